//! The claim of a snapshot decision ([`crate::claim`]), step by step: two study handles on one
//! SQLite file decide on the same snapshot, one claims, then the other.

use super::*;
use crate::claim::PENDING_EXCLUSION_RADIUS;
use crate::storage::sqlite::SqliteStorage;

fn config(path: &str, max_trials: u64) -> StudyConfig {
    StudyConfig::from_toml(&format!(
        r#"
[study]
name = "claim"
storage = "sqlite:{path}"
decide = "snapshot"
[objective]
command = ["true"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "c"
type = "categorical"
choices = ["a", "b", "c"]
[budget]
max_trials = {max_trials}
[policy]
acquisition = "log_ei"
initial_design = 4
seed = 7
"#
    ))
    .unwrap()
}

fn handle(path: &str, max_trials: u64) -> Study {
    Study::open(
        config(path, max_trials),
        Box::new(SqliteStorage::open(path).unwrap()),
    )
    .unwrap()
}

fn tell(study: &mut Study, t: &Trial) {
    let y = -(t.x[0] - 0.3).powi(2) - t.x[2];
    let outcome = Outcome::Complete {
        objective: y,
        cost: 1.0,
    };
    study.tell(t.number, &outcome).unwrap();
}

/// Two handles past the initial design, on one file.
fn two_handles(max_trials: u64) -> (tempfile::TempDir, Study, Study) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let path = path.to_str().unwrap();
    let (mut a, b) = (handle(path, max_trials), handle(path, max_trials));
    for _ in 0..4 {
        let Ask::Trial(t) = a.ask("a").unwrap() else {
            panic!("finished early")
        };
        tell(&mut a, &t);
    }
    (dir, a, b)
}

fn trial_of(d: &Decision) -> &NewTrial {
    match &d.decided {
        Decided::Trial(t, _) => t,
        other => panic!("not a trial: {other:?}"),
    }
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(p, q)| (p - q).powi(2))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn a_lone_claim_takes_the_decision_unchanged() {
    let (_dir, mut a, _b) = two_handles(20);
    let Ask::Trial(t) = a.ask("a").unwrap() else {
        panic!("finished")
    };
    assert_eq!(t.decision.phase, Phase::Model);
    assert_eq!(a.last_ask().path, ClaimPath::Unchanged);
    assert_eq!(a.last_ask().attempts, 1);
}

#[test]
fn by_default_a_study_decides_under_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let path = path.to_str().unwrap();
    let mut cfg = config(path, 20);
    cfg.study.decide = crate::config::DecideMode::Locked;
    let text = toml::to_string(&cfg).unwrap();
    assert!(
        !text.contains("decide"),
        "the default is not written: {text}"
    );
    let mut study = Study::open(cfg, Box::new(SqliteStorage::open(path).unwrap())).unwrap();
    for _ in 0..6 {
        let Ask::Trial(t) = study.ask("a").unwrap() else {
            panic!("finished early")
        };
        assert_eq!(study.last_ask().path, ClaimPath::Locked);
        tell(&mut study, &t);
    }
}

#[test]
fn a_claim_next_to_a_point_handed_out_meanwhile_takes_a_runner_up() {
    let (_dir, mut a, mut b) = two_handles(20);
    let (snap_a, dec_a) = a.snapshot_decision("a").unwrap();
    let (snap_b, dec_b) = b.snapshot_decision("b").unwrap();
    // Same snapshot, nothing pending: the same decision, the race the claim must settle.
    assert_eq!(trial_of(&dec_a).x, trial_of(&dec_b).x);
    assert!(!dec_a.runners_up.is_empty(), "log EI keeps its runner-ups");
    for (i, r) in dec_a.runners_up.iter().enumerate() {
        assert!(distance(&r.x, &trial_of(&dec_a).x) >= PENDING_EXCLUSION_RADIUS);
        assert_eq!(r.decision.phase, Phase::Model);
        let v = r.decision.acquisition_value.unwrap();
        assert!(v <= trial_of(&dec_a).decision.acquisition_value.unwrap());
        if i > 0 {
            assert!(v <= dec_a.runners_up[i - 1].decision.acquisition_value.unwrap());
        }
    }
    let mut timing = AskTiming::default();
    let Some(Ask::Trial(tb)) = b.claim("b", &snap_b, &dec_b, &mut timing).unwrap() else {
        panic!("b's claim must succeed")
    };
    assert_eq!(timing.path, ClaimPath::Unchanged);
    let Some(Ask::Trial(ta)) = a.claim("a", &snap_a, &dec_a, &mut timing).unwrap() else {
        panic!("a's claim takes a runner-up")
    };
    assert_eq!(timing.path, ClaimPath::RunnerUp);
    assert!(distance(&ta.x, &tb.x) >= PENDING_EXCLUSION_RADIUS);
    assert_eq!((ta.number, tb.number), (5, 4));
    // Taken: the free runner-up best on a's model with b's point fantasized as pending, which
    // records that value and one more pending trial.
    let models = dec_a.models.as_ref().unwrap();
    let rescored = |x: &[f64]| {
        let v = models.rescore(CostSetting::Uniform, &tb.x, x).unwrap();
        v.unwrap()[0]
    };
    let free: Vec<&NewTrial> = (dec_a.runners_up.iter())
        .filter(|r| distance(&r.x, &tb.x) >= PENDING_EXCLUSION_RADIUS)
        .collect();
    let best = (free.iter())
        .max_by(|p, q| rescored(&p.x).total_cmp(&rescored(&q.x)))
        .unwrap();
    assert_eq!(ta.x, best.x);
    assert_eq!(ta.decision.acquisition_value, Some(rescored(&ta.x)));
    assert_eq!(ta.decision.pending, best.decision.pending + 1);
    // Here the re-scoring matters: the first free runner-up in the snapshot's order (what a
    // claim that only filters would take) lost its place to a point b's trial does not crowd.
    assert_ne!(ta.x, free[0].x);
    assert!(rescored(&free[0].x) < rescored(&ta.x));
}

#[test]
fn a_claim_next_to_a_point_handed_out_meanwhile_without_runner_ups_is_refused() {
    let (_dir, mut a, mut b) = two_handles(20);
    let (snap_a, mut dec_a) = a.snapshot_decision("a").unwrap();
    dec_a.runners_up.clear();
    let Ask::Trial(tb) = b.ask("b").unwrap() else {
        panic!("finished")
    };
    let mut timing = AskTiming::default();
    assert!(
        a.claim("a", &snap_a, &dec_a, &mut timing)
            .unwrap()
            .is_none()
    );
    assert_eq!(
        a.trials().unwrap().len(),
        5,
        "a refused claim writes nothing"
    );
    // The ask tries again on a fresh snapshot that sees b's trial as pending.
    let Ask::Trial(ta) = a.ask("a").unwrap() else {
        panic!("finished")
    };
    assert!(distance(&ta.x, &tb.x) >= PENDING_EXCLUSION_RADIUS);
    assert_eq!((ta.number, tb.number), (5, 4));
}

#[test]
fn runner_ups_taken_meanwhile_are_skipped() {
    let (_dir, mut a, mut b) = two_handles(20);
    let (snap_a, dec_a) = a.snapshot_decision("a").unwrap();
    assert!(dec_a.runners_up.len() >= 2, "{}", dec_a.runners_up.len());
    // b takes the decision's point, then (as a third worker would) its first runner-up.
    let Ask::Trial(t0) = b.ask("b").unwrap() else {
        panic!("finished")
    };
    assert_eq!(t0.x, trial_of(&dec_a).x);
    let (snap_b, mut dec_b) = b.snapshot_decision("b").unwrap();
    dec_b.decided = Decided::Trial(dec_a.runners_up[0].clone(), snap_b.state.clone());
    dec_b.runners_up.clear();
    let mut timing = AskTiming::default();
    let Some(Ask::Trial(t1)) = b.claim("b", &snap_b, &dec_b, &mut timing).unwrap() else {
        panic!("b's claim must succeed")
    };
    assert_eq!(t1.x, dec_a.runners_up[0].x);
    let Some(Ask::Trial(ta)) = a.claim("a", &snap_a, &dec_a, &mut timing).unwrap() else {
        panic!("a's claim takes a later runner-up")
    };
    assert_eq!(timing.path, ClaimPath::RunnerUp);
    for taken in [&t0, &t1] {
        assert!(distance(&ta.x, &taken.x) >= PENDING_EXCLUSION_RADIUS);
    }
    assert!(dec_a.runners_up[1..].iter().any(|r| r.x == ta.x));
}

#[test]
fn the_worker_salt_is_zero_without_pending_trials_and_differs_between_workers() {
    assert_eq!(crate::claim::worker_salt("w1", 0), 0);
    let salts: Vec<u64> = (0..16)
        .map(|i| crate::claim::worker_salt(&format!("w{i}"), 3))
        .collect();
    assert!(salts.iter().all(|&s| s != 0));
    let distinct: std::collections::HashSet<u64> = salts.iter().copied().collect();
    assert_eq!(distinct.len(), 16);
    // Fixed values: the salt is part of a stored decision's seed.
    assert_eq!(
        crate::claim::worker_salt("w1", 3),
        crate::claim::worker_salt("w1", 1)
    );
}

/// A lone worker's snapshot study decides exactly as under the lock: same points, same records
/// (but the time taken), same stored state.
#[test]
fn a_lone_snapshot_worker_decides_as_under_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let run = |mode: crate::config::DecideMode, file: &str| {
        let path = dir.path().join(file);
        let path = path.to_str().unwrap();
        let mut cfg = config(path, 10);
        cfg.study.decide = mode;
        let mut study = Study::open(cfg, Box::new(SqliteStorage::open(path).unwrap())).unwrap();
        while let Ask::Trial(t) = study.ask("w").unwrap() {
            tell(&mut study, &t);
        }
        let mut trials = study.trials().unwrap();
        for t in &mut trials {
            t.decision.seconds = None;
        }
        let trials: Vec<_> = trials
            .iter()
            .map(|t| (t.x.clone(), t.decision.clone()))
            .collect();
        let state = study.storage.snapshot("claim").unwrap().state;
        (trials, state)
    };
    let locked = run(crate::config::DecideMode::Locked, "l.db");
    let snapshot = run(crate::config::DecideMode::Snapshot, "s.db");
    assert_eq!(locked.0.len(), 10);
    assert_eq!(locked, snapshot);
}

#[test]
fn a_claim_after_a_tell_meanwhile_is_revalidated() {
    let (_dir, mut a, mut b) = two_handles(20);
    let Ask::Trial(t) = b.ask("b").unwrap() else {
        panic!("finished")
    };
    let (snap_a, dec_a) = a.snapshot_decision("a").unwrap();
    tell(&mut b, &t);
    let mut timing = AskTiming::default();
    let claimed = a.claim("a", &snap_a, &dec_a, &mut timing).unwrap();
    let Some(Ask::Trial(ta)) = claimed else {
        panic!("a's claim must succeed")
    };
    assert_eq!(timing.path, ClaimPath::Revalidated);
    assert_eq!(ta.x, trial_of(&dec_a).x);
}

#[test]
fn the_last_trial_cannot_be_claimed_twice() {
    // Four initial trials, then one left.
    let (_dir, mut a, mut b) = two_handles(5);
    let (snap_a, dec_a) = a.snapshot_decision("a").unwrap();
    let Ask::Trial(_) = b.ask("b").unwrap() else {
        panic!("b takes the last trial")
    };
    let mut timing = AskTiming::default();
    let claimed = a.claim("a", &snap_a, &dec_a, &mut timing).unwrap();
    assert!(
        matches!(claimed, Some(Ask::Finished(Finished::MaxTrials(5)))),
        "{claimed:?}"
    );
    assert_eq!(timing.path, ClaimPath::Locked);
    assert_eq!(a.trials().unwrap().len(), 5);
}

#[test]
fn a_fresh_handle_warm_starts_from_the_latest_fit() {
    let (dir, mut a, _b) = two_handles(20);
    let Ask::Trial(t) = a.ask("a").unwrap() else {
        panic!("finished")
    };
    let fitted = t
        .decision
        .params
        .clone()
        .expect("a model step records its fit");
    let path = dir.path().join("s.db");
    let mut fresh = handle(path.to_str().unwrap(), 20);
    let (snap, _) = fresh.snapshot_decision("fresh").unwrap();
    let state = StudyState::from_json(&snap.state).unwrap();
    assert_eq!(state.params, Some(fitted));
}

#[test]
fn a_point_evaluated_meanwhile_is_not_taken_again() {
    let (_dir, mut a, mut b) = two_handles(20);
    let (snap_a, dec_a) = a.snapshot_decision("a").unwrap();
    // b decides on the same trials, so on the same point, and evaluates it before a claims.
    let Ask::Trial(tb) = b.ask("b").unwrap() else {
        panic!("finished")
    };
    assert_eq!(tb.x, trial_of(&dec_a).x);
    tell(&mut b, &tb);
    let mut timing = AskTiming::default();
    match a.claim("a", &snap_a, &dec_a, &mut timing).unwrap() {
        None => {}
        Some(Ask::Trial(ta)) => {
            assert_eq!(timing.path, ClaimPath::RunnerUp);
            assert!(distance(&ta.x, &tb.x) >= PENDING_EXCLUSION_RADIUS);
        }
        Some(other) => panic!("{other:?}"),
    }
}
