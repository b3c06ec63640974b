//! The worker loop as a library (`pandora_study::optimize`): an objective given as a Rust
//! function, several workers on one SQLite study, `Study::optimize` on a study already open (in
//! memory too), and the ways the loop ends (finished, a failure streak, a panic in an
//! evaluation, the objective ending it).

use pandora_study::optimize::{
    Evaluation, OptimizeError, OptimizeOptions, SAME_FAILURES_AT_START, Silent, optimize,
};
use pandora_study::shutdown::Shutdown;
use pandora_study::storage::sqlite::SqliteStorage;
use pandora_study::{Outcome, Study, StudyConfig, Trial, TrialState};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A study of two floats with an external objective and `budget` (extra TOML appended).
fn config(db: &Path, extra: &str) -> StudyConfig {
    config_at(&format!("sqlite:{}", db.display()), extra)
}

/// [`config`] in the storage `url`.
fn config_at(url: &str, extra: &str) -> StudyConfig {
    let toml = format!(
        r#"
[study]
name = "loop"
storage = "{url}"

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
"#
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

/// An objective that ends the loop once it has seen `after` trials.
struct EndsAfter {
    after: u64,
    seen: std::sync::atomic::AtomicU64,
}

impl pandora_study::Objective for EndsAfter {
    fn evaluate(&self, s: &Study, t: &Trial, stop: Option<&Shutdown>) -> Evaluation {
        self.seen.fetch_add(1, Ordering::SeqCst);
        quadratic(s, t, stop)
    }

    fn ended(&self) -> bool {
        self.seen.load(Ordering::SeqCst) >= self.after
    }
}

#[test]
fn study_optimize_runs_an_in_memory_study_on_the_callers_thread() {
    let cfg = config_at("sqlite::memory:", "[budget]\nmax_trials = 6");
    let storage = pandora_study::storage::open(&cfg.study.storage).unwrap();
    let mut study = Study::open(cfg, storage).unwrap();
    let caller = std::thread::current().id();
    let on_caller = |s: &Study, t: &Trial, stop: Option<&Shutdown>| {
        assert_eq!(
            std::thread::current().id(),
            caller,
            "worker 0 runs on the caller's thread"
        );
        quadratic(s, t, stop)
    };
    let ended = study
        .optimize(&on_caller, &Silent, &OptimizeOptions::new(1))
        .unwrap();
    assert_eq!(ended.finished.as_deref(), Some("reached max_trials = 6"));
    // The caller's own study holds the trials (a second connection would see an empty database).
    let all = study.trials().unwrap();
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|t| t.state == TrialState::Complete));
}

#[test]
fn study_optimize_refuses_workers_on_an_in_memory_study() {
    let cfg = config_at("sqlite::memory:", "[budget]\nmax_trials = 6");
    let storage = pandora_study::storage::open(&cfg.study.storage).unwrap();
    let mut study = Study::open(cfg, storage).unwrap();
    let err = study
        .optimize(&quadratic, &Silent, &OptimizeOptions::new(2))
        .unwrap_err();
    assert!(matches!(err, OptimizeError::InMemory(2)), "{err:?}");
    assert!(
        err.to_string().starts_with("workers: an in-memory study"),
        "{err}"
    );
    assert!(study.trials().unwrap().is_empty(), "nothing was asked");
}

#[test]
fn study_optimize_shares_a_file_study_with_workers_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 9");
    let storage = pandora_study::storage::open(&cfg.study.storage).unwrap();
    let mut study = Study::open(cfg.clone(), storage).unwrap();
    // Each evaluation waits (up to 5 s) until two evaluations have run at once, so a worker
    // that opened its own connection must have taken a trial while worker 0 held one.
    let (running, overlapped) = (AtomicUsize::new(0), AtomicBool::new(false));
    let waits = |s: &Study, t: &Trial, stop: Option<&Shutdown>| {
        if running.fetch_add(1, Ordering::SeqCst) >= 1 {
            overlapped.store(true, Ordering::SeqCst);
        }
        let start = std::time::Instant::now();
        while !overlapped.load(Ordering::SeqCst) && start.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        running.fetch_sub(1, Ordering::SeqCst);
        quadratic(s, t, stop)
    };
    let ended = study
        .optimize(&waits, &Silent, &OptimizeOptions::new(3))
        .unwrap();
    assert_eq!(ended.finished.as_deref(), Some("reached max_trials = 9"));
    assert!(
        overlapped.load(Ordering::SeqCst),
        "no two evaluations ran at once"
    );
    let all = trials(&cfg);
    assert_eq!(all.len(), 9);
    let workers: HashSet<_> = all.iter().filter_map(|t| t.worker.clone()).collect();
    assert!(
        workers.len() >= 2,
        "more than one worker asked: {workers:?}"
    );
}

#[test]
fn an_objective_that_ends_the_loop_stops_every_worker_without_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 30");
    let open = opener(&cfg);
    let objective = EndsAfter {
        after: 4,
        seen: Default::default(),
    };
    let ended = optimize(&open, &objective, &Silent, &OptimizeOptions::new(2)).unwrap();
    assert_eq!(ended.finished, None);
    let all = trials(&cfg);
    // Each worker finishes the trial it holds: at most one more than `after` per other worker.
    assert!((4..=5).contains(&all.len()), "{} trials", all.len());
    assert!(all.iter().all(|t| t.state == TrialState::Complete));
}

#[test]
fn repeated_failures_continue_when_the_options_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 8");
    let open = opener(&cfg);
    let nan = |_: &Study, _: &Trial, _: Option<&Shutdown>| Evaluation::failed("value is NaN");
    let options = OptimizeOptions {
        stop_on_repeated_failures: false,
        ..OptimizeOptions::new(1)
    };
    let ended = optimize(&open, &nan, &Silent, &options).unwrap();
    assert_eq!(ended.finished.as_deref(), Some("reached max_trials = 8"));
    let all = trials(&cfg);
    assert_eq!(all.len(), 8);
    assert!(all.iter().all(|t| t.state == TrialState::Failed));
}

#[test]
fn n_trials_caps_the_trials_handed_out_over_all_workers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("s.db"), "[budget]\nmax_trials = 30");
    let open = opener(&cfg);
    let options = OptimizeOptions {
        n_trials: Some(5),
        ..OptimizeOptions::new(3)
    };
    let ended = optimize(&open, &quadratic, &Silent, &options).unwrap();
    // The cap, not the study, ended the loop: no reason, and exactly 5 trials, all complete.
    assert_eq!(ended.finished, None);
    let all = trials(&cfg);
    assert_eq!(all.len(), 5);
    assert!(all.iter().all(|t| t.state == TrialState::Complete));
    // A second call continues the same study; the study's own limit still ends it.
    let options = OptimizeOptions {
        n_trials: Some(100),
        ..OptimizeOptions::new(1)
    };
    let ended = optimize(&open, &quadratic, &Silent, &options).unwrap();
    assert_eq!(ended.finished.as_deref(), Some("reached max_trials = 30"));
    assert_eq!(trials(&cfg).len(), 30);
}
