//! The worker loop as a library (`pandora_study::optimize`): an objective given as a Rust
//! function, several workers on one SQLite study, and the ways the loop ends (finished, a
//! failure streak, a panic in an evaluation).

use pandora_study::optimize::{
    Evaluation, OptimizeError, OptimizeOptions, SAME_FAILURES_AT_START, Silent, optimize,
};
use pandora_study::shutdown::Shutdown;
use pandora_study::storage::sqlite::SqliteStorage;
use pandora_study::{Outcome, Study, StudyConfig, Trial, TrialState};
use std::collections::HashSet;
use std::path::Path;

/// A study of two floats with an external objective and `budget` (extra TOML appended).
fn config(db: &Path, extra: &str) -> StudyConfig {
    let toml = format!(
        r#"
[study]
name = "loop"
storage = "sqlite:{}"

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
low = -1.0
high = 1.0

[policy]
initial_design = 3
seed = 5
{extra}
"#,
        db.display()
    );
    StudyConfig::from_toml(&toml).unwrap()
}

/// Opens the study of `cfg` on a new connection (what each worker does).
fn opener(
    cfg: &StudyConfig,
) -> impl Fn() -> Result<Study, Box<dyn std::error::Error + Send + Sync>> + Sync {
    move || {
        let storage = pandora_study::storage::open(&cfg.study.storage)?;
        Ok(Study::open(cfg.clone(), storage)?)
    }
}

/// `(a − 0.3)² + b²` at the trial's parameters, cost 1.
fn quadratic(_: &Study, t: &Trial, _: Option<&Shutdown>) -> Evaluation {
    let a = t.params["a"].as_f64().unwrap();
    let b = t.params["b"].as_f64().unwrap();
    Evaluation::told(Outcome::Complete {
        objective: (a - 0.3).powi(2) + b * b,
        cost: 1.0,
    })
}

/// The default worker-name prefix of this process.
fn prefix() -> String {
    OptimizeOptions::new(1).prefix
}

fn trials(cfg: &StudyConfig) -> Vec<Trial> {
    let storage = SqliteStorage::open(cfg.study.storage.trim_start_matches("sqlite:")).unwrap();
    let mut study = Study::open(cfg.clone(), Box::new(storage)).unwrap();
    study.trials().unwrap()
}

#[test]
fn three_workers_share_a_study_until_its_budget_is_spent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\ntotal = 9.0");
    let open = opener(&cfg);
    let ended = optimize(&open, &quadratic, &Silent, &OptimizeOptions::new(3)).unwrap();
    assert!(
        ended.finished.as_deref().unwrap().contains("budget"),
        "{ended:?}"
    );
    assert_eq!(ended.after_signal, None);
    let all = trials(&cfg);
    assert_eq!(all.len(), 9, "the budget of 9 unit costs is held");
    assert!(all.iter().all(|t| t.state == TrialState::Complete));
    // No trial was handed the point of a trial still running when it was created (a point may
    // be evaluated again after its first evaluation ended).
    for (j, tj) in all.iter().enumerate() {
        for ti in &all[..j] {
            let running =
                ti.created_at <= tj.created_at && ti.finished_at.is_none_or(|f| tj.created_at < f);
            assert!(
                !(running && ti.x == tj.x),
                "trials {} and {} share a point while both run",
                ti.number,
                tj.number
            );
        }
    }
    // Which worker took which trial depends on the scheduler; every trial names one of the three.
    let names: HashSet<String> = (0..3).map(|k| format!("{}-{k}", prefix())).collect();
    assert!(
        all.iter()
            .all(|t| t.worker.as_ref().is_some_and(|w| names.contains(w)))
    );
}

#[test]
fn a_failure_streak_at_the_start_ends_the_loop_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 20");
    let open = opener(&cfg);
    let broken = |_: &Study, _: &Trial, _: Option<&Shutdown>| Evaluation::failed("no such file");
    let err = optimize(&open, &broken, &Silent, &OptimizeOptions::new(1)).unwrap_err();
    match &err {
        OptimizeError::SameFailures { count, reason } => {
            assert_eq!(*count, SAME_FAILURES_AT_START);
            assert_eq!(reason, "no such file");
        }
        other => panic!("expected a failure streak, got {other:?}"),
    }
    assert_eq!(trials(&cfg).len(), SAME_FAILURES_AT_START);
}

#[test]
fn a_panicking_evaluation_fails_its_trial_and_stops_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 20");
    let open = opener(&cfg);
    let panics = |s: &Study, t: &Trial, stop: Option<&Shutdown>| {
        if t.number == 2 {
            panic!("boom at {}", t.number);
        }
        quadratic(s, t, stop)
    };
    let err = optimize(&open, &panics, &Silent, &OptimizeOptions::new(1)).unwrap_err();
    assert!(
        matches!(&err, OptimizeError::Panicked { trial: 2, message } if message == "boom at 2"),
        "{err:?}"
    );
    let all = trials(&cfg);
    assert_eq!(all.len(), 3);
    let failed = all.iter().find(|t| t.number == 2).unwrap();
    assert_eq!(failed.state, TrialState::Failed);
    assert!(
        failed
            .error
            .as_deref()
            .unwrap()
            .contains("panicked: boom at 2")
    );
}

#[test]
fn no_workers_is_refused_before_anything_is_opened() {
    let never = || -> Result<Study, Box<dyn std::error::Error + Send + Sync>> {
        panic!("opened with 0 workers")
    };
    let err = optimize(&never, &quadratic, &Silent, &OptimizeOptions::new(0)).unwrap_err();
    assert!(matches!(err, OptimizeError::NoWorkers));
    assert_eq!(err.to_string(), "workers: must be at least 1, got 0");
}
