//! Sixteen workers on one study with a categorical parameter, on SQLite and on PostgreSQL: each
//! a thread with its own connection and `Study` handle, looping ask → short sleep → tell. Asks
//! decide on a snapshot and claim under the lock (`pandora_study::claim`); the guarantees are
//! those of the lock-held protocol: no trial handed out twice, no two running trials closer than
//! the exclusion radius in the proposal space, `max_trials` held.

use std::time::Duration;

use pandora_study::claim::PENDING_EXCLUSION_RADIUS;
use pandora_study::{Ask, ClaimPath, Outcome, Study, StudyConfig, Trial};

const WORKERS: usize = 16;
const MAX_TRIALS: usize = 48;

fn config(storage: &str) -> StudyConfig {
    StudyConfig::from_toml(&format!(
        r#"
[study]
name = "sixteen"
storage = "{storage}"
decide = "snapshot"
[objective]
command = ["true"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "y"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "c"
type = "categorical"
choices = ["a", "b", "c"]
[budget]
max_trials = {MAX_TRIALS}
[policy]
acquisition = "log_ei"
initial_design = 4
seed = 11
"#
    ))
    .unwrap()
}

/// One worker: ask, sleep 50 to 150 ms, tell, until the study is finished. Returns the paths its
/// asks took.
fn worker(url: &str, id: usize) -> Vec<ClaimPath> {
    let storage = pandora_study::storage::open(url).unwrap();
    let mut study = Study::open(config(url), storage).unwrap();
    let mut paths = Vec::new();
    let who = format!("w{id}");
    loop {
        let Ask::Trial(t) = study.ask(&who).unwrap() else {
            return paths;
        };
        paths.push(study.last_ask().path);
        std::thread::sleep(Duration::from_millis(50 + (t.number * 7 + id as u64) % 101));
        let y = -(t.x[0] - 0.3).powi(2) - (t.x[1] - 0.6).powi(2) - 0.3 * t.x[3];
        let outcome = Outcome::Complete {
            objective: y,
            cost: 1.0,
        };
        study.tell(t.number, &outcome).unwrap();
    }
}

fn distance(a: &Trial, b: &Trial) -> f64 {
    a.x.iter()
        .zip(&b.x)
        .map(|(p, q)| (p - q).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// Pairs (j, i), j < i, where trial j was running when trial i was handed out (by the storage's
/// timestamps: created before i and finished after).
fn running_pairs(trials: &[Trial]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        for (j, u) in trials[..i].iter().enumerate() {
            if u.finished_at.is_none_or(|f| f > t.created_at) {
                pairs.push((j, i));
            }
        }
    }
    pairs
}

fn sixteen_workers(url: &str) {
    // Create the study before the workers race to open it.
    Study::open(config(url), pandora_study::storage::open(url).unwrap()).unwrap();
    let paths: Vec<ClaimPath> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|i| s.spawn(move || worker(url, i)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut study = Study::open(config(url), pandora_study::storage::open(url).unwrap()).unwrap();
    let trials = study.trials().unwrap();
    // max_trials held, numbers 0..n without gaps or repeats, every trial told once.
    assert_eq!(trials.len(), MAX_TRIALS);
    assert_eq!(paths.len(), MAX_TRIALS);
    let numbers: Vec<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..MAX_TRIALS as u64).collect::<Vec<_>>());
    assert!(trials.iter().all(|t| t.objective.is_some()));
    // No two trials running at once closer than the exclusion radius.
    let pairs = running_pairs(&trials);
    assert!(pairs.len() >= 40, "only {} overlapping pairs", pairs.len());
    for &(j, i) in &pairs {
        let d = distance(&trials[j], &trials[i]);
        assert!(
            d >= PENDING_EXCLUSION_RADIUS * (1.0 - 1e-9),
            "trial {i} handed out {d} from running trial {j}: {:?} vs {:?}",
            trials[i].x,
            trials[j].x
        );
    }
    let count = |p: ClaimPath| paths.iter().filter(|&&q| q == p).count();
    eprintln!(
        "{} overlapping pairs; paths: unchanged {} revalidated {} retried {} locked {}",
        pairs.len(),
        count(ClaimPath::Unchanged),
        count(ClaimPath::Revalidated),
        count(ClaimPath::Retried),
        count(ClaimPath::Locked)
    );
}

#[test]
fn sixteen_workers_on_a_categorical_sqlite_study() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    sixteen_workers(&format!("sqlite:{}", path.to_str().unwrap()));
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn sixteen_workers_on_a_categorical_postgres_study() {
    let base = std::env::var("PANDORA_TEST_POSTGRES_URL")
        .expect("PANDORA_TEST_POSTGRES_URL: this test needs a PostgreSQL server");
    let schema = format!("t_sixteen_{}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={schema}");
    sixteen_workers(&url);
    if let Ok(mut c) = postgres::Client::connect(&base, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }
}
