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

fn random_dag_chain(rng: &mut Xoshiro256PlusPlus, n: usize) -> MarkovChain {
    let mut transitions = vec![vec![0.0; n + 1]; n + 1];
    for (s, row) in transitions.iter_mut().enumerate().take(n) {
        let mut raw = vec![0.0; n + 1];
        for (t, x) in raw.iter_mut().enumerate().skip(s + 1) {
            if t == n || rng.random_bool(0.6) {
                *x = rng.random_range(0.1..1.0);
            }
        }
        let sum: f64 = raw.iter().sum();
        *row = raw.iter().map(|x| x / sum).collect();
    }
    let rewards = (0..=n).map(|_| rng.random_range(-1.0..2.0)).collect();
    let mut terminal = vec![false; n + 1];
    terminal[n] = true;
    MarkovChain::new(rewards, transitions, terminal).unwrap()
}

/// `G(s) = max_{C ∋ s} E[reward collected while in C] / P(absorbed before leaving C)`, by
/// enumerating continuation sets (acyclic chains with states in topological order).
pub(crate) fn index_by_enumeration(c: &MarkovChain, s: usize) -> f64 {
    let n = c.len();
    let nonterm: Vec<usize> = (0..n).filter(|&u| !c.terminal[u]).collect();
    let mut best = f64::NEG_INFINITY;
    for mask in 0u32..(1 << nonterm.len()) {
        let inside: Vec<bool> = (0..n)
            .map(|u| {
                nonterm
                    .iter()
                    .position(|&x| x == u)
                    .is_some_and(|k| mask & (1 << k) != 0)
            })
            .collect();
        if !inside[s] {
            continue;
        }
        let (mut r, mut a) = (vec![0.0; n], vec![0.0; n]);
        for u in (0..n).rev() {
            if !inside[u] {
                continue;
            }
            r[u] = c.rewards[u];
            for t in 0..n {
                let p = c.transitions[u][t];
                if c.terminal[t] {
                    a[u] += p;
                } else if inside[t] {
                    r[u] += p * r[t];
                    a[u] += p * a[t];
                }
            }
        }
        if a[s] > 0.0 {
            best = best.max(r[s] / a[s]);
        } else if r[s] > 0.0 {
            return f64::INFINITY;
        }
    }
    best
}

#[test]
fn chain_indices_match_enumeration_and_index_policy_is_optimal() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let (mut worst_idx, mut worst_val) = (0.0_f64, 0.0_f64);
    for t in 0..60 {
        let k = 2 + t % 2;
        let chains: Vec<MarkovChain> = (0..k)
            .map(|_| random_dag_chain(&mut rng, 2 + t % 4))
            .collect();
        for c in &chains {
            let g = c.gittins_indices().unwrap();
            for (s, gs) in g.iter().enumerate() {
                match gs {
                    None => assert!(c.terminal[s]),
                    Some(x) => {
                        let e = index_by_enumeration(c, s);
                        worst_idx = worst_idx.max((x - e).abs());
                        assert!((x - e).abs() < 1e-9, "case {t} state {s}: {x} vs {e}");
                    }
                }
            }
        }
        let start = vec![0; k];
        let opt = selection_optimum(&chains, &start).unwrap();
        let pol = index_policy_value(&chains, &start).unwrap();
        worst_val = worst_val.max((opt - pol).abs());
        assert!((opt - pol).abs() < 1e-9, "case {t}: {opt} vs {pol}");
    }
    eprintln!("max |index - enumeration| = {worst_idx:e}, max |index policy - DP| = {worst_val:e}");
}

#[test]
fn pandora_is_a_special_case_of_chain_selection() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut worst = 0.0_f64;
    for t in 0..80 {
        let p = random_discrete(&mut rng, 1 + t % 4, 3, t % 2 == 1);
        let w = p.weitzman().unwrap();
        let mut chains = Vec::new();
        for (i, b) in p.boxes.iter().enumerate() {
            let Reward::Discrete { values, probs } = &b.reward else {
                unreachable!()
            };
            let c = MarkovChain::pandora_box(values, probs, b.cost.mean()).unwrap();
            let g = c.gittins_indices().unwrap()[0].unwrap();
            worst = worst.max((g - w.indices[i]).abs());
            assert!(
                (g - w.indices[i]).abs() < 1e-9,
                "case {t} box {i}: {g} vs {} {b:?}",
                w.indices[i]
            );
            chains.push(c);
        }
        if let Some(y0) = p.fallback {
            chains.push(MarkovChain::fallback(y0).unwrap());
        }
        let start = vec![0; chains.len()];
        let v = index_policy_value(&chains, &start).unwrap();
        assert!(
            (v - w.expected_utility).abs() < 1e-9,
            "case {t}: {v} vs {}",
            w.expected_utility
        );
        let opt = selection_optimum(&chains, &start).unwrap();
        assert!((opt - dp_optimum(&p).unwrap()).abs() < 1e-9);
    }
    eprintln!("max |chain index - box index| = {worst:e}");
}

#[test]
fn chain_errors() {
    // A state that cannot reach a terminal state.
    let c = MarkovChain::new(
        vec![1.0, 0.0],
        vec![vec![1.0, 0.0], vec![0.0, 1.0]],
        vec![false, true],
    );
    assert!(c.is_err());
    let c = MarkovChain::new(vec![1.0], vec![vec![0.5]], vec![false]);
    assert!(c.is_err());
    // A positive-reward cycle that can still absorb has a finite index.
    let c = MarkovChain::new(
        vec![1.0, 0.0],
        vec![vec![0.5, 0.5], vec![0.0, 1.0]],
        vec![false, true],
    )
    .unwrap();
    let g = c.gittins_indices().unwrap()[0].unwrap();
    // Going forever earns E[visits] = 2; α = 1 + 0.5 max(α, V) → α = 2.
    assert!((g - 2.0).abs() < 1e-9, "{g}");
}

#[test]
fn budget_is_met_exactly_and_optimal_by_duality() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let (mut worst_b, mut worst_dual) = (0.0_f64, 0.0_f64);
    let mut binding = 0;
    for t in 0..150 {
        let p = random_discrete(&mut rng, 1 + t % 5, 4, t % 3 == 0);
        // A budget between the cheapest and the most expensive index policies.
        let lo = solve_budget(&p, 1e9).unwrap().expected_cost;
        let b = rng.random_range(0.0..1.0) * lo;
        let sol = match solve_budget(&p, b) {
            Ok(s) => s,
            Err(_) => continue, // infeasible without fallback
        };
        if !sol.binding {
            continue;
        }
        binding += 1;
        worst_b = worst_b.max((sol.expected_cost - b).abs());
        assert!((sol.expected_cost - b).abs() < 1e-9, "case {t}");
        // Weak duality: max_π E[R] − λ E[C] (DP) + λB bounds every feasible policy; attained.
        let lag = dp_optimum(&p.with_scaled_costs(sol.lambda)).unwrap();
        let gap = (sol.expected_reward - (lag + sol.lambda * b)).abs();
        worst_dual = worst_dual.max(gap);
        assert!(
            gap < 1e-9,
            "case {t}: {} vs {}",
            sol.expected_reward,
            lag + sol.lambda * b
        );
    }
    assert!(binding > 50);
    eprintln!(
        "budget: {binding} binding cases, max |E[cost] − B| = {worst_b:e}, max duality gap = {worst_dual:e}"
    );
}

#[test]
fn budget_with_normal_boxes() {
    let p = Problem::new(
        vec![
            PandoraBox::normal(0.0, 1.0, 1.0),
            PandoraBox::normal(0.5, 0.5, 0.3),
            PandoraBox::discrete(vec![0.0, 2.0], vec![0.7, 0.3], 0.5),
        ],
        None,
    )
    .unwrap();
    let sol = solve_budget(&p, 1.0).unwrap();
    assert!(sol.binding);
    assert!(
        (sol.expected_cost - 1.0).abs() < 1e-9,
        "{}",
        sol.expected_cost
    );
    assert!(solve_budget(&p, 0.1).is_err());
    assert!(solve_budget(&p, f64::NAN).is_err());
}
