use super::*;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A random discrete instance: `n` boxes, up to `k` support points, integer-ish values so that
/// ties between rewards and indices occur.
pub(crate) fn random_discrete(
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
    k: usize,
    fallback: bool,
) -> Problem {
    let boxes = (0..n)
        .map(|_| {
            let m = rng.random_range(1..=k);
            let values: Vec<f64> = (0..m)
                .map(|_| rng.random_range(-4..=8) as f64 * 0.5)
                .collect();
            let raw: Vec<f64> = (0..m).map(|_| rng.random_range(0.05..1.0)).collect();
            let s: f64 = raw.iter().sum();
            let probs = raw.iter().map(|p| p / s).collect();
            let cost = if rng.random_bool(0.1) {
                0.0
            } else {
                rng.random_range(0.0..1.5)
            };
            PandoraBox::discrete(values, probs, cost)
        })
        .collect();
    let fb = if fallback {
        Some(rng.random_range(-2.0..3.0))
    } else {
        None
    };
    Problem::new(boxes, fb).unwrap()
}

#[test]
fn discrete_index_solves_equation() {
    let v = [0.0, 1.0, 4.0];
    let p = [0.5, 0.3, 0.2];
    for c in [0.01, 0.3, 0.8, 0.9, 1.1, 3.0, 10.0] {
        let g = discrete_index(&v, &p, c);
        let ei: f64 = v.iter().zip(&p).map(|(x, q)| q * (x - g).max(0.0)).sum();
        assert!((ei - c).abs() < 1e-12, "c={c} g={g} ei={ei}");
    }
    assert_eq!(discrete_index(&v, &p, 0.0), 4.0);
}

#[test]
fn normal_index_solves_equation() {
    let p = Problem::new(vec![PandoraBox::normal(0.5, 2.0, 0.3)], None).unwrap();
    let g = p.indices().unwrap()[0];
    let z = (0.5 - g) / 2.0;
    let ei = 2.0 * crate::math::h(z);
    assert!((ei - 0.3).abs() < 1e-12);
}

#[test]
fn weitzman_equals_dp_on_random_discrete_instances() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut worst = 0.0_f64;
    for t in 0..400 {
        let n = 1 + t % 6;
        let p = random_discrete(&mut rng, n, 4, t % 2 == 0);
        let w = p.weitzman().unwrap();
        let dp = dp_optimum(&p).unwrap();
        let (r, c) = discrete_policy_value(&p).unwrap();
        worst = worst.max((w.expected_utility - dp).abs());
        assert!(
            (w.expected_utility - dp).abs() < 1e-9,
            "case {t}: {} vs {dp}",
            w.expected_utility
        );
        assert!((r - c - dp).abs() < 1e-9, "recursion case {t}");
        assert!((r - w.expected_reward).abs() < 1e-9 && (c - w.expected_cost).abs() < 1e-9);
    }
    eprintln!("max |Weitzman - DP| = {worst:e}");
}

#[test]
fn exact_value_matches_monte_carlo() {
    let boxes = vec![
        PandoraBox::discrete(vec![0.0, 1.0, 4.0], vec![0.5, 0.3, 0.2], 0.3),
        PandoraBox::normal(0.5, 1.0, 0.1),
        PandoraBox::normal(1.0, 0.3, 0.05),
        PandoraBox {
            reward: Reward::Normal {
                mean: -1.0,
                std: 3.0,
            },
            cost: Cost::Discrete {
                values: vec![0.0, 0.8],
                probs: vec![0.5, 0.5],
            },
        },
    ];
    for fb in [None, Some(0.0), Some(1.2)] {
        let p = Problem::new(boxes.clone(), fb).unwrap();
        let w = p.weitzman().unwrap();
        let mc = p.simulate(200_000, 11).unwrap();
        let z = (mc.mean_utility - w.expected_utility) / mc.std_error;
        eprintln!(
            "fallback {fb:?}: exact {} mc {} ± {} (z = {z:.2})",
            w.expected_utility, mc.mean_utility, mc.std_error
        );
        assert!(z.abs() < 4.0);
    }
}

#[test]
fn normal_integral_matches_discretized_limit() {
    // Two point masses expressed as normals with std 0 and as discrete boxes agree exactly.
    let a = Problem::new(
        vec![
            PandoraBox::normal(1.0, 0.0, 0.2),
            PandoraBox::normal(0.5, 1.0, 0.1),
        ],
        Some(0.3),
    )
    .unwrap();
    let b = Problem::new(
        vec![
            PandoraBox::discrete(vec![1.0], vec![1.0], 0.2),
            PandoraBox::normal(0.5, 1.0, 0.1),
        ],
        Some(0.3),
    )
    .unwrap();
    let (wa, wb) = (a.weitzman().unwrap(), b.weitzman().unwrap());
    assert!((wa.expected_utility - wb.expected_utility).abs() < 1e-14);
    // Single normal box without fallback: E[min(X, g)] = μ − E[(X − g)⁺] = μ − c.
    let s = Problem::new(vec![PandoraBox::normal(0.7, 2.0, 0.4)], None).unwrap();
    let w = s.weitzman().unwrap();
    assert!(
        (w.expected_utility - (0.7 - 0.4)).abs() < 1e-12,
        "{}",
        w.expected_utility
    );
}

#[test]
fn bad_input_is_an_error() {
    assert!(Problem::new(vec![], None).is_err());
    assert!(Problem::new(vec![PandoraBox::discrete(vec![1.0], vec![0.5], 0.1)], None).is_err());
    assert!(Problem::new(vec![PandoraBox::discrete(vec![1.0], vec![1.0], -0.1)], None).is_err());
    assert!(Problem::new(vec![PandoraBox::normal(0.0, 1.0, 0.0)], None).is_err());
    assert!(Problem::new(vec![PandoraBox::normal(f64::NAN, 1.0, 1.0)], None).is_err());
    let e = Problem::new(
        vec![PandoraBox::discrete(vec![1.0], vec![1.0], 0.1)],
        Some(f64::INFINITY),
    );
    assert!(matches!(e, Err(crate::Error::InvalidInput { ref what, .. }) if what == "fallback"));
}
