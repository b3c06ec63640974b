//! The storage contract of trials with steps, run against every backend (included by
//! `sqlite_storage.rs` and `postgres_storage.rs`).

use pandora_core::policy::Phase;
use pandora_core::run::record::DecisionRecord;
use pandora_study::storage::Storage;
use pandora_study::trial::{Ask, Decided, StepOutcome};
use pandora_study::{NewTrial, Outcome, Trial, TrialState};
use serde_json::json;

/// An ask whose decision is `decided` (ignoring the trials).
fn ask_as(s: &mut dyn Storage, worker: &str, decided: Decided) -> pandora_study::Result<Ask> {
    let mut once = Some(decided);
    s.ask_with("steps", worker, &mut |_, _| {
        Ok(once.take().expect("one decision"))
    })
}

fn new_trial(x: f64, step_to: Option<u32>) -> Decided {
    Decided::Trial(
        NewTrial {
            params: json!({"x": x}),
            x: vec![x],
            decision: DecisionRecord::new(Phase::InitialDesign, "test"),
            step_to,
        },
        json!({"n": 1}),
    )
}

fn resume(number: u64, step_to: u32) -> Decided {
    Decided::Resume {
        number,
        step_to,
        state: json!({"resumed": number}),
    }
}

fn step(step: u32, value: f64) -> StepOutcome {
    StepOutcome {
        step,
        value,
        cost: 1.5,
        max_steps: 4,
    }
}

fn handed(a: Ask) -> Trial {
    match a {
        Ask::Trial(t) => *t,
        Ask::Finished(f) => panic!("finished: {f}"),
    }
}

fn get(s: &mut dyn Storage, number: u64) -> Trial {
    s.trials("steps").unwrap().remove(number as usize)
}

/// Runs the contract on a fresh storage; `reopen` opens the same storage again (durability).
pub fn check_steps(s: &mut dyn Storage, reopen: &dyn Fn() -> Box<dyn Storage>) {
    s.open_study("steps", "{}").unwrap();
    let t = handed(ask_as(s, "w1", new_trial(0.25, Some(2))).unwrap());
    assert_eq!((t.number, t.step_from(), t.step_to), (0, Some(1), Some(2)));
    assert_eq!(t.state, TrialState::Running);

    // Out of order, non-finite values and non-positive costs change nothing.
    assert!(s.tell_step("steps", 0, &step(2, 0.1)).is_err());
    assert!(s.tell_step("steps", 0, &step(1, f64::NAN)).is_err());
    let free = StepOutcome {
        cost: 0.0,
        ..step(1, 0.1)
    };
    assert!(s.tell_step("steps", 0, &free).is_err());
    assert!(get(s, 0).steps.is_empty());

    let t = s.tell_step("steps", 0, &step(1, 0.5)).unwrap();
    assert_eq!(
        (t.state, t.steps.len(), t.cost),
        (TrialState::Running, 1, Some(1.5))
    );
    let again = s.tell_step("steps", 0, &step(1, 0.5)).unwrap_err();
    assert!(again.to_string().contains("already told"), "{again}");
    // The run's last step pauses the trial; nothing beyond it is accepted.
    let t = s.tell_step("steps", 0, &step(2, 0.6)).unwrap();
    assert_eq!((t.state, t.cost), (TrialState::Paused, Some(3.0)));
    let late = s.tell_step("steps", 0, &step(3, 0.7)).unwrap_err();
    assert!(late.to_string().contains("not running"), "{late}");
    // A trial with steps is told step by step, not with one outcome.
    let whole = Outcome::Complete {
        objective: 1.0,
        cost: 1.0,
    };
    assert!(s.tell_outcome("steps", 0, &whole).is_err());
    assert_eq!(get(s, 0), t, "refused tells change nothing");

    // Resume: the same trial, running again for another worker, from step 3.
    let t = handed(ask_as(s, "w2", resume(0, 4)).unwrap());
    assert_eq!((t.number, t.step_from(), t.step_to), (0, Some(3), Some(4)));
    assert_eq!(
        (t.state, t.worker.as_deref()),
        (TrialState::Running, Some("w2"))
    );
    assert_eq!(
        t.steps.iter().map(|s| s.value).collect::<Vec<_>>(),
        [0.5, 0.6]
    );
    // A worker presumed gone leaves its trial paused with its told steps, not abandoned, and its
    // late step is refused (the step may have been handed out again).
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(s.abandon_stale("steps", 0.0).unwrap(), [0]);
    let t = get(s, 0);
    assert_eq!((t.state, t.steps.len()), (TrialState::Paused, 2));
    assert!(s.tell_step("steps", 0, &step(3, 0.7)).is_err());
    assert_eq!(get(s, 0).steps.len(), 2);

    // Resumed again, it completes at max_steps with the last value as its objective.
    handed(ask_as(s, "w3", resume(0, 4)).unwrap());
    s.tell_step("steps", 0, &step(3, 0.7)).unwrap();
    let t = s.tell_step("steps", 0, &step(4, 0.8)).unwrap();
    assert_eq!(
        (t.state, t.objective, t.cost),
        (TrialState::Complete, Some(0.8), Some(6.0))
    );
    assert!(t.finished_at.is_some());
    // Only a paused trial can be resumed; a refused resume rolls the ask back.
    assert!(ask_as(s, "w4", resume(0, 4)).is_err());
    assert_eq!(get(s, 0), t);

    // Trials without steps are untouched by all this, and cannot be told steps.
    let plain = handed(ask_as(s, "w1", new_trial(0.5, None)).unwrap());
    assert_eq!((plain.step_to, plain.step_from()), (None, None));
    assert!(s.tell_step("steps", plain.number, &step(1, 0.1)).is_err());
    s.abandon("steps", plain.number, "signal").unwrap();
    assert_eq!(get(s, plain.number).state, TrialState::Abandoned);

    // A failure ends a paused trial; its cost adds to its steps' costs.
    let t = handed(ask_as(s, "w1", new_trial(0.75, Some(1))).unwrap());
    s.tell_step("steps", t.number, &step(1, 0.2)).unwrap();
    assert_eq!(get(s, t.number).state, TrialState::Paused);
    let failed = Outcome::Failed {
        reason: "diverged".into(),
        cost: Some(0.5),
    };
    let told = s.tell_outcome("steps", t.number, &failed).unwrap().trial;
    assert_eq!(
        (told.state, told.cost, told.steps.len()),
        (TrialState::Failed, Some(2.0), 1)
    );

    // Everything is durable: another connection reads the same trials and steps.
    let mine = s.trials("steps").unwrap();
    let mut other = reopen();
    assert_eq!(other.trials("steps").unwrap(), mine);
    let steps: Vec<u32> = mine[0].steps.iter().map(|s| s.step).collect();
    assert_eq!(steps, [1, 2, 3, 4]);
}
