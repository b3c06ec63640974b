use super::*;
use crate::gp::{ExactGp, GpParams, Kernel, KernelKind};

fn lc(mean: f64, var: f64) -> LogCost {
    LogCost { mean, var }
}

#[test]
fn ei_and_log_ei_reference_values() {
    let p = ExpectedImprovement { best_f: 0.0 }.eval(0.0, 1.0, LogCost::default());
    assert!((p.value - 0.398_942_280_401_432_7).abs() < 1e-16);
    assert!((p.d_mu - 0.5).abs() < 1e-16);
    assert!((p.d_sigma - 0.398_942_280_401_432_7).abs() < 1e-16);
    let l5 = LogExpectedImprovement { best_f: 5.0 }
        .eval(0.0, 1.0, LogCost::default())
        .value;
    assert!((l5 - (-16.744_301_162_660_99)).abs() < 1e-12 * 16.74);
    // best = 40 needs the log-space branch; naive evaluation underflows.
    let l40 = LogExpectedImprovement { best_f: 40.0 }
        .eval(0.0, 1.0, LogCost::default())
        .value;
    assert!((l40 - (-808.298_568_356_62)).abs() < 1e-12 * 808.3);
    let far = LogExpectedImprovement { best_f: 1e6 }.eval(0.0, 1.0, LogCost::default());
    assert!(far.value.is_finite() && far.d_mu.is_finite() && far.d_sigma.is_finite());
    assert!(far.value < -4.9e11);
}

#[test]
fn gp_ucb_schedule_reference_values() {
    // Reference notes §7.1 (t = C + 1).
    for (d, t, want) in [
        (1, 1.0, 1.120_114_158_19),
        (1, 100.0, 4.804_250_306_98),
        (8, 1.0, 1.951_890_774_86),
        (8, 500.0, 6.923_577_253_6),
        (7, 1.0, 1.898_478_217_81),
    ] {
        assert!((gp_ucb_beta(d, t) - want).abs() < 1e-10, "d={d} t={t}");
    }
    assert_eq!(cost_cooling_alpha(25.0, 100.0), 0.25);
    assert_eq!(cost_cooling_alpha(-5.0, 100.0), 0.0);
}

fn all_acquisitions() -> Vec<(&'static str, Box<dyn PointwiseAcquisition>)> {
    vec![
        ("ei", Box::new(ExpectedImprovement { best_f: 0.7 })),
        ("log_ei", Box::new(LogExpectedImprovement { best_f: 0.7 })),
        (
            "log_vanilla_ei",
            Box::new(LogVanillaExpectedImprovement { best_f: 0.7 }),
        ),
        ("pi", Box::new(ProbabilityOfImprovement { best_f: 0.7 })),
        (
            "log_pi",
            Box::new(LogProbabilityOfImprovement { best_f: 0.7 }),
        ),
        ("ucb", Box::new(UpperConfidenceBound { beta: 2.5 })),
        ("pbgi", Box::new(Pbgi { lambda: 1e-2 })),
        ("pbgi_small_lambda", Box::new(Pbgi { lambda: 1e-6 })),
        ("pbgi_plain", Box::new(PbgiPlain { lambda: 1e-2 })),
        ("lcb", Box::new(LowerConfidenceBound { beta: 2.5 })),
        (
            "eipc",
            Box::new(ExpectedImprovementPerCost {
                best_f: 0.7,
                alpha: 1.0,
            }),
        ),
        (
            "eicc",
            Box::new(ExpectedImprovementPerCost {
                best_f: 0.7,
                alpha: 0.4,
            }),
        ),
        (
            "log_eipc_inv",
            Box::new(LogExpectedImprovementPerCost {
                best_f: 0.7,
                alpha: 1.0,
                convention: CostConvention::Inverse,
            }),
        ),
        (
            "log_eipc_exp",
            Box::new(LogExpectedImprovementPerCost {
                best_f: 0.7,
                alpha: 0.6,
                convention: CostConvention::Expected,
            }),
        ),
    ]
}

#[test]
fn partials_match_finite_differences() {
    for (name, a) in all_acquisitions() {
        for (mu, s, m, v) in [
            (0.2, 0.5, 0.3, 0.1),
            (1.5, 0.2, -0.4, 0.02),
            (-3.0, 0.8, 1.2, 0.0),
        ] {
            let p = a.eval(mu, s, lc(m, v));
            let h = 1e-6;
            let f = |mu: f64, s: f64, m: f64, v: f64| a.eval(mu, s, lc(m, v)).value;
            let fd = [
                (f(mu + h, s, m, v) - f(mu - h, s, m, v)) / (2.0 * h),
                (f(mu, s + h, m, v) - f(mu, s - h, m, v)) / (2.0 * h),
                (f(mu, s, m + h, v) - f(mu, s, m - h, v)) / (2.0 * h),
                (f(mu, s, m, v + h) - f(mu, s, m, (v - h).max(0.0)))
                    / (if v > 0.0 { 2.0 * h } else { h }),
            ];
            let an = [p.d_mu, p.d_sigma, p.d_cost_mean, p.d_cost_var];
            for (i, (x, y)) in fd.iter().zip(an).enumerate() {
                assert!(
                    (x - y).abs() < 1e-6 * (1.0 + x.abs()),
                    "{name} partial {i} at mu={mu}: fd {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn cost_conventions_agree_with_closed_forms() {
    let (mu, s, best) = (0.1, 0.6, 0.5);
    let ei = ExpectedImprovement { best_f: best }
        .eval(mu, s, LogCost::default())
        .value;
    // Known cost c = 3: EIPC = EI / c, LogEIPC = log EI − log 3 in both conventions.
    let known = lc(3f64.ln(), 0.0);
    let eipc = ExpectedImprovementPerCost {
        best_f: best,
        alpha: 1.0,
    }
    .eval(mu, s, known)
    .value;
    assert!((eipc - ei / 3.0).abs() < 1e-15);
    for conv in [CostConvention::Inverse, CostConvention::Expected] {
        let l = LogExpectedImprovementPerCost {
            best_f: best,
            alpha: 1.0,
            convention: conv,
        }
        .eval(mu, s, known)
        .value;
        assert!((l - (ei / 3.0).ln()).abs() < 1e-13);
    }
    // Unknown log-normal cost: E[c^-1] = exp(−m + v/2), E[c] = exp(m + v/2).
    let unk = lc(0.4, 0.3);
    let eipc = ExpectedImprovementPerCost {
        best_f: best,
        alpha: 1.0,
    }
    .eval(mu, s, unk)
    .value;
    assert!((eipc - ei * (-0.4f64 + 0.15).exp()).abs() < 1e-15);
    let inv = LogExpectedImprovementPerCost {
        best_f: best,
        alpha: 1.0,
        convention: CostConvention::Inverse,
    }
    .eval(mu, s, unk)
    .value;
    assert!((inv - eipc.ln()).abs() < 1e-13);
    let exp = LogExpectedImprovementPerCost {
        best_f: best,
        alpha: 1.0,
        convention: CostConvention::Expected,
    }
    .eval(mu, s, unk)
    .value;
    assert!((exp - (ei.ln() - (0.4f64 + 0.15))).abs() < 1e-13);
}

fn toy_gp(seed: f64, d: usize) -> ExactGp {
    let n = 12;
    let x: Vec<f64> = (0..n * d)
        .map(|i| ((i as f64 + seed) * 0.618_034).fract())
        .collect();
    let y: Vec<f64> = (0..n)
        .map(|i| (3.0 * x[i * d]).sin() + seed * x[i * d + d - 1])
        .collect();
    ExactGp::new(
        x,
        y,
        GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.3; d], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-4,
        },
    )
    .unwrap()
}

#[test]
fn objective_gradients_with_every_cost_model_match_finite_differences() {
    let d = 3;
    let gp = toy_gp(0.0, d);
    let cost_gp = toy_gp(0.3, d);
    let linear = LinearMeanCost {
        offset: 1.0,
        slope: 20.0,
    };
    let custom = KnownCost(|x: &[f64], g: &mut [f64]| {
        g[0] = 2.0 * x[0];
        g[1] = 0.0;
        g[2] = 1.0;
        1.0 + x[0] * x[0] + x[2]
    });
    let unknown = UnknownCost(&cost_gp);
    let costs: [(&str, &dyn CostModel); 4] = [
        ("uniform", &UniformCost),
        ("linear", &linear),
        ("custom", &custom),
        ("unknown", &unknown),
    ];
    let q = [0.33, 0.71, 0.45];
    for (cname, cost) in costs {
        for (aname, acq) in all_acquisitions() {
            let obj = OnModel::with_cost(&gp, acq, cost);
            let mut g = vec![0.0; d];
            obj.value_grad(&q, &mut g);
            for k in 0..d {
                let h = 1e-6;
                let mut qp = q;
                let mut qm = q;
                qp[k] += h;
                qm[k] -= h;
                let mut tmp = vec![0.0; d];
                let fd =
                    (obj.value_grad(&qp, &mut tmp) - obj.value_grad(&qm, &mut tmp)) / (2.0 * h);
                assert!(
                    (fd - g[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{aname} with {cname} cost, dim {k}: fd {fd} vs {}",
                    g[k]
                );
            }
        }
    }
}

#[test]
fn invalid_costs_are_errors() {
    let gp = toy_gp(0.0, 2);
    let neg = LinearMeanCost {
        offset: -1.0,
        slope: 0.0,
    };
    let obj = OnModel::with_cost(&gp, ExpectedImprovement { best_f: 0.0 }, &neg);
    assert!(obj.evaluate(&[0.5, 0.5], false).is_err());
    let mut g = [0.0; 2];
    assert!(obj.value_grad(&[0.5, 0.5], &mut g).is_nan());
}

/// The situation of the PBGI paper's Figure 8: on one posterior, EI and large-λ PBGI pick a point
/// near the incumbent, small-λ PBGI a riskier point where the mean is lower but the variance
/// larger.
#[test]
fn figure_8_ei_and_large_lambda_exploit_small_lambda_explores() {
    let x = vec![0.15, 0.3, 0.42, 0.55];
    let y = vec![0.2, 1.0, 1.3, 0.6];
    let gp = ExactGp::new(
        x,
        y.clone(),
        GpParams {
            kernel: Kernel::new(KernelKind::Matern52, vec![0.15], 1.0).unwrap(),
            mean: 0.0,
            noise: 1e-6,
        },
    )
    .unwrap();
    let grid: Vec<f64> = (0..=1000).map(|i| i as f64 / 1000.0).collect();
    let argmax = |acq: Box<dyn PointwiseAcquisition>| -> (f64, f64, f64) {
        let (v, _) = OnModel::new(&gp, acq).evaluate(&grid, false).unwrap();
        let j = (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
        let p = gp.posterior(&grid[j..=j], false).unwrap();
        (grid[j], p.mean[0], p.var[0].sqrt())
    };
    let best_f = 1.3;
    let (x_ei, mu_ei, s_ei) = argmax(Box::new(ExpectedImprovement { best_f }));
    let (x_large, _, _) = argmax(Box::new(Pbgi { lambda: 1.0 }));
    let (x_small, mu_small, s_small) = argmax(Box::new(Pbgi { lambda: 1e-5 }));
    eprintln!("argmax: EI {x_ei}, PBGI(1) {x_large}, PBGI(1e-5) {x_small}");
    // EI and large-λ PBGI stay near the incumbent at 0.42 and agree with each other.
    assert!((x_ei - 0.42).abs() < 0.15, "EI chose {x_ei}");
    assert!(
        (x_large - x_ei).abs() < 0.05,
        "large-λ PBGI chose {x_large}, EI {x_ei}"
    );
    // Small-λ PBGI goes where the mean is lower but the uncertainty higher.
    assert!((x_small - x_ei).abs() > 0.2, "small-λ PBGI chose {x_small}");
    assert!(mu_small < mu_ei && s_small > s_ei);
}

/// An exact GP with `n` uniform random training points in `d` dimensions (Matérn-5/2).
fn random_gp(n: usize, d: usize) -> ExactGp {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
    let y = x
        .chunks_exact(d)
        .map(|r| r.iter().map(|v| (4.0 * v).sin()).sum::<f64>())
        .collect();
    let params = GpParams {
        kernel: Kernel::new(KernelKind::Matern52, vec![0.4; d], 1.5).unwrap(),
        mean: 0.0,
        noise: 1e-4,
    };
    ExactGp::new(x, y, params).unwrap()
}

/// An objective that hides `prefers_blocks` and `value_grads`: the one-point-at-a-time path.
struct OneAtATime<'a>(&'a dyn crate::optim::Objective);

impl crate::optim::Objective for OneAtATime<'_> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn value_grad(&self, x: &[f64], g: &mut [f64]) -> f64 {
        self.0.value_grad(x, g)
    }
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        self.0.values(xs, out)
    }
}

/// Block evaluation (the lockstep restarts' path) equals the one-point evaluation up to
/// rounding, and its gradients match finite differences, for every acquisition and cost model.
#[test]
fn block_value_grads_equal_pointwise_and_finite_differences() {
    use crate::optim::Objective;
    let d = 3;
    let gp = random_gp(crate::gp::model::BLOCKS_FROM_N, d);
    assert!(crate::gp::Posterior::prefers_blocks(&gp));
    assert!(!crate::gp::Posterior::prefers_blocks(&toy_gp(0.0, d)));
    let linear = LinearMeanCost {
        offset: 1.0,
        slope: 20.0,
    };
    let cost_gp = toy_gp(0.3, d);
    let unknown = UnknownCost(&cost_gp);
    let costs: [(&str, &dyn CostModel); 3] = [
        ("uniform", &UniformCost),
        ("linear", &linear),
        ("unknown", &unknown),
    ];
    let m = 37;
    let xs: Vec<f64> = (0..m * d)
        .map(|i| ((i as f64 + 0.5) * 0.754_877_666).fract())
        .collect();
    for (cname, cost) in costs {
        for (aname, acq) in all_acquisitions() {
            let obj = OnModel::with_cost(&gp, acq, cost);
            assert!(obj.prefers_blocks());
            let mut vals = vec![0.0; m];
            let mut grads = vec![0.0; m * d];
            obj.value_grads(&xs, &mut vals, &mut grads);
            for j in 0..m {
                let x = &xs[j * d..(j + 1) * d];
                let mut g = vec![0.0; d];
                let v = obj.value_grad(x, &mut g);
                let tol = |a: f64| 1e-9 * (1.0 + a.abs());
                assert!(
                    (v - vals[j]).abs() < tol(v),
                    "{aname}/{cname} point {j}: {v} vs {}",
                    vals[j]
                );
                for k in 0..d {
                    let gb = grads[j * d + k];
                    assert!(
                        (g[k] - gb).abs() < tol(g[k]),
                        "{aname}/{cname} grad {j},{k}"
                    );
                }
            }
            // Finite differences of the block values at the first point.
            for k in 0..d {
                let h = 1e-6;
                let (mut p, mut q) = (xs[..d].to_vec(), xs[..d].to_vec());
                p[k] += h;
                q[k] -= h;
                let mut two = p.clone();
                two.extend_from_slice(&q);
                let mut v2 = [0.0; 2];
                let mut g2 = vec![0.0; 2 * d];
                obj.value_grads(&two, &mut v2, &mut g2);
                let fd = (v2[0] - v2[1]) / (2.0 * h);
                assert!(
                    (fd - grads[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{aname}/{cname} dim {k}: fd {fd} vs {}",
                    grads[k]
                );
            }
        }
    }
}

/// The lockstep maximization reaches the value of the one-at-a-time maximization (the runs see
/// the same values up to rounding) and is deterministic.
#[test]
fn lockstep_maximization_matches_one_at_a_time() {
    use crate::optim::{MultiStartOptions, maximize};
    let d = 4;
    let gp = random_gp(300, d);
    let best = gp
        .train_y()
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let opts = MultiStartOptions::default();
    for (name, acq) in [
        (
            "log_ei",
            Box::new(LogExpectedImprovement { best_f: best }) as Box<dyn PointwiseAcquisition>,
        ),
        ("pbgi", Box::new(Pbgi { lambda: 1e-3 })),
    ] {
        let obj = OnModel::new(&gp, acq);
        let block = maximize(&obj, &opts, 3).unwrap();
        let again = maximize(&obj, &opts, 3).unwrap();
        let plain = maximize(&OneAtATime(&obj), &opts, 3).unwrap();
        assert_eq!(block, again, "{name}: lockstep is deterministic");
        assert_eq!(block.restarts.len(), plain.restarts.len());
        let rel = (block.value - plain.value).abs() / plain.value.abs().max(1e-12);
        assert!(rel < 1e-6, "{name}: {} vs {}", block.value, plain.value);
    }
}

#[test]
fn log_vanilla_ei_is_the_floored_log_and_goes_flat_where_log_ei_does_not() {
    let naive = LogVanillaExpectedImprovement { best_f: 0.0 };
    let stable = LogExpectedImprovement { best_f: 0.0 };
    let ei = ExpectedImprovement { best_f: 0.0 };
    // Where EI ≫ 1e-6 the two logs agree to the floor's relative size.
    let (mu, s) = (0.3, 0.5);
    let e = ei.eval(mu, s, LogCost::default()).value;
    let v = naive.eval(mu, s, LogCost::default());
    assert!((v.value - (e + 1e-6).ln()).abs() < 1e-15);
    assert!((v.value - stable.eval(mu, s, LogCost::default()).value).abs() < 2e-6 / e);
    // Far below the incumbent (u = −10: EI ≈ 7.7e-25) the naive value is the floor's log and
    // its gradient ≈ 1e-18, where LogEI still has a slope of about |u|/σ.
    let far = naive.eval(-10.0, 1.0, LogCost::default());
    assert!((far.value - 1e-6f64.ln()).abs() < 1e-15);
    assert!(far.d_mu < 1e-15 && far.d_mu >= 0.0);
    assert!(stable.eval(-10.0, 1.0, LogCost::default()).d_mu > 9.0);
}
