//! BOCVS: expectations, gradients, schedules, ETC traces, the Gittins index and short runs.

use pandora_core::acquisition::pbgi_index;
use pandora_core::cvs::*;
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind, PriorPath};
use pandora_core::optim::Objective;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn tn(var: f64) -> Distribution {
    Distribution::truncated_normal_with_variance(0.5, 0.0, 1.0, var).unwrap()
}

fn sets_3d(costs: &[f64]) -> Vec<ControlSet> {
    let v: [&[usize]; 7] = [&[0], &[1], &[2], &[0, 1], &[0, 2], &[1, 2], &[0, 1, 2]];
    v.iter()
        .zip(costs)
        .map(|(s, &c)| ControlSet::new(s.to_vec(), c))
        .collect()
}

const MODERATE: [f64; 7] = [0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 1.0];
const CHEAP: [f64; 7] = [0.01, 0.01, 0.01, 0.1, 0.1, 0.1, 1.0];
const EXPENSIVE: [f64; 7] = [0.6, 0.6, 0.6, 0.8, 0.8, 0.8, 1.0];

fn problem_3d(costs: &[f64], var: f64, bank: usize) -> CvsProblem {
    CvsProblem::new(3, sets_3d(costs), vec![Some(tn(var)); 3], bank, 11).unwrap()
}

fn small_gp(seed: u64) -> ExactGp {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let x: Vec<f64> = (0..8 * 3).map(|_| rng.random::<f64>()).collect();
    let y: Vec<f64> = x
        .chunks_exact(3)
        .map(|p| (3.0 * p[0]).sin() + p[1] * p[2])
        .collect();
    let params = GpParams {
        kernel: Kernel::new(KernelKind::Rbf, vec![0.3, 0.4, 0.5], 1.0).unwrap(),
        mean: 0.0,
        noise: 1e-4,
    };
    ExactGp::new(x, y, params).unwrap()
}

#[test]
fn truncated_normal_scales_of_the_paper() {
    // The paper code's rule: bisection stopped at NumPy-allclose agreement of the variance.
    for (v, s) in [(0.02, 0.14182), (0.04, 0.21355), (0.08, 0.90603)] {
        let got = bocvs_truncated_normal_scale(0.5, 0.0, 1.0, v).unwrap();
        assert!((got - s).abs() < 5e-6, "variance {v}: scale {got}");
        // The rule is the truncated variance, not the untruncated scale².
        assert!((got * got - v).abs() > 1e-5);
        let d = Distribution::truncated_normal(0.5, got, 0.0, 1.0).unwrap();
        assert!((d.variance() - v).abs() <= 1e-8 + 1e-5 * v);
    }
    // Exact roots (the variance is flat near 1/12, so 0.08 moves in the fourth digit).
    for (v, s) in [(0.02, 0.1418205), (0.04, 0.2135480), (0.08, 0.9060993)] {
        let got = truncated_normal_scale(0.5, 0.0, 1.0, v).unwrap();
        assert!((got - s).abs() < 1e-6, "variance {v}: scale {got}");
        assert!((tn(v).variance() - v).abs() < 1e-13);
    }
}

#[test]
fn expected_ucb_gradient_matches_finite_differences() {
    let gp = small_gp(1);
    let p = problem_3d(&MODERATE, 0.04, 128);
    for set in [0usize, 4, 6] {
        let e = Expected {
            problem: &p,
            set,
            integrand: pandora_core::cvs::expected::Ucb {
                model: &gp,
                beta: 2.0,
            },
        };
        let k = p.sets()[set].vars.len();
        let x: Vec<f64> = [0.31, 0.62, 0.47][..k].to_vec();
        let mut g = vec![0.0; k];
        let v = e.eval(&x, &mut g).unwrap();
        assert!((v - e.eval_many(&x).unwrap()[0]).abs() < 1e-12);
        for j in 0..k {
            let h = 1e-6;
            let mut a = x.clone();
            let mut b = x.clone();
            a[j] += h;
            b[j] -= h;
            let fd = (e.eval_many(&a).unwrap()[0] - e.eval_many(&b).unwrap()[0]) / (2.0 * h);
            assert!(
                (fd - g[j]).abs() < 1e-6 * (1.0 + fd.abs()),
                "set {set} coord {j}: {fd} vs {}",
                g[j]
            );
        }
    }
}

#[test]
fn expected_ucb_matches_monte_carlo() {
    let gp = small_gp(2);
    let p = problem_3d(&MODERATE, 0.08, 1024);
    let set = 0; // controls x0, x1 and x2 random
    let e = Expected {
        problem: &p,
        set,
        integrand: pandora_core::cvs::expected::Ucb {
            model: &gp,
            beta: 2.0,
        },
    };
    let x0 = 0.42;
    let bank = e.eval_many(&[x0]).unwrap()[0];
    // Plain Monte Carlo with fresh pseudo-random draws.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let n = 40_000;
    let mut pts = Vec::with_capacity(n * 3);
    for _ in 0..n {
        let r = p.draw_random(set, &mut rng);
        pts.extend_from_slice(&p.assemble(set, &[x0], &r));
    }
    let post = gp.posterior(&pts, false).unwrap();
    let u: Vec<f64> = post
        .mean
        .iter()
        .zip(&post.var)
        .map(|(m, v)| m + 2.0 * v.sqrt())
        .collect();
    let mean = u.iter().sum::<f64>() / n as f64;
    let sd = (u.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let se = sd / (n as f64).sqrt();
    assert!(
        (bank - mean).abs() < 4.0 * se + 1e-3,
        "bank {bank} mc {mean} se {se}"
    );
}

/// `f(x) = x0·x1 + x2² + 0.3·cos(4·x1)` has a closed-form expectation under a discrete law and
/// closed-form first two moments under the others.
struct Poly;
impl CvsFunction for Poly {
    fn dim(&self) -> usize {
        3
    }
    fn value(&self, x: &[f64]) -> f64 {
        x[0] * x[1] + x[2] * x[2]
    }
}

#[test]
fn bank_expectation_converges_to_closed_form() {
    let dists = [tn(0.04), Distribution::uniform(0.1, 0.9).unwrap(), tn(0.08)];
    let sets = vec![ControlSet::new(vec![0], 1.0)];
    let x0 = 0.7;
    let exact = x0 * dists[1].mean() + dists[2].variance() + dists[2].mean().powi(2);
    let mut errs = Vec::new();
    for n in [16usize, 128, 1024, 8192] {
        let p = CvsProblem::new(
            3,
            sets.clone(),
            dists.iter().cloned().map(Some).collect(),
            n,
            3,
        )
        .unwrap();
        errs.push((p.expected_value(&Poly, 0, &[x0]).unwrap() - exact).abs());
    }
    assert!(errs[3] < 2e-5, "{errs:?}");
    assert!(errs[3] < errs[0] / 20.0, "{errs:?}");
    // A discrete law is exact once the bank resolves its probabilities.
    let disc = Distribution::discrete(vec![0.2, 0.5, 1.0], vec![0.25, 0.25, 0.5]).unwrap();
    let p = CvsProblem::new(
        3,
        vec![ControlSet::new(vec![0, 2], 1.0)],
        vec![None, Some(disc.clone()), None],
        1024,
        4,
    )
    .unwrap();
    let v = p.expected_value(&Poly, 0, &[0.5, 0.3]).unwrap();
    assert!((v - (0.5 * disc.mean() + 0.09)).abs() < 1e-12, "{v}");
}

#[test]
fn problem_validation() {
    let d = vec![Some(tn(0.02)); 3];
    assert!(CvsProblem::new(3, vec![], d.clone(), 8, 0).is_err());
    assert!(CvsProblem::new(3, vec![ControlSet::new(vec![3], 1.0)], d.clone(), 8, 0).is_err());
    assert!(CvsProblem::new(3, vec![ControlSet::new(vec![0], 0.0)], d.clone(), 8, 0).is_err());
    assert!(
        CvsProblem::new(
            3,
            vec![ControlSet::new(vec![0], 1.0)],
            vec![None, d[1].clone(), d[2].clone()],
            8,
            0
        )
        .is_ok()
    );
    assert!(
        CvsProblem::new(
            3,
            vec![ControlSet::new(vec![1], 1.0)],
            vec![None, d[1].clone(), d[2].clone()],
            8,
            0
        )
        .is_err()
    );
    let outside = Distribution::uniform(-0.5, 0.5).unwrap();
    assert!(
        CvsProblem::new(
            1,
            vec![ControlSet::new(vec![], 1.0)],
            vec![Some(outside)],
            8,
            0
        )
        .is_err()
    );
}

#[test]
fn cost_groups_come_from_the_costs() {
    // Shuffled costs: groups are by value, not by position.
    let costs = [1.0, 0.2, 0.1, 0.2, 0.1, 0.1, 0.2];
    let p = problem_3d(&costs, 0.02, 8);
    let g = p.cost_groups();
    assert_eq!(g.len(), 3);
    assert_eq!((g[0].cost, g[0].sets.clone()), (0.1, vec![2, 4, 5]));
    assert_eq!((g[1].cost, g[1].sets.clone()), (0.2, vec![1, 3, 6]));
    assert_eq!((g[2].cost, g[2].sets.clone()), (1.0, vec![0]));
}

#[test]
fn etc_targets_and_play_counts() {
    let ada = EtcPlays::Adaptive(4.0);
    let t: Vec<usize> = [0.01, 0.1, 0.2, 0.6, 0.8]
        .iter()
        .map(|&c| ada.target(c))
        .collect();
    assert_eq!(t, vec![400, 40, 20, 6, 5]);
    // Hand trace with 2 plays per group: E0, E0, E1, E1, then commit.
    let p = problem_3d(&CHEAP, 0.02, 8);
    let all = vec![true; 7];
    let mut etc = Etc::new(2.0, EtcPlays::Fixed(2));
    let mut phases = Vec::new();
    for _ in 0..6 {
        let (ph, cands) = etc.phase(&p, &all);
        match ph {
            Phase::Explore(0) => assert_eq!(cands, vec![0, 1, 2]),
            Phase::Explore(1) => assert_eq!(cands, vec![3, 4, 5]),
            Phase::Commit => assert_eq!(cands, (0..7).collect::<Vec<_>>()),
            _ => unreachable!(),
        }
        phases.push(ph);
        let d = Decision {
            set: cands[0],
            x_ctrl: vec![],
            scores: vec![],
            epsilon: None,
            phase: Some(ph),
            lambda: None,
        };
        etc.observed(&d, 0.0);
    }
    use Phase::*;
    assert_eq!(
        phases,
        vec![
            Explore(0),
            Explore(0),
            Explore(1),
            Explore(1),
            Commit,
            Commit
        ]
    );
    assert_eq!(etc.counts(), &[2, 2]);
    // An unaffordable group is skipped.
    let fresh = Etc::new(2.0, EtcPlays::Fixed(2));
    let mut afford = vec![false; 7];
    afford[3] = true;
    afford[6] = true;
    assert_eq!(fresh.phase(&p, &afford), (Explore(1), vec![3]));
    // Expensive costs with ETC-Ada: 6 plays of the 0.6 group, then 5 of the 0.8 group.
    let pe = problem_3d(&EXPENSIVE, 0.02, 8);
    let mut e = Etc::new(2.0, ada);
    let mut trace = Vec::new();
    for _ in 0..12 {
        let (ph, _) = e.phase(&pe, &all);
        trace.push(ph);
        e.observed(
            &Decision {
                set: 0,
                x_ctrl: vec![],
                scores: vec![],
                epsilon: None,
                phase: Some(ph),
                lambda: None,
            },
            0.0,
        );
    }
    assert_eq!(trace.iter().filter(|&&p| p == Explore(0)).count(), 6);
    assert_eq!(trace.iter().filter(|&&p| p == Explore(1)).count(), 5);
    assert_eq!(trace[11], Commit);
}

#[test]
fn eps_schedules_and_ucb_cvs_choice() {
    let ad = EpsSchedule::CostAdaptive {
        eps0: 2.0,
        variance_weighted: false,
    };
    for (c, t) in [(&CHEAP, 330.0), (&MODERATE, 45.0), (&EXPENSIVE, 8.75)] {
        let p = problem_3d(c, 0.02, 8);
        assert!((ad.t_cut(&p) - t).abs() < 1e-9, "{}", ad.t_cut(&p));
    }
    let p = problem_3d(&MODERATE, 0.02, 8);
    let eps: Vec<f64> = [0usize, 9, 45, 100]
        .iter()
        .map(|&t| ad.epsilon(t, &p))
        .collect();
    assert_eq!(eps, vec![2.0, 1.6, 0.0, 0.0]);
    let w = EpsSchedule::CostAdaptive {
        eps0: 2.0,
        variance_weighted: true,
    };
    // Singletons leave two variables of variance 0.02 random, pairs one: weights 0.48 and 0.24.
    let expect = 3.0 * 0.48 * 10.0 + 3.0 * 0.24 * 5.0;
    assert!((w.t_cut(&p) - expect).abs() < 1e-9);
    let lin = EpsSchedule::Linear {
        eps0: 1.0,
        t_cut: 4.0,
    };
    assert_eq!(
        (0..6).map(|t| lin.epsilon(t, &p)).collect::<Vec<_>>(),
        vec![1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    );

    // Algorithm 1, steps 3-6, by hand.
    let v = [1.0, 1.5, 2.0];
    let c = [0.1, 0.2, 1.0];
    assert_eq!(ucb_cvs_choose(&v, &c, 0.0), 2);
    assert_eq!(ucb_cvs_choose(&v, &c, 0.6), 1);
    assert_eq!(ucb_cvs_choose(&v, &c, 1.0), 0);
    // Equal cheapest costs: the larger value wins.
    assert_eq!(ucb_cvs_choose(&[1.9, 1.95, 2.0], &[0.1, 0.1, 1.0], 0.2), 1);
}

#[test]
fn per_cost_rule_never_divides_a_negative_score() {
    // Scores below the reference have gain 0 instead of a negative ratio that a cheap cost would
    // make *less* negative.
    assert_eq!(
        per_cost_choose(&[-1.0, -0.5, 0.4], 0.0, &[0.01, 0.1, 1.0]),
        2
    );
    assert_eq!(per_cost_choose(&[0.2, 0.5, 0.9], 0.0, &[0.01, 0.1, 1.0]), 0);
    // No positive gain: cost-agnostic argmax.
    assert_eq!(
        per_cost_choose(&[-1.0, -0.5, -0.7], 0.0, &[0.01, 0.1, 1.0]),
        1
    );
}

#[test]
fn mixture_index_reduces_to_pbgi_and_solves_its_equation() {
    for &(m, s, l) in &[(0.3, 0.5, -2.0), (-1.0, 0.01, -8.0), (2.0, 3.0, 1.0)] {
        let a = mixture_index(&[m], &[s], l).unwrap();
        let b = pbgi_index(m, s, l);
        assert!(
            (a.g - b.g).abs() < 1e-10 * (1.0 + b.g.abs()),
            "{} {}",
            a.g,
            b.g
        );
    }
    let mu = [0.1, 0.5, -0.3, 0.9];
    let sd = [0.2, 0.05, 0.4, 0.1];
    let lc = 0.01f64;
    let r = mixture_index(&mu, &sd, lc.ln()).unwrap();
    let ei: f64 = mu
        .iter()
        .zip(&sd)
        .map(|(&m, &s)| s * pandora_core::math::h((m - r.g) / s))
        .sum::<f64>()
        / 4.0;
    assert!((ei - lc).abs() < 1e-12, "{ei}");
    // Implicit derivatives against differences.
    let h = 1e-6;
    let mut mp = mu;
    mp[1] += h;
    let mut mm = mu;
    mm[1] -= h;
    let fd = (mixture_index(&mp, &sd, lc.ln()).unwrap().g
        - mixture_index(&mm, &sd, lc.ln()).unwrap().g)
        / (2.0 * h);
    assert!((fd - r.d_mu[1]).abs() < 1e-6);
    let mut sp = sd;
    sp[2] += h;
    let mut sm = sd;
    sm[2] -= h;
    let fd = (mixture_index(&mu, &sp, lc.ln()).unwrap().g
        - mixture_index(&mu, &sm, lc.ln()).unwrap().g)
        / (2.0 * h);
    assert!((fd - r.d_sigma[2]).abs() < 1e-6);
    // Tiny λc: far above every mean, still finite.
    let far = mixture_index(&mu, &sd, -700.0).unwrap();
    assert!(far.g.is_finite() && far.g > 1.0);
}

#[test]
fn gittins_index_objective_gradient() {
    let gp = small_gp(3);
    let p = problem_3d(&MODERATE, 0.04, 64);
    for set in [1usize, 3, 6] {
        let obj = GittinsIndex {
            problem: &p,
            set,
            model: &gp,
            log_lambda_c: (0.01f64).ln(),
        };
        let k = obj.dim();
        let x: Vec<f64> = [0.55, 0.25, 0.8][..k].to_vec();
        let mut g = vec![0.0; k];
        obj.value_grad(&x, &mut g);
        for j in 0..k {
            let h = 1e-6;
            let mut a = x.clone();
            let mut b = x.clone();
            a[j] += h;
            b[j] -= h;
            let fd = (obj.eval(&a, &mut []).unwrap() - obj.eval(&b, &mut []).unwrap()) / (2.0 * h);
            assert!(
                (fd - g[j]).abs() < 1e-5 * (1.0 + fd.abs()),
                "set {set} {j}: {fd} vs {}",
                g[j]
            );
        }
    }
}

struct Sample(PriorPath);
impl CvsFunction for Sample {
    fn dim(&self) -> usize {
        3
    }
    fn value(&self, x: &[f64]) -> f64 {
        self.0.value(x)
    }
    fn value_grad(&self, x: &[f64], g: &mut [f64]) -> f64 {
        self.0.value_grad(x, g)
    }
}

fn quick_config(budget: f64) -> RunConfig {
    let mut cfg = RunConfig::new(3, 0.25, budget).unwrap();
    cfg.optimizer = SetOptimizer {
        raw_partial: 32,
        restarts_partial: 2,
        raw_full: 128,
        restarts_full: 3,
        max_iter: 40,
    };
    cfg
}

fn sample_problem(seed: u64) -> (CvsProblem, Sample) {
    sample_problem_with(seed, &MODERATE)
}

fn sample_problem_with(seed: u64, costs: &[f64]) -> (CvsProblem, Sample) {
    let k = Kernel::new(KernelKind::Rbf, vec![0.25; 3], 1.0).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + seed);
    let f = Sample(PriorPath::sample(&k, 256, &mut rng).unwrap());
    (problem_3d(costs, 0.04, 16), f)
}

/// `max_decisions` ends a run after that many budgeted iterations however much budget is left;
/// without it the same run goes on.
#[test]
fn max_decisions_caps_a_run() {
    let (p, f) = sample_problem(0);
    let mut cfg = quick_config(5.0);
    cfg.optimum = Some(0.0);
    cfg.max_decisions = Some(3);
    let mut pol = build_policy("ts-psq", 5.0, 0.01).unwrap();
    let capped = run(&p, &f, pol.as_mut(), &cfg, 1).unwrap();
    assert_eq!(capped.steps.len(), 3);
    cfg.max_decisions = None;
    let mut pol = build_policy("ts-psq", 5.0, 0.01).unwrap();
    let full = run(&p, &f, pol.as_mut(), &cfg, 1).unwrap();
    assert!(full.steps.len() > 3, "{}", full.steps.len());
    assert_eq!(capped.steps[..], full.steps[..3]);
}

#[test]
fn every_named_policy_runs_and_respects_the_budget() {
    let (p, f) = sample_problem(0);
    let mut cfg = quick_config(0.45);
    let (best, _) = p.optimum(&f, &cfg.optimizer, 9).unwrap();
    cfg.optimum = Some(best.value);
    for name in POLICY_NAMES {
        let mut pol = build_policy(name, 10.0, 0.01).unwrap();
        let tr = run(&p, &f, pol.as_mut(), &cfg, 1).unwrap();
        assert!(!tr.steps.is_empty(), "{name}");
        let last = tr.steps.last().unwrap();
        assert!(last.cumulative_cost <= 0.45 + 1e-9, "{name}");
        assert!(
            tr.steps
                .windows(2)
                .all(|w| w[1].simple_regret <= w[0].simple_regret),
            "{name}"
        );
        assert!(
            tr.steps
                .iter()
                .all(|s| s.value.is_finite() && s.y.is_finite()),
            "{name}"
        );
        for s in &tr.steps {
            // The realized query keeps the chosen controlled values.
            for (&v, &x) in p.sets()[s.set].vars.iter().zip(&s.x_ctrl) {
                assert_eq!(s.x[v], x);
            }
        }
    }
    assert!(build_policy("nope", 1.0, 1.0).is_err());
}

/// Short runs (budget 2.5 under moderate costs, ≈ 12–25 decisions; the cost-agnostic PSQ
/// baselines, which only ever play the full set, on equal costs with budget 6) with reduced but
/// otherwise identical policies: fewer paths and features for TS/EI, and ETC / UCB-CVS horizons scaled to
/// the budget (ETC-Ada with 0.4 budget units per group instead of 4, UCB-CVS with a linear decay
/// over 10 observations), since with the paper's settings they would still be exploring.
#[test]
fn policies_beat_random_choice_on_average() {
    let seeds = [0u64, 1, 2, 3];
    let mean_regret_on = |costs: &[f64], budget: f64, mk: &dyn Fn() -> Box<dyn CvsPolicy>| {
        let mut s = 0.0;
        for &seed in &seeds {
            let (p, f) = sample_problem_with(seed, costs);
            let mut cfg = quick_config(budget);
            let (best, _) = p.optimum(&f, &cfg.optimizer, 9).unwrap();
            cfg.optimum = Some(best.value);
            let mut pol = mk();
            s += run(&p, &f, pol.as_mut(), &cfg, seed)
                .unwrap()
                .final_regret();
        }
        s / seeds.len() as f64
    };
    let mean_regret = |mk: &dyn Fn() -> Box<dyn CvsPolicy>| mean_regret_on(&MODERATE, 2.5, mk);
    let random = mean_regret(&|| Box::new(RandomChoice));
    type Make = Box<dyn Fn() -> Box<dyn CvsPolicy>>;
    let policies: Vec<(&str, Make)> = vec![
        (
            "ucb-cvs-linear10",
            Box::new(|| {
                Box::new(UcbCvs::new(
                    2.0,
                    EpsSchedule::Linear {
                        eps0: 2.0,
                        t_cut: 10.0,
                    },
                ))
            }),
        ),
        (
            "etc-ada(0.4)",
            Box::new(|| Box::new(Etc::new(2.0, EtcPlays::Adaptive(0.4)))),
        ),
        (
            "etc-3",
            Box::new(|| Box::new(Etc::new(2.0, EtcPlays::Fixed(3)))),
        ),
        ("ucb-naive", Box::new(|| Box::new(UcbPsq::new(2.0, true)))),
        ("ts-naive", Box::new(|| Box::new(TsPsq::new(256, true)))),
        ("ei-naive", Box::new(|| Box::new(EiPsq::new(8, 256, true)))),
        (
            "gittins",
            Box::new(|| Box::new(GittinsCvs::new(LambdaRule::Fixed(0.01)).unwrap())),
        ),
    ];
    let mut report = Vec::new();
    for (name, mk) in &policies {
        report.push((*name, mean_regret(mk.as_ref())));
    }
    eprintln!("random {random:.4}; {report:?}");
    for (name, r) in report {
        assert!(r < random, "{name}: mean regret {r} vs random {random}");
    }
    let equal = [1.0; 7];
    let random_eq = mean_regret_on(&equal, 6.0, &|| Box::new(RandomChoice));
    let psq: Vec<(&str, Make)> = vec![
        ("ucb-psq", Box::new(|| Box::new(UcbPsq::new(2.0, false)))),
        ("ts-psq", Box::new(|| Box::new(TsPsq::new(256, false)))),
        ("ei-psq", Box::new(|| Box::new(EiPsq::new(8, 256, false)))),
    ];
    let mut report = Vec::new();
    for (name, mk) in &psq {
        report.push((*name, mean_regret_on(&equal, 6.0, mk.as_ref())));
    }
    eprintln!("equal costs: random {random_eq:.4}; {report:?}");
    for (name, r) in report {
        assert!(
            r < random_eq,
            "{name}: mean regret {r} vs random {random_eq}"
        );
    }
}

/// A policy rebuilt by replaying another's decisions (only what a study stores: the set, the
/// controlled values, the ETC phase, λ and the chosen set's score) reaches the same state: the
/// next decision's ε (UCB-CVS), ETC phase and Gittins(-D) λ agree with the original policy's.
#[test]
fn replayed_policies_reach_the_same_state() {
    let (p, f) = sample_problem(3);
    let cfg = quick_config(10.0);
    type Make = fn() -> Box<dyn CvsPolicy>;
    let policies: Vec<(&str, Make)> = vec![
        ("ucb-cvs-linear", || {
            build_policy("ucb-cvs-linear", 10.0, 1.0).unwrap()
        }),
        ("ucb-cvs", || build_policy("ucb-cvs", 10.0, 1.0).unwrap()),
        ("etc-3", || Box::new(Etc::new(2.0, EtcPlays::Fixed(3)))),
        ("gittins-d", || {
            build_policy("gittins-d", 10.0, 1.0).unwrap()
        }),
        ("gittins", || build_policy("gittins", 10.0, 1.0).unwrap()),
    ];
    let affordable = vec![true; p.num_sets()];
    for (name, make) in policies {
        let mut a = make();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut x: Vec<f64> = (0..5 * 3).map(|_| rng.random::<f64>()).collect();
        let mut y: Vec<f64> = x.chunks_exact(3).map(|q| f.value(q)).collect();
        let mut log = Vec::new();
        let context = |x: &[f64], y: &[f64]| {
            let gp = ExactGp::new(x.to_vec(), y.to_vec(), cfg.gp.clone()).unwrap();
            let best = y.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            (gp, best)
        };
        for it in 0..8 {
            let (gp, best) = context(&x, &y);
            let ctx = Context {
                problem: &p,
                gp: &gp,
                affordable: &affordable,
                iteration: it,
                best_y: best,
                seed: it as u64,
                optimizer: &cfg.optimizer,
            };
            let d = a.select(&ctx).unwrap();
            let rest = p.draw_random(d.set, &mut rng);
            let xq = p.assemble(d.set, &d.x_ctrl, &rest);
            let yq = f.value(&xq);
            a.observed(&d, yq);
            x.extend_from_slice(&xq);
            y.push(yq);
            log.push((d, best, yq));
        }
        let mut b = make();
        for (d, best, yq) in &log {
            let mut stored = d.clone();
            stored.scores = vec![f64::NAN; p.num_sets()];
            stored.scores[d.set] = d.scores[d.set];
            b.replay(&stored, *best, *yq);
        }
        let (gp, best) = context(&x, &y);
        let ctx = Context {
            problem: &p,
            gp: &gp,
            affordable: &affordable,
            iteration: 8,
            best_y: best,
            seed: 8,
            optimizer: &cfg.optimizer,
        };
        let da = a.select(&ctx).unwrap();
        let db = b.select(&ctx).unwrap();
        assert_eq!(da.epsilon, db.epsilon, "{name}");
        assert_eq!(da.phase, db.phase, "{name}");
        assert_eq!(da.lambda, db.lambda, "{name}");
        // The state moved, so a replay that did nothing would fail the comparison above.
        let fresh = make().select(&ctx).unwrap();
        match name {
            "gittins" => assert_eq!(da.lambda, Some(1.0)),
            "etc-3" => assert_eq!(da.phase, Some(Phase::Commit)),
            _ => assert!(
                (da.epsilon, da.lambda) != (fresh.epsilon, fresh.lambda),
                "{name}: {:?} {:?}",
                (da.epsilon, da.lambda),
                (fresh.epsilon, fresh.lambda)
            ),
        }
    }
}

/// `planned_decisions` (what `pandora cvs plan` counts for policies with a schedule) against
/// real runs on a 3-D problem with cheap-level costs: ETC with 4 plays per cheaper group
/// exactly (its exploration, then the full set while affordable, then the dearest affordable
/// sets), UCB-CVS with a linear decay over 6 observations as an upper bound that its decay phase
/// only shortens, and `None` for the policies without a schedule.
#[test]
fn scheduled_policies_plan_their_decisions() {
    for seed in [0u64, 1] {
        let (p, f) = sample_problem_with(seed, &CHEAP);
        for budget in [0.25, 1.6, 2.35] {
            let cfg = quick_config(budget);
            // By hand: 4 × 0.01 + 4 × 0.1 = 0.44 of exploration (as far as the budget goes),
            // then 1.0 while affordable, then 0.1s, then 0.01s.
            let by_hand = |budget: f64| -> usize {
                let mut left = budget;
                let mut n = 0;
                for (plays, c) in [(4, 0.01), (4, 0.1)] {
                    let k = ((left / c + 1e-9).floor() as usize).min(plays);
                    n += k;
                    left -= k as f64 * c;
                }
                for c in [1.0, 0.1, 0.01] {
                    let k = (left / c + 1e-9).floor() as usize;
                    n += k;
                    left -= k as f64 * c;
                }
                n
            };
            let mut etc = Etc::new(2.0, EtcPlays::Fixed(4));
            let planned = etc.planned_decisions(&p, budget).unwrap();
            assert_eq!(planned, by_hand(budget), "budget {budget}");
            let tr = run(&p, &f, &mut etc, &cfg, seed).unwrap();
            assert_eq!(tr.steps.len(), planned, "ETC, seed {seed}, budget {budget}");
            let mut ucb = UcbCvs::new(
                2.0,
                EpsSchedule::Linear {
                    eps0: 2.0,
                    t_cut: 6.0,
                },
            );
            let planned = ucb.planned_decisions(&p, budget).unwrap();
            let tr = run(&p, &f, &mut ucb, &cfg, seed).unwrap();
            assert!(
                tr.steps.len() <= planned,
                "UCB-CVS, seed {seed}, budget {budget}"
            );
        }
        for name in ["ts-psq", "gittins-d", "random"] {
            let pol = build_policy(name, 1.0, 0.01).unwrap();
            assert_eq!(pol.planned_decisions(&p, 1.0), None, "{name}");
        }
    }
}
