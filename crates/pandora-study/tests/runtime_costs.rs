//! Studies with measured (runtime) costs: the log-cost model must stay sensible when the same
//! region is evaluated again and again with slightly different costs (runtimes are noisy).

use pandora_core::policy::Phase;
use pandora_study::storage::sqlite::SqliteStorage;
use pandora_study::{Ask, Outcome, Study, StudyConfig};

const CONFIG: &str = r#"
[study]
name = "rt"
direction = "maximize"

[objective]
kind = "external"

[[space]]
name = "a"
type = "float"
low = 0.0
high = 1.0

[[space]]
name = "b"
type = "float"
low = 0.0
high = 1.0

[cost]
kind = "runtime"

[budget]
total = 1000.0

[policy]
acquisition = "pbgi_d"
initial_design = 6
seed = 0
"#;

/// A deterministic jitter in [-1, 1] for trial `k` (a fixed pseudo-random sequence).
fn jitter(k: u64) -> f64 {
    let mut z = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    2.0 * (z >> 11) as f64 / (1u64 << 53) as f64 - 1.0
}

/// Trials concentrate around the optimum (0.3, 0.6) and their "runtimes" (0.2 s to 0.4 s, with
/// ±20 % noise) differ between neighbours. Every proposal's predicted cost E[c] must stay within a
/// factor 5 of the observed range: with the log-cost GP's noise fixed at 1e-4 the fit collapsed to
/// white noise and predicted costs of 1e-8 s and of more than the whole budget.
#[test]
fn predicted_runtimes_stay_in_the_observed_range_despite_noise() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StudyConfig::from_toml(CONFIG).unwrap();
    let storage = SqliteStorage::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    let mut study = Study::open(cfg, Box::new(storage)).unwrap();
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    let mut checked = 0;
    for k in 0..45u64 {
        let t = match study.ask("w").unwrap() {
            Ask::Trial(t) => t,
            Ask::Finished(f) => panic!("finished after {k} trials: {f}"),
        };
        if t.decision.phase == Phase::Model {
            let pc = t.decision.predicted_cost.unwrap();
            assert!(
                pc > lo / 5.0 && pc < hi * 5.0,
                "trial {k}: predicted cost {pc} outside [{lo}/5, {hi}*5]; cost model {}",
                t.decision
                    .step()
                    .unwrap()
                    .cost_params
                    .as_ref()
                    .unwrap()
                    .lengthscales[0]
            );
            checked += 1;
        }
        let (a, b) = (t.x[0], t.x[1]);
        let objective = -(a - 0.3).powi(2) - (b - 0.6).powi(2);
        let cost = 0.2 * (1.0 + a) * (1.0 + 0.2 * jitter(k));
        lo = lo.min(cost);
        hi = hi.max(cost);
        study
            .tell(t.number, &Outcome::Complete { objective, cost })
            .unwrap();
    }
    assert!(checked >= 35);
}

/// A runtime-cost study counts only the objective's time toward its budget; the optimizer's own
/// time per ask is recorded with every decision (stored, read back) and the summary shows both
/// totals side by side.
#[test]
fn the_optimizers_time_is_recorded_per_ask_and_summed_next_to_the_objectives() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StudyConfig::from_toml(CONFIG).unwrap();
    let storage = SqliteStorage::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    let mut study = Study::open(cfg, Box::new(storage)).unwrap();
    for k in 0..8u64 {
        let Ask::Trial(t) = study.ask("w").unwrap() else {
            panic!("finished after {k} trials")
        };
        let s = t.decision.seconds.expect("the ask's time is recorded");
        assert!(s.is_finite() && s >= 0.0, "{s}");
        study
            .tell(
                t.number,
                &Outcome::Complete {
                    objective: -(k as f64),
                    cost: 0.5,
                },
            )
            .unwrap();
    }
    let trials = study.trials().unwrap();
    let stored: f64 = trials.iter().map(|t| t.decision.seconds.unwrap()).sum();
    let summary = study.summary().unwrap();
    assert_eq!(summary.time.optimizer_trials, 8);
    assert_eq!(summary.time.optimizer_s, stored);
    assert!(summary.time.objective_s >= 0.0);
    // The budget counts the objective's reported runtimes only.
    assert_eq!(summary.budget_spent, 4.0);
    let json = summary.to_json();
    assert_eq!(json["time"]["optimizer_trials"], 8);
    assert!(json["time"]["optimizer_s"].is_f64());
}
