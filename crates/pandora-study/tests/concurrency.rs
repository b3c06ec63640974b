//! Sixteen worker processes on one study with a categorical parameter, on SQLite and on
//! PostgreSQL: each a process (this test binary run again as [`worker_process`]) with its own
//! connection and `Study` handle, looping ask → short sleep → tell. Asks decide on a snapshot and
//! claim under the lock (`pandora_study::claim`); the guarantees are those of the lock-held
//! protocol: no trial handed out twice, no two running trials closer than the exclusion radius
//! in the proposal space, `max_trials` held. On SQLite the study is then resumed: what is
//! replayable (docs/postgres.md) is checked.

use std::process::{Command, Stdio};
use std::time::Duration;

use pandora_study::claim::PENDING_EXCLUSION_RADIUS;
use pandora_study::{Ask, Outcome, Study, StudyConfig, Trial};

const WORKERS: usize = 16;
const MAX_TRIALS: usize = 48;
/// Set in a worker process: the storage URL and the worker's number.
const URL_ENV: &str = "PANDORA_TEST_WORKER_URL";
const ID_ENV: &str = "PANDORA_TEST_WORKER_ID";

fn config(storage: &str) -> StudyConfig {
    config_with(storage, MAX_TRIALS)
}

fn config_with(storage: &str, max_trials: usize) -> StudyConfig {
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
max_trials = {max_trials}
[policy]
acquisition = "log_ei"
initial_design = 4
seed = 11
"#
    ))
    .unwrap()
}

fn objective(t: &Trial) -> Outcome {
    Outcome::Complete {
        objective: -(t.x[0] - 0.3).powi(2) - (t.x[1] - 0.6).powi(2) - 0.3 * t.x[3],
        cost: 1.0,
    }
}

/// One worker: ask, sleep 50 to 150 ms, tell, until the study is finished. Returns the paths its
/// asks took.
fn worker(url: &str, id: usize) -> Vec<String> {
    let storage = pandora_study::storage::open(url).unwrap();
    let mut study = Study::open(config(url), storage).unwrap();
    let mut paths = Vec::new();
    let who = format!("w{id}");
    loop {
        let Ask::Trial(t) = study.ask(&who).unwrap() else {
            return paths;
        };
        paths.push(format!("{:?}", study.last_ask().path));
        std::thread::sleep(Duration::from_millis(50 + (t.number * 7 + id as u64) % 101));
        study.tell(t.number, &objective(&t)).unwrap();
    }
}

/// A worker process of the tests below: they run this test binary again with only this test
/// and the environment naming the storage and the worker. Run directly, it does nothing.
#[test]
fn worker_process() {
    let (Ok(url), Ok(id)) = (std::env::var(URL_ENV), std::env::var(ID_ENV)) else {
        return;
    };
    let paths = worker(&url, id.parse().unwrap());
    println!("PATHS {}", paths.join(" "));
}

/// Runs [`WORKERS`] worker processes on `url` and returns the paths their asks took.
fn worker_processes(url: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "worker_process",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(URL_ENV, url)
                .env(ID_ENV, i.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker process")
        })
        .collect();
    let mut paths = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "worker failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = (stdout.lines())
            .find_map(|l| l.split_once("PATHS").map(|(_, rest)| rest))
            .expect("the worker reports its paths");
        paths.extend(line.split_whitespace().map(str::to_string));
    }
    paths
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
    let paths = worker_processes(url);
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
    let count = |p: &str| paths.iter().filter(|q| *q == p).count();
    eprintln!(
        "{} overlapping pairs; paths: unchanged {} revalidated {} runner-up {} retried {} \
         locked {}",
        pairs.len(),
        count("Unchanged"),
        count("Revalidated"),
        count("RunnerUp"),
        count("Retried"),
        count("Locked")
    );
}

/// The next decisions of a resumed study, asked by `workers` in turn (a trial told before the
/// next ask when `tell` is set): points and decision records but the time taken.
fn continue_study(path: &std::path::Path, workers: &[&str], tell: bool) -> Vec<(Vec<f64>, String)> {
    let url = format!("sqlite:{}", path.to_str().unwrap());
    let storage = pandora_study::storage::open(&url).unwrap();
    let mut study = Study::open(config_with(&url, MAX_TRIALS + 4), storage).unwrap();
    let mut out = Vec::new();
    for who in workers {
        let Ask::Trial(t) = study.ask(who).unwrap() else {
            panic!("the study has trials left")
        };
        let mut decision = t.decision.clone();
        decision.seconds = None;
        out.push((t.x.clone(), format!("{decision:?}")));
        if tell {
            study.tell(t.number, &objective(&t)).unwrap();
        }
    }
    out
}

/// What is replayable after concurrent workers (docs/postgres.md): a decision is a function of
/// the stored trials and state, the configuration and, with trials pending, the worker's name.
/// So two copies of the stored study, resumed in fresh processes' handles by different workers,
/// continue alike while nothing is pending, and alike again with trials pending for the same
/// worker names; and a resumed ask decides exactly what `Study::decide_on` gives on the stored
/// records.
fn resumed_copies_continue_alike(dir: &std::path::Path) {
    let (a, b) = (dir.join("s.db"), dir.join("copy.db"));
    std::fs::copy(&a, &b).unwrap();
    let url = format!("sqlite:{}", a.to_str().unwrap());
    let study = Study::open(
        config_with(&url, MAX_TRIALS + 4),
        pandora_study::storage::open(&url).unwrap(),
    )
    .unwrap();
    let snap = (pandora_study::storage::open(&url).unwrap())
        .snapshot("sixteen")
        .unwrap();
    let expected = study.decide_on(&snap.trials, &snap.state).unwrap();
    let pandora_study::trial::Decided::Trial(expected, _) = expected else {
        panic!("a trial is left")
    };
    drop(study);
    let told_a = continue_study(&a, &["resumer", "r2"], true);
    let told_b = continue_study(&b, &["other", "o2"], true);
    assert_eq!(told_a, told_b);
    assert_eq!(told_a[0].0, expected.x);
    let pending_a = continue_study(&a, &["p", "q"], false);
    let pending_b = continue_study(&b, &["p", "q"], false);
    assert_eq!(pending_a, pending_b);
}

#[test]
fn sixteen_workers_on_a_categorical_sqlite_study() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    sixteen_workers(&format!("sqlite:{}", path.to_str().unwrap()));
    resumed_copies_continue_alike(dir.path());
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
