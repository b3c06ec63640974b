//! Studies with steps (`[fidelity]`, cost-aware freeze-thaw) end to end on SQLite: the ask/tell
//! loop on synthetic learning curves with known ground truth, the budget, determinism, workers
//! that vanish, and configuration errors.

use pandora_study::storage::sqlite::SqliteStorage;
use pandora_study::{Ask, Finished, Study, StudyConfig, TrialState};

/// Two parameters, steps of uniform cost, a budget of `budget` steps.
fn config(name: &str, extra: &str) -> String {
    format!(
        r#"
[study]
name = "{name}"
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

[policy]
initial_design = 4
seed = 3

[fidelity]
max_steps = 8
lambda = 0.002
{extra}
"#
    )
}

fn open(toml: &str) -> (tempfile::TempDir, Study) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StudyConfig::from_toml(toml).unwrap();
    let storage = SqliteStorage::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    (dir, Study::open(cfg, Box::new(storage)).unwrap())
}

/// The ground truth: run `x` reaches `A(x) = 1 − 2‖x − (0.3, 0.6)‖²` along
/// `A(x)(1 − e^{−t/2})` (every curve rises and flattens; early values rank the runs as their
/// final values do).
fn curve(x: &[f64], t: u32) -> f64 {
    let a = 1.0 - 2.0 * ((x[0] - 0.3).powi(2) + (x[1] - 0.6).powi(2));
    a * (1.0 - (-(t as f64) / 2.0).exp())
}

/// Runs the study to its end, one worker, telling every handed-out step; returns the sequence of
/// (trial, first step, last step) handed out and why it finished.
fn drive(study: &mut Study) -> (Vec<(u64, u32, u32)>, Finished) {
    let mut handed = Vec::new();
    loop {
        match study.ask("w").unwrap() {
            Ask::Finished(f) => return (handed, f),
            Ask::Trial(t) => {
                let (from, to) = (t.step_from().unwrap(), t.step_to.unwrap());
                handed.push((t.number, from, to));
                for step in from..=to {
                    study
                        .tell_step(t.number, step, curve(&t.x, step), None)
                        .unwrap();
                }
            }
        }
        assert!(handed.len() < 500, "the study does not end");
    }
}

#[test]
fn the_index_policy_pauses_poor_runs_and_finishes_good_ones_within_budget() {
    let (_dir, mut study) = open(&config("ft", "[budget]\ntotal = 60.0"));
    let (handed, finished) = drive(&mut study);
    let trials = study.trials().unwrap();
    // Every trial's steps are 1, 2, ... with no step told twice.
    for t in &trials {
        let steps: Vec<u32> = t.steps.iter().map(|s| s.step).collect();
        assert_eq!(
            steps,
            (1..=steps.len() as u32).collect::<Vec<_>>(),
            "trial {}",
            t.number
        );
    }
    let told: usize = trials.iter().map(|t| t.steps.len()).sum();
    let summary = study.summary().unwrap();
    assert!(
        summary.budget_spent <= 60.0 + 1e-9,
        "{}",
        summary.budget_spent
    );
    assert_eq!(
        summary.budget_spent, told as f64,
        "uniform cost: one per step"
    );
    // Some runs were trained to the end, others were left paused early: freeze-thaw at work.
    let complete = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    let paused_early = trials
        .iter()
        .filter(|t| t.state == TrialState::Paused && t.steps.len() < 4)
        .count();
    assert!(complete >= 1, "no run completed: {handed:?}");
    assert!(paused_early >= 1, "no run was dropped early: {handed:?}");
    assert!(
        handed.iter().any(|&(_, from, _)| from > 1),
        "no run was resumed"
    );
    // The best complete run is good (the optimum is 1).
    let best = summary.best.unwrap().objective.unwrap();
    assert!(best > 0.8, "best {best}");
    assert!(
        matches!(finished, Finished::Budget { .. } | Finished::Stopped { .. }),
        "{finished}"
    );
    assert_eq!(summary.counts.paused, trials.len() - complete);
}

#[test]
fn the_same_reports_give_the_same_decisions() {
    let extra = "[budget]\ntotal = 25.0";
    let (_d1, mut one) = open(&config("a", extra));
    let (_d2, mut two) = open(&config("b", extra));
    assert_eq!(drive(&mut one), drive(&mut two));
}

#[test]
fn a_high_lambda_stops_the_study_by_its_index_rule() {
    // At λ = 1 a step costs as much as the whole range of values: after the initial design no
    // index can beat a complete run.
    let toml = config("stop", "steps_per_ask = 8\n[budget]\ntotal = 200.0")
        .replace("lambda = 0.002", "lambda = 1.0");
    let (_dir, mut study) = open(&toml);
    let (handed, finished) = drive(&mut study);
    assert!(
        matches!(finished, Finished::Stopped { .. }),
        "{finished}: {handed:?}"
    );
    let summary = study.summary().unwrap();
    assert!(summary.stop_reason.unwrap().contains("freeze_thaw"));
    assert!(summary.budget_spent < 200.0);
}

#[test]
fn a_vanished_worker_leaves_a_paused_trial_that_is_resumed_from_its_last_told_step() {
    // One configuration only (max_trials = 1), so the next ask must resume it.
    let extra = "steps_per_ask = 3\n[budget]\ntotal = 50.0\nmax_trials = 1";
    let (_dir, mut study) = open(&config("gone", extra));
    let Ask::Trial(t) = study.ask("w1").unwrap() else {
        panic!("finished")
    };
    assert_eq!((t.step_from(), t.step_to), (Some(1), Some(3)));
    study.tell_step(t.number, 1, curve(&t.x, 1), None).unwrap();
    // The worker dies before step 2: its trial is paused, keeping step 1.
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(study.abandon_stale(0.0).unwrap(), [t.number]);
    assert_eq!(study.summary().unwrap().counts.paused, 1);
    // Its late report is refused; the next ask resumes the trial at step 2, never step 1.
    assert!(study.tell_step(t.number, 2, 0.0, None).is_err());
    let Ask::Trial(u) = study.ask("w2").unwrap() else {
        panic!("finished")
    };
    assert_eq!(
        (u.number, u.step_from(), u.step_to),
        (t.number, Some(2), Some(4))
    );
    assert_eq!(u.worker.as_deref(), Some("w2"));
    for step in 2..=4 {
        study
            .tell_step(u.number, step, curve(&u.x, step), None)
            .unwrap();
    }
    let t = study.trials().unwrap().remove(t.number as usize);
    let steps: Vec<u32> = t.steps.iter().map(|s| s.step).collect();
    assert_eq!((steps, t.state), (vec![1, 2, 3, 4], TrialState::Paused));
}

#[test]
fn known_step_costs_are_computed_and_reported_ones_required() {
    let (_dir, mut study) = open(&config("known", "step_weights = [1, 1, 1, 1, 2, 2, 2, 2]"));
    let Ask::Trial(t) = study.ask("w").unwrap() else {
        panic!("finished")
    };
    let e = study.tell_step(t.number, 1, 0.5, Some(3.0)).unwrap_err();
    assert!(e.to_string().contains("cost"), "{e}");
    let told = study.tell_step(t.number, 1, 0.5, None).unwrap();
    assert_eq!(told.cost, Some(1.0));

    let (_dir, mut study) = open(&config("rep", "[cost]\nkind = \"reported\""));
    let Ask::Trial(t) = study.ask("w").unwrap() else {
        panic!("finished")
    };
    let e = study.tell_step(t.number, 1, 0.5, None).unwrap_err();
    assert!(e.to_string().contains("cost"), "{e}");
    assert_eq!(
        study.tell_step(t.number, 1, 0.5, Some(2.5)).unwrap().cost,
        Some(2.5)
    );

    // Runtime step costs: `pandora run` measures them; an external loop tells the seconds.
    let (_dir, mut study) = open(&config("rt", "[cost]\nkind = \"runtime\""));
    let Ask::Trial(t) = study.ask("w").unwrap() else {
        panic!("finished")
    };
    let e = study.tell_step(t.number, 1, 0.5, None).unwrap_err();
    assert!(e.to_string().contains("runtime"), "{e}");
    assert_eq!(
        study.tell_step(t.number, 1, 0.5, Some(0.25)).unwrap().cost,
        Some(0.25)
    );
}

#[test]
fn invalid_fidelity_sections_name_the_field() {
    for (extra, field) in [
        ("max_steps_typo = 1", "max_steps_typo"),
        ("step_weights = [1.0]", "fidelity.step_weights"),
        ("positions = [3, 2, 1, 4, 5, 6, 7, 8]", "fidelity"),
        ("steps_per_ask = 0", "fidelity.steps_per_ask"),
        ("grid_points = 100", "fidelity.grid_points"),
        (
            "[policy.stopping]\nrule = \"pbgi\"\nlambda = 0.1",
            "stopping",
        ),
    ] {
        let toml = config("bad", extra);
        let err = match StudyConfig::from_toml(&toml) {
            Err(e) => e.to_string(),
            Ok(c) => c.validate().unwrap_err().to_string(),
        };
        assert!(err.contains(field), "{extra}: {err}");
    }
    let zero = config("bad", "").replace("lambda = 0.002", "lambda = 0.0");
    let err = StudyConfig::from_toml(&zero)
        .and_then(|c| c.validate())
        .unwrap_err();
    assert!(err.to_string().contains("fidelity.lambda"), "{err}");
}
