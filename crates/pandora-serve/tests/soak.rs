//! The soak test of issue 26: 8 clients at once, each running 50 ask/tell pairs over real HTTP
//! against `pandora serve` on a free loopback port, on SQLite and on PostgreSQL.
//!
//! Checks: no trial is handed out twice and none is lost (the 400 numbers are exactly 0..400, all
//! complete), the budget holds (`max_trials = 400`: every client's next ask is `finished`), every
//! tell is accepted, and no response is a 5xx. The study stays in its initial design (a random
//! design needs no model fit), so the test measures the server and the storage's lock, and takes
//! a few seconds. It prints the latency median and 95th percentile of asks and tells (never
//! asserted: times depend on the machine; docs/serve.md records a run).
//!
//! The PostgreSQL run needs `PANDORA_TEST_POSTGRES_URL` at build time (see build.rs; ignored
//! otherwise) and works in a schema of its own, dropped at the end.

use pandora_serve::Options;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENTS: usize = 8;
const PAIRS: usize = 50;
const TRIALS: usize = CLIENTS * PAIRS;

/// One HTTP/1.1 exchange on a new connection (`Connection: close`): the status and the body.
async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    let (headers, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers: {reply:?}"));
    assert!(
        !headers.to_ascii_lowercase().contains("transfer-encoding"),
        "{headers}"
    );
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {headers}"));
    (status, body.to_string())
}

#[derive(Debug, Deserialize)]
struct Asked {
    number: Option<u64>,
    params: Option<Params>,
    finished: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Params {
    x: f64,
}

#[derive(Debug, Deserialize)]
struct Status {
    status: Summary,
}

#[derive(Debug, Deserialize)]
struct Summary {
    complete: usize,
    running: usize,
    failed: usize,
    total_cost: f64,
}

#[derive(Debug, Deserialize)]
struct Told {
    trial: TrialOut,
}

#[derive(Debug, Deserialize)]
struct TrialOut {
    number: u64,
    state: String,
}

/// What one client saw: the trials it was handed, its latencies, and every non-200 answer.
#[derive(Debug, Default)]
struct Seen {
    numbers: Vec<u64>,
    ask_ms: Vec<f64>,
    tell_ms: Vec<f64>,
    refused: Vec<String>,
}

/// `PAIRS` ask/tell pairs as worker `c{k}`.
async fn client(addr: SocketAddr, k: usize) -> Seen {
    let mut seen = Seen::default();
    let worker = format!(r#"{{"worker": "c{k}"}}"#);
    for _ in 0..PAIRS {
        let t0 = Instant::now();
        let (status, body) = request(addr, "POST", "/api/studies/soak/ask", &worker).await;
        seen.ask_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        if status != 200 {
            seen.refused.push(format!("ask: {status} {body}"));
            continue;
        }
        let asked: Asked = serde_json::from_str(&body).unwrap();
        let (Some(n), Some(p)) = (asked.number, asked.params) else {
            seen.refused.push(format!("ask: no trial: {body}"));
            continue;
        };
        seen.numbers.push(n);
        let y = (p.x - 0.3).powi(2);
        let tell = format!(r#"{{"objective": {y}, "cost": 1.0}}"#);
        let path = format!("/api/studies/soak/trials/{n}/tell");
        let t0 = Instant::now();
        let (status, body) = request(addr, "POST", &path, &tell).await;
        seen.tell_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        let told: Option<Told> = serde_json::from_str(&body).ok();
        let ok = told.is_some_and(|t| t.trial.number == n && t.trial.state == "complete");
        if status != 200 || !ok {
            seen.refused.push(format!("tell {n}: {status} {body}"));
        }
    }
    seen
}

/// The median and 95th percentile (nearest rank) of `v`, in ms.
fn median_p95(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (rank(0.5), rank(0.95))
}

/// Runs the soak against a server on `storage_url` and checks everything the module docs list.
async fn soak(storage_url: String, label: &str) {
    let mut opts = Options::new(storage_url);
    // The soak is about correctness under concurrency, not the rate limits.
    opts.rate_per_second = 1e9;
    opts.rate_burst = u32::MAX;
    opts.client_rate_per_second = 1e9;
    opts.client_rate_burst = u32::MAX;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(pandora_serve::serve(
        opts,
        "127.0.0.1:0".parse().unwrap(),
        async move {
            let _ = stopped.await;
        },
        move |a| {
            let _ = addr_tx.send(a);
        },
    ));
    let addr = addr_rx.await.unwrap();
    let config = format!(
        r#"{{"study": {{"name": "soak", "direction": "minimize"}},
            "objective": {{"kind": "external"}},
            "space": [{{"name": "x", "type": "float", "low": 0.0, "high": 1.0}}],
            "cost": {{"kind": "reported"}},
            "budget": {{"max_trials": {TRIALS}}},
            "policy": {{"initial_design": {TRIALS}}}}}"#
    );
    let (status, body) = request(addr, "POST", "/api/studies", &config).await;
    assert_eq!(status, 201, "{body}");

    let start = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|k| tokio::spawn(client(addr, k)))
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.unwrap());
    }
    let wall = start.elapsed();

    let refused: Vec<&String> = all.iter().flat_map(|s| &s.refused).collect();
    assert!(refused.is_empty(), "refused or wrong answers: {refused:?}");
    let numbers: Vec<u64> = all.iter().flat_map(|s| s.numbers.iter().copied()).collect();
    let distinct: BTreeSet<u64> = numbers.iter().copied().collect();
    assert_eq!(numbers.len(), TRIALS, "asks that handed out a trial");
    assert_eq!(distinct.len(), TRIALS, "a trial was handed out twice");
    assert_eq!(
        distinct,
        (0..TRIALS as u64).collect(),
        "numbers 0..{TRIALS}"
    );
    // The budget holds: every further ask, from every client at once, is finished.
    let extra: Vec<_> = (0..CLIENTS)
        .map(|k| {
            tokio::spawn(async move {
                let w = format!(r#"{{"worker": "late{k}"}}"#);
                request(addr, "POST", "/api/studies/soak/ask", &w).await
            })
        })
        .collect();
    for t in extra {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200, "{body}");
        let a: Asked = serde_json::from_str(&body).unwrap();
        assert!(a.number.is_none() && a.finished.is_some(), "{body}");
    }
    let (status, body) = request(addr, "GET", "/api/studies/soak", "").await;
    assert_eq!(status, 200, "{body}");
    let st: Status = serde_json::from_str(&body).unwrap();
    let s = st.status;
    assert_eq!((s.complete, s.running, s.failed), (TRIALS, 0, 0), "{body}");
    assert!((s.total_cost - TRIALS as f64).abs() < 1e-9, "{body}");

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    let (ask_med, ask_p95) = median_p95(all.iter().flat_map(|s| s.ask_ms.clone()).collect());
    let (tell_med, tell_p95) = median_p95(all.iter().flat_map(|s| s.tell_ms.clone()).collect());
    eprintln!(
        "soak on {label}: {CLIENTS} clients x {PAIRS} ask/tell pairs in {:.2} s \
         ({:.0} requests/s); ask median {ask_med:.1} ms, p95 {ask_p95:.1} ms; \
         tell median {tell_med:.1} ms, p95 {tell_p95:.1} ms",
        wall.as_secs_f64(),
        (2 * TRIALS) as f64 / wall.as_secs_f64().max(1e-9),
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn soak_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("soak.db").display());
    runtime().block_on(soak(url, "sqlite"));
}

#[test]
#[cfg_attr(not(pandora_postgres), ignore = "set PANDORA_TEST_POSTGRES_URL to run")]
fn soak_postgres() {
    const ENV: &str = "PANDORA_TEST_POSTGRES_URL";
    let Some(base) = std::env::var(ENV).ok().filter(|s| !s.is_empty()) else {
        panic!("soak_postgres: {ENV} is not set: this test needs a PostgreSQL server");
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let schema = format!("t_serve_soak_{}_{nanos}", std::process::id());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={schema}");
    // The schema is dropped whether the soak passes or not.
    let outcome = std::panic::catch_unwind(|| runtime().block_on(soak(url, "postgresql")));
    if let Ok(mut c) = postgres::Client::connect(&base, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}
