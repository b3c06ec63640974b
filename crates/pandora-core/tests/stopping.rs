//! Tests of the stopping rules, the cost-adjusted regret and λ from a budget.

use pandora_core::acquisition::{
    CostConvention, CostModel, KnownCost, LogCost, LogExpectedImprovementPerCost,
    PointwiseAcquisition, UnknownCost, pbgi_index,
};
use pandora_core::gp::paths::{PosteriorPath, PriorPath};
use pandora_core::gp::{GpModel, GpParams, Kernel, KernelKind, Transforms};
use pandora_core::optim::{DiscreteCoord, MixedSpace, OneHotBlock};
use pandora_core::stopping::budget::{
    UEstimatorOptions, UReference, estimate_u, expected_max_on_set, lambda_from_budget,
};
use pandora_core::stopping::heuristics::{Convergence, FixedBudget, Gss};
use pandora_core::stopping::median::{LogEipcMed, SrGapMed};
use pandora_core::stopping::pbgi::{
    PbgiStopping, PointPosterior, Timing, log_eipc_exp, stops_by_log_eipc, stops_by_pbgi,
};
use pandora_core::stopping::prb::{Prb, SampleSchedule};
use pandora_core::stopping::regret::{evaluate_stop, summarize};
use pandora_core::stopping::ucb_lcb::UcbLcb;
use pandora_core::stopping::{
    Candidates, CostInfo, Guard, OptimizerConfig, RuleConfig, RunState, StoppingConfig,
    StoppingRule, SuppliedStatistics, Trace, hindsight, replay,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

fn random_point(r: &mut Xoshiro256PlusPlus, unknown: bool) -> PointPosterior {
    PointPosterior {
        mu: r.random_range(-3.0..3.0),
        sigma: 10f64.powf(r.random_range(-3.0..1.0)),
        cost: LogCost {
            mean: r.random_range(-3.0..3.0),
            var: if unknown {
                r.random_range(0.0..1.5)
            } else {
                0.0
            },
        },
    }
}

#[test]
fn pbgi_and_log_eipc_forms_agree_on_random_posteriors() {
    let mut r = rng(1);
    let (mut stops, mut goes) = (0, 0);
    for case in 0..20_000 {
        let unknown = case % 2 == 1;
        let m = 1 + case % 5;
        let pts: Vec<PointPosterior> = (0..m).map(|_| random_point(&mut r, unknown)).collect();
        let lambda = 10f64.powf(r.random_range(-5.0..0.5));
        let best = r.random_range(-2.0..6.0);
        let a = stops_by_pbgi(&pts, best, lambda);
        let b = stops_by_log_eipc(&pts, best, lambda);
        assert_eq!(a, b, "case {case}: {pts:?} best {best} lambda {lambda}");
        // The paper's minimization statement: min over points of the min-mode index ≥ the best
        // (lowest) value of the negated problem.
        let min_form = pts.iter().all(|p| {
            pandora_core::acquisition::pbgi_index_min(
                -p.mu,
                p.sigma,
                lambda.ln() + p.cost.mean + 0.5 * p.cost.var,
            )
            .g >= -best
        });
        assert_eq!(min_form, b, "min mode, case {case}");
        if a {
            stops += 1;
        } else {
            goes += 1;
        }
    }
    // Both outcomes are well represented, so the agreement is not vacuous.
    assert!(
        stops > 2000 && goes > 2000,
        "{stops} stops, {goes} continues"
    );
}

#[test]
fn pbgi_and_log_eipc_forms_agree_at_near_ties() {
    let mut r = rng(2);
    for case in 0..5000 {
        let p = random_point(&mut r, case % 2 == 0);
        let lambda = 10f64.powf(r.random_range(-6.0..1.0));
        let g = pbgi_index(p.mu, p.sigma, lambda.ln() + p.cost.mean + 0.5 * p.cost.var).g;
        // Exactly at the index, a few ulps and 1e-12 relative around it.
        let ulp = f64::EPSILON * g.abs().max(f64::MIN_POSITIVE);
        for best in [
            g,
            g + ulp,
            g - ulp,
            g + 4.0 * ulp,
            g - 4.0 * ulp,
            g * (1.0 + 1e-12),
            g * (1.0 - 1e-12),
        ] {
            assert_eq!(
                stops_by_pbgi(&[p], best, lambda),
                stops_by_log_eipc(&[p], best, lambda),
                "case {case}: {p:?} best {best} lambda {lambda}"
            );
        }
        // Clearly above the index: no box beats the incumbent; clearly below: one does.
        let scale = g.abs() + p.mu.abs() + p.sigma;
        assert!(stops_by_log_eipc(&[p], g + 1e-6 * scale, lambda));
        assert!(!stops_by_log_eipc(&[p], g - 1e-6 * scale, lambda));
    }
}

/// A GP on `[0,1]^d` with fixed hyperparameters (raw units, no transforms).
fn model(x: &[f64], y: &[f64], d: usize, ls: f64) -> GpModel {
    let kernel = Kernel::new(KernelKind::Matern52, vec![ls; d], 1.0).unwrap();
    GpModel::with_params(
        x,
        y,
        d,
        &Transforms::default(),
        GpParams {
            kernel,
            mean: 0.0,
            noise: 1e-6,
        },
    )
    .unwrap()
}

fn grid(m: usize) -> Vec<f64> {
    (0..m).map(|i| i as f64 / (m - 1) as f64).collect()
}

/// The rule's computed statistic on an exclusive candidate set equals the brute-force maximum
/// of LogEIPC over the unevaluated candidates, and its decision equals the PBGI form there.
#[test]
fn pbgi_rule_on_a_model_matches_brute_force_known_and_unknown_cost() {
    let x = [0.1, 0.35, 0.6, 0.9];
    let y = [0.2, -0.4, 0.5, 0.1];
    let gp = model(&x, &y, 1, 0.2);
    let cand = grid(41);
    let cost_fn = KnownCost(|p: &[f64], g: &mut [f64]| {
        g[0] = 2.0;
        0.5 + 2.0 * p[0]
    });
    let logc: Vec<f64> = x.iter().map(|p| (0.5 + 2.0 * p).ln()).collect();
    let cost_gp = model(&x, &logc, 1, 0.3);
    let unknown = UnknownCost(&cost_gp);
    for (which, info, cm) in [
        (
            "known",
            CostInfo::Known(&cost_fn),
            &cost_fn as &dyn CostModel,
        ),
        (
            "unknown",
            CostInfo::Unknown(&cost_gp),
            &unknown as &dyn CostModel,
        ),
    ] {
        let post = gp.posterior(&cand, false).unwrap();
        let lc = cm.log_cost(&cand, 1, false).unwrap();
        let best = 0.5;
        let mut pts = Vec::new();
        for (j, c) in cand.iter().enumerate() {
            if x.iter().any(|o| (o - c).abs() < 1e-12) {
                continue;
            }
            pts.push(PointPosterior {
                mu: post.mean[j],
                sigma: post.var[j].sqrt(),
                cost: LogCost {
                    mean: lc.mean[j],
                    var: lc.var[j],
                },
            });
        }
        let brute = pts
            .iter()
            .map(|p| log_eipc_exp(p, best))
            .fold(f64::NEG_INFINITY, f64::max);
        // Also against the library acquisition (exp convention).
        let acq = LogExpectedImprovementPerCost {
            best_f: best,
            alpha: 1.0,
            convention: CostConvention::Expected,
        };
        let lib = pts
            .iter()
            .map(|p| acq.eval(p.mu, p.sigma, p.cost).value)
            .fold(f64::NEG_INFINITY, f64::max);
        assert!((brute - lib).abs() < 1e-12);
        for lambda in [1e-4, 1e-3, 1e-2, 0.05, 0.3] {
            let mut rule =
                PbgiStopping::new(lambda, 1, Guard::default(), OptimizerConfig::default()).unwrap();
            let mut state = RunState::new(1, &x, &y, &[], 0);
            state.model = Some(&gp);
            state.cost_info = info;
            state.candidates = Some(Candidates {
                points: &cand,
                exclusive: true,
            });
            let (v, _) = rule.max_log_eipc(&state).unwrap();
            assert!((v - brute).abs() < 1e-12, "{which}: {v} vs {brute}");
            let dec = rule.check(&state).unwrap();
            assert_eq!(
                dec.is_stop(),
                stops_by_pbgi(&pts, best, lambda),
                "{which} {lambda}"
            );
            assert_eq!(dec.is_stop(), brute <= lambda.ln());
            let s = &dec.report().statistics[0];
            assert_eq!(s.name, "max_log_eipc");
            assert_eq!(s.threshold, lambda.ln());
        }
    }
}

/// Before the update (stopping paper App. C.2): the statistic is the brute-force maximum of
/// LogEIPC on the posterior of `D_{t−1}` with the incumbent of `D_t` over the candidates not in
/// `D_t`; for the PBGI policy's own choice `x_t = argmax g_{λ,t−1}` the rule fires exactly when
/// `y_t` beats `g_{λ,t−1}(x_t)` (the notebook's "this-round" rule); NaN and no stop without a
/// previous posterior.
#[test]
fn pbgi_rule_before_the_update_uses_the_previous_posterior() {
    let x_old = [0.1, 0.35, 0.6, 0.9];
    let y_old = [0.2, -0.4, 0.5, 0.1];
    let old = model(&x_old, &y_old, 1, 0.2);
    let cand = grid(1001);
    let lambda: f64 = 0.01;
    // The PBGI policy's choice on D_{t−1}: the candidate with the largest index.
    let post = old.posterior(&cand, false).unwrap();
    let (mut j_best, mut g_best) = (0, f64::NEG_INFINITY);
    for (j, c) in cand.iter().enumerate() {
        if x_old.iter().any(|o| (o - c).abs() < 1e-12) {
            continue;
        }
        let g = pbgi_index(post.mean[j], post.var[j].sqrt(), lambda.ln()).g;
        if g > g_best {
            (j_best, g_best) = (j, g);
        }
    }
    assert!(g_best > 0.5, "the index beats the incumbent: {g_best}");
    let x_t = cand[j_best];
    let run = |y_t: f64, timing: Timing, previous: bool| {
        let mut x = x_old.to_vec();
        x.push(x_t);
        let mut y = y_old.to_vec();
        y.push(y_t);
        let new = model(&x, &y, 1, 0.2);
        let mut rule = PbgiStopping::new(lambda, 1, Guard::default(), OptimizerConfig::default())
            .unwrap()
            .with_timing(timing);
        let mut state = RunState::new(1, &x, &y, &[], 4);
        state.model = Some(&new);
        state.previous_model = previous.then_some(&old);
        state.candidates = Some(Candidates {
            points: &cand,
            exclusive: true,
        });
        let v = rule.max_log_eipc_before_update(&state).unwrap();
        let dec = rule.check(&state).unwrap();
        (v, dec, y.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    };
    for y_t in [g_best + 1e-6, g_best - 1e-3, 0.3, 1.5] {
        let (v, dec, best) = run(y_t, Timing::BeforeUpdate, true);
        // Brute force on the old posterior, D_t's points excluded, D_t's incumbent.
        let brute = (0..cand.len())
            .filter(|&j| j != j_best && !x_old.iter().any(|o| (o - cand[j]).abs() < 1e-12))
            .map(|j| {
                let p = PointPosterior {
                    mu: post.mean[j],
                    sigma: post.var[j].sqrt(),
                    cost: LogCost {
                        mean: 0.0,
                        var: 0.0,
                    },
                };
                log_eipc_exp(&p, best)
            })
            .fold(f64::NEG_INFINITY, f64::max);
        assert!((v - brute).abs() < 1e-12, "y_t = {y_t}: {v} vs {brute}");
        assert_eq!(dec.is_stop(), brute <= lambda.ln(), "y_t = {y_t}");
        // This-round form: fires iff the new value beats the index that chose x_t.
        assert_eq!(dec.is_stop(), y_t >= g_best, "y_t = {y_t}");
        let s = &dec.report().statistics[0];
        assert_eq!(s.name, "max_log_eipc_before_update");
        assert_eq!(s.value, v);
    }
    // Without the previous posterior (t = 0): NaN, reported, no stop.
    let (v, dec, _) = run(1.5, Timing::BeforeUpdate, false);
    assert!(v.is_nan());
    assert!(!dec.is_stop());
    assert!(dec.report().statistics[0].value.is_nan());
    // After the update the rule reads the other statistic.
    let (_, after, _) = run(g_best - 1e-3, Timing::AfterUpdate, true);
    assert_eq!(after.report().statistics[0].name, "max_log_eipc");
    // A supplied statistic is used as is.
    let x = [0.1, 0.2];
    let y = [0.0, 0.1];
    let mut rule = PbgiStopping::new(lambda, 1, Guard::default(), OptimizerConfig::default())
        .unwrap()
        .with_timing(Timing::BeforeUpdate);
    let mut state = RunState::new(1, &x, &y, &[], 1);
    state.supplied.max_log_eipc_before_update = Some(lambda.ln() - 1e-9);
    assert!(rule.check(&state).unwrap().is_stop());
}

/// The continuous maximization finds (at least) the best grid value.
#[test]
fn pbgi_rule_continuous_maximum_is_at_least_the_grid_maximum() {
    let x = [0.1, 0.35, 0.6, 0.9, 0.2, 0.3];
    let y = [0.2, -0.4, 0.5, 0.1, 0.3, 0.0];
    let d = 2;
    let gp = model(&x, &y[..3], d, 0.3);
    let xs = &x[..6];
    let rule = PbgiStopping::new(0.01, 1, Guard::default(), OptimizerConfig::default()).unwrap();
    let mut state = RunState::new(d, xs, &y[..3], &[], 0);
    state.model = Some(&gp);
    let (v, xbest) = rule.max_log_eipc(&state).unwrap();
    let mut g2 = Vec::new();
    for i in 0..21 {
        for j in 0..21 {
            g2.push(i as f64 / 20.0);
            g2.push(j as f64 / 20.0);
        }
    }
    state.candidates = Some(Candidates {
        points: &g2,
        exclusive: true,
    });
    let (vg, _) = rule.max_log_eipc(&state).unwrap();
    assert!(v >= vg - 1e-9, "{v} < grid {vg}");
    // The grid as extra candidates for the continuous search: at least both.
    state.candidates = Some(Candidates {
        points: &g2,
        exclusive: false,
    });
    let (ve, _) = rule.max_log_eipc(&state).unwrap();
    assert!(ve >= vg && ve >= v - 1e-9, "{ve} vs {v}, {vg}");
    assert_eq!(xbest.len(), 2);
}

fn supplied_log_eipc(values: &[f64]) -> Vec<SuppliedStatistics> {
    values
        .iter()
        .map(|v| SuppliedStatistics {
            max_log_eipc_exp: Some(*v),
            ..Default::default()
        })
        .collect()
}

/// Observations with `n_initial = 2` and `t` BO evaluations (values irrelevant here).
fn dummy_run(t: usize) -> (Vec<f64>, Vec<f64>) {
    let n = 2 + t;
    ((0..n).map(|i| i as f64 / n as f64).collect(), vec![0.0; n])
}

#[test]
fn pbgi_rule_guard_and_window_on_hand_traces() {
    let lam = (-2.0f64).exp(); // log λ = −2
    let run = |vals: &[f64], window: usize, guard: Guard| {
        let (x, y) = dummy_run(vals.len() - 1);
        let mut rule = PbgiStopping::new(lam, window, guard, OptimizerConfig::default()).unwrap();
        replay(&mut rule, 1, &x, &y, &[], 2, &supplied_log_eipc(vals))
            .unwrap()
            .stop
    };
    // Plain rule: first value ≤ −2 (ties stop).
    assert_eq!(run(&[-1.0, -2.0, -3.0], 1, Guard::default()), Some(1));
    // Debounce 2: needs two consecutive triggers.
    let db = Guard {
        burn_in: 0,
        debounce: 2,
    };
    assert_eq!(run(&[-1.0, -3.0, -1.0, -3.0, -3.0], 1, db), Some(4));
    // Burn-in 3: no stop before 3 BO evaluations.
    let bi = Guard {
        burn_in: 3,
        debounce: 1,
    };
    assert_eq!(run(&[-3.0, -3.0, -3.0, -3.0], 1, bi), Some(3));
    // Window 2: log((e^-1 + e^-3)/2) = −1.566 > −2, log((e^-3 + e^-3)/2) = −3.
    assert_eq!(run(&[-1.0, -3.0, -3.0], 2, Guard::default()), Some(2));
    assert_eq!(run(&[-3.0, -1.0, -1.0], 2, Guard::default()), None);
    {
        let (x, y) = dummy_run(1);
        let mut rule =
            PbgiStopping::new(lam, 2, Guard::default(), OptimizerConfig::default()).unwrap();
        let rep = replay(
            &mut rule,
            1,
            &x,
            &y,
            &[],
            2,
            &supplied_log_eipc(&[-1.0, -3.0]),
        )
        .unwrap();
        let s = &rep.decisions[1].report().statistics[0];
        // log((e^-1 + e^-3)/2) = −1.5662192…
        let expected = (((-1.0f64).exp() + (-3.0f64).exp()) / 2.0).ln();
        assert_eq!(s.name, "log_mean_eipc_window");
        assert!((s.value - expected).abs() < 1e-14 && (expected + 1.5662192).abs() < 1e-7);
        assert!(rep.decisions[0].report().statistics[0].value.is_nan());
    }
    // Supplied maximal PBGI index: stop iff it does not beat the incumbent.
    let (x, y) = dummy_run(1);
    let mut rule = PbgiStopping::new(lam, 1, Guard::default(), OptimizerConfig::default()).unwrap();
    let sup = [
        SuppliedStatistics {
            max_pbgi_index: Some(0.1),
            ..Default::default()
        },
        SuppliedStatistics {
            max_pbgi_index: Some(0.0),
            ..Default::default()
        },
    ];
    let r = replay(&mut rule, 1, &x, &y, &[], 2, &sup).unwrap();
    assert_eq!(r.stop, Some(1));
    let s = &r.decisions[1].report().statistics[0];
    assert_eq!(
        (s.name.as_str(), s.value, s.threshold),
        ("max_pbgi_index", 0.0, 0.0)
    );
}

#[test]
fn baselines_on_hand_computed_supplied_traces() {
    // UCB-LCB, θ = 0.01, ≤.
    let (x, y) = dummy_run(2);
    let sup: Vec<_> = [0.5, 0.02, 0.01]
        .iter()
        .map(|v| SuppliedStatistics {
            ucb_lcb: Some(*v),
            ..Default::default()
        })
        .collect();
    let mut r = UcbLcb::new(0.01, 1, Guard::default(), OptimizerConfig::default()).unwrap();
    assert_eq!(
        replay(&mut r, 1, &x, &y, &[], 2, &sup).unwrap().stop,
        Some(2)
    );

    // LogEIPC-med, I = 3, η = e^-1: median(0, −1, −2) = −1, threshold −2, first possible at t = 2.
    let (x, y) = dummy_run(4);
    let sup: Vec<_> = [0.0, -1.0, -2.0, -2.5, -3.5]
        .iter()
        .map(|v| SuppliedStatistics {
            max_log_eipc_inv: Some(*v),
            ..Default::default()
        })
        .collect();
    let mut r = LogEipcMed::new(
        (-1.0f64).exp(),
        3,
        Guard::default(),
        OptimizerConfig::default(),
    )
    .unwrap();
    let rep = replay(&mut r, 1, &x, &y, &[], 2, &sup).unwrap();
    assert_eq!(rep.stop, Some(2));
    assert!(rep.decisions[1].report().statistics[0].threshold.is_nan());
    assert!((rep.decisions[2].report().statistics[0].threshold + 2.0).abs() < 1e-15);
    // A value that is low early cannot fire before the median exists.
    let sup2: Vec<_> = [-9.0, -9.0, 0.0]
        .iter()
        .map(|v| SuppliedStatistics {
            max_log_eipc_inv: Some(*v),
            ..Default::default()
        })
        .collect();
    let (x2, y2) = dummy_run(2);
    assert_eq!(
        replay(&mut r, 1, &x2, &y2, &[], 2, &sup2).unwrap().stop,
        None
    );

    // SRGap-med, I = 2, χ = 0.5: median(4, 2) = 3, threshold 1.5.
    let (x, y) = dummy_run(3);
    let sup: Vec<_> = [4.0, 2.0, 2.0, 1.4]
        .iter()
        .map(|v| SuppliedStatistics {
            srgap: Some(*v),
            ..Default::default()
        })
        .collect();
    let mut r = SrGapMed::new(0.5, 2, Guard::default()).unwrap();
    assert_eq!(
        replay(&mut r, 1, &x, &y, &[], 2, &sup).unwrap().stop,
        Some(3)
    );

    // PRB, δ = 0.05: stop once P ≥ 0.95.
    let (x, y) = dummy_run(2);
    let sup: Vec<_> = [0.5, 0.94, 0.95]
        .iter()
        .map(|v| SuppliedStatistics {
            prb: Some(*v),
            ..Default::default()
        })
        .collect();
    let mut r = Prb::new(
        0.05,
        0.05,
        SampleSchedule::default(),
        1024,
        Guard::default(),
        OptimizerConfig::default(),
    )
    .unwrap();
    assert_eq!(
        replay(&mut r, 1, &x, &y, &[], 2, &sup).unwrap().stop,
        Some(2)
    );
}

#[test]
fn prb_sample_schedule_is_64_times_1_5_capped_at_1000() {
    let s = SampleSchedule::default();
    let mut v = vec![s.initial];
    for _ in 0..9 {
        v.push(s.next(*v.last().unwrap()));
    }
    assert_eq!(v, [64, 96, 144, 216, 324, 486, 729, 1000, 1000, 1000]);
}

#[test]
fn convergence_gss_and_fixed_budget_on_hand_traces() {
    // Convergence, w = 5. Best history b = [1, 2, 2, 2, 2, 2, 2, 3]: last improvement at t = 1,
    // five evaluations without improvement at t = 6.
    let y = [0.0, 1.0, 2.0, 2.0, 1.5, 2.0, 2.0, 2.0, 3.0];
    let x: Vec<f64> = (0..y.len()).map(|i| i as f64 / 10.0).collect();
    let mut r = Convergence::new(5, Guard::default()).unwrap();
    let rep = replay(&mut r, 1, &x, &y, &[], 2, &[]).unwrap();
    assert_eq!(rep.stop, Some(6));
    assert_eq!(rep.decisions[5].report().statistics[0].value, 4.0);

    // GSS, w = 5, φ = 0.01: b = [1, 2, 3, 4, 5, 6, 6, 6, 6, 6, 6]; the improvement over the window
    // first vanishes at t = 10.
    let y = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0];
    let x: Vec<f64> = (0..y.len()).map(|i| i as f64 / 20.0).collect();
    for of_best in [false, true] {
        let mut r = Gss::new(5, 0.01, of_best, Guard::default()).unwrap();
        let rep = replay(&mut r, 1, &x, &y, &[], 2, &[]).unwrap();
        assert_eq!(rep.stop, Some(10), "iqr_of_best = {of_best}");
        if !of_best {
            // At t = 5: y = 0..6, IQR = 4.5 − 1.5 = 3 (linear interpolation), threshold 0.03,
            // improvement b_5 − b_0 = 5.
            let s = &rep.decisions[5].report().statistics[0];
            assert!(
                (s.threshold - 0.03).abs() < 1e-15 && s.value == 5.0,
                "{s:?}"
            );
        }
    }
    // Constant values: IQR = 0 never triggers.
    let y = [1.0; 12];
    let mut r = Gss::new(5, 0.01, false, Guard::default()).unwrap();
    assert_eq!(replay(&mut r, 1, &x, &y, &[], 2, &[]).unwrap().stop, None);

    // Fixed budget: 3 iterations, or BO-phase cost 2.5 (initial-design cost excluded).
    let y = [0.0; 6];
    let x: Vec<f64> = (0..6).map(|i| i as f64 / 6.0).collect();
    let cost = [5.0, 5.0, 1.0, 1.0, 0.6, 1.0];
    let mut r = FixedBudget::new(Some(3), None).unwrap();
    assert_eq!(
        replay(&mut r, 1, &x, &y, &cost, 2, &[]).unwrap().stop,
        Some(3)
    );
    let mut r = FixedBudget::new(None, Some(2.5)).unwrap();
    let rep = replay(&mut r, 1, &x, &y, &cost, 2, &[]).unwrap();
    assert_eq!(rep.stop, Some(3));
    let s = &rep.decisions[3].report().statistics[0];
    assert_eq!(s.name, "cumulative_cost");
    assert!((s.value - 2.6).abs() < 1e-12);
    assert!(FixedBudget::new(None, None).is_err());
}

#[test]
fn cost_adjusted_regret_hindsight_and_stop_evaluation() {
    // y (max) = [0, 1 | 3, 3, 4], costs [5, 5 | 1, 2, 3], optimum 5.
    let y = [0.0, 1.0, 3.0, 3.0, 4.0];
    let cost = [5.0, 5.0, 1.0, 2.0, 3.0];
    let tr = Trace::from_observations(&y, &cost, 2, 5.0).unwrap();
    assert_eq!(tr.simple_regret, [4.0, 2.0, 2.0, 1.0]);
    assert_eq!(tr.cumulative_cost, [0.0, 1.0, 3.0, 6.0]);
    assert_eq!(tr.cost_adjusted(0.5), [4.0, 2.5, 3.5, 4.0]);
    assert_eq!(hindsight(&tr, 0.5), (1, 2.5));
    assert_eq!(hindsight(&tr, 0.0), (3, 1.0));
    let o = evaluate_stop(&tr, 0.5, Some(2)).unwrap();
    assert!(o.fired && o.index == 2 && o.cost_adjusted_regret == 3.5 && o.gap_to_hindsight == 1.0);
    let n = evaluate_stop(&tr, 0.5, None).unwrap();
    assert!(!n.fired && n.index == 3 && n.cost_adjusted_regret == 4.0);
    assert!(evaluate_stop(&tr, 0.5, Some(4)).is_err());
    let s = summarize(&[o, n]).unwrap();
    assert_eq!(s.never_fired, 1);
    assert_eq!(s.mean_index, 2.5);
    assert_eq!(s.mean_cost_adjusted_regret, 3.75);
    assert!((s.se_cost_adjusted_regret - 0.25).abs() < 1e-15);
    assert_eq!(s.mean_gap_to_hindsight, 1.25);
    assert!(Trace::new(vec![1.0], vec![]).is_err());
}

#[test]
fn config_parses_names_and_tables_and_builds() {
    let c: StoppingConfig = serde_json::from_str("\"pbgi\"").unwrap();
    assert_eq!(c, StoppingConfig::default());
    assert!(c.build(None).is_err(), "pbgi needs a lambda");
    assert_eq!(c.build(Some(1e-3)).unwrap().name(), "pbgi");
    let c: StoppingConfig =
        serde_json::from_str(r#"{"rule": "gss", "window": 7, "burn_in": 3}"#).unwrap();
    assert_eq!(
        c.rule,
        RuleConfig::Gss {
            window: 7,
            phi: 0.01,
            iqr_of_best: false
        }
    );
    assert_eq!(c.guard.burn_in, 3);
    assert_eq!(c.guard.debounce, 1);
    let c: StoppingConfig = serde_json::from_str(
        r#"{"rule": "pbgi", "lambda": 1e-5, "window": 20, "debounce": 2,
            "optimizer": {"raw_samples": 512}}"#,
    )
    .unwrap();
    assert_eq!(
        c.rule,
        RuleConfig::Pbgi {
            lambda: Some(1e-5),
            window: 20,
            timing: Timing::AfterUpdate,
        }
    );
    assert_eq!(c.optimizer.raw_samples, Some(512));
    let back: StoppingConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
    // The default timing is not written (configs serialized before it existed stay the same).
    assert!(!serde_json::to_string(&c).unwrap().contains("timing"));
    let c: StoppingConfig =
        serde_json::from_str(r#"{"rule": "pbgi", "timing": "before-update"}"#).unwrap();
    assert_eq!(
        c.rule,
        RuleConfig::Pbgi {
            lambda: None,
            window: 1,
            timing: Timing::BeforeUpdate,
        }
    );
    let back: StoppingConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert_eq!(back, c);
    assert!(
        serde_json::from_str::<StoppingConfig>(r#"{"rule": "pbgi", "timing": "later"}"#).is_err()
    );
    for name in [
        "pbgi",
        "log-eipc",
        "ucb-lcb",
        "log-eipc-med",
        "srgap-med",
        "prb",
        "convergence",
        "gss",
        "never",
    ] {
        let c = StoppingConfig::from_name(name).unwrap();
        let rule = c.build(Some(0.01)).unwrap();
        let back: StoppingConfig =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c, "{name}");
        assert!(!rule.name().is_empty());
    }
    assert!(serde_json::from_str::<StoppingConfig>("\"sometimes\"").is_err());
    assert!(serde_json::from_str::<StoppingConfig>("\"fixed-budget\"").is_err());
    let fb: StoppingConfig =
        serde_json::from_str(r#"{"rule": "fixed-budget", "max_iterations": 50}"#).unwrap();
    assert_eq!(fb.build(None).unwrap().name(), "fixed-budget");
    let bad: StoppingConfig = serde_json::from_str(r#"{"rule": "prb", "delta": 1.5}"#).unwrap();
    assert!(bad.build(None).is_err());
}

#[test]
fn lambda_from_budget_follows_theorem_1() {
    assert!((lambda_from_budget(2.0, 12.0, 2.0).unwrap() - 0.2).abs() < 1e-15);
    assert!(lambda_from_budget(2.0, 2.0, 2.0).is_err());
    assert!(lambda_from_budget(0.0, 12.0, 2.0).is_err());
    assert!(lambda_from_budget(f64::NAN, 12.0, 2.0).is_err());
}

/// Far-apart points under a short lengthscale are independent `N(0, s²)`:
/// `E[max of 2] = s/√π`, `E[max of 3] = 3s/(2√π)`.
#[test]
fn expected_max_matches_closed_forms_and_converges() {
    let s2 = 4.0;
    let kernel = Kernel::new(KernelKind::Matern52, vec![1e-3], s2).unwrap();
    let pi = std::f64::consts::PI;
    for (pts, exact) in [
        (vec![0.0, 0.5], s2.sqrt() / pi.sqrt()),
        (vec![0.0, 0.5, 1.0], 3.0 * s2.sqrt() / (2.0 * pi.sqrt())),
    ] {
        let small = expected_max_on_set(&kernel, &pts, 1.0, 400, 7).unwrap();
        let large = expected_max_on_set(&kernel, &pts, 1.0, 25_600, 8).unwrap();
        for e in [small, large] {
            assert!((e.u - exact).abs() < 4.0 * e.std_error, "{e:?} vs {exact}");
        }
        // Standard error shrinks like 1/√S (64x the samples: 8x smaller, ±20%).
        let ratio = small.std_error / large.std_error;
        assert!((6.4..9.6).contains(&ratio), "{ratio}");
        // The outcome scale multiplies U.
        let scaled = expected_max_on_set(&kernel, &pts, 3.0, 400, 7).unwrap();
        assert!((scaled.u - 3.0 * small.u).abs() < 1e-12);
    }
}

/// `estimate_u` on a fitted model: the exact estimator on an exclusive set agrees with the
/// closed form, and the continuous (random-feature) estimator is at least the exact grid value
/// and close to it on a fine grid.
#[test]
fn estimate_u_prior_and_posterior() {
    let x = [0.2, 0.8];
    let y = [0.3, -0.1];
    let gp = model(&x, &y, 1, 0.2);
    let g = grid(201);
    let opts = UEstimatorOptions {
        samples: 400,
        seed: 3,
        ..Default::default()
    };
    let on_grid = estimate_u(
        &gp,
        UReference::Prior,
        Some(Candidates {
            points: &g,
            exclusive: true,
        }),
        None,
        &UEstimatorOptions {
            samples: 4000,
            ..opts
        },
    )
    .unwrap();
    let cont = estimate_u(&gp, UReference::Prior, None, None, &opts).unwrap();
    let tol = 4.0 * (on_grid.std_error.powi(2) + cont.std_error.powi(2)).sqrt();
    assert!(cont.u > on_grid.u - tol, "{cont:?} vs grid {on_grid:?}");
    assert!(
        cont.u < on_grid.u + tol + 0.02,
        "{cont:?} vs grid {on_grid:?}"
    );
    assert!(on_grid.u > 1.0 && on_grid.u < 2.5, "{on_grid:?}");
    // Posterior version: E[max f | D] − y* is non-negative and smaller than the prior U here.
    let post = estimate_u(&gp, UReference::Posterior { best: 0.3 }, None, None, &opts).unwrap();
    assert!(post.u > 0.0 && post.u < cont.u, "{post:?} vs {cont:?}");
}

/// With all candidates evaluated, every posterior path peaks (to noise level) at an evaluated
/// point, so PRB is 1 when ε is above the noise.
#[test]
fn prb_is_one_when_everything_is_evaluated() {
    let x = [0.0, 0.5, 1.0];
    let y = [0.1, 0.9, -0.3];
    let gp = model(&x, &y, 1, 0.2);
    let mut rule = Prb::new(
        0.01,
        0.05,
        SampleSchedule {
            initial: 20,
            growth: 1.5,
            max: 40,
        },
        256,
        Guard::default(),
        OptimizerConfig::default(),
    )
    .unwrap();
    let mut state = RunState::new(1, &x, &y, &[], 1);
    state.model = Some(&gp);
    state.candidates = Some(Candidates {
        points: &x,
        exclusive: true,
    });
    let dec = rule.check(&state).unwrap();
    assert_eq!(dec.report().statistics[0].value, 1.0);
    assert!(dec.is_stop());
    assert_eq!(rule.samples(), 30);
    // On the continuum with few data the incumbent is far from surely optimal.
    state.candidates = None;
    let r = rule.sample_regrets(&state, 30).unwrap();
    assert!(r.iter().all(|v| *v >= 0.0));
    let frac = r.iter().filter(|v| **v <= 0.01).count() as f64 / 30.0;
    assert!(frac < 0.95, "{frac}");
}

#[test]
fn ucb_lcb_and_srgap_statistics_on_a_model() {
    let x = [0.1, 0.4, 0.7, 0.95];
    let y = [0.2, 0.6, -0.1, 0.3];
    let gp = model(&x, &y, 1, 0.2);
    let g = grid(101);
    let mut state = RunState::new(1, &x, &y, &[], 2);
    state.model = Some(&gp);
    state.candidates = Some(Candidates {
        points: &g,
        exclusive: true,
    });
    let rule = UcbLcb::new(0.01, 1, Guard::default(), OptimizerConfig::default()).unwrap();
    let k = rule.statistic(&state).unwrap();
    // Brute force: β = gp_ucb_beta(1, t + 1) with t = 2.
    let beta = pandora_core::acquisition::gp_ucb_beta(1, 3.0);
    let pg = gp.posterior(&g, false).unwrap();
    let ucb = pg
        .mean
        .iter()
        .zip(&pg.var)
        .map(|(m, v)| m + beta.sqrt() * v.sqrt())
        .fold(f64::NEG_INFINITY, f64::max);
    let po = gp.posterior(&x, false).unwrap();
    let lcb = po
        .mean
        .iter()
        .zip(&po.var)
        .map(|(m, v)| m - beta.sqrt() * v.sqrt())
        .fold(f64::NEG_INFINITY, f64::max);
    assert!((k - (ucb - lcb)).abs() < 1e-12, "{k} vs {}", ucb - lcb);
    assert!(k > 0.0);

    // SRGap: same posterior and same incumbent before and after gives gap 0; a new incumbent
    // gives a positive gap; no previous model gives NaN.
    let sr = SrGapMed::new(0.01, 20, Guard::default()).unwrap();
    assert!(sr.statistic(&state).unwrap().is_nan());
    let x3 = [0.1, 0.4, 0.7];
    let old = model(&x3, &y[..3], 1, 0.2);
    let y_same = [0.2, 0.6, -0.1, 0.3];
    state.previous_model = Some(&gp);
    state.y = &y_same;
    assert!(sr.statistic(&state).unwrap().abs() < 1e-12);
    let y_new = [0.2, 0.6, -0.1, 0.9];
    let gp_new = model(&x, &y_new, 1, 0.2);
    state.y = &y_new;
    state.model = Some(&gp_new);
    state.previous_model = Some(&old);
    let gap = sr.statistic(&state).unwrap();
    assert!(gap.is_finite() && gap > 0.1, "{gap}");
}

/// Theorem 1 as a statistical test: on 1-D GP-prior problems over a grid, the PBGI and the
/// LogEIPC acquisitions with the PBGI/LogEIPC rule spend in expectation at most `C + U/λ`
/// (unscaled costs; `C` = expected cost of the random first point), for uniform and linear costs.
/// (Measured: mean spend 6.2-6.5 against a bound of 33; the bound is loose but a rule that
/// failed to stop would spend up to 60.)
#[test]
fn theorem_1_expected_cost_within_c_plus_u() {
    let m = 60;
    let g = grid(m);
    let kernel = Kernel::new(KernelKind::Matern52, vec![0.1], 1.0).unwrap();
    let u = expected_max_on_set(&kernel, &g, 1.0, 20_000, 11).unwrap();
    let lambda = 0.05;
    let k = pandora_core::gp::model::kernel_matrix(&kernel, &g, 1e-10);
    let chol = pandora_core::linalg::Cholesky::factor(k.as_ref(), Default::default()).unwrap();
    let l = chol.l();
    for linear in [false, true] {
        let cost_of = move |x: f64| if linear { 0.5 + x } else { 1.0 };
        let known = KnownCost(move |p: &[f64], gr: &mut [f64]| {
            gr[0] = if linear { 1.0 } else { 0.0 };
            cost_of(p[0])
        });
        let c_first = g.iter().map(|x| cost_of(*x)).sum::<f64>() / m as f64;
        let bound = c_first + u.u / lambda;
        for use_pbgi in [false, true] {
            let mut r = rng(99);
            let runs = 150;
            let mut spent = Vec::new();
            for _ in 0..runs {
                // An objective from the same prior (exact, on the grid).
                let z: Vec<f64> = (0..m)
                    .map(|_| r.sample(rand_distr::StandardNormal))
                    .collect();
                let f: Vec<f64> = (0..m)
                    .map(|i| (0..=i).map(|j| l[(i, j)] * z[j]).sum())
                    .collect();
                let first = r.random_range(0..m);
                let mut xi = vec![g[first]];
                let mut yi = vec![f[first]];
                let mut rule =
                    PbgiStopping::new(lambda, 1, Guard::default(), OptimizerConfig::default())
                        .unwrap();
                loop {
                    let gp = GpModel::with_params(
                        &xi,
                        &yi,
                        1,
                        &Transforms::default(),
                        GpParams {
                            kernel: kernel.clone(),
                            mean: 0.0,
                            noise: 1e-8,
                        },
                    )
                    .unwrap();
                    let mut state = RunState::new(1, &xi, &yi, &[], 1);
                    state.model = Some(&gp);
                    state.cost_info = CostInfo::Known(&known);
                    state.candidates = Some(Candidates {
                        points: &g,
                        exclusive: true,
                    });
                    if rule.check(&state).unwrap().is_stop() {
                        break;
                    }
                    // Next point: argmax LogEIPC or argmax PBGI index over unevaluated points.
                    let best = yi.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let post = gp.posterior(&g, false).unwrap();
                    let mut pick = (f64::NEG_INFINITY, usize::MAX);
                    for (j, &gj) in g.iter().enumerate() {
                        if xi.contains(&gj) {
                            continue;
                        }
                        let (mu, s) = (post.mean[j], post.var[j].sqrt());
                        let lc = cost_of(gj).ln();
                        let score = if use_pbgi {
                            pbgi_index(mu, s, lambda.ln() + lc).g
                        } else {
                            log_eipc_exp(
                                &PointPosterior {
                                    mu,
                                    sigma: s,
                                    cost: LogCost { mean: lc, var: 0.0 },
                                },
                                best,
                            )
                        };
                        if score > pick.0 {
                            pick = (score, j);
                        }
                    }
                    if pick.1 == usize::MAX {
                        break;
                    }
                    xi.push(g[pick.1]);
                    yi.push(f[pick.1]);
                }
                spent.push(xi.iter().map(|x| cost_of(*x)).sum::<f64>());
            }
            let mean = spent.iter().sum::<f64>() / runs as f64;
            let sd =
                (spent.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (runs - 1) as f64).sqrt();
            let se = sd / (runs as f64).sqrt();
            assert!(
                mean <= bound + 3.0 * se,
                "linear={linear} pbgi={use_pbgi}: mean spend {mean} (se {se}) > C + U/λ = {bound}"
            );
            // Not vacuous: the runs do evaluate several points on average.
            assert!(mean > 3.0, "linear={linear} pbgi={use_pbgi}: {mean}");
        }
    }
}

/// A policy step returns the model it fitted (the same posterior as conditioning a GP on the
/// proposal's hyperparameters), and the acquisition maximum it found serves as the rule's
/// statistic (same decision as computing it afresh).
#[test]
fn rule_from_a_policy_step_reuses_the_proposal() {
    use pandora_core::acquisition::{AcquisitionName, AcquisitionParams, LinearMeanCost};
    use pandora_core::gp::{GpModel, Transforms};
    use pandora_core::optim::MultiStartOptions;
    use pandora_core::policy::{CostSetting, History, StepConfig, StepContext, propose_fitted};
    use pandora_core::stopping::step::supplied_from_proposal;
    let d = 2;
    let f = |x: &[f64]| -((x[0] - 0.3).powi(2) + (x[1] - 0.7).powi(2));
    let config = StepConfig {
        acquisition: AcquisitionName::LogEipc,
        params: AcquisitionParams {
            convention: Some(CostConvention::Expected),
            ..AcquisitionParams::default()
        },
        multistart: MultiStartOptions {
            raw_samples: Some(200),
            num_restarts: Some(4),
            ..MultiStartOptions::default()
        },
        standardize: false,
        ..StepConfig::default()
    };
    let cost = LinearMeanCost {
        offset: 1.0,
        slope: 20.0,
    };
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut checked = 0;
    for step in 0..10u64 {
        let history = History {
            x: &x,
            y: &y,
            cost: &[],
            pending: &[],
        };
        let (p, models) = propose_fitted(
            d,
            history,
            &config,
            &StepContext::default(),
            CostSetting::Known(&cost),
            step,
            None,
        )
        .unwrap();
        assert_eq!(models.is_some(), p.params.is_some());
        if let Some(models) = models {
            let t = Transforms {
                normalize_inputs: None,
                standardize_outcomes: false,
                output_scale: None,
            };
            let rebuilt = GpModel::with_params(&x, &y, d, &t, p.params.clone().unwrap()).unwrap();
            let probe = [0.1, 0.2, 0.5, 0.5, 0.9, 0.05];
            let (a, b) = (
                models.model.posterior(&probe, false).unwrap(),
                rebuilt.posterior(&probe, false).unwrap(),
            );
            assert_eq!((a.mean, a.var), (b.mean, b.var), "step {step}");
            let sup = supplied_from_proposal(&config, &history, &p, false, Some(0.01));
            assert_eq!(sup.max_log_eipc_exp, Some(p.acquisition_value));
            let opt = OptimizerConfig {
                raw_samples: Some(200),
                num_restarts: Some(4),
            };
            let rule = PbgiStopping::new(0.01, 1, Guard::default(), opt).unwrap();
            let mut state = RunState::new(d, &x, &y, &[], 6);
            state.model = Some(&models.model);
            state.cost_info = CostInfo::Known(&cost);
            state.seed = step;
            let (v, _) = rule.max_log_eipc(&state).unwrap();
            assert!(
                (v - p.acquisition_value).abs() < 1e-9,
                "step {step}: {v} vs {}",
                p.acquisition_value
            );
            let mut a = rule.clone();
            let mut b = rule.clone();
            let fresh = a.check(&state).unwrap();
            state.supplied = sup;
            state.model = None; // the supplied statistic suffices
            assert_eq!(b.check(&state).unwrap().is_stop(), fresh.is_stop());
            checked += 1;
        }
        y.push(f(&p.x));
        x.extend_from_slice(&p.x);
    }
    assert!(checked >= 3);
}

/// Decisions serialize (for storage and status displays); with unknown costs a supplied
/// LogEIPC-inv maximum is not the PBGI rule's statistic, so the rule needs the model.
#[test]
fn decisions_serialize_and_unknown_cost_conventions_are_not_mixed() {
    let x = [0.1, 0.5, 0.9];
    let y = [0.0, 1.0, 0.5];
    let logc = [0.0, 0.1, 0.2];
    let cost_gp = model(&x, &logc, 1, 0.3);
    let mut state = RunState::new(1, &x, &y, &[], 2);
    state.cost_info = CostInfo::Unknown(&cost_gp);
    state.supplied.max_log_eipc_inv = Some(-10.0);
    let mut rule = PbgiStopping::new(0.1, 1, Guard::default(), OptimizerConfig::default()).unwrap();
    assert!(
        rule.check(&state).is_err(),
        "inv convention must not be used as the exp statistic"
    );
    state.supplied.max_log_eipc_exp = Some(-10.0);
    let dec = rule.check(&state).unwrap();
    assert!(dec.is_stop());
    let json = serde_json::to_string(&dec).unwrap();
    let back: pandora_core::stopping::Decision = serde_json::from_str(&json).unwrap();
    assert_eq!(back, dec);
    match &dec {
        pandora_core::stopping::Decision::Stop { reason, report } => {
            assert!(reason.contains("max_log_eipc"), "{reason}");
            assert_eq!(report.iteration, 1);
            assert!(report.triggered);
        }
        _ => unreachable!(),
    }
    // Bad input is an error, not a panic.
    let bad = RunState::new(1, &x[..2], &y, &[], 2);
    assert!(rule.check(&bad).is_err());
    let nan_y = [0.0, f64::NAN, 1.0];
    assert!(rule.check(&RunState::new(1, &x, &nan_y, &[], 1)).is_err());
}

#[test]
fn nan_statistics_serialize_as_null() {
    let s = pandora_core::stopping::Statistic::new(
        "srgap",
        f64::NAN,
        f64::NAN,
        pandora_core::stopping::Comparison::AtMost,
    );
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"value\":null"), "{json}");
    let back: pandora_core::stopping::Statistic = serde_json::from_str(&json).unwrap();
    assert!(back.value.is_nan() && back.threshold.is_nan() && !back.holds());
}

#[test]
fn ucb_lcb_moving_window_on_a_hand_trace() {
    let (x, y) = dummy_run(2);
    let sup: Vec<_> = [0.03, 0.0, 0.0]
        .iter()
        .map(|v| SuppliedStatistics {
            ucb_lcb: Some(*v),
            ..Default::default()
        })
        .collect();
    // Window 2: means 0.015 (t = 1) and 0 (t = 2); no stop at t = 0 (window not full).
    let mut r = UcbLcb::new(0.01, 2, Guard::default(), OptimizerConfig::default()).unwrap();
    let rep = replay(&mut r, 1, &x, &y, &[], 2, &sup).unwrap();
    assert_eq!(rep.stop, Some(2));
    let s = &rep.decisions[1].report().statistics[0];
    assert_eq!(s.name, "ucb_minus_lcb_window");
    assert!((s.value - 0.015).abs() < 1e-15);
}

/// SRGap with an unchanged incumbent: `gap = |m_old(x_b) − m_new(x_b)| + √β √(KL/2)`, recomputed
/// here from the two posteriors.
#[test]
fn srgap_matches_its_formula_when_the_incumbent_is_unchanged() {
    let x = [0.1, 0.4, 0.7, 0.95];
    let y = [0.2, 0.6, -0.1, 0.3];
    let old = model(&x[..3], &y[..3], 1, 0.2);
    let new = model(&x, &y, 1, 0.2);
    let mut state = RunState::new(1, &x, &y, &[], 2);
    state.model = Some(&new);
    state.previous_model = Some(&old);
    let sr = SrGapMed::new(0.01, 20, Guard::default()).unwrap();
    let gap = sr.statistic(&state).unwrap();
    let xb = [0.4];
    let (po, pn) = (
        old.posterior(&xb, false).unwrap(),
        new.posterior(&xb, false).unwrap(),
    );
    let (mo, vo) = (po.mean[0], po.var[0].max(1e-12));
    let (mn, vn) = (pn.mean[0], pn.var[0].max(1e-12));
    let kl = 0.5 * ((vn / vo).ln() + (vo + (mo - mn).powi(2)) / vn - 1.0);
    let beta = pandora_core::acquisition::gp_ucb_beta(1, 3.0);
    let expected = (mo - mn).abs() + beta.sqrt() * (kl.max(0.0) / 2.0).sqrt();
    assert!((gap - expected).abs() < 1e-12, "{gap} vs {expected}");
    assert!(gap > 0.0);
}

#[test]
fn rule_bank_records_each_rules_first_stop() {
    use pandora_core::stopping::RuleBank;
    // Best history [1, 2, 2, 2, 2, 2, 2, 3] (see the Convergence test).
    let y = [0.0, 1.0, 2.0, 2.0, 1.5, 2.0, 2.0, 2.0, 3.0];
    let x: Vec<f64> = (0..y.len()).map(|i| i as f64 / 10.0).collect();
    let mut bank = RuleBank::new(vec![
        Box::new(Convergence::new(5, Guard::default()).unwrap()),
        Box::new(FixedBudget::new(Some(3), None).unwrap()),
        Box::new(Convergence::new(2, Guard::default()).unwrap()),
    ]);
    for n in 2..=y.len() {
        let state = RunState::new(1, &x[..n], &y[..n], &[], 2);
        let decisions = bank.check(&state).unwrap();
        assert_eq!(decisions.len(), 3);
    }
    assert_eq!(bank.stops(), &[Some(6), Some(3), Some(3)]);
    assert!(bank.all_stopped());
    assert_eq!(bank.names(), ["convergence", "fixed-budget", "convergence"]);
}

/// U is in raw objective units: with standardized outcomes, scaling the data by 10 (same
/// internal hyperparameters, same seed) scales U by 10; input normalization maps the search box.
#[test]
fn estimate_u_undoes_the_model_transforms() {
    let x = [0.1, 0.5, 0.9, 0.3];
    let y = [0.2, -0.3, 0.4, 0.0];
    let y10: Vec<f64> = y.iter().map(|v| 10.0 * v).collect();
    let params = GpParams {
        kernel: Kernel::new(KernelKind::Matern52, vec![0.3], 1.0).unwrap(),
        mean: 0.0,
        noise: 1e-6,
    };
    let t = Transforms {
        normalize_inputs: Some(Some((vec![-1.0], vec![3.0]))),
        standardize_outcomes: true,
        output_scale: None,
    };
    let a = GpModel::with_params(&x, &y, 1, &t, params.clone()).unwrap();
    let b = GpModel::with_params(&x, &y10, 1, &t, params).unwrap();
    assert_eq!(a.to_internal(&[-1.0, 3.0, 1.0]).unwrap(), [0.0, 1.0, 0.5]);
    let opts = UEstimatorOptions {
        samples: 64,
        seed: 5,
        ..Default::default()
    };
    for reference in [UReference::Prior, UReference::Posterior { best: 0.4 }] {
        let ua = estimate_u(&a, reference, None, None, &opts).unwrap();
        let rb = match reference {
            UReference::Prior => UReference::Prior,
            UReference::Posterior { best } => UReference::Posterior { best: 10.0 * best },
        };
        let ub = estimate_u(&b, rb, None, None, &opts).unwrap();
        assert!(
            (ub.u - 10.0 * ua.u).abs() < 1e-9 * ub.u.abs().max(1.0),
            "{ua:?} {ub:?}"
        );
    }
    // Inputs normalized from [-1, 3] with internal lengthscale 0.3 is the same prior on raw
    // points as no normalization with lengthscale 1.2: identical exact U on a grid.
    let g = grid(30);
    let plain = model(&x, &y, 1, 1.2);
    let normalized = GpModel::with_params(
        &x,
        &y,
        1,
        &Transforms {
            normalize_inputs: Some(Some((vec![-1.0], vec![3.0]))),
            standardize_outcomes: false,
            output_scale: None,
        },
        GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.3], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-6,
        },
    )
    .unwrap();
    let c = Some(Candidates {
        points: &g,
        exclusive: true,
    });
    let up = estimate_u(&plain, UReference::Prior, c, None, &opts).unwrap();
    let un = estimate_u(&normalized, UReference::Prior, c, None, &opts).unwrap();
    assert!((up.u - un.u).abs() < 1e-9, "{up:?} vs {un:?}");
}

/// The forms a study config will use, in TOML.
#[test]
fn config_reads_from_toml() {
    #[derive(serde::Deserialize)]
    struct Study {
        stopping: StoppingConfig,
    }
    let s: Study = toml::from_str("stopping = \"pbgi\"").unwrap();
    assert_eq!(s.stopping, StoppingConfig::default());
    let s: Study = toml::from_str(
        "[stopping]\nrule = \"pbgi\"\nlambda = 1e-5\nwindow = 20\nburn_in = 20\ndebounce = 2\n",
    )
    .unwrap();
    assert_eq!(
        s.stopping.rule,
        RuleConfig::Pbgi {
            lambda: Some(1e-5),
            window: 20,
            timing: Timing::AfterUpdate,
        }
    );
    assert_eq!(
        (s.stopping.guard.burn_in, s.stopping.guard.debounce),
        (20, 2)
    );
    let s: Study = toml::from_str(
        "[stopping]\nrule = \"prb\"\nepsilon = 0.1\n[stopping.schedule]\ninitial = 32\ngrowth = 2.0\nmax = 500\n",
    )
    .unwrap();
    match s.stopping.rule {
        RuleConfig::Prb {
            epsilon, schedule, ..
        } => {
            assert_eq!(epsilon, 0.1);
            assert_eq!((schedule.initial, schedule.max), (32, 500));
        }
        other => panic!("{other:?}"),
    }
    assert!(toml::from_str::<Study>("stopping = \"maybe\"").is_err());
}

/// PRB on a fixed grid (paths sharing one frequency draw, evaluated together) and PRB with a
/// continuous maximization per path estimate the same distribution of the incumbent's regret: on
/// a 1-D model their mean regrets and their fractions below ε agree within Monte Carlo error, and
/// every grid regret is at least the regret on a coarser sub-grid (same paths, fewer points).
#[test]
fn prb_on_a_grid_agrees_with_the_continuous_maximization() {
    let x = [0.05, 0.3, 0.55, 0.8, 0.97];
    let y = [0.2, -0.4, 0.9, 0.1, -0.2];
    let gp = model(&x, &y, 1, 0.15);
    let rule = Prb::new(
        0.3,
        0.05,
        SampleSchedule::default(),
        1024,
        Guard::default(),
        OptimizerConfig::default(),
    )
    .unwrap();
    let mut state = RunState::new(1, &x, &y, &[], 1);
    state.model = Some(&gp);
    state.seed = 11;
    let s = 600;
    let fine = rule
        .sample_regrets_on_points(&state, s, &grid(2001))
        .unwrap();
    let cont = rule.sample_regrets(&state, s).unwrap();
    let mean_se = |v: &[f64]| {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, (var / n).sqrt())
    };
    let (mf, sf) = mean_se(&fine);
    let (mc, sc) = mean_se(&cont);
    assert!(
        (mf - mc).abs() <= 4.0 * (sf * sf + sc * sc).sqrt(),
        "grid {mf} ± {sf}, continuous {mc} ± {sc}"
    );
    let frac = |v: &[f64]| v.iter().filter(|r| **r <= 0.3).count() as f64 / v.len() as f64;
    let (pf, pc) = (frac(&fine), frac(&cont));
    let se = (pf * (1.0 - pf) / s as f64 + pc * (1.0 - pc) / s as f64).sqrt();
    assert!((pf - pc).abs() <= 4.0 * se + 1e-9, "{pf} vs {pc}");
    assert!(fine.iter().all(|r| *r >= 0.0));
    // The same seed draws the same paths: a sub-grid (every 4th point) can only lower each
    // path's maximum.
    let coarse_pts: Vec<f64> = grid(2001).into_iter().step_by(4).collect();
    let coarse = rule
        .sample_regrets_on_points(&state, s, &coarse_pts)
        .unwrap();
    for (c, f) in coarse.iter().zip(&fine) {
        assert!(c <= f, "{c} > {f}");
    }
    assert!(rule.sample_regrets_on_points(&state, s, &[]).is_err());
}

/// A study's mixed space on the unit cube: a float (coordinate 0), a categorical parameter with
/// three choices (the one-hot block 1..4) and an int with five values (coordinate 4).
fn mixed_space() -> MixedSpace {
    MixedSpace::new(
        5,
        vec![OneHotBlock { start: 1, len: 3 }],
        vec![DiscreteCoord {
            index: 4,
            values: vec![0.0, 0.25, 0.5, 0.75, 1.0],
        }],
    )
    .unwrap()
}

/// Every valid point of [`mixed_space`] with the float on a grid of `m` values (row-major).
fn mixed_valid_points(m: usize) -> Vec<f64> {
    let mut out = Vec::new();
    for x0 in grid(m) {
        for choice in 0..3 {
            for x4 in [0.0, 0.25, 0.5, 0.75, 1.0] {
                let mut p = vec![x0, 0.0, 0.0, 0.0, x4];
                p[1 + choice] = 1.0;
                out.extend(p);
            }
        }
    }
    out
}

/// A GP on valid points of [`mixed_space`] whose inputs are normalized from `[−0.5, 1.5]^5` (so
/// the paths' internal coordinates are not the cube's), with standardized outcomes.
fn mixed_model() -> (Vec<f64>, Vec<f64>, GpModel) {
    let x = vec![
        0.1, 1.0, 0.0, 0.0, 0.25, //
        0.7, 0.0, 1.0, 0.0, 1.0, //
        0.4, 0.0, 0.0, 1.0, 0.5, //
        0.9, 1.0, 0.0, 0.0, 0.75, //
        0.25, 0.0, 1.0, 0.0, 0.0, //
        0.55, 0.0, 0.0, 1.0, 0.25,
    ];
    let y = vec![0.3, -0.2, 0.8, 0.1, -0.5, 0.4];
    let gp = GpModel::with_params(
        &x,
        &y,
        5,
        &Transforms {
            normalize_inputs: Some(Some((vec![-0.5; 5], vec![1.5; 5]))),
            standardize_outcomes: true,
            output_scale: None,
        },
        GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.15; 5], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-6,
        },
    )
    .unwrap();
    (x, y, gp)
}

fn max_on(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Issue 20.1: the automatic λ's `U` ranges over exactly the points a study with categorical and
/// int parameters can propose. The same prior (and posterior) paths as `estimate_u` draws, each
/// maximized by brute force over the valid points (the float on a grid of 201 values), give the
/// same `U`; the maximum over the relaxed cube (what `estimate_u` computed before) is clearly
/// larger: a path peaks between the one-hot vertices as readily as at them.
#[test]
fn estimate_u_ranges_over_the_valid_points_of_a_mixed_space() {
    let (_, _, gp) = mixed_model();
    let space = mixed_space();
    let valid = mixed_valid_points(201);
    let internal = gp.to_internal(&valid).unwrap();
    let (y_mean, y_std) = gp.outcome_scale();
    let opts = UEstimatorOptions {
        samples: 16,
        seed: 5,
        ..Default::default()
    };
    let best = 0.8;
    let mut values = vec![0.0; valid.len() / 5];
    for reference in [UReference::Prior, UReference::Posterior { best }] {
        let mut r = rng(opts.seed);
        let mut brute = 0.0;
        for _ in 0..opts.samples {
            match reference {
                UReference::Prior => {
                    PriorPath::sample(&gp.params().kernel, opts.num_features, &mut r)
                        .unwrap()
                        .values(&internal, &mut values)
                        .unwrap();
                    brute += y_std * max_on(&values);
                }
                UReference::Posterior { .. } => {
                    PosteriorPath::sample(gp.inner(), opts.num_features, &mut r)
                        .unwrap()
                        .values(&internal, &mut values)
                        .unwrap();
                    brute += y_mean + y_std * max_on(&values) - best;
                }
            }
        }
        brute /= opts.samples as f64;
        let mixed = estimate_u(&gp, reference, None, Some(&space), &opts).unwrap();
        let cube = estimate_u(&gp, reference, None, None, &opts).unwrap();
        assert!(
            (mixed.u - brute).abs() < 1e-3 * y_std,
            "{reference:?}: valid points {mixed:?} vs brute force {brute}"
        );
        assert!(
            cube.u > brute + 0.2 * y_std,
            "{reference:?}: the relaxed cube {cube:?} vs the valid points {brute}"
        );
    }
}

/// Issue 20.1: PRB's regrets `max_x f_s(x) − f_s(x̂)` range over exactly the points a study with
/// categorical and int parameters can propose: the same posterior paths as the rule draws,
/// maximized by brute force over the valid points, give the same regret path by path, and PRB's
/// probability follows them; over the relaxed cube (the rule before) every path has a larger
/// maximum.
#[test]
fn prb_ranges_over_the_valid_points_of_a_mixed_space() {
    let (x, y, gp) = mixed_model();
    let space = mixed_space();
    let valid = mixed_valid_points(201);
    let internal = gp.to_internal(&valid).unwrap();
    let y_std = gp.outcome_scale().1;
    let rule = Prb::new(
        0.3,
        0.05,
        SampleSchedule::default(),
        1024,
        Guard::default(),
        OptimizerConfig::default(),
    )
    .unwrap();
    let mut state = RunState::new(5, &x, &y, &[], 1);
    state.model = Some(&gp);
    state.seed = 9;
    let samples = 16;
    let cube = rule.sample_regrets(&state, samples).unwrap();
    state.space = Some(&space);
    let mixed = rule.sample_regrets(&state, samples).unwrap();
    // The rule's incumbent is the best observed point (index 2); its paths come from this seed.
    let x_hat = gp.to_internal(&x[10..15]).unwrap();
    let mut r = rng(state.seed ^ 0x7072_6200);
    let mut values = vec![0.0; valid.len() / 5];
    let mut above = 0;
    for (s, (m, c)) in mixed.iter().zip(&cube).enumerate() {
        let path = PosteriorPath::sample(gp.inner(), 1024, &mut r).unwrap();
        path.values(&internal, &mut values).unwrap();
        let brute = (y_std * (max_on(&values) - path.value(&x_hat))).max(0.0);
        assert!(
            (m - brute).abs() < 1e-3 * y_std,
            "path {s}: valid points {m} vs brute force {brute}"
        );
        if *c > brute + 0.05 * y_std {
            above += 1;
        }
    }
    assert!(
        above >= samples - 2,
        "{above} of {samples}: {cube:?} vs {mixed:?}"
    );
}
