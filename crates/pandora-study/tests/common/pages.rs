//! The storage contract of paged reads ([`Storage::trials_page`]), run against every backend
//! (included by `sqlite_storage.rs` and `postgres_storage.rs`).

use pandora_core::policy::Phase;
use pandora_core::run::record::DecisionRecord;
use pandora_study::storage::Storage;
use pandora_study::trial::{Ask, Decided, StepOutcome};
use pandora_study::{Error, NewTrial, Outcome, TrialState};
use serde_json::json;

/// Hands out a new trial at `x` of `study` (with steps up to `step_to`, if given).
fn add(s: &mut dyn Storage, study: &str, x: f64, step_to: Option<u32>) -> u64 {
    let mut once = Some(Decided::Trial(
        NewTrial {
            params: json!({"x": x}),
            x: vec![x],
            decision: DecisionRecord::new(Phase::InitialDesign, "test"),
            step_to,
        },
        json!({}),
    ));
    match s
        .ask_with(study, "w", &mut |_, _| {
            Ok(once.take().expect("one decision"))
        })
        .unwrap()
    {
        Ask::Trial(t) => t.number,
        Ask::Finished(f) => panic!("finished: {f}"),
    }
}

fn step(step: u32, value: f64) -> StepOutcome {
    StepOutcome {
        step,
        value,
        cost: 1.0,
        max_steps: 4,
    }
}

/// Runs the contract on a fresh storage.
pub fn check_pages(s: &mut dyn Storage) {
    let e = s.trials_page("pages", 0, 10).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    s.open_study("pages", "{}").unwrap();
    let empty = s.trials_page("pages", 0, 10).unwrap();
    assert_eq!((empty.total, empty.trials.len()), (0, 0));

    // Seven trials: some with steps (at page boundaries below), one complete, one failed; and
    // another study's trials and steps in between, which no page may show.
    s.open_study("other", "{}").unwrap();
    for i in 0..7u32 {
        let with_steps = matches!(i, 1 | 3 | 4);
        add(s, "pages", f64::from(i) / 10.0, with_steps.then_some(2));
        let o = add(s, "other", 0.5, Some(2));
        s.tell_step("other", o, &step(1, -1.0)).unwrap();
    }
    for (n, v) in [(1, 0.1), (3, 0.3), (4, 0.4)] {
        s.tell_step("pages", n, &step(1, v)).unwrap();
    }
    s.tell_step("pages", 4, &step(2, 0.45)).unwrap();
    let done = Outcome::Complete {
        objective: 2.0,
        cost: 1.0,
    };
    s.tell_outcome("pages", 2, &done).unwrap();
    let failed = Outcome::Failed {
        reason: "broke".into(),
        cost: None,
    };
    s.tell_outcome("pages", 6, &failed).unwrap();

    let all = s.trials("pages").unwrap();
    assert_eq!(all.len(), 7);
    assert_eq!(all[4].state, TrialState::Paused);
    assert_eq!(all[4].steps.len(), 2);
    for from in 0..=9u64 {
        for limit in [0, 1, 2, 3, 7, 100, u64::MAX] {
            let page = s.trials_page("pages", from, limit).unwrap();
            let start = (from as usize).min(all.len());
            let end = start.saturating_add(limit.min(100) as usize).min(all.len());
            assert_eq!(page.total, 7, "from {from} limit {limit}");
            assert_eq!(page.trials, all[start..end], "from {from} limit {limit}");
        }
    }
    let far = s.trials_page("pages", u64::MAX, u64::MAX).unwrap();
    assert_eq!((far.total, far.trials.len()), (7, 0));
    let other = s.trials_page("other", 2, 1).unwrap();
    assert_eq!((other.total, other.trials[0].steps.len()), (7, 1));
}
