//! Studies written by the release of 2026-11-25 (commit e53a7dd) still open, report and resume.
//!
//! `tests/fixtures/v0/studies.db` was written by that release's `pandora` from the configs next to
//! it (`make_fixture.py`): PBGI-D starting from the automatic stopping λ, fixed-λ PBGI stopped by
//! its rule, B-MS-EI with reported costs, a mixed space with failed and running trials, and a
//! cost-varying-variable-subsets study. `golden/` holds what that release reported for them.

use pandora_core::run::record::{DecisionRecord, StudyState};
use pandora_study::{Ask, Study, StudyConfig, TrialState, storage};
use serde_json::Value;
use std::path::{Path, PathBuf};

const STUDIES: [&str; 5] = ["pbgi_d_auto", "pbgi_stop", "bmsei", "mixed_logei", "cvs"];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v0")
}

/// A copy of the fixture database in a fresh directory (the fixture itself is never written).
fn copy() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("studies.db");
    std::fs::copy(fixture().join("studies.db"), &db).unwrap();
    (dir, db.to_str().unwrap().to_string())
}

fn golden(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture().join("golden").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every stored decision and study state reads into the typed records and writes back to the
/// very same JSON: old studies keep their data, and their exports do not change.
#[test]
fn every_stored_record_reads_and_writes_back_unchanged() {
    let (_dir, db) = copy();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut q = conn
        .prepare("SELECT study, number, decision FROM trials")
        .unwrap();
    let rows: Vec<(String, i64, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(rows.len() > 60, "{} trials", rows.len());
    let mut kinds = std::collections::BTreeSet::new();
    for (study, number, text) in rows {
        let stored: Value = serde_json::from_str(&text).unwrap();
        let rec = DecisionRecord::from_json(stored.clone())
            .unwrap_or_else(|e| panic!("{study} trial {number}: {e}"));
        kinds.insert((
            study.clone(),
            format!("{:?}", rec.phase),
            rec.cvs().is_some(),
        ));
        assert_eq!(rec.to_json(), stored, "{study} trial {number}");
    }
    // The fixture covers what it claims: model steps of every study, CVS and non-CVS records.
    for s in STUDIES {
        let cvs = s == "cvs";
        assert!(
            kinds.contains(&(s.to_string(), "Model".into(), cvs)),
            "{s}: {kinds:?}"
        );
        assert!(
            kinds.contains(&(s.to_string(), "InitialDesign".into(), cvs)),
            "{s}"
        );
    }
    let mut q = conn.prepare("SELECT name, state FROM studies").unwrap();
    let states: Vec<(String, String)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(states.len(), STUDIES.len());
    for (name, text) in states {
        let stored: Value = serde_json::from_str(&text).unwrap();
        let state = StudyState::from_json(&stored).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(state.to_json(), stored, "{name}");
    }
}

fn open(db: &str, name: &str) -> Study {
    let text = std::fs::read_to_string(fixture().join(format!("{name}.toml"))).unwrap();
    let mut config = StudyConfig::from_toml(&text).unwrap();
    config.study.storage = format!("sqlite:{db}");
    Study::open(config, storage::open(&format!("sqlite:{db}")).unwrap()).unwrap()
}

/// The configurations were stored with every policy key of every acquisition side by side (before
/// `PolicySpec`): they still load by name alone, into the policy their TOML file gives today.
#[test]
fn stored_configs_of_the_earlier_form_load_as_their_toml_reads_today() {
    let (_dir, db) = copy();
    for name in STUDIES {
        let text = std::fs::read_to_string(fixture().join(format!("{name}.toml"))).unwrap();
        let toml = StudyConfig::from_toml(&text).unwrap();
        let url = format!("sqlite:{db}");
        let stored = Study::load(name, storage::open(&url).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(stored.config().policy, toml.policy, "{name}");
    }
}

/// The summaries (counts, costs, best trial, λ, the stopping rule's last check) are what the
/// release that wrote the studies reported.
#[test]
fn summaries_match_what_the_writing_release_reported() {
    let (_dir, db) = copy();
    for name in STUDIES {
        let mut study = open(&db, name);
        let mut now = study.summary().unwrap().to_json();
        let then = golden(&format!("{name}.status.json"));
        // Added since: why a finished study is finished, as data.
        now.as_object_mut().unwrap().remove("finished");
        // Added since: the optimizer's time per decision, which the release did not record.
        let time = now.as_object_mut().unwrap().remove("time").unwrap();
        assert_eq!(time["optimizer_s"], 0.0, "{name}");
        assert_eq!(time["optimizer_trials"], 0, "{name}");
        // Added since: trials with steps waiting to be resumed (none in these studies).
        let paused = now.as_object_mut().unwrap().remove("paused").unwrap();
        assert_eq!(paused, 0, "{name}");
        let mut then_fixed = then.clone();
        // The release reported only the stopping rule's reason; now every finish, in words.
        if let Some(r) = then["stop_reason"].as_str() {
            then_fixed["stop_reason"] = Value::from(format!("stopping rule fired: {r}"));
        }
        if now["stop_reason"].is_string() && then["stop_reason"].is_null() {
            // A budget or max_trials finish is now remembered; the release forgot it.
            then_fixed["stop_reason"] = now["stop_reason"].clone();
        }
        assert_eq!(now, then_fixed, "{name}");
    }
}

/// Every study resumes: a finished one says why (the same reason as before), the others hand out
/// a valid next trial that continues the numbering.
#[test]
fn studies_resume() {
    let (_dir, db) = copy();
    for name in STUDIES {
        let mut study = open(&db, name);
        let before = study.trials().unwrap();
        let next = golden(&format!("{name}.next.json"));
        match study.ask("resume-test").unwrap() {
            Ask::Finished(f) => {
                assert_eq!(
                    next["finished"].as_str(),
                    Some(f.to_string().as_str()),
                    "{name}"
                );
            }
            Ask::Trial(t) => {
                assert!(next["number"].is_u64(), "{name}: the release said {next}");
                assert_eq!(t.number, before.len() as u64, "{name}");
                assert_eq!(t.state, TrialState::Running);
                assert!(
                    t.x.iter().all(|v| (0.0..=1.0).contains(v)),
                    "{name}: {:?}",
                    t.x
                );
                assert_eq!(
                    t.params.as_object().unwrap().len(),
                    next["params"].as_object().unwrap().len()
                );
            }
        }
    }
}

/// The next trial of every study is the one the writing release handed out, to the last bit
/// (same machine kind: the BO step is deterministic for a given binary and CPU). Ignored by
/// default, as floating-point kernels may differ on another CPU; run it by hand after changing
/// the BO loop: `cargo test -p pandora-study --test fixture_v0 -- --ignored`.
#[test]
#[ignore = "bit-identical decisions depend on the CPU's SIMD kernels; run by hand"]
fn next_trials_are_bit_identical_to_the_writing_release() {
    let (_dir, db) = copy();
    // `mixed_logei` is left out on purpose: since mixed spaces are optimized over valid points
    // only (categoricals and ints, docs/studies.md "Mixed spaces"), its decisions differ from the
    // release's, which maximized over the relaxed cube and snapped.
    for name in STUDIES.into_iter().filter(|&n| n != "mixed_logei") {
        let mut study = open(&db, name);
        match study.ask("resume-test").unwrap() {
            Ask::Finished(f) => {
                let next = golden(&format!("{name}.next.json"));
                assert_eq!(
                    next["finished"].as_str(),
                    Some(f.to_string().as_str()),
                    "{name}"
                );
            }
            Ask::Trial(mut t) => {
                // Measured since: the decision's time, which varies from run to run.
                assert!(t.decision.seconds.take().is_some_and(|s| s >= 0.0));
                let next = golden(&format!("{name}.next.json"));
                assert_eq!(Value::from(t.number), next["number"], "{name}");
                assert_eq!(t.params, next["params"], "{name}");
                let then = golden(&format!("{name}.next_decision.json"));
                assert_eq!(t.decision.to_json(), then["decision"], "{name}");
                assert_eq!(Value::from(t.x.clone()), then["x"], "{name}");
            }
        }
    }
}
