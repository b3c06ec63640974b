use super::*;
use crate::gittins::discrete_index;
use crate::gittins::tests::index_by_enumeration;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A random run with `n` states in topological order: each state that is not complete steps to
/// one to three later states; the last state is complete, others are with probability 0.3.
/// Values and costs on a coarse grid, so that ties between indices and values occur.
fn random_run(rng: &mut Xoshiro256PlusPlus, n: usize, started: bool) -> CurveRun {
    let mut nodes = Vec::with_capacity(n);
    for i in 0..n {
        let value = rng.random_range(-4..=8) as f64 * 0.25;
        if i == n - 1 || (i > 0 && rng.random_bool(0.3)) {
            nodes.push(CurveNode {
                value: Some(value),
                cost: 0.0,
                next: Vec::new(),
            });
            continue;
        }
        let k = rng.random_range(1..=3.min(n - 1 - i));
        let mut targets: Vec<usize> = (i + 1..n).collect();
        for j in 0..k {
            let r = rng.random_range(j..targets.len());
            targets.swap(j, r);
        }
        let raw: Vec<f64> = (0..k).map(|_| rng.random_range(0.05..1.0)).collect();
        let sum: f64 = raw.iter().sum();
        let cost = if rng.random_bool(0.1) {
            0.0
        } else {
            rng.random_range(0.0..0.6)
        };
        nodes.push(CurveNode {
            value: (i > 0 || started).then_some(value),
            cost,
            next: targets[..k]
                .iter()
                .zip(&raw)
                .map(|(&t, p)| (t, p / sum))
                .collect(),
        });
    }
    let at = if rng.random_bool(0.3) {
        rng.random_range(0..n)
    } else {
        0
    };
    CurveRun::new(nodes, at).unwrap()
}

fn random_walk(rng: &mut Xoshiro256PlusPlus) -> CurveRun {
    let steps = rng.random_range(0..=4);
    let m = rng.random_range(1..=3);
    let costs: Vec<f64> = (0..steps).map(|_| rng.random_range(0.0..0.3)).collect();
    let inc: Vec<f64> = (0..m)
        .map(|_| rng.random_range(-2..=3) as f64 * 0.2)
        .collect();
    let raw: Vec<f64> = (0..m).map(|_| rng.random_range(0.05..1.0)).collect();
    let sum: f64 = raw.iter().sum();
    let probs: Vec<f64> = raw.iter().map(|p| p / sum).collect();
    let from = rng.random_range(-1.0..1.0);
    CurveRun::walk(from, &costs, &inc, &probs, rng.random_bool(0.5)).unwrap()
}

fn random_instance(rng: &mut Xoshiro256PlusPlus, case: usize) -> FreezeThaw {
    let k = 1 + case % 3;
    let runs = (0..k)
        .map(|_| {
            if rng.random_bool(0.3) {
                random_walk(rng)
            } else {
                let n = rng.random_range(1..=7);
                let started = rng.random_bool(0.5);
                random_run(rng, n, started)
            }
        })
        .collect();
    let fallback = rng.random_bool(0.5).then(|| rng.random_range(-1.0..2.0));
    FreezeThaw::new(runs, fallback).unwrap()
}

/// The must-hold check: on random instances the index policy's exact value (by the amortized
/// formula and by dynamic programming over joint states) equals the optimum over all policies.
#[test]
fn index_policy_is_optimal_on_random_instances() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
    let mut worst = 0.0_f64;
    for case in 0..300 {
        let ft = random_instance(&mut rng, case);
        let g = ft.indices();
        let opt = ft.dp_optimum().unwrap();
        let pol = ft.dp_policy_value(&g).unwrap();
        let amortized = ft.policy_value(&g);
        let gap = (opt - pol).abs().max((opt - amortized).abs());
        worst = worst.max(gap);
        assert!(
            gap <= 1e-9,
            "case {case}: optimum {opt}, index policy {pol}, amortized {amortized}: {ft:?}"
        );
    }
    eprintln!("max |index policy - optimum| over 300 instances = {worst:e}");
}

/// Two independent index computations: backward induction with an exact affine finish, and the
/// generic chain solver (policy iteration); plus the enumeration of continuation sets.
#[test]
fn indices_match_the_chain_solver_and_enumeration() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(29);
    for case in 0..200 {
        let run = if case % 4 == 0 {
            random_walk(&mut rng)
        } else {
            let n = rng.random_range(1..=8);
            random_run(&mut rng, n, true)
        };
        let mine = run.indices();
        let chain = run.to_chain().unwrap();
        let theirs = chain.gittins_indices().unwrap();
        for (s, g) in mine.iter().enumerate() {
            let other = theirs[s].unwrap();
            let scale = 1.0 + g.abs();
            assert!(
                (g - other).abs() <= 1e-9 * scale,
                "case {case} state {s}: {g} vs chain {other}: {run:?}"
            );
            if chain.len() <= 12 {
                let e = index_by_enumeration(&chain, s);
                assert!(
                    (g - e).abs() <= 1e-9 * scale,
                    "case {case} state {s}: {g} vs {e}"
                );
            }
        }
    }
}

/// A run with one step to completion is a closed Pandora's box: its index solves
/// `E[max(X − g, 0)] = c`.
#[test]
fn a_one_step_run_is_a_pandora_box() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
    for _ in 0..100 {
        let m = rng.random_range(1..=5);
        let values: Vec<f64> = (0..m).map(|_| rng.random_range(-2.0..3.0)).collect();
        let raw: Vec<f64> = (0..m).map(|_| rng.random_range(0.05..1.0)).collect();
        let sum: f64 = raw.iter().sum();
        let probs: Vec<f64> = raw.iter().map(|p| p / sum).collect();
        let cost = rng.random_range(0.0..1.0);
        let mut nodes = vec![CurveNode {
            value: None,
            cost,
            next: (0..m).map(|j| (j + 1, probs[j])).collect(),
        }];
        nodes.extend(values.iter().map(|&v| CurveNode {
            value: Some(v),
            cost: 0.0,
            next: Vec::new(),
        }));
        let run = CurveRun::new(nodes, 0).unwrap();
        let g = run.index(0);
        let want = discrete_index(&values, &probs, cost);
        assert!(
            (g - want).abs() <= 1e-10 * (1.0 + want.abs()),
            "{g} vs {want}"
        );
    }
}

/// The walk's lattice merges paths with the same increments: the same indices as the tree that
/// enumerates every path, with `C(t + m − 1, m − 1)` states at depth `t`.
#[test]
fn walk_lattice_equals_the_path_tree() {
    let (from, costs, inc, probs) = (0.3, [0.05, 0.1, 0.02], [-0.2, 0.1, 0.4], [0.3, 0.5, 0.2]);
    let walk = CurveRun::walk(from, &costs, &inc, &probs, true).unwrap();
    assert_eq!(walk.nodes.len(), 1 + 3 + 6 + 10);
    // The tree: node ids in breadth-first order, 3^t nodes at depth t.
    let mut nodes = Vec::new();
    let mut layer = vec![from];
    let mut first = 0;
    for t in 0..=costs.len() {
        let next_first = first + layer.len();
        let mut next_layer = Vec::new();
        for (i, &v) in layer.iter().enumerate() {
            let next = if t < costs.len() {
                (0..3).map(|j| (next_first + 3 * i + j, probs[j])).collect()
            } else {
                Vec::new()
            };
            nodes.push(CurveNode {
                value: Some(v),
                cost: costs.get(t).copied().unwrap_or(0.0),
                next,
            });
            if t < costs.len() {
                next_layer.extend(inc.iter().map(|d| v + d));
            }
        }
        layer = next_layer;
        first = next_first;
    }
    let tree = CurveRun::new(nodes, 0).unwrap();
    let (a, b) = (walk.index(0), tree.index(0));
    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    let lattice_values: Vec<f64> = walk.nodes[10..].iter().map(|n| n.value.unwrap()).collect();
    assert!(lattice_values.iter().all(|v| (v - from).abs() < 1.3));
}

/// A rule that looks sensible but ignores the option to drop a run later (continue the run with
/// the best expected final value net of its remaining cost) is strictly worse on some instances:
/// the DP distinguishes policies, so the optimality check above can fail.
#[test]
fn a_myopic_rule_is_not_optimal() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(37);
    let mut worse = 0;
    for case in 0..200 {
        let ft = random_instance(&mut rng, case);
        let myopic: Vec<Vec<f64>> = ft.runs.iter().map(expected_net_final).collect();
        let opt = ft.dp_optimum().unwrap();
        let val = ft.dp_policy_value(&myopic).unwrap();
        assert!(val <= opt + 1e-9);
        if val < opt - 1e-6 {
            worse += 1;
        }
    }
    assert!(
        worse >= 5,
        "the myopic rule lost on only {worse} of 200 instances"
    );
}

/// `E[final value − remaining cost]` if the run is trained to the end from each state.
fn expected_net_final(run: &CurveRun) -> Vec<f64> {
    let mut e = vec![0.0; run.nodes.len()];
    for u in (0..run.nodes.len()).rev() {
        let node = &run.nodes[u];
        e[u] = if node.is_complete() {
            node.value.unwrap()
        } else {
            node.next.iter().map(|&(v, p)| p * e[v]).sum::<f64>() - node.cost
        };
    }
    e
}

#[test]
fn actions_follow_the_largest_index() {
    let leaf = |v: f64| CurveNode {
        value: Some(v),
        cost: 0.0,
        next: Vec::new(),
    };
    let step =
        |value: Option<f64>, cost: f64, next: Vec<(usize, f64)>| CurveNode { value, cost, next };
    // Run 0: complete at 0.5. Run 1: not started, reaches 0 or 2 with probability ½ for 0.1
    // (index g with ½(2 − g) = 0.1: g = 1.8). Run 2: paused at 0.4, reaches 1.0 for 0.7
    // (index 0.3).
    let runs = vec![
        CurveRun::new(vec![leaf(0.5)], 0).unwrap(),
        CurveRun::new(
            vec![
                step(None, 0.1, vec![(1, 0.5), (2, 0.5)]),
                leaf(0.0),
                leaf(2.0),
            ],
            0,
        )
        .unwrap(),
        CurveRun::new(vec![step(Some(0.4), 0.7, vec![(1, 1.0)]), leaf(1.0)], 0).unwrap(),
    ];
    let ft = FreezeThaw::new(runs.clone(), None).unwrap();
    let d = ft.decide();
    assert!((d.indices[1][0] - 1.8).abs() < 1e-12, "{:?}", d.indices);
    assert!((d.indices[2][0] - 0.3).abs() < 1e-12, "{:?}", d.indices);
    assert_eq!(d.action, Action::Start { run: 1 });
    // E[max(0.5, min(1.8, X))] with X ∈ {0, 2}: ½·0.5 + ½·1.8.
    assert!((d.expected_utility - 1.15).abs() < 1e-12);
    assert_eq!(
        ft.action_at(&d.indices, &[0, 1, 0]),
        Action::Select { run: 0, value: 0.5 }
    );
    assert_eq!(
        ft.action_at(&d.indices, &[0, 2, 0]),
        Action::Select { run: 1, value: 2.0 }
    );
    let with_fallback = FreezeThaw::new(runs.clone(), Some(1.8)).unwrap();
    assert_eq!(with_fallback.decide().action, Action::Stop { value: 1.8 });
    let only_paused = FreezeThaw::new(vec![runs[2].clone()], Some(0.2)).unwrap();
    assert_eq!(only_paused.decide().action, Action::Continue { run: 0 });
}

#[test]
fn errors_name_the_field() {
    let leaf = CurveNode {
        value: Some(1.0),
        cost: 0.0,
        next: Vec::new(),
    };
    let bad = |nodes: Vec<CurveNode>, at: usize| {
        let e = CurveRun::new(nodes, at).and_then(|r| FreezeThaw::new(vec![r], None));
        match e {
            Err(Error::InvalidInput { what, .. }) => what,
            other => panic!("expected an error, got {other:?}"),
        }
    };
    let step = |cost: f64, next: Vec<(usize, f64)>| CurveNode {
        value: Some(0.0),
        cost,
        next,
    };
    assert_eq!(bad(vec![], 0), "nodes");
    assert_eq!(bad(vec![leaf.clone()], 1), "at");
    assert_eq!(
        bad(vec![step(0.1, vec![(0, 1.0)]), leaf.clone()], 0),
        "nodes[0].next[0].node"
    );
    assert_eq!(
        bad(vec![step(0.1, vec![(1, 0.5)]), leaf.clone()], 0),
        "nodes[0].next"
    );
    assert_eq!(
        bad(vec![step(-0.1, vec![(1, 1.0)]), leaf.clone()], 0),
        "nodes[0].cost"
    );
    let mut none = leaf.clone();
    none.value = None;
    assert_eq!(bad(vec![none], 0), "nodes[0].value");
    let run = CurveRun::new(vec![leaf], 0).unwrap();
    let e = FreezeThaw::new(vec![run.clone()], Some(f64::NAN)).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { ref what, .. } if what == "fallback"));
    let mut broken = run;
    broken.at = 3;
    let e = FreezeThaw::new(vec![broken], None).unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput { ref what, .. } if what == "runs[0].at"),
        "{e}"
    );
    let e = CurveRun::walk(0.0, &[0.1], &[0.1, 0.2], &[0.5], false).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { ref what, .. } if what == "increments.probs"));
    let e = CurveRun::walk(0.0, &[0.1, -1.0], &[0.1], &[1.0], false).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { ref what, .. } if what == "step_costs[1]"));
    let e = FreezeThaw::new(vec![], None).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { ref what, .. } if what == "runs"));
}

/// One informative step: the discretized martingale's index is PBGI's `σ h((μ − g)/σ) = c`.
#[test]
fn a_gaussian_run_with_one_informative_step_has_the_pbgi_index() {
    use crate::acquisition::pbgi::pbgi_index;
    for &(mu, var, c) in &[
        (0.0_f64, 1.0_f64, 0.1_f64),
        (2.0, 0.25, 0.01),
        (-1.0, 4.0, 1.0),
    ] {
        let sd: f64 = var.sqrt();
        let run = CurveRun::gaussian(mu, &[var], &[c], 201, false).unwrap();
        let want = pbgi_index(mu, sd, c.ln()).g;
        let g = run.index(0);
        assert!(
            (g - want).abs() < 1e-3 * sd,
            "{mu} {var} {c}: {g} vs {want}"
        );
        // Information only at the last of three steps: PBGI with the total cost.
        let late = CurveRun::gaussian(mu, &[0.0, 0.0, var], &[c, c, c], 201, false).unwrap();
        let want = pbgi_index(mu, sd, (3.0 * c).ln()).g;
        assert!(
            (late.index(0) - want).abs() < 1e-3 * sd,
            "late: {} vs {want}",
            late.index(0)
        );
        // The same information early is worth more: the run can be dropped before paying on.
        let early = CurveRun::gaussian(mu, &[var, 0.0, 0.0], &[c, c, c], 201, false).unwrap();
        assert!(early.index(0) > late.index(0) + 1e-6);
    }
}

#[test]
fn a_gaussian_run_without_variance_is_worth_its_mean_net_of_cost() {
    let run = CurveRun::gaussian(0.7, &[0.0, 0.0], &[0.1, 0.05], 5, true).unwrap();
    assert!((run.index(0) - 0.55).abs() < 1e-12, "{}", run.index(0));
    let done = CurveRun::gaussian(0.7, &[], &[], 5, false).unwrap();
    assert_eq!(done.index(0), 0.7);
    assert!(done.nodes[0].is_complete());
    let e = CurveRun::gaussian(0.0, &[1.0], &[0.1], 4, false).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { ref what, .. } if what == "points"));
    let e = CurveRun::gaussian(0.0, &[1.0, -1.0], &[0.1, 0.1], 5, false).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { ref what, .. } if what == "variance_drops[1]"));
    let e = CurveRun::gaussian(0.0, &[1.0], &[0.1, 0.1], 5, false).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { ref what, .. } if what == "variance_drops"));
}

/// A spread of information over many steps: the discretization converges as the grid refines,
/// and the index policy on such runs is still exactly optimal (the DP check on a coarse grid).
#[test]
fn gaussian_runs_converge_and_stay_optimal() {
    let drops = [0.3, 0.2, 0.1, 0.05];
    let costs = [0.05, 0.05, 0.05, 0.05];
    let g: Vec<f64> = [51, 101, 201, 401]
        .iter()
        .map(|&p| {
            CurveRun::gaussian(0.0, &drops, &costs, p, false)
                .unwrap()
                .index(0)
        })
        .collect();
    let diffs: Vec<f64> = g.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    assert!(diffs[2] < 2e-3 && diffs[2] <= diffs[0] + 1e-12, "{g:?}");
    let runs = vec![
        CurveRun::gaussian(0.0, &[0.5, 0.1], &[0.1, 0.1], 7, false).unwrap(),
        CurveRun::gaussian(0.2, &[0.05, 0.05], &[0.05, 0.05], 7, true).unwrap(),
    ];
    let ft = FreezeThaw::new(runs, Some(0.1)).unwrap();
    let d = ft.decide();
    let opt = ft.dp_optimum().unwrap();
    assert!(
        (opt - d.expected_utility).abs() < 1e-9,
        "{opt} vs {}",
        d.expected_utility
    );
}

#[test]
fn free_steps_make_the_index_the_best_reachable_value() {
    let run = CurveRun::walk(
        0.0,
        &[0.0, 0.0, 0.0],
        &[-0.5, 0.2, 0.3],
        &[0.5, 0.3, 0.2],
        true,
    )
    .unwrap();
    assert!((run.index(0) - 0.9).abs() < 1e-12, "{}", run.index(0));
}

/// Newton's method on the current state's local MDP against the exact backward pass, in every
/// state of random runs, walks and discretized Gaussian martingales.
#[test]
fn the_current_index_by_newton_equals_the_backward_pass() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
    let mut worst = 0.0f64;
    for case in 0..240 {
        let run = match case % 3 {
            0 => random_walk(&mut rng),
            1 => {
                let n = rng.random_range(1..=8);
                random_run(&mut rng, n, case % 2 == 0)
            }
            _ => {
                let steps = rng.random_range(1..=6);
                let drops: Vec<f64> = (0..steps)
                    .map(|_| {
                        if rng.random::<f64>() < 0.2 {
                            0.0
                        } else {
                            rng.random::<f64>()
                        }
                    })
                    .collect();
                let costs: Vec<f64> = (0..steps).map(|_| 0.3 * rng.random::<f64>()).collect();
                let points = 3 + 2 * rng.random_range(0..20);
                CurveRun::gaussian(rng.random::<f64>(), &drops, &costs, points, false).unwrap()
            }
        };
        let exact = run.indices();
        for (s, want) in exact.iter().enumerate() {
            let g = CurveRun::new(run.nodes.clone(), s).unwrap().current_index();
            worst = worst.max((g - want).abs() / (1.0 + want.abs()));
            assert!(
                (g - want).abs() <= 1e-9 * (1.0 + want.abs()),
                "case {case} state {s}: Newton {g} vs exact {want}"
            );
        }
    }
    eprintln!("max relative |Newton − exact| = {worst:e}");
}
