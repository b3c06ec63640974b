use super::baselines::{
    Asha, Hyperband, MedianStopping, RandomSearch, bracket_size, rung_steps, s_max,
};
use super::summary::{BenchSettings, PolicyName, play_one, quartiles};
use super::*;

/// A table of unit costs with `values[k][t]`, one-coordinate embeddings and finals = last value.
fn table(values: Vec<Vec<f64>>) -> Table {
    let k = values.len();
    let t = values[0].len();
    Table::new(TableParts {
        name: "hand".into(),
        labels: (0..k).map(|i| format!("c{i}")).collect(),
        x: (0..k).map(|i| vec![i as f64 / k as f64]).collect(),
        positions: (1..=t).map(|s| s as f64).collect(),
        weights: vec![1.0; t],
        finals: values.iter().map(|v| v[t - 1]).collect(),
        costs: vec![vec![1.0; t]; k],
        values,
    })
    .unwrap()
}

/// `(config, step)` of every row.
fn steps(trace: &Trace) -> Vec<(usize, usize)> {
    trace.rows.iter().map(|r| (r.config, r.step)).collect()
}

#[test]
fn hyperband_bracket_sizes_match_the_paper() {
    // Li et al. 2017, Table 1 (R = 81, η = 3): n = 81, 34, 15, 8, 5; r_0 = 1, 3, 9, 27, 81.
    assert_eq!(s_max(81, 3), 4);
    let n: Vec<usize> = (0..=4).rev().map(|s| bracket_size(4, 3, s)).collect();
    assert_eq!(n, [81, 34, 15, 8, 5]);
    assert_eq!(rung_steps(81, 3, 4), [1, 3, 9, 27, 81]);
    assert_eq!(rung_steps(81, 3, 0), [81]);
    assert_eq!((s_max(9, 3), s_max(8, 3), s_max(1, 3)), (2, 1, 0));
    assert_eq!(Asha::rungs(9, 3), [1, 3, 9]);
    assert_eq!(Asha::rungs(20, 3), [1, 3, 9, 20]);
}

#[test]
fn successive_halving_on_nine_configurations() {
    // η = 3, T = 9: bracket s = 2 has 9 configurations and rungs at 1, 3, 9 steps. At step 1
    // configuration k is worth k/10, so 6, 7, 8 are promoted; at step 3 configuration 6 is
    // the best, so it alone is trained to step 9. 9 + 3·2 + 6 = 21 steps.
    let values: Vec<Vec<f64>> = (0..9)
        .map(|k| {
            (0..9)
                .map(|t| {
                    if t >= 1 && k == 6 {
                        1.0
                    } else {
                        k as f64 / 10.0
                    }
                })
                .collect()
        })
        .collect();
    let tb = table(values);
    let mut sh = Hyperband::successive_halving(3, 2, 7).unwrap();
    let trace = play(&tb, &mut sh, 21.0).unwrap();
    let order = permutation(9, &mut rng(7));
    let mut expected: Vec<(usize, usize)> = order.iter().map(|&k| (k, 1)).collect();
    let promoted: Vec<usize> = order.iter().copied().filter(|k| *k >= 6).collect();
    for &k in &promoted {
        expected.extend([(k, 2), (k, 3)]);
    }
    expected.extend((4..=9).map(|s| (6, s)));
    assert_eq!(steps(&trace), expected);
    // Only the last step completes a run: the regret drops from 0.8 (max − min) to 0.
    assert_eq!(trace.rows[19].regret, 1.0 - 0.0);
    assert_eq!(trace.rows[20].regret, 0.0);
}

#[test]
fn median_rule_stops_below_the_median_of_running_averages() {
    // Constant curves by position in the random order: 0.5, 0.4, 0.45 (grace 2, min 1 run).
    // Run 2 (0.4) is below the median 0.5 at step 2: stopped after 2 steps. Run 3 (0.45) at
    // step 2 faces averages {0.5, 0.4}, median 0.45: not below, goes on; at step 3 only the
    // first run reached it (0.5): stopped after 3 steps.
    let order = permutation(3, &mut rng(11));
    let by_pos = [0.5, 0.4, 0.45];
    let mut values = vec![Vec::new(); 3];
    for (pos, &k) in order.iter().enumerate() {
        values[k] = vec![by_pos[pos]; 4];
    }
    let mut m = MedianStopping::new(2, 1, 11).unwrap();
    let trace = play(&table(values), &mut m, f64::INFINITY).unwrap();
    let per_run: Vec<usize> = (0..3)
        .map(|r| trace.rows.iter().filter(|row| row.run == r).count())
        .collect();
    assert_eq!(per_run, [4, 2, 3]);
    assert!(trace.stopped);
}

#[test]
fn random_search_trains_every_configuration_in_order() {
    let tb = table(vec![vec![0.1, 0.2], vec![0.3, 0.1], vec![0.0, 0.5]]);
    let trace = play(&tb, &mut RandomSearch::new(3), f64::INFINITY).unwrap();
    let order = permutation(3, &mut rng(3));
    let expected: Vec<(usize, usize)> = order.iter().flat_map(|&k| [(k, 1), (k, 2)]).collect();
    assert_eq!(steps(&trace), expected);
    // The incumbent is the best final validation value: config 2 (0.5), regret 0.
    assert_eq!(trace.rows.last().unwrap().regret, 0.0);
    assert!(trace.stopped);
}

#[test]
fn asha_promotes_the_top_third() {
    // η = 3, T = 3: rungs at 1 and 3 steps. Three runs reach rung 0; the best of them (config
    // 2) is promoted before a fourth configuration starts.
    let tb = table(vec![vec![0.1; 3], vec![0.2; 3], vec![0.9; 3], vec![0.3; 3]]);
    let mut asha = Asha::new(3, 5).unwrap();
    let trace = play(&tb, &mut asha, 5.0).unwrap();
    let order = permutation(4, &mut rng(5));
    let first3: Vec<usize> = order[..3].to_vec();
    let mut expected: Vec<(usize, usize)> = first3.iter().map(|&k| (k, 1)).collect();
    let best = *first3
        .iter()
        .max_by(|a, b| tb.value(**a, 0).total_cmp(&tb.value(**b, 0)))
        .unwrap();
    expected.extend([(best, 2), (best, 3)]);
    assert_eq!(steps(&trace), expected);
}

#[test]
fn regret_and_quartiles() {
    let tb = table(vec![vec![0.1, 0.9], vec![0.2, 0.3]]);
    let mut rs = RandomSearch::new(0);
    let trace = play(&tb, &mut rs, f64::INFINITY).unwrap();
    assert_eq!(trace.initial_regret, 0.9 - 0.3);
    assert_eq!(trace.regret_at(0.5), 0.9 - 0.3);
    assert_eq!(trace.regret_at(4.0), 0.0);
    let q = quartiles(&[4.0, 1.0, 3.0, 2.0, 5.0]);
    assert_eq!((q.q25, q.median, q.q75), (2.0, 3.0, 4.0));
    let q = quartiles(&[1.0, 2.0]);
    assert_eq!((q.q25, q.median, q.q75), (1.25, 1.5, 1.75));
}

#[test]
fn table_errors_name_the_field() {
    let good = TableParts {
        name: "t".into(),
        labels: vec!["a".into(), "b".into()],
        x: vec![vec![0.0], vec![1.0]],
        positions: vec![1.0, 2.0],
        weights: vec![1.0, 1.0],
        values: vec![vec![0.1, 0.2], vec![0.3, 0.4]],
        costs: vec![vec![1.0, 1.0], vec![1.0, 1.0]],
        finals: vec![0.2, 0.4],
    };
    assert!(Table::new(good.clone()).is_ok());
    let mut p = good.clone();
    p.costs[1][0] = 0.0;
    assert!(Table::new(p).unwrap_err().0.contains("costs[1][0]"));
    let mut p = good.clone();
    p.x[1] = vec![1.5];
    assert!(Table::new(p).unwrap_err().0.contains("x[1]"));
    let mut p = good.clone();
    p.positions = vec![2.0, 1.0];
    assert!(Table::new(p).unwrap_err().0.contains("positions[1]"));
    let mut p = good;
    p.values[0].pop();
    assert!(Table::new(p).unwrap_err().0.contains("values[0]"));
}

#[test]
fn lcdb_loads_and_its_errors_name_the_field() {
    assert_eq!(
        lcdb::datasets().unwrap(),
        [554, 901, 1483, 23512, 40996, 41027]
    );
    let t = lcdb::instance(901).unwrap();
    assert_eq!((t.configs(), t.steps()), (20, 24));
    assert_eq!(
        t.positions()[..3],
        [1.0, 1.0 + 2.0 * (23.0f64 / 16.0).log2(), 3.0]
    );
    assert!(lcdb::instance(1).unwrap_err().0.contains("openmlid"));
    let head = lcdb::COLUMNS.join(",");
    let row = "7,A,16,25,0.5,0.5,0.01";
    let cases = [
        (
            format!("openmlid,lerner\n{row}"),
            "column 2 must be `learner`",
        ),
        (
            format!("{head}\n7,A,16,25,0.5,x,0.01"),
            "line 2: test_acc_mean",
        ),
        (
            format!("{head}\n{row}\n7,A,sixteen,25,0.5,0.5,0.01"),
            "line 3: size_train",
        ),
        (
            format!("{head}\n7,A,16,25,0.5,0.5,0"),
            "line 2: traintime_mean_s",
        ),
        (format!("{head}\n{row},9"), "line 2: 8 fields"),
    ];
    for (text, want) in cases {
        let e = lcdb::parse(&text).unwrap_err().0;
        assert!(e.contains(want), "{want}: {e}");
    }
    let rows = lcdb::parse(&format!(
        "{head}\n{row}\n7,A,23,25,0.6,0.6,0.02\n7,B,16,25,0.5,0.5,0.01"
    ))
    .unwrap();
    let e = lcdb::instance_from(&rows, 7).unwrap_err().0;
    assert!(e.contains("learner B, size_train 23"), "{e}");
}

#[test]
fn synthetic_instances_are_seeded() {
    let spec = synthetic::SyntheticSpec {
        configs: 5,
        steps: 4,
        ..Default::default()
    };
    let a = synthetic::instance(&spec, 1).unwrap();
    assert_eq!(a, synthetic::instance(&spec, 1).unwrap());
    assert_ne!(a, synthetic::instance(&spec, 2).unwrap());
    assert_eq!((a.configs(), a.steps()), (5, 4));
}

#[test]
fn every_policy_is_deterministic_for_a_seed() {
    let spec = synthetic::SyntheticSpec {
        configs: 6,
        steps: 5,
        ..Default::default()
    };
    let tb = synthetic::instance(&spec, 3).unwrap();
    let s = BenchSettings {
        budget_fraction: 0.6,
        ..Default::default()
    };
    for name in PolicyName::ALL {
        let a = play_one(&tb, name, &s, 9).unwrap();
        let b = play_one(&tb, name, &s, 9).unwrap();
        assert_eq!(a, b, "{name:?}");
        assert!(!a.rows.is_empty(), "{name:?}");
    }
}

/// `uses_lambda` is what a λ sweep relies on: the policies it names change their decisions with
/// λ on some instance, the others play the same steps at every λ.
#[test]
fn exactly_the_policies_that_use_lambda_change_with_it() {
    // PBGI and LogEIPC without pausing give every unstarted configuration the same estimated
    // cost, so λ moves PBGI's choice only through the trade of mean against spread: it takes
    // enough configurations to see it.
    let spec = synthetic::SyntheticSpec {
        configs: 20,
        steps: 3,
        ..Default::default()
    };
    let at = |lambda: f64, name: PolicyName, seed: u64| {
        let tb = synthetic::instance(&spec, seed).unwrap();
        let s = BenchSettings {
            budget_fraction: 0.6,
            lambda,
            ..Default::default()
        };
        steps(&play_one(&tb, name, &s, seed).unwrap())
    };
    for name in PolicyName::ALL {
        let changed = (0..4).any(|seed| at(1e-4, name, seed) != at(5.0, name, seed));
        assert_eq!(changed, name.uses_lambda(), "{name:?}");
    }
}

/// A row of the epochs file for configuration `k` at `epoch` (hyperparameters from `k`).
fn epochs_row(k: u64, epoch: u64, valid: f64, time: f64) -> String {
    let u = 0.1 * k as f64;
    format!(
        "{k},{u},{u},{u},{u},{u},0.01,1e-4,{h},32,0.9,{epoch},{valid},{test},{time},{time}",
        h = 8 + k,
        test = valid - 0.01
    )
}

#[test]
fn epochs_loads_a_hand_made_table_and_its_errors_name_the_field() {
    let head = epochs::COLUMNS.join(",");
    // Two configurations, two epochs, rows out of order.
    let text = [
        head.clone(),
        epochs_row(3, 2, 0.8, 0.02),
        epochs_row(1, 1, 0.5, 0.01),
        epochs_row(3, 1, 0.6, 0.03),
        epochs_row(1, 2, 0.7, 0.04),
    ]
    .join("\n");
    let t = epochs::instance_from(&epochs::parse(&text).unwrap()).unwrap();
    assert_eq!((t.configs(), t.steps()), (2, 2));
    assert_eq!(t.x(), [vec![0.1; 5], vec![0.1 * 3.0; 5]]);
    assert_eq!(t.positions(), [1.0, 2.0]);
    assert_eq!(t.weights(), [1.0, 1.0]);
    assert_eq!(
        (t.value(0, 0), t.value(0, 1), t.value(1, 1)),
        (0.5, 0.7, 0.8)
    );
    assert_eq!((t.cost(0, 1), t.cost(1, 0)), (0.04, 0.03));
    assert_eq!(t.final_objective(1), 0.8 - 0.01);
    assert!(t.labels()[0].contains("hidden=9") && !t.labels()[0].contains(','));

    let ok = epochs_row(1, 1, 0.5, 0.01);
    let cases = [
        (
            format!("config,u_lr,u_alfa\n{ok}"),
            "column 3 must be `u_alpha`",
        ),
        (format!("{head}\n{ok},7"), "line 2: 17 fields"),
        (
            format!("{head}\n{ok}\n{}", ok.replacen("0.1,", "1.5,", 1)),
            "line 3: u_lr",
        ),
        (
            format!("{head}\n{}", epochs_row(1, 1, 0.5, 0.0)),
            "line 2: time_s",
        ),
        (
            format!("{head}\n{}", epochs_row(1, 1, f64::NAN, 0.1)),
            "line 2: valid_acc",
        ),
        (
            format!("{head}\n{}", epochs_row(1, 0, 0.5, 0.1)),
            "line 2: epoch",
        ),
    ];
    for (text, want) in cases {
        let e = epochs::parse(&text).unwrap_err().0;
        assert!(e.contains(want), "{want}: {e}");
    }
    let rows = |lines: &[String]| epochs::parse(&format!("{head}\n{}", lines.join("\n"))).unwrap();
    let missing = rows(&[
        epochs_row(1, 1, 0.5, 0.1),
        epochs_row(1, 2, 0.5, 0.1),
        epochs_row(2, 2, 0.5, 0.1),
    ]);
    let e = epochs::instance_from(&missing).unwrap_err().0;
    assert!(e.contains("config 2, epoch 1: missing"), "{e}");
    let dup = rows(&[epochs_row(1, 1, 0.5, 0.1), epochs_row(1, 1, 0.6, 0.1)]);
    let e = epochs::instance_from(&dup).unwrap_err().0;
    assert!(e.contains("config 1, epoch 1: duplicate"), "{e}");
    let other = epochs_row(1, 2, 0.5, 0.1).replace(",0.01,1e-4,", ",0.02,1e-4,");
    let e = epochs::instance_from(&rows(&[epochs_row(1, 1, 0.5, 0.1), other]))
        .unwrap_err()
        .0;
    assert!(
        e.contains("config 1, epoch 2: hyperparameters differ"),
        "{e}"
    );
    assert!(
        epochs::instance_from(&[])
            .unwrap_err()
            .0
            .contains("no rows")
    );
}

#[test]
fn the_shipped_epochs_file_loads_with_its_shape() {
    let t = epochs::instance().unwrap();
    assert_eq!((t.configs(), t.steps()), (256, 20));
    assert!(t.x().iter().all(|x| x.len() == epochs::DIM));
    assert_eq!(t.positions()[19], 20.0);
    // Real curves: a wide spread of final accuracies, every epoch timed.
    let (hi, lo) = t.final_range();
    assert!(hi > 0.95 && lo < 0.5, "{hi} {lo}");
    assert!(t.total_cost() > 1.0 && t.total_cost() < 1000.0);
}

#[test]
fn an_epochs_subset_keeps_the_first_configurations_and_epochs() {
    let rows = epochs::parse(epochs::EPOCHS_CSV).unwrap();
    let t = epochs::instance_from(&epochs::subset(&rows, Some(16), Some(5)).unwrap()).unwrap();
    let full = epochs::instance().unwrap();
    assert_eq!(
        (t.configs(), t.steps(), t.name()),
        (16, 5, "mlp-digits-K16-T5")
    );
    assert_eq!(full.name(), "mlp-digits-K256-T20");
    assert_eq!(
        (t.x()[15].clone(), t.value(15, 4)),
        (full.x()[15].clone(), full.value(15, 4))
    );
    // The final objective is the test accuracy after the last epoch kept.
    let test5 = rows
        .iter()
        .find(|r| r.config == 3 && r.epoch == 5)
        .unwrap()
        .test;
    assert_eq!(t.final_objective(3), test5);
    for (k, e, want) in [
        (Some(0), None, "configs"),
        (Some(257), None, "configs"),
        (None, Some(21), "epochs"),
    ] {
        let err = epochs::subset(&rows, k, e).unwrap_err().0;
        assert!(err.starts_with(want), "{want}: {err}");
    }
}
