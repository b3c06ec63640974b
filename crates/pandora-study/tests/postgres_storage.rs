//! The PostgreSQL backend of `Storage`: the same contract as the SQLite backend (round trips,
//! atomicity, validation, concurrency, migrations), against a real server.
//!
//! These tests run when `PANDORA_TEST_POSTGRES_URL` names a database the tests may create schemas
//! in (e.g. `postgresql://pandora:pw@127.0.0.1:5432/pandora_test`; `.ci/run` starts one); without
//! it at build time they are ignored (reported as `ignored`, see build.rs). Every test works in its own freshly created
//! schema (`?schema=...`), dropped at the end.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use pandora_core::policy::Phase;
use pandora_core::run::record::DecisionRecord;
use pandora_study::storage::Storage;
use pandora_study::storage::postgres::{PostgresStorage, SCHEMA_VERSION};
use pandora_study::trial::{Ask, Decided};
use pandora_study::{Error, Finished, NewTrial, Outcome, Trial, TrialState};
use serde_json::{Value, json};

#[path = "common/pages.rs"]
mod pages;
#[path = "common/steps.rs"]
mod steps;

const ENV: &str = "PANDORA_TEST_POSTGRES_URL";

/// A schema of its own for one test, dropped (with everything in it) when the guard goes.
struct TestSchema {
    base: String,
    schema: String,
}

impl TestSchema {
    /// A fresh schema name on the server of `PANDORA_TEST_POSTGRES_URL`. The tests that call
    /// this are `#[ignore]`d unless the variable was set at build time (`cfg(pandora_postgres)`,
    /// see build.rs); run with `--ignored` but without the variable, they fail here instead of
    /// passing without having run.
    fn new(test: &str) -> Self {
        let Some(base) = std::env::var(ENV).ok().filter(|s| !s.is_empty()) else {
            panic!("{test}: {ENV} is not set: this test needs a PostgreSQL server (see README.md)");
        };
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!(
            "t_{test}_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        assert!(schema.len() <= 63, "schema name too long: {schema}");
        Self { base, schema }
    }

    /// The storage URL of this schema.
    fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.base, self.schema)
    }

    fn open(&self) -> PostgresStorage {
        PostgresStorage::open_url(&self.url()).expect("open the test schema")
    }

    /// A plain connection with `search_path` set to the schema.
    fn raw(&self) -> postgres::Client {
        let mut c = postgres::Client::connect(&self.base, postgres::NoTls).expect("raw connect");
        c.batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .unwrap();
        c
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

/// A `decide` that proposes `x = [n / 1000]` (n = number of trials seen) and counts its calls in
/// the study state.
fn counting_decide(trials: &[Trial], state: &Value) -> pandora_study::Result<Decided> {
    let n = trials.len();
    let calls = state.get("calls").and_then(Value::as_u64).unwrap_or(0);
    Ok(Decided::Trial(
        NewTrial {
            params: json!({ "n": n }),
            x: vec![n as f64 / 1000.0],
            decision: seen(n),
            step_to: None,
        },
        json!({ "calls": calls + 1 }),
    ))
}

/// A decision record marked with `n` (its `pending` count).
fn seen(n: usize) -> DecisionRecord {
    DecisionRecord {
        pending: n,
        ..DecisionRecord::new(Phase::InitialDesign, "test")
    }
}

/// The trial of an ask that must hand one out.
fn trial(a: Ask) -> Trial {
    match a {
        Ask::Trial(t) => *t,
        Ask::Finished(f) => panic!("finished: {f}"),
    }
}

fn ask(s: &mut PostgresStorage, study: &str, worker: &str) -> Trial {
    trial(
        s.ask_with(study, worker, &mut counting_decide)
            .expect("ask"),
    )
}

fn study_state(s: &mut PostgresStorage, study: &str) -> Value {
    let mut seen = None;
    // Read the state through ask_with's view, then roll back with an error.
    let r = s.ask_with(study, "probe", &mut |_, state| {
        seen = Some(state.clone());
        Err(Error::invalid("probe", "rollback"))
    });
    assert!(matches!(r, Err(Error::Invalid { .. })));
    seen.expect("decide was called")
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn round_trip_of_every_field_survives_reopening() {
    let db = TestSchema::new("roundtrip");
    let (a, b, c);
    {
        let mut s = db.open();
        assert_eq!(
            s.open_study("demo", r#"{"budget": 10.5}"#).unwrap(),
            r#"{"budget": 10.5}"#
        );
        a = trial(
            s.ask_with("demo", "w-a", &mut |trials, state| {
                assert!(trials.is_empty());
                assert_eq!(state, &Value::Null);
                Ok(Decided::Trial(
                    NewTrial {
                        params: json!({"lr": 0.1, "layers": 3, "act": "relu"}),
                        x: vec![0.1, 0.123_456_789_012_345_67, 1.0 / 3.0],
                        decision: DecisionRecord::new(Phase::InitialDesign, "test"),
                        step_to: None,
                    },
                    json!({"lambda": 0.25}),
                ))
            })
            .unwrap(),
        );
        assert_eq!(a.created_at, a.heartbeat_at);
        b = ask(&mut s, "demo", "w-b");
        c = ask(&mut s, "demo", "w-c");
        assert_eq!((a.number, b.number, c.number), (0, 1, 2));
        let a_told = s
            .tell(
                "demo",
                0,
                &Outcome::Complete {
                    objective: -1.234_567_890_123_456_7e-3,
                    cost: 2.5,
                },
            )
            .unwrap();
        assert_eq!(a_told.state, TrialState::Complete);
        assert_eq!(a_told.objective, Some(-1.234_567_890_123_456_7e-3));
        let b_told = s
            .tell(
                "demo",
                1,
                &Outcome::Failed {
                    reason: "exit status 1\nstderr: boom".into(),
                    cost: Some(0.0),
                },
            )
            .unwrap();
        assert_eq!(b_told.state, TrialState::Failed);
        assert_eq!(s.trials("demo").unwrap(), vec![a_told, b_told, c.clone()]);
    }
    let mut s = db.open();
    // The stored config wins over a new one.
    assert_eq!(
        s.open_study("demo", r#"{"budget": 99}"#).unwrap(),
        r#"{"budget": 10.5}"#
    );
    assert_eq!(s.studies().unwrap(), vec!["demo".to_owned()]);
    let trials = s.trials("demo").unwrap();
    assert_eq!(trials.len(), 3);

    let t0 = &trials[0];
    assert_eq!(t0.number, 0);
    assert_eq!(t0.state, TrialState::Complete);
    assert_eq!(t0.params, a.params);
    assert_eq!(t0.x, a.x, "f64 coordinates round-trip bit for bit");
    assert_eq!(t0.objective, Some(-1.234_567_890_123_456_7e-3));
    assert_eq!(t0.cost, Some(2.5));
    assert_eq!(t0.worker.as_deref(), Some("w-a"));
    assert_eq!(t0.created_at, a.created_at);
    assert_eq!(t0.heartbeat_at, a.heartbeat_at);
    assert!(t0.finished_at.unwrap() >= t0.created_at);
    assert_eq!(
        t0.decision,
        DecisionRecord::new(Phase::InitialDesign, "test")
    );
    assert_eq!(t0.error, None);
    // Server time, in Unix seconds: close to this machine's clock.
    assert!((t0.created_at - pandora_study::storage::now()).abs() < 600.0);

    let t1 = &trials[1];
    assert_eq!(t1.state, TrialState::Failed);
    assert_eq!(t1.objective, None);
    assert_eq!(t1.cost, Some(0.0));
    assert_eq!(t1.error.as_deref(), Some("exit status 1\nstderr: boom"));
    assert_eq!(t1.worker.as_deref(), Some("w-b"));
    assert!(t1.finished_at.is_some());

    let t2 = &trials[2];
    assert_eq!(t2, &c);
    assert_eq!(t2.state, TrialState::Running);
    assert_eq!((t2.objective, t2.cost, t2.finished_at), (None, None, None));

    // The study state survived too (two counting asks after the explicit λ state).
    assert_eq!(study_state(&mut s, "demo"), json!({"calls": 2}));
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(s.schema(), db.schema);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn ask_numbers_trials_and_passes_the_state() {
    let db = TestSchema::new("numbering");
    let mut s = db.open();
    s.open_study("a", "{}").unwrap();
    s.open_study("B", "{}").unwrap();
    for i in 0..5u64 {
        let t = ask(&mut s, "a", "w");
        assert_eq!(t.number, i);
        assert_eq!(t.decision, seen(i as usize));
    }
    // Numbering is per study.
    assert_eq!(ask(&mut s, "B", "w").number, 0);
    assert_eq!(study_state(&mut s, "a"), json!({"calls": 5}));
    assert_eq!(study_state(&mut s, "B"), json!({"calls": 1}));
    // Byte order, as in SQLite, whatever the database's collation.
    assert_eq!(s.studies().unwrap(), vec!["B", "a"]);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn decide_error_rolls_back() {
    let db = TestSchema::new("rollback");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    ask(&mut s, "s", "w");
    let before = s.trials("s").unwrap();
    let r = s.ask_with("s", "w", &mut |_, _| {
        Err(Error::invalid("space", "nothing left to propose"))
    });
    match r {
        Err(Error::Invalid { what, .. }) => assert_eq!(what, "space"),
        other => panic!("expected decide's error, got {other:?}"),
    }
    assert_eq!(s.trials("s").unwrap(), before);
    assert_eq!(study_state(&mut s, "s"), json!({"calls": 1}));
    // A non-finite coordinate from decide is refused the same way.
    let r = s.ask_with("s", "w", &mut |_, _| {
        Ok(Decided::Trial(
            NewTrial {
                params: json!({}),
                x: vec![0.5, f64::NAN],
                decision: DecisionRecord::new(Phase::InitialDesign, "test"),
                step_to: None,
            },
            json!("changed"),
        ))
    });
    match r {
        Err(Error::Invalid { what, .. }) => assert_eq!(what, "x[1]"),
        other => panic!("expected a NaN error, got {other:?}"),
    }
    assert_eq!(s.trials("s").unwrap(), before);
    assert_eq!(study_state(&mut s, "s"), json!({"calls": 1}));
    // The next ask continues the numbering, and the connection is still usable.
    assert_eq!(ask(&mut s, "s", "w").number, 1);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn unknown_study_and_trial_are_not_found() {
    let db = TestSchema::new("notfound");
    let mut s = db.open();
    assert!(matches!(
        s.ask_with("nope", "w", &mut counting_decide),
        Err(Error::NotFound(_))
    ));
    assert!(matches!(s.trials("nope"), Err(Error::NotFound(_))));
    assert!(matches!(s.heartbeat("nope", 0), Err(Error::NotFound(_))));
    assert!(matches!(
        s.abandon_stale("nope", 1.0),
        Err(Error::NotFound(_))
    ));
    let ok = Outcome::Complete {
        objective: 1.0,
        cost: 1.0,
    };
    assert!(matches!(s.tell("nope", 0, &ok), Err(Error::NotFound(_))));
    assert_eq!(s.study_config("nope").unwrap(), None);
    s.open_study("s", "{}").unwrap();
    assert!(matches!(s.tell("s", 0, &ok), Err(Error::NotFound(_))));
    assert!(matches!(s.heartbeat("s", 3), Err(Error::NotFound(_))));
    assert!(s.trials("s").unwrap().is_empty());
    assert!(s.abandon_stale("s", 0.0).unwrap().is_empty());
    assert!(matches!(
        s.open_study("bad", "{not json"),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(s.open_study("", "{}"), Err(Error::Invalid { .. })));
    assert!(matches!(
        s.open_study("nul\0name", "{}"),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        s.tell("s", u64::MAX, &ok),
        Err(Error::Invalid { .. })
    ));
    assert_eq!(s.studies().unwrap(), vec!["s"]);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn invalid_outcomes_and_second_tells_change_nothing() {
    let db = TestSchema::new("invalid");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    ask(&mut s, "s", "w");
    let before = s.trials("s").unwrap();
    let bad = [
        (
            Outcome::Complete {
                objective: f64::NAN,
                cost: 1.0,
            },
            "objective",
        ),
        (
            Outcome::Complete {
                objective: f64::INFINITY,
                cost: 1.0,
            },
            "objective",
        ),
        (
            Outcome::Complete {
                objective: 1.0,
                cost: 0.0,
            },
            "cost",
        ),
        (
            Outcome::Complete {
                objective: 1.0,
                cost: -2.0,
            },
            "cost",
        ),
        (
            Outcome::Complete {
                objective: 1.0,
                cost: f64::NAN,
            },
            "cost",
        ),
        (
            Outcome::Failed {
                reason: "x".into(),
                cost: Some(-0.5),
            },
            "cost",
        ),
        (
            Outcome::Failed {
                reason: "x".into(),
                cost: Some(f64::NAN),
            },
            "cost",
        ),
    ];
    for (outcome, field) in &bad {
        match s.tell("s", 0, outcome) {
            Err(Error::Invalid { what, .. }) => assert_eq!(&what, field, "{outcome:?}"),
            other => panic!("{outcome:?} should be refused, got {other:?}"),
        }
        assert_eq!(s.trials("s").unwrap(), before);
    }
    assert!(matches!(
        s.abandon_stale("s", f64::NAN),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        s.abandon_stale("s", -1.0),
        Err(Error::Invalid { .. })
    ));

    let done = s
        .tell(
            "s",
            0,
            &Outcome::Complete {
                objective: 3.0,
                cost: 1.5,
            },
        )
        .unwrap();
    let after = s.trials("s").unwrap();
    assert_eq!(after, vec![done]);
    for again in [
        Outcome::Complete {
            objective: 4.0,
            cost: 1.0,
        },
        Outcome::Failed {
            reason: "late".into(),
            cost: None,
        },
    ] {
        match s.tell("s", 0, &again) {
            Err(Error::Invalid { reason, .. }) => assert!(reason.contains("already complete")),
            other => panic!("a second tell must fail, got {other:?}"),
        }
        assert_eq!(s.trials("s").unwrap(), after);
    }
    // A failed trial cannot be told either; a NUL in the reason is stored as U+FFFD.
    ask(&mut s, "s", "w");
    let failed = s
        .tell(
            "s",
            1,
            &Outcome::Failed {
                reason: "oom\0".into(),
                cost: None,
            },
        )
        .unwrap();
    assert_eq!(failed.error.as_deref(), Some("oom\u{fffd}"));
    let after = s.trials("s").unwrap();
    match s.tell(
        "s",
        1,
        &Outcome::Complete {
            objective: 1.0,
            cost: 1.0,
        },
    ) {
        Err(Error::Invalid { reason, .. }) => assert!(reason.contains("already failed")),
        other => panic!("telling a failed trial must fail, got {other:?}"),
    }
    assert_eq!(s.trials("s").unwrap(), after);
    assert_eq!(after[1].cost, None);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn abandon_stale_marks_only_stale_running_trials_and_heartbeat_refreshes() {
    let db = TestSchema::new("abandon");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    s.open_study("other", "{}").unwrap();
    for _ in 0..4 {
        ask(&mut s, "s", "w");
    }
    ask(&mut s, "other", "w");
    s.tell(
        "s",
        2,
        &Outcome::Complete {
            objective: 0.0,
            cost: 1.0,
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let hb_before = s.trials("s").unwrap()[1].heartbeat_at;
    s.heartbeat("s", 1).unwrap();
    let hb_after = s.trials("s").unwrap()[1].heartbeat_at;
    assert!(hb_after > hb_before);
    // Nothing is older than an hour.
    assert!(s.abandon_stale("s", 3600.0).unwrap().is_empty());
    // Trials 0 and 3 are stale; 1 was refreshed; 2 is complete; the other study is untouched.
    assert_eq!(s.abandon_stale("s", 0.2).unwrap(), vec![0, 3]);
    let trials = s.trials("s").unwrap();
    let states: Vec<_> = trials.iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [
            TrialState::Abandoned,
            TrialState::Running,
            TrialState::Complete,
            TrialState::Abandoned
        ]
    );
    assert!(trials[0].error.as_deref().unwrap().contains("abandoned"));
    assert_eq!(s.trials("other").unwrap()[0].state, TrialState::Running);
    // Already abandoned trials are not reported twice.
    assert!(s.abandon_stale("s", 0.2).unwrap().is_empty());
    // An abandoned trial no longer takes heartbeats...
    assert!(matches!(s.heartbeat("s", 0), Err(Error::Invalid { .. })));
    assert_eq!(s.trials("s").unwrap(), trials);
    // ...but a late outcome is recorded (the evaluation was paid for), and said to be late,
    // while the outcome of a trial still running is not.
    let on_time = s
        .tell_outcome(
            "s",
            1,
            &Outcome::Failed {
                reason: "x".into(),
                cost: None,
            },
        )
        .unwrap();
    assert!(!on_time.late);
    let told = s
        .tell_outcome(
            "s",
            3,
            &Outcome::Complete {
                objective: 7.0,
                cost: 2.0,
            },
        )
        .unwrap();
    assert!(told.late);
    let late = told.trial;
    assert_eq!(late.state, TrialState::Complete);
    assert_eq!(late.error, None);
    assert_eq!(s.trials("s").unwrap()[3], late);
    // The change is durable: another connection sees it.
    drop(s);
    let mut s = db.open();
    assert_eq!(s.trials("s").unwrap()[3], late);
    // A complete trial does not take heartbeats either.
    assert!(matches!(s.heartbeat("s", 3), Err(Error::Invalid { .. })));
}

/// The cost of trial `n` in the budget test, known when it is proposed.
fn trial_cost(n: usize) -> f64 {
    1.0 + 0.5 * (n % 4) as f64
}

/// Workers on separate connections: distinct trials, every tell stored, each decision sees every
/// earlier trial, and a budget counted over complete and pending trials is never exceeded.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn concurrent_workers_get_distinct_trials_and_respect_the_budget() {
    const THREADS: usize = 4;
    const ASKS: usize = 50;
    const BUDGET: f64 = 250.0;
    let db = TestSchema::new("concurrent");
    let url = db.url();
    // Every worker opens the (not yet existing) schema itself: concurrent opens and migrations
    // must also be safe.
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|w| {
            let url = url.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut s = PostgresStorage::open_url(&url).expect("open");
                s.open_study("s", r#"{"shared": true}"#)
                    .expect("open_study");
                let worker = format!("w{w}");
                let mut mine = Vec::new();
                let mut refused = false;
                for _ in 0..ASKS {
                    let r = s.ask_with("s", &worker, &mut |trials, state| {
                        // Each decision sees every earlier trial, pending or not.
                        assert_eq!(state["calls"].as_u64().unwrap_or(0), trials.len() as u64);
                        // The budget counts the cost of evaluated trials and the known cost of
                        // pending ones; refuse a trial that would not fit.
                        let spent: f64 = trials
                            .iter()
                            .map(|t| match t.state {
                                TrialState::Running => t.decision.predicted_cost.unwrap(),
                                _ => t.cost.unwrap_or(0.0),
                            })
                            .sum();
                        let next = trial_cost(trials.len());
                        if spent + next > BUDGET {
                            let f = Finished::Budget {
                                spent,
                                total: BUDGET,
                            };
                            return Ok(Decided::Finished(f, None));
                        }
                        let Decided::Trial(mut new, st) = counting_decide(trials, state)? else {
                            unreachable!("counting_decide always proposes")
                        };
                        new.decision = DecisionRecord {
                            predicted_cost: Some(next),
                            ..seen(trials.len())
                        };
                        Ok(Decided::Trial(new, st))
                    });
                    let t = match r {
                        Ok(Ask::Trial(t)) => *t,
                        Ok(Ask::Finished(_)) => {
                            refused = true;
                            break;
                        }
                        Err(e) => panic!("ask: {e}"),
                    };
                    let n = t.number as usize;
                    // Every fifth trial fails (with its cost); the others complete.
                    let outcome = if n % 5 == 4 {
                        Outcome::Failed {
                            reason: format!("trial {n} failed"),
                            cost: Some(trial_cost(n)),
                        }
                    } else {
                        Outcome::Complete {
                            objective: n as f64 * 0.5,
                            cost: trial_cost(n),
                        }
                    };
                    let told = s.tell("s", t.number, &outcome).expect("tell");
                    assert_eq!(told.worker.as_deref(), Some(worker.as_str()));
                    mine.push(t.number);
                }
                (mine, refused)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut refusals = 0;
    for h in handles {
        let (mine, refused) = h.join().expect("worker panicked");
        all.extend(mine);
        refusals += usize::from(refused);
    }
    // Independently: the largest n with cost(0) + ... + cost(n - 1) <= BUDGET.
    let mut expected = 0;
    let mut total = 0.0;
    while total + trial_cost(expected) <= BUDGET {
        total += trial_cost(expected);
        expected += 1;
    }
    assert_eq!(expected, 143);
    assert!(expected < THREADS * ASKS, "the budget must bind");
    assert!(refusals >= 1);

    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(all.len(), expected, "no trial handed out twice");
    assert_eq!(distinct, (0..expected as u64).collect::<BTreeSet<_>>());

    let mut s = PostgresStorage::open_url(&url).unwrap();
    let trials = s.trials("s").unwrap();
    assert_eq!(trials.len(), expected);
    let mut spent = 0.0;
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t.number, i as u64);
        assert_eq!(t.x, vec![i as f64 / 1000.0]);
        assert_eq!(t.cost, Some(trial_cost(i)));
        if i % 5 == 4 {
            assert_eq!(t.state, TrialState::Failed);
            assert_eq!(
                t.error.as_deref(),
                Some(format!("trial {i} failed").as_str())
            );
        } else {
            assert_eq!(t.state, TrialState::Complete);
            assert_eq!(t.objective, Some(i as f64 * 0.5));
        }
        spent += t.cost.unwrap();
    }
    assert!(spent <= BUDGET, "spent {spent} of {BUDGET}");
    assert_eq!(spent, total);
    let workers: BTreeSet<_> = trials.iter().filter_map(|t| t.worker.clone()).collect();
    assert!(workers.len() >= 2, "{workers:?}");
    assert_eq!(study_state(&mut s, "s"), json!({"calls": expected}));
}

/// Two connections telling the same trial at once: exactly one succeeds.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn a_trial_is_told_at_most_once_under_races() {
    const ROUNDS: u64 = 10;
    let db = TestSchema::new("race");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    for _ in 0..ROUNDS {
        ask(&mut s, "s", "w");
    }
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2u32)
        .map(|k| {
            let url = db.url();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut s = PostgresStorage::open_url(&url).unwrap();
                let mut wins = Vec::new();
                for n in 0..ROUNDS {
                    barrier.wait();
                    let outcome = Outcome::Complete {
                        objective: f64::from(k),
                        cost: 1.0,
                    };
                    match s.tell("s", n, &outcome) {
                        Ok(t) => wins.push((n, t.objective.unwrap())),
                        Err(Error::Invalid { .. }) => {}
                        Err(e) => panic!("unexpected error {e}"),
                    }
                }
                wins
            })
        })
        .collect();
    let mut wins: Vec<(u64, f64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    wins.sort_by_key(|a| a.0);
    assert_eq!(
        wins.iter().map(|w| w.0).collect::<Vec<_>>(),
        (0..ROUNDS).collect::<Vec<_>>()
    );
    // What is stored is the winner's outcome.
    for (t, (_, v)) in s.trials("s").unwrap().iter().zip(&wins) {
        assert_eq!(t.objective, Some(*v));
    }
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn fresh_schema_gets_the_newest_version_and_future_versions_are_refused() {
    let db = TestSchema::new("version");
    {
        let mut s = db.open();
        assert_eq!(SCHEMA_VERSION, 2);
        assert_eq!(s.schema_version().unwrap(), 2);
    }
    // Reopening applies nothing twice.
    {
        let mut s = db.open();
        assert_eq!(s.schema_version().unwrap(), 2);
    }
    let mut raw = db.raw();
    let rows: i64 = raw
        .query_one("SELECT COUNT(*) FROM schema_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 2);
    // The tables live in the test's schema.
    let tables: i64 = raw
        .query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 \
             AND table_name IN ('studies', 'trials', 'schema_version')",
            &[&db.schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 3);
    raw.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES ($1, 0)",
        &[&(SCHEMA_VERSION as i32 + 1)],
    )
    .unwrap();
    match PostgresStorage::open_url(&db.url()) {
        Err(Error::Storage(msg)) => {
            assert!(msg.contains("newer"), "{msg}");
            assert!(msg.contains(&(SCHEMA_VERSION + 1).to_string()), "{msg}");
        }
        other => panic!("a future schema must be refused, got {other:?}"),
    }
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn schemas_isolate_studies_and_open_dispatches_postgres_urls() {
    let (a, b) = (TestSchema::new("iso_a"), TestSchema::new("iso_b"));
    let mut sa = pandora_study::storage::open(&a.url()).unwrap();
    let mut sb =
        pandora_study::storage::open(&b.url().replacen("postgresql://", "postgres://", 1)).unwrap();
    sa.open_study("s", r#"{"in": "a"}"#).unwrap();
    assert!(sb.studies().unwrap().is_empty());
    assert_eq!(sb.study_config("s").unwrap(), None);
    sb.open_study("s", r#"{"in": "b"}"#).unwrap();
    assert_eq!(
        sa.study_config("s").unwrap().as_deref(),
        Some(r#"{"in": "a"}"#)
    );
    assert_eq!(
        sb.study_config("s").unwrap().as_deref(),
        Some(r#"{"in": "b"}"#)
    );
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn study_config_reads_back_the_stored_configuration() {
    let db = TestSchema::new("config");
    let mut s = db.open();
    assert_eq!(s.study_config("s").unwrap(), None);
    s.open_study("s", r#"{"a": 1}"#).unwrap();
    assert_eq!(s.study_config("s").unwrap().as_deref(), Some(r#"{"a": 1}"#));
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn update_state_reads_and_writes_the_study_state_atomically() {
    let db = TestSchema::new("update_state");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    assert_eq!(s.update_state("s", &mut |_| Ok(None)).unwrap(), Value::Null);
    let new = serde_json::json!({"stopped": "pbgi"});
    let got = s
        .update_state("s", &mut |old| {
            assert_eq!(old, &Value::Null);
            Ok(Some(new.clone()))
        })
        .unwrap();
    assert_eq!(got, new);
    assert_eq!(study_state(&mut s, "s"), new);
    // A failing update changes nothing.
    let err = s.update_state("s", &mut |_| Err(pandora_study::Error::invalid("x", "no")));
    assert!(err.is_err());
    assert_eq!(study_state(&mut s, "s"), new);
    assert!(s.update_state("missing", &mut |_| Ok(None)).is_err());
}

#[test]
fn connection_errors_are_clear_and_never_show_the_password() {
    // Runs without a server: nothing listens on port 1.
    match PostgresStorage::open_url("postgresql://bob:Sekr1t-pw@127.0.0.1:1/db?connect_timeout=5") {
        Err(Error::Postgres(msg)) => {
            assert!(msg.contains("connecting to"), "{msg}");
            assert!(msg.contains("bob:***@127.0.0.1:1"), "{msg}");
            assert!(!msg.contains("Sekr1t"), "{msg}");
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
    for bad in [
        "postgresql://bob:Sekr1t-pw@h/db?nonsense=1",
        "postgresql://bob:Sekr1t-pw@h:notaport/db",
        "postgresql://bob:Sekr1t-pw@h/db?schema=bad-name",
        "mysql://bob:Sekr1t-pw@h/db",
    ] {
        match PostgresStorage::open_url(bad) {
            Err(Error::Invalid { what, reason }) => {
                assert_eq!(what, "storage URL");
                assert!(!reason.contains("Sekr1t"), "{reason}");
            }
            other => panic!("{bad}: expected an invalid URL error, got {other:?}"),
        }
    }
}

/// A wrong password for the real server (when it checks passwords) is a clear error without it.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn a_wrong_password_is_a_clear_error_without_the_password() {
    let db = TestSchema::new("badpw");
    let cfg: postgres::Config = db.base.parse().unwrap();
    if cfg.get_password().is_some() {
        let user = cfg.get_user().unwrap_or("postgres");
        let host = match &cfg.get_hosts()[0] {
            postgres::config::Host::Tcp(h) => h.clone(),
            #[allow(unreachable_patterns)]
            _ => return,
        };
        let port = cfg.get_ports().first().copied().unwrap_or(5432);
        let db_name = cfg.get_dbname().unwrap_or("postgres");
        let url = format!("postgresql://{user}:Wrong-Sekr1t@{host}:{port}/{db_name}");
        match PostgresStorage::open_url(&url) {
            Err(Error::Postgres(msg)) => {
                assert!(!msg.contains("Wrong-Sekr1t"), "{msg}");
                assert!(msg.contains("password"), "{msg}");
            }
            Ok(_) => eprintln!("the test server accepts any password; skipping that check"),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

/// Median latency of one ask + tell round trip (both committed) with a trivial `decide`.
/// `PANDORA_TEST_POSTGRES_URL=... cargo test --release -p pandora-study --test postgres_storage \
///  -- --ignored --nocapture time_ask_tell_round_trip`
#[test]
#[ignore = "timing report, run by hand"]
fn time_ask_tell_round_trip() {
    const N: usize = 400;
    let db = TestSchema::new("timing");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    let mut times = Vec::with_capacity(N);
    for i in 0..N {
        let start = Instant::now();
        let t = ask(&mut s, "s", "w");
        s.tell(
            "s",
            t.number,
            &Outcome::Complete {
                objective: i as f64,
                cost: 1.0,
            },
        )
        .unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let all = times.clone();
    times.sort_by(f64::total_cmp);
    let first: Vec<f64> = {
        let mut f = all[..N / 4].to_vec();
        f.sort_by(f64::total_cmp);
        f
    };
    let last: Vec<f64> = {
        let mut l = all[3 * N / 4..].to_vec();
        l.sort_by(f64::total_cmp);
        l
    };
    println!(
        "{N} ask+tell round trips on PostgreSQL: median {:.3} ms, p10 {:.3} ms, p90 {:.3} ms \
         (median of the first {} {:.3} ms, of the last {} {:.3} ms)",
        times[N / 2],
        times[N / 10],
        times[9 * N / 10],
        N / 4,
        first[first.len() / 2],
        N / 4,
        last[last.len() / 2],
    );
}

/// A study stores its configuration in the database for everyone who can read it: the storage
/// URL's password must not be in it, and loading the study by name still works.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn stored_study_configuration_has_no_password() {
    let db = TestSchema::new("redact");
    let url = db.url();
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, pw)| pw.to_string());
    let cfg = pandora_study::StudyConfig::from_toml(&format!(
        "[study]\nname = \"r\"\nstorage = \"{url}\"\n[objective]\nbuiltin = \"ackley\"\ndim = 2\n\
         [budget]\nmax_trials = 5\n"
    ))
    .unwrap();
    let study = pandora_study::Study::open(cfg.clone(), Box::new(db.open())).unwrap();
    assert_eq!(
        study.config().study.storage,
        url,
        "the live config keeps the URL"
    );
    drop(study);
    let stored = db.open().study_config("r").unwrap().unwrap();
    if let Some(pw) = password.filter(|p| !p.is_empty()) {
        assert!(!stored.contains(&pw), "the password was stored: {stored}");
        assert!(stored.contains(":***@"), "{stored}");
    }
    // Reopening with the same config (the stored URL differs) and loading by name both work.
    pandora_study::Study::open(cfg, Box::new(db.open())).unwrap();
    let loaded = pandora_study::Study::load("r", Box::new(db.open())).unwrap();
    assert_eq!(
        loaded.config().study.storage,
        pandora_study::config::redact_url(&url)
    );
    let loaded = pandora_study::Study::load_at("r", Box::new(db.open()), &url).unwrap();
    assert_eq!(loaded.config().study.storage, url);
}

/// `Outcome::CompleteAt` (cost-varying variable subsets) replaces the trial's parameters and
/// point by the realized ones, durably; an invalid point or a second tell changes nothing.
#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn complete_at_replaces_the_point_and_is_durable() {
    let db = TestSchema::new("complete_at");
    let mut s = db.open();
    s.open_study("cvs", "{}").unwrap();
    let t0 = ask(&mut s, "cvs", "w");
    let t1 = ask(&mut s, "cvs", "w");
    let bad = Outcome::CompleteAt {
        objective: 1.0,
        cost: 0.5,
        params: json!({"n": 0, "r": 0.25}),
        x: vec![0.0, f64::INFINITY],
    };
    assert!(s.tell("cvs", t0.number, &bad).is_err());
    assert_eq!(s.trials("cvs").unwrap()[0], t0);
    let good = Outcome::CompleteAt {
        objective: 1.0,
        cost: 0.5,
        params: json!({"n": 0, "r": 0.25}),
        x: vec![0.0, 0.25],
    };
    let told = s.tell("cvs", t0.number, &good).unwrap();
    assert_eq!(told.params, json!({"n": 0, "r": 0.25}));
    assert_eq!(told.x, vec![0.0, 0.25]);
    assert!(s.tell("cvs", t0.number, &good).is_err());
    let plain = s
        .tell(
            "cvs",
            t1.number,
            &Outcome::Complete {
                objective: 2.0,
                cost: 1.0,
            },
        )
        .unwrap();
    assert_eq!((plain.params, plain.x), (t1.params.clone(), t1.x.clone()));
    drop(s);
    let mut s = db.open();
    let t = &s.trials("cvs").unwrap()[0];
    assert_eq!(t.params, json!({"n": 0, "r": 0.25}));
    assert_eq!(t.x, vec![0.0, 0.25]);
    assert_eq!((t.objective, t.cost), (Some(1.0), Some(0.5)));
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn abandon_gives_up_one_running_trial_and_leaves_the_others() {
    let db = TestSchema::new("abandon_one");
    let mut s = db.open();
    s.open_study("s", "{}").unwrap();
    ask(&mut s, "s", "w");
    ask(&mut s, "s", "w");
    assert!(s.abandon("s", 1, "abandoned: stopped by SIGTERM").unwrap());
    let trials = s.trials("s").unwrap();
    assert_eq!(trials[0].state, TrialState::Running);
    assert_eq!(trials[1].state, TrialState::Abandoned);
    assert_eq!(
        trials[1].error.as_deref(),
        Some("abandoned: stopped by SIGTERM")
    );
    // Once abandoned (or told), nothing changes; a late outcome is still recorded.
    assert!(!s.abandon("s", 1, "again").unwrap());
    let ok = Outcome::Complete {
        objective: 1.0,
        cost: 1.0,
    };
    assert!(s.tell_outcome("s", 1, &ok).unwrap().late);
    assert!(!s.abandon("s", 1, "again").unwrap());
    assert_eq!(s.trials("s").unwrap()[1].state, TrialState::Complete);
    assert!(matches!(s.abandon("s", 7, "r"), Err(Error::NotFound(_))));
    assert!(matches!(s.abandon("nope", 0, "r"), Err(Error::NotFound(_))));
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn trials_with_steps_pause_resume_and_complete() {
    let db = TestSchema::new("steps");
    let mut s = db.open();
    let reopen = || -> Box<dyn Storage> { Box::new(db.open()) };
    steps::check_steps(&mut s, &reopen);
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn pages_of_trials_are_ranges_of_one_snapshot() {
    let db = TestSchema::new("pages");
    let mut s = db.open();
    pages::check_pages(&mut s);
}
