//! The SQLite backend of `Storage`: round trips, atomicity, validation, concurrency, migrations.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pandora_core::policy::Phase;
use pandora_core::run::record::DecisionRecord;
use pandora_study::storage::Storage;
use pandora_study::storage::sqlite::{SCHEMA_VERSION, SqliteStorage};
use pandora_study::trial::{Ask, Decided};
use pandora_study::{Error, NewTrial, Outcome, Trial, TrialState};
use serde_json::{Value, json};

#[path = "common/pages.rs"]
mod pages;
#[path = "common/steps.rs"]
mod steps;

/// A database file in a fresh temporary directory (kept alive by the returned guard).
fn temp_db() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("study.db").to_str().unwrap().to_owned();
    (dir, path)
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

fn ask(s: &mut SqliteStorage, study: &str, worker: &str) -> Trial {
    trial(
        s.ask_with(study, worker, &mut counting_decide)
            .expect("ask"),
    )
}

fn study_state(s: &mut SqliteStorage, study: &str) -> Value {
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
fn round_trip_of_every_field_survives_reopening() {
    let (_dir, path) = temp_db();
    let (a, b, c);
    {
        let mut s = SqliteStorage::open(&path).unwrap();
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
    let mut s = SqliteStorage::open(&path).unwrap();
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
}

#[test]
fn ask_numbers_trials_and_passes_the_state() {
    let mut s = SqliteStorage::open(":memory:").unwrap();
    s.open_study("a", "{}").unwrap();
    s.open_study("b", "{}").unwrap();
    for i in 0..5u64 {
        let t = ask(&mut s, "a", "w");
        assert_eq!(t.number, i);
        assert_eq!(t.decision, seen(i as usize));
    }
    // Numbering is per study.
    assert_eq!(ask(&mut s, "b", "w").number, 0);
    assert_eq!(study_state(&mut s, "a"), json!({"calls": 5}));
    assert_eq!(study_state(&mut s, "b"), json!({"calls": 1}));
    assert_eq!(s.studies().unwrap(), vec!["a", "b"]);
}

#[test]
fn decide_error_rolls_back() {
    let mut s = SqliteStorage::open(":memory:").unwrap();
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
    // The next ask continues the numbering.
    assert_eq!(ask(&mut s, "s", "w").number, 1);
}

#[test]
fn unknown_study_and_trial_are_not_found() {
    let mut s = SqliteStorage::open(":memory:").unwrap();
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
    s.open_study("s", "{}").unwrap();
    assert!(matches!(s.tell("s", 0, &ok), Err(Error::NotFound(_))));
    assert!(matches!(s.heartbeat("s", 3), Err(Error::NotFound(_))));
    assert!(s.trials("s").unwrap().is_empty());
    assert!(matches!(
        s.open_study("bad", "{not json"),
        Err(Error::Invalid { .. })
    ));
}

#[test]
fn invalid_outcomes_and_second_tells_change_nothing() {
    let mut s = SqliteStorage::open(":memory:").unwrap();
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
        assert!(matches!(s.tell("s", 0, &again), Err(Error::Invalid { .. })));
        assert_eq!(s.trials("s").unwrap(), after);
    }
    // A failed trial cannot be told either.
    ask(&mut s, "s", "w");
    s.tell(
        "s",
        1,
        &Outcome::Failed {
            reason: "oom".into(),
            cost: None,
        },
    )
    .unwrap();
    let after = s.trials("s").unwrap();
    assert!(
        s.tell(
            "s",
            1,
            &Outcome::Complete {
                objective: 1.0,
                cost: 1.0
            }
        )
        .is_err()
    );
    assert_eq!(s.trials("s").unwrap(), after);
    assert_eq!(after[1].cost, None);
}

#[test]
fn abandon_stale_marks_only_stale_running_trials_and_heartbeat_refreshes() {
    let (_dir, path) = temp_db();
    let mut s = SqliteStorage::open(&path).unwrap();
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
    // The change is durable.
    drop(s);
    let mut s = SqliteStorage::open(&path).unwrap();
    assert_eq!(s.trials("s").unwrap()[3], late);
}

#[test]
fn concurrent_workers_get_distinct_trials_and_every_tell_is_stored() {
    const THREADS: u64 = 4;
    const ASKS: u64 = 50;
    let (_dir, path) = temp_db();
    // Every worker opens the (not yet existing) file itself: concurrent opens and migrations
    // must also be safe.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|w| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut s = SqliteStorage::open(&path).expect("open");
                s.open_study("s", r#"{"shared": true}"#)
                    .expect("open_study");
                let worker = format!("w{w}");
                let mut mine = Vec::new();
                for _ in 0..ASKS {
                    let t = s
                        .ask_with("s", &worker, &mut |trials, state| {
                            // Each decision sees every earlier trial, pending or not.
                            let Decided::Trial(new, st) = counting_decide(trials, state)? else {
                                unreachable!("counting_decide always proposes")
                            };
                            assert_eq!(state["calls"].as_u64().unwrap_or(0), trials.len() as u64);
                            Ok(Decided::Trial(new, st))
                        })
                        .expect("ask");
                    let t = trial(t);
                    let told = s
                        .tell(
                            "s",
                            t.number,
                            &Outcome::Complete {
                                objective: t.number as f64 * 0.5,
                                cost: 1.0 + w as f64,
                            },
                        )
                        .expect("tell");
                    assert_eq!(told.worker.as_deref(), Some(worker.as_str()));
                    mine.push(t.number);
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().expect("worker panicked"));
    }
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(all.len() as u64, THREADS * ASKS);
    assert_eq!(distinct, (0..THREADS * ASKS).collect::<BTreeSet<_>>());

    let mut s = SqliteStorage::open(&path).unwrap();
    let trials = s.trials("s").unwrap();
    assert_eq!(trials.len() as u64, THREADS * ASKS);
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t.number, i as u64);
        assert_eq!(t.state, TrialState::Complete);
        assert_eq!(t.objective, Some(i as f64 * 0.5));
        assert_eq!(t.x, vec![i as f64 / 1000.0]);
        let w: f64 = t.worker.as_deref().unwrap()[1..].parse().unwrap();
        assert_eq!(t.cost, Some(1.0 + w));
    }
    assert_eq!(study_state(&mut s, "s"), json!({"calls": THREADS * ASKS}));
}

#[test]
fn fresh_database_gets_the_newest_schema_version_and_future_versions_are_refused() {
    let (_dir, path) = temp_db();
    {
        let s = SqliteStorage::open(&path).unwrap();
        assert_eq!(SCHEMA_VERSION, 2);
        assert_eq!(s.schema_version().unwrap(), 2);
    }
    // Reopening applies nothing twice.
    {
        let s = SqliteStorage::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), 2);
    }
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 2);
        conn.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?1, 0)",
            [SCHEMA_VERSION + 1],
        )
        .unwrap();
    }
    match SqliteStorage::open(&path) {
        Err(Error::Storage(msg)) => {
            assert!(msg.contains("newer"), "{msg}");
            assert!(msg.contains(&(SCHEMA_VERSION + 1).to_string()), "{msg}");
        }
        other => panic!("a future schema must be refused, got {other:?}"),
    }
}

#[test]
fn database_settings_are_applied() {
    let (_dir, path) = temp_db();
    let _s = SqliteStorage::open(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    // journal_mode=WAL is persistent in the file; the other pragmas are per connection and
    // are checked through behaviour (durability, concurrency and foreign-key tests).
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode.to_lowercase(), "wal");
}

#[test]
fn urls_are_parsed() {
    assert_eq!(
        SqliteStorage::path_of_url("sqlite:///tmp/a.db").unwrap(),
        "/tmp/a.db"
    );
    assert_eq!(
        SqliteStorage::path_of_url("sqlite://rel/a.db").unwrap(),
        "rel/a.db"
    );
    assert_eq!(SqliteStorage::path_of_url("sqlite:a.db").unwrap(), "a.db");
    assert_eq!(
        SqliteStorage::path_of_url("sqlite::memory:").unwrap(),
        ":memory:"
    );
    assert_eq!(SqliteStorage::path_of_url("plain.db").unwrap(), "plain.db");
    assert!(SqliteStorage::path_of_url("postgres://host/db").is_err());
    assert!(SqliteStorage::path_of_url("sqlite://").is_err());

    let (dir, _) = temp_db();
    let url = format!("sqlite://{}", dir.path().join("u.db").display());
    let mut s = SqliteStorage::open_url(&url).unwrap();
    s.open_study("s", "{}").unwrap();
    assert!(dir.path().join("u.db").exists());
    let mut m = SqliteStorage::open_url("sqlite::memory:").unwrap();
    assert!(m.studies().unwrap().is_empty());
}

/// Rough latency of one ask + tell round trip on a file database (both durable).
/// `cargo test --release -p pandora-study --test sqlite_storage -- --ignored --nocapture`
#[test]
#[ignore = "timing report, run by hand"]
fn time_ask_tell_round_trip() {
    const N: u64 = 200;
    let (_dir, path) = temp_db();
    let mut s = SqliteStorage::open(&path).unwrap();
    s.open_study("s", "{}").unwrap();
    let start = Instant::now();
    for i in 0..N {
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
    }
    let elapsed = start.elapsed();
    println!(
        "{N} ask+tell round trips on a file database: {:.3} s total, {:.3} ms per round trip",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / N as f64
    );
}

/// Environment variables through which [`multi_process_workers_get_distinct_trials`] hands a
/// database and a worker id to the child processes running [`child_process_worker`].
const CHILD_DB: &str = "PANDORA_SQLITE_TEST_CHILD_DB";
const CHILD_ID: &str = "PANDORA_SQLITE_TEST_CHILD_ID";
const CHILD_ASKS: u64 = 25;

/// The body of one worker process (does nothing unless started by the multi-process test).
#[test]
#[ignore = "run as a child process by multi_process_workers_get_distinct_trials"]
fn child_process_worker() {
    let (Ok(path), Ok(id)) = (std::env::var(CHILD_DB), std::env::var(CHILD_ID)) else {
        return;
    };
    let mut s = SqliteStorage::open(&path).expect("open");
    s.open_study("s", "{}").expect("open_study");
    let worker = format!("p{id}");
    for _ in 0..CHILD_ASKS {
        let t = ask(&mut s, "s", &worker);
        s.tell(
            "s",
            t.number,
            &Outcome::Complete {
                objective: t.number as f64,
                cost: 1.0,
            },
        )
        .expect("tell");
    }
}

#[test]
fn multi_process_workers_get_distinct_trials() {
    const PROCESSES: u64 = 3;
    let (_dir, path) = temp_db();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|id| {
            std::process::Command::new(&exe)
                .args(["--exact", "child_process_worker", "--ignored", "--quiet"])
                .env(CHILD_DB, &path)
                .env(CHILD_ID, id.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a worker process failed");
    }
    let mut s = SqliteStorage::open(&path).unwrap();
    let trials = s.trials("s").unwrap();
    assert_eq!(trials.len() as u64, PROCESSES * CHILD_ASKS);
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t.number, i as u64);
        assert_eq!(t.state, TrialState::Complete);
        assert_eq!(t.objective, Some(i as f64));
    }
    let workers: BTreeSet<_> = trials.iter().filter_map(|t| t.worker.clone()).collect();
    assert_eq!(workers.len() as u64, PROCESSES);
    assert_eq!(
        study_state(&mut s, "s"),
        json!({"calls": PROCESSES * CHILD_ASKS})
    );
}

#[test]
fn study_config_reads_back_the_stored_configuration() {
    let mut m = SqliteStorage::open_url("sqlite::memory:").unwrap();
    assert_eq!(m.study_config("s").unwrap(), None);
    m.open_study("s", r#"{"a": 1}"#).unwrap();
    assert_eq!(m.study_config("s").unwrap().as_deref(), Some(r#"{"a": 1}"#));
}

/// `Outcome::CompleteAt` (cost-varying variable subsets) replaces the trial's parameters and
/// point by the realized ones, durably; an invalid point or a second tell changes nothing.
#[test]
fn complete_at_replaces_the_point_and_is_durable() {
    let (_dir, path) = temp_db();
    {
        let mut s = SqliteStorage::open(&path).unwrap();
        s.open_study("cvs", "{}").unwrap();
        let t0 = ask(&mut s, "cvs", "w");
        let t1 = ask(&mut s, "cvs", "w");
        let bad = Outcome::CompleteAt {
            objective: 1.0,
            cost: 0.5,
            params: json!({"n": 0, "r": 0.25}),
            x: vec![0.0, f64::NAN],
        };
        assert!(s.tell("cvs", t0.number, &bad).is_err());
        let not_object = Outcome::CompleteAt {
            objective: 1.0,
            cost: 0.5,
            params: json!([1, 2]),
            x: vec![0.0, 0.25],
        };
        assert!(s.tell("cvs", t0.number, &not_object).is_err());
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
        assert_eq!(told.state, TrialState::Complete);
        assert!(s.tell("cvs", t0.number, &good).is_err());
        // A plain tell keeps the handed-out point.
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
        assert_eq!((plain.params, plain.x), (t1.params, t1.x));
    }
    let mut s = SqliteStorage::open(&path).unwrap();
    let t = &s.trials("cvs").unwrap()[0];
    assert_eq!(t.params, json!({"n": 0, "r": 0.25}));
    assert_eq!(t.x, vec![0.0, 0.25]);
    assert_eq!((t.objective, t.cost), (Some(1.0), Some(0.5)));
}

#[test]
fn abandon_gives_up_one_running_trial_and_leaves_the_others() {
    let mut s = SqliteStorage::open(":memory:").unwrap();
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
fn trials_with_steps_pause_resume_and_complete() {
    let (_dir, path) = temp_db();
    let mut s = SqliteStorage::open(&path).unwrap();
    let reopen = || -> Box<dyn Storage> { Box::new(SqliteStorage::open(&path).unwrap()) };
    steps::check_steps(&mut s, &reopen);
}

#[test]
fn pages_of_trials_are_ranges_of_one_snapshot() {
    let (_dir, path) = temp_db();
    let mut s = SqliteStorage::open(&path).unwrap();
    pages::check_pages(&mut s);
}

#[test]
fn a_version_1_database_is_migrated_and_keeps_its_trials() {
    let (_dir, path) = temp_db();
    {
        // The schema of release 1, with one trial.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL,
                 applied_at REAL NOT NULL);
             INSERT INTO schema_version VALUES (1, 0);
             CREATE TABLE studies (name TEXT PRIMARY KEY NOT NULL, config TEXT NOT NULL,
                 state TEXT NOT NULL, created_at REAL NOT NULL);
             CREATE TABLE trials (study TEXT NOT NULL REFERENCES studies(name),
                 number INTEGER NOT NULL, state TEXT NOT NULL, params TEXT NOT NULL,
                 x TEXT NOT NULL, objective REAL, cost REAL, worker TEXT,
                 created_at REAL NOT NULL, finished_at REAL, heartbeat_at REAL NOT NULL,
                 decision TEXT NOT NULL, error TEXT, PRIMARY KEY (study, number));
             INSERT INTO studies VALUES ('old', '{}', 'null', 0);",
        )
        .unwrap();
        let decision = serde_json::to_string(&seen(0)).unwrap();
        conn.execute(
            "INSERT INTO trials VALUES ('old', 0, 'complete', '{\"n\": 0}', '[0.5]', 1.5, 2.0, \
             'w', 0, 1, 1, ?1, NULL)",
            [decision],
        )
        .unwrap();
    }
    let mut s = SqliteStorage::open(&path).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let t = s.trials("old").unwrap().remove(0);
    assert_eq!(
        (t.state, t.objective, t.step_to),
        (TrialState::Complete, Some(1.5), None)
    );
    assert!(t.steps.is_empty());
}
