//! The HTTP API in process (`tower::ServiceExt::oneshot` on the router) over SQLite in a temporary
//! directory, and once on a real loopback port.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use pandora_serve::{App, Options, ROUTES, Token, router};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use tower::ServiceExt;

const TOKEN: &str = "0123456789abcdef-test-token";

/// An external study of two parameters, minimized, with reported costs and `max_trials` trials.
fn toml_config(name: &str, max_trials: u64) -> String {
    format!(
        "[study]\nname = \"{name}\"\ndirection = \"minimize\"\n[objective]\nkind = \"external\"\n\
         [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n\
         [[space]]\nname = \"opt\"\ntype = \"categorical\"\nchoices = [\"adam\", \"sgd\"]\n\
         [cost]\nkind = \"reported\"\n[budget]\nmax_trials = {max_trials}\n\
         [policy]\ninitial_design = 3\n"
    )
}

struct Server {
    router: axum::Router,
    _dir: tempfile::TempDir,
}

fn server(token: Option<&str>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let mut opts = Options::new(url);
    opts.token = token.map(|t| Token::new(t).unwrap());
    opts.max_body_bytes = 64 * 1024;
    Server {
        router: router(App::new(opts)),
        _dir: dir,
    }
}

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Reply {
    fn json<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The error's field, checking the error body's shape and status.
    fn error_field(&self) -> Option<String> {
        let e: ErrorBody = self.json();
        assert_eq!(e.error.status, self.status.as_u16());
        assert!(!e.error.message.is_empty());
        e.error.field
    }
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    status: u16,
    field: Option<String>,
    message: String,
}

async fn call(
    router: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Reply {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if let Some(c) = content_type {
        req = req.header(header::CONTENT_TYPE, c);
    }
    let resp = router
        .clone()
        .oneshot(req.body(body.into()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

async fn get(s: &Server, path: &str) -> Reply {
    call(&s.router, "GET", path, None, None, Body::empty()).await
}

async fn post_json(s: &Server, path: &str, body: &str) -> Reply {
    let ct = Some("application/json");
    call(&s.router, "POST", path, None, ct, body.to_string()).await
}

async fn create(s: &Server, toml: &str) -> Reply {
    let ct = Some("application/toml");
    call(
        &s.router,
        "POST",
        "/api/studies",
        None,
        ct,
        toml.to_string(),
    )
    .await
}

#[derive(Debug, Deserialize)]
struct Asked {
    number: Option<u64>,
    params: Option<BTreeMap<String, serde_json::Value>>,
    finished: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Created {
    name: String,
    created: bool,
}

#[derive(Debug, Deserialize)]
struct Status {
    study: String,
    storage: String,
    status: Summary,
}

#[derive(Debug, Deserialize)]
struct Summary {
    running: usize,
    complete: usize,
    failed: usize,
    total_cost: f64,
    best: Option<BestOf>,
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct BestOf {
    number: u64,
    objective: f64,
}

#[derive(Debug, Deserialize)]
struct TrialOut {
    number: u64,
    state: String,
    objective: Option<f64>,
    cost: Option<f64>,
    worker: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Told {
    trial: TrialOut,
    late: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Page {
    total: usize,
    offset: u64,
    limit: u64,
    trials: Vec<TrialOut>,
}

#[derive(Debug, Deserialize)]
struct Best {
    best: Option<TrialOut>,
}

#[derive(Debug, Deserialize)]
struct List {
    storage: String,
    studies: Vec<String>,
}

/// The objective of the tests: smallest at x = 0.3 with "adam".
fn objective(params: &BTreeMap<String, serde_json::Value>) -> f64 {
    let x = params["x"].as_f64().unwrap();
    let pen = if params["opt"] == "adam" { 0.0 } else { 0.5 };
    (x - 0.3).powi(2) + pen
}

#[tokio::test]
async fn create_then_ask_and_tell_until_the_budget_ends() {
    let s = server(None);
    let r = create(&s, &toml_config("demo", 6)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let c: Created = r.json();
    assert_eq!((c.name.as_str(), c.created), ("demo", true));
    // The same configuration again: the study is opened, as the CLI does.
    let r = create(&s, &toml_config("demo", 6)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert!(!r.json::<Created>().created);

    let mut told = 0;
    loop {
        let r = post_json(&s, "/api/studies/demo/ask", r#"{"worker": "w1"}"#).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let a: Asked = r.json();
        if let Some(f) = a.finished {
            assert!(f.contains("max_trials") || f.contains("trials"), "{f}");
            break;
        }
        let (n, params) = (a.number.unwrap(), a.params.unwrap());
        let body = format!(r#"{{"objective": {}, "cost": 2.5}}"#, objective(&params));
        let r = post_json(&s, &format!("/api/studies/demo/trials/{n}/tell"), &body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let t: Told = r.json();
        assert_eq!((t.trial.number, t.trial.state.as_str()), (n, "complete"));
        assert_eq!(t.trial.worker.as_deref(), Some("w1"));
        assert_eq!(t.late, None);
        told += 1;
        assert!(told <= 6, "more trials than max_trials");
    }
    assert_eq!(told, 6);

    let st: Status = get(&s, "/api/studies/demo").await.json();
    assert_eq!(st.study, "demo");
    assert!(st.storage.starts_with("sqlite:"));
    assert_eq!(
        (st.status.complete, st.status.running, st.status.failed),
        (6, 0, 0)
    );
    assert!((st.status.total_cost - 15.0).abs() < 1e-12);
    assert!(st.status.stop_reason.is_some());
    let best = st.status.best.unwrap();

    let b: Best = get(&s, "/api/studies/demo/best").await.json();
    let b = b.best.unwrap();
    assert_eq!((b.number, b.objective), (best.number, Some(best.objective)));
    assert_eq!(b.cost, Some(2.5));

    let p: Page = get(&s, "/api/studies/demo/trials?offset=2&limit=3")
        .await
        .json();
    assert_eq!((p.total, p.offset, p.limit), (6, 2, 3));
    let numbers: Vec<u64> = p.trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, [2, 3, 4]);
    let p: Page = get(&s, "/api/studies/demo/trials?offset=99").await.json();
    assert!(p.trials.is_empty());
    assert_eq!(p.total, 6);
    let p: Page = get(&s, &format!("/api/studies/demo/trials?offset={}", u64::MAX))
        .await
        .json();
    assert_eq!((p.total, p.trials.len()), (6, 0));
    let p: Page = get(&s, "/api/studies/demo/trials?offset=5&limit=1000")
        .await
        .json();
    assert_eq!(p.trials.iter().map(|t| t.number).collect::<Vec<_>>(), [5]);
    let one: TrialOut = get(&s, "/api/studies/demo/trials/4").await.json();
    assert_eq!(one.number, 4);
    let r = get(&s, "/api/studies/demo/trials/6").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
    assert_eq!(r.error_field().as_deref(), Some("number"));

    let csv = get(&s, "/api/studies/demo/export?format=csv").await;
    assert_eq!(csv.status, StatusCode::OK);
    assert!(
        csv.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    assert!(
        csv.headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .contains("demo.csv")
    );
    let lines: Vec<&str> = csv.body.lines().collect();
    assert_eq!(lines.len(), 7);
    assert!(lines[0].starts_with("number,state,objective,cost"));
    assert!(lines[0].ends_with("param.x,param.opt"));
    let rows: Vec<TrialOut> = get(&s, "/api/studies/demo/export").await.json();
    assert_eq!(rows.len(), 6);

    let l: List = get(&s, "/api/studies").await.json();
    assert_eq!(l.studies, ["demo"]);
    assert!(l.storage.starts_with("sqlite:"));
}

/// Eight asks at once, on a multi-threaded runtime with as many connections: each gets its own
/// trial (the ask runs under the storage's lock), and every trial is told and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_asks_never_get_the_same_trial() {
    let s = server(None);
    // All eight in the initial design: the test is about the lock, not the model.
    let cfg = toml_config("conc", 40).replace("initial_design = 3", "initial_design = 10");
    assert_eq!(create(&s, &cfg).await.status, StatusCode::CREATED);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let router = s.router.clone();
        tasks.push(tokio::spawn(async move {
            let body = format!(r#"{{"worker": "w{w}"}}"#);
            let ct = Some("application/json");
            call(&router, "POST", "/api/studies/conc/ask", None, ct, body).await
        }));
    }
    let mut numbers = BTreeSet::new();
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        let a: Asked = r.json();
        assert!(numbers.insert(a.number.unwrap()), "trial handed out twice");
    }
    assert_eq!(numbers, (0..8).collect());
    let mut tells = Vec::new();
    for n in numbers {
        let router = s.router.clone();
        tells.push(tokio::spawn(async move {
            let path = format!("/api/studies/conc/trials/{n}/tell");
            let body = r#"{"objective": 1.0, "cost": 1.0}"#;
            let ct = Some("application/json");
            call(&router, "POST", &path, None, ct, body).await.status
        }));
    }
    for t in tells {
        assert_eq!(t.await.unwrap(), StatusCode::OK);
    }
    let st: Status = get(&s, "/api/studies/conc").await.json();
    assert_eq!((st.status.complete, st.status.running), (8, 0));
}

#[tokio::test]
async fn errors_name_the_field_with_a_4xx_status() {
    let s = server(None);
    assert_eq!(
        create(&s, &toml_config("e", 5)).await.status,
        StatusCode::CREATED
    );
    let a: Asked = post_json(&s, "/api/studies/e/ask", "").await.json();
    assert_eq!(a.number, Some(0));
    let tell = "/api/studies/e/trials/0/tell";
    let unprocessable = StatusCode::UNPROCESSABLE_ENTITY;
    for (path, body, status, field) in [
        (tell, r#"{}"#, unprocessable, "objective"),
        (tell, r#"{"objective": 1.0}"#, unprocessable, "cost"),
        (
            tell,
            r#"{"objective": "high", "cost": 1}"#,
            unprocessable,
            "objective",
        ),
        (
            tell,
            r#"{"objective": 1.0, "cost": -1}"#,
            unprocessable,
            "cost",
        ),
        (
            tell,
            r#"{"objective": 1.0, "cost": 1, "failed": "x"}"#,
            unprocessable,
            "failed",
        ),
        (
            tell,
            r#"{"objective": 1.0, "cost": 1, "random": {"x": 1}}"#,
            unprocessable,
            "random",
        ),
        (
            tell,
            r#"{"objective": NaN, "cost": 1}"#,
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            tell,
            r#"{"objective": 1e999, "cost": 1}"#,
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            tell,
            r#"{"objective": 1.0, "cost": 1"#,
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (
            tell,
            r#"{"objective": 1.0, "cost": 1} x"#,
            StatusCode::BAD_REQUEST,
            "body",
        ),
        (tell, r#"{"objectiv": 1.0}"#, unprocessable, "objectiv"),
        (
            "/api/studies/e/trials/99/tell",
            r#"{"objective": 1, "cost": 1}"#,
            StatusCode::NOT_FOUND,
            "number",
        ),
        (
            "/api/studies/e/trials/abc/tell",
            r#"{"objective": 1, "cost": 1}"#,
            StatusCode::BAD_REQUEST,
            "number",
        ),
        (
            "/api/studies/nope/trials/0/tell",
            r#"{"objective": 1, "cost": 1}"#,
            StatusCode::NOT_FOUND,
            "name",
        ),
        (
            "/api/studies/e/ask",
            r#"{"worker": ""}"#,
            unprocessable,
            "worker",
        ),
        (
            "/api/studies/e/ask",
            r#"{"worker": 7}"#,
            unprocessable,
            "worker",
        ),
        (
            "/api/studies/e/ask",
            r#"{"wroker": "a"}"#,
            unprocessable,
            "wroker",
        ),
        (
            "/api/studies/nope/ask",
            r#"{}"#,
            StatusCode::NOT_FOUND,
            "name",
        ),
    ] {
        let r = post_json(&s, path, body).await;
        assert_eq!(r.status, status, "{path} {body}: {}", r.body);
        assert_eq!(
            r.error_field().as_deref(),
            Some(field),
            "{path} {body}: {}",
            r.body
        );
    }
    // None of these changed the trial; a good tell works once, and a second one is a conflict.
    let good = r#"{"objective": 0.5, "cost": 1.5}"#;
    assert_eq!(post_json(&s, tell, good).await.status, StatusCode::OK);
    let r = post_json(&s, tell, good).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.error_field().as_deref(), Some("number"));

    for (path, status, field) in [
        ("/api/studies/e/trials?limit=0", unprocessable, "limit"),
        (
            "/api/studies/e/trials?limit=ten",
            StatusCode::BAD_REQUEST,
            "limit",
        ),
        (
            "/api/studies/e/trials?page=2",
            StatusCode::BAD_REQUEST,
            "query",
        ),
        (
            "/api/studies/e/export?format=xml",
            StatusCode::BAD_REQUEST,
            "format",
        ),
        ("/api/studies/e/trials/7", StatusCode::NOT_FOUND, "number"),
        ("/api/studies/nope", StatusCode::NOT_FOUND, "name"),
        ("/api/nothing", StatusCode::NOT_FOUND, "path"),
    ] {
        let r = get(&s, path).await;
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert_eq!(
            r.error_field().as_deref(),
            Some(field),
            "{path}: {}",
            r.body
        );
    }
    let r = call(
        &s.router,
        "DELETE",
        "/api/studies",
        None,
        None,
        Body::empty(),
    )
    .await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.error_field().as_deref(), Some("method"));
}

#[tokio::test]
async fn bad_configurations_are_refused_naming_the_field() {
    let s = server(None);
    let good = toml_config("c", 5);
    let json_ct = Some("application/json");
    for (ct, body, status, field) in [
        (None, good.replace("name = \"c\"", "name = \"../etc\""), 422, "study.name"),
        (None, good.replace("name = \"c\"", "name = \"<b>x</b>\""), 422, "study.name"),
        (None, good.replace("max_trials = 5", "max_trials = \"ten\""), 422, "config"),
        (None, good.replace("kind = \"external\"", "command = [\"rm\", \"-rf\", \"/\"]"), 422, "objective.command"),
        (None, good.replace("[objective]", "storage = \"sqlite:/tmp/other.db\"\n[objective]"), 422, "study.storage"),
        (None, "[study\n".to_string(), 422, "config"),
        (json_ct, r#"{"study": {"name": "j"}, "objective": {"kind": "external"}, "budget": {"max_trials": "ten"}}"#.into(), 422, "budget.max_trials"),
        (json_ct, r#"{"study": {"name": "j"}, "objective": {"kind": "external"}}"#.into(), 422, "space"),
        (json_ct, r#"{"study": {"name": "j"},"#.into(), 400, "body"),
    ] {
        let r = call(&s.router, "POST", "/api/studies", None, ct, body.clone()).await;
        assert_eq!(r.status.as_u16(), status, "{body}: {}", r.body);
        assert_eq!(r.error_field().as_deref(), Some(field), "{body}: {}", r.body);
    }
    let l: List = get(&s, "/api/studies").await.json();
    assert!(l.studies.is_empty(), "{:?}", l.studies);
    // A JSON configuration that is right.
    let json = r#"{"study": {"name": "j", "direction": "minimize"},
        "objective": {"kind": "external"},
        "space": [{"name": "x", "type": "float", "low": 0.0, "high": 1.0}],
        "budget": {"max_trials": 3}}"#;
    let r = call(&s.router, "POST", "/api/studies", None, json_ct, json).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    // The same name with another space: refused, the study kept.
    let other = json.replace("\"high\": 1.0", "\"high\": 2.0");
    let r = call(&s.router, "POST", "/api/studies", None, json_ct, other).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    assert_eq!(r.error_field().as_deref(), Some("study"));
}

#[tokio::test]
async fn oversize_bodies_are_refused() {
    let s = server(None);
    let big = format!(
        "{}\n{}",
        toml_config("big", 5),
        "# padding\n".repeat(10_000)
    );
    let r = create(&s, &big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.body);
    assert_eq!(r.error_field().as_deref(), Some("body"));
    let l: List = get(&s, "/api/studies").await.json();
    assert!(l.studies.is_empty());
}

#[tokio::test]
async fn a_token_is_required_when_set() {
    let s = server(Some(TOKEN));
    let ct = Some("application/toml");
    let cfg = toml_config("t", 5);
    for token in [None, Some("0123456789abcdef-test-tokeN"), Some("short")] {
        let r = call(&s.router, "POST", "/api/studies", token, ct, cfg.clone()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert_eq!(r.headers[header::WWW_AUTHENTICATE], "Bearer");
        assert_eq!(r.error_field().as_deref(), Some("Authorization"));
        let r = call(&s.router, "GET", "/api/studies", token, None, Body::empty()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    }
    // Nothing was created.
    let r = call(
        &s.router,
        "GET",
        "/api/studies",
        Some(TOKEN),
        None,
        Body::empty(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.json::<List>().studies.is_empty());
    let r = call(&s.router, "POST", "/api/studies", Some(TOKEN), ct, cfg).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    // A wrong token cannot ask either: no trial is handed out.
    let r = call(
        &s.router,
        "POST",
        "/api/studies/t/ask",
        Some("wrong-token-wrong-token"),
        None,
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = call(
        &s.router,
        "GET",
        "/api/studies/t/trials",
        Some(TOKEN),
        None,
        Body::empty(),
    )
    .await;
    assert_eq!(r.json::<Page>().total, 0);
    assert_eq!(r.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
}

/// The server shows a PostgreSQL URL (its connections come from an SQLite file here): the
/// password appears in no response, not even in an error that quotes the URL.
#[tokio::test]
async fn the_storage_password_never_appears_in_a_response() {
    let dir = tempfile::tempdir().unwrap();
    let file = format!("sqlite:{}", dir.path().join("s.db").display());
    let secret = "s3cr3t-P@ss";
    let url = format!("postgresql://alice:{secret}@db.example:5432/studies");
    let open = move || pandora_study::storage::open(&file);
    let s = Server {
        router: router(App::with_opener(Options::new(url.clone()), Box::new(open))),
        _dir: tempfile::tempdir().unwrap(),
    };
    let shown = "postgresql://alice:***@db.example:5432/studies";
    let r = create(&s, &toml_config("pg", 3)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let mut bodies = vec![r.body];
    let l = get(&s, "/api/studies").await;
    assert_eq!(l.json::<List>().storage, shown);
    let st = get(&s, "/api/studies/pg").await;
    assert_eq!(st.json::<Status>().storage, shown);
    bodies.extend([l.body, st.body]);
    // A configuration naming the server's storage with the password is accepted; another
    // storage is refused with the server's URL redacted.
    let with_url =
        toml_config("pg2", 3).replace("[objective]", &format!("storage = \"{url}\"\n[objective]"));
    let r = create(&s, &with_url).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    bodies.push(r.body);
    let other = toml_config("pg3", 3).replace(
        "[objective]",
        "storage = \"postgresql://bob:other-secret@x/y\"\n[objective]",
    );
    let r = create(&s, &other).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.body.contains(shown), "{}", r.body);
    bodies.push(r.body);
    for path in [
        "/api/studies/pg2/export?format=json",
        "/api/studies/pg2/export?format=csv",
    ] {
        bodies.push(get(&s, path).await.body);
    }
    for b in &bodies {
        assert!(!b.contains(secret) && !b.contains("other-secret"), "{b}");
    }
    // The configuration stored with the study holds the redacted URL only.
    let mut storage =
        pandora_study::storage::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
            .unwrap();
    let stored = storage.study_config("pg2").unwrap().unwrap();
    assert!(!stored.contains(secret), "{stored}");
    assert!(stored.contains(shown), "{stored}");
}

#[tokio::test]
async fn the_rate_limit_refuses_with_429() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    opts.rate_per_second = 1e-6;
    opts.rate_burst = 2;
    let s = Server {
        router: router(App::new(opts)),
        _dir: dir,
    };
    assert_eq!(get(&s, "/api/studies").await.status, StatusCode::OK);
    assert_eq!(get(&s, "/api/studies").await.status, StatusCode::OK);
    let r = get(&s, "/api/studies").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers.contains_key(header::RETRY_AFTER));
}

/// `GET /api/studies` as the peer `ip` (the address the real server gives each request).
async fn get_from(s: &Server, ip: &str) -> Reply {
    let peer: std::net::SocketAddr = format!("{ip}:40000").parse().unwrap();
    let req = Request::builder()
        .uri("/api/studies")
        .extension(axum::extract::ConnectInfo(peer))
        .body(Body::empty())
        .unwrap();
    let resp = s.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Reply {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

/// One client over its own limit is refused (429 naming the client's limit) while another one
/// still gets through; the global limit still caps them all together.
#[tokio::test]
async fn a_flooding_client_is_refused_while_others_get_through() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    opts.client_rate_per_second = 1e-6;
    opts.client_rate_burst = 3;
    opts.rate_per_second = 1e-6;
    opts.rate_burst = 6;
    let s = Server {
        router: router(App::new(opts)),
        _dir: dir,
    };
    for _ in 0..3 {
        assert_eq!(get_from(&s, "10.0.0.1").await.status, StatusCode::OK);
    }
    let r = get_from(&s, "10.0.0.1").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.body);
    assert!(r.headers.contains_key(header::RETRY_AFTER));
    let e: ErrorBody = r.json();
    assert!(e.error.message.contains("this client"), "{}", r.body);
    // Another client still gets through; IPv6 hosts count by their /64.
    assert_eq!(get_from(&s, "10.0.0.2").await.status, StatusCode::OK);
    assert_eq!(get_from(&s, "[2001:db8::1]").await.status, StatusCode::OK);
    assert_eq!(get_from(&s, "[2001:db8::2]").await.status, StatusCode::OK);
    // Six requests let through in all (the refused one took no global token): the global bucket
    // is empty now, for everyone.
    let r = get_from(&s, "10.0.0.3").await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.body);
    let e: ErrorBody = r.json();
    assert!(e.error.message.contains("all clients"), "{}", r.body);
}

/// The real server counts clients by their peer address: a client on 127.0.0.2 that used up its
/// burst is refused while one on 127.0.0.1 still gets through.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_server_limits_each_peer_address() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    opts.client_rate_per_second = 1e-6;
    opts.client_rate_burst = 2;
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
    // Linux routes all of 127.0.0.0/8 to the loopback interface.
    let status_from = |ip: &'static str| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{ip}:0").parse().unwrap()).unwrap();
        let mut conn = socket.connect(addr).await.unwrap();
        conn.write_all(b"GET /api/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).await.unwrap();
        reply.split_whitespace().nth(1).unwrap_or("").to_string()
    };
    assert_eq!(status_from("127.0.0.2").await, "200");
    assert_eq!(status_from("127.0.0.2").await, "200");
    assert_eq!(status_from("127.0.0.2").await, "429");
    assert_eq!(status_from("127.0.0.1").await, "200");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// `docs/openapi.json`'s operations are exactly the router's routes, and each route of the table
/// is served with its methods (and no other).
#[tokio::test]
async fn the_openapi_description_matches_the_router() {
    #[derive(Deserialize)]
    struct OpenApi {
        openapi: String,
        paths: BTreeMap<String, BTreeMap<String, serde::de::IgnoredAny>>,
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let text = std::fs::read_to_string(path).unwrap();
    let doc: OpenApi = serde_json::from_str(&text).unwrap();
    assert!(doc.openapi.starts_with("3."));
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let documented: BTreeSet<(String, String)> = doc
        .paths
        .iter()
        .flat_map(|(p, ops)| {
            ops.keys()
                .filter(|m| METHODS.contains(&m.as_str()))
                .map(move |m| (m.to_uppercase(), p.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(documented, routed, "docs/openapi.json and ROUTES differ");

    let s = server(None);
    let concrete = |p: &str| p.replace("{name}", "nosuch").replace("{number}", "0");
    for r in ROUTES {
        let reply = call(
            &s.router,
            r.method,
            &concrete(r.path),
            None,
            None,
            Body::empty(),
        )
        .await;
        assert_ne!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{r:?}");
        assert!(
            !reply.body.contains("no route"),
            "{r:?} is not routed: {}",
            reply.body
        );
    }
    for p in ROUTES.iter().map(|r| r.path) {
        for m in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            if ROUTES.iter().any(|r| r.path == p && r.method == m) {
                continue;
            }
            let reply = call(&s.router, m, &concrete(p), None, None, Body::empty()).await;
            assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{m} {p}");
        }
    }
}

/// A real server on a free loopback port: it answers, and stops when told (graceful shutdown).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_answers_and_shuts_down() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let bind = "127.0.0.1:0".parse().unwrap();
    let server = tokio::spawn(pandora_serve::serve(
        opts,
        bind,
        async move {
            let _ = stopped.await;
        },
        move |a| {
            let _ = addr_tx.send(a);
        },
    ));
    let addr = addr_rx.await.unwrap();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /api/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("\"studies\":[]"), "{reply}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();

    // Without a token, only loopback addresses are served.
    let opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    let any = "0.0.0.0:0".parse().unwrap();
    let e = pandora_serve::serve(opts, any, async {}, |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("--token-file"), "{e}");
}

/// A request in flight when shutdown begins still gets its answer, and its effect is stored:
/// the headers and half the body of a `POST /api/studies` are sent, shutdown is triggered, then
/// the rest of the body follows; the server answers 201 and only then stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_at_shutdown_finishes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(pandora_serve::serve(
        Options::new(url.clone()),
        "127.0.0.1:0".parse().unwrap(),
        async move {
            let _ = stopped.await;
        },
        move |a| {
            let _ = addr_tx.send(a);
        },
    ));
    let addr = addr_rx.await.unwrap();
    let body = toml_config("inflight", 4);
    let (first, rest) = body.split_at(body.len() / 2);
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/studies HTTP/1.1\r\nHost: x\r\nContent-Type: application/toml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{first}",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    // Let the server read the headers and start the request (it then waits for the body).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.send(()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        !server.is_finished(),
        "the server stopped with a request in flight"
    );
    conn.write_all(rest.as_bytes()).await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    server.await.unwrap().unwrap();
    let mut storage = pandora_study::storage::open(&url).unwrap();
    assert!(storage.study_config("inflight").unwrap().is_some());
}

/// A study call running on the blocking pool when shutdown begins runs to its end, its request
/// gets its answer and its effect is stored: the storage connection of a `POST /api/studies` is
/// held open (the opener waits) while shutdown is triggered, then let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_study_call_in_flight_at_shutdown_finishes() {
    use std::sync::{Arc, Mutex, mpsc};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let (entered_tx, entered_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Arc::new(Mutex::new(go_rx));
    let open_url = url.clone();
    let opener = move || {
        let _ = entered_tx.send(());
        let _ = go_rx.lock().unwrap().recv();
        pandora_study::storage::open(&open_url)
    };
    let app = App::with_opener(Options::new(url.clone()), Box::new(opener));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(pandora_serve::serve_app(
        app,
        "127.0.0.1:0".parse().unwrap(),
        async move {
            let _ = stopped.await;
        },
        move |a| {
            let _ = addr_tx.send(a);
        },
    ));
    let addr = addr_rx.await.unwrap();
    let body = toml_config("held", 4);
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/studies HTTP/1.1\r\nHost: x\r\nContent-Type: application/toml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut entered_rx = entered_rx;
    entered_rx.recv().await.unwrap();
    // The request is inside its study call now: shut down, and the server must wait for it.
    stop.send(()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !server.is_finished(),
        "the server stopped with a study call in flight"
    );
    go_tx.send(()).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    server.await.unwrap().unwrap();
    let mut storage = pandora_study::storage::open(&url).unwrap();
    assert!(storage.study_config("held").unwrap().is_some());
}

/// A study with steps over HTTP: `ask` says which steps to run (`steps`: from, to, resume), `tell`
/// takes one step at a time (`step`), the trial pauses at the end of its run and a later ask
/// resumes it; a step told twice is a 4xx naming `step`.
#[tokio::test]
async fn steps_of_a_fidelity_study_are_asked_and_told_one_by_one() {
    let s = server(None);
    let toml = "[study]\nname = \"ft\"\ndirection = \"maximize\"\n[objective]\nkind = \"external\"\n\
                [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n\
                [budget]\ntotal = 12.0\nmax_trials = 1\n[policy]\ninitial_design = 1\n\
                [fidelity]\nmax_steps = 4\nlambda = 0.001\nsteps_per_ask = 2\n";
    let r = create(&s, toml).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let r = post_json(&s, "/api/studies/ft/ask", r#"{"worker": "w1"}"#).await;
    let a: serde_json::Value = r.json();
    assert_eq!(
        a["steps"],
        serde_json::json!({"from": 1, "to": 2, "resume": false})
    );
    let tell = |step: u64| format!(r#"{{"objective": {}, "step": {step}}}"#, 0.1 * step as f64);
    let r = post_json(&s, "/api/studies/ft/trials/0/tell", &tell(1)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = post_json(&s, "/api/studies/ft/trials/0/tell", &tell(1)).await;
    assert!(r.status.is_client_error(), "{}", r.body);
    assert_eq!(r.error_field().as_deref(), Some("step"));
    let r = post_json(&s, "/api/studies/ft/trials/0/tell", &tell(2)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    // Paused now: a further step is refused until an ask resumes the trial.
    let r = post_json(&s, "/api/studies/ft/trials/0/tell", &tell(3)).await;
    assert!(r.status.is_client_error(), "{}", r.body);
    let one: serde_json::Value = get(&s, "/api/studies/ft/trials/0").await.json();
    assert_eq!(one["state"], "paused");
    let values: Vec<f64> = one["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [0.1, 0.2]);
    let page: serde_json::Value = get(&s, "/api/studies/ft/trials").await.json();
    assert_eq!(page["trials"][0]["steps"], one["steps"]);
    // The set-up tells the dashboard to draw the steps.
    let setup: serde_json::Value = get(&s, "/api/studies/ft/setup").await.json();
    assert_eq!(
        setup["fidelity"],
        serde_json::json!({"max_steps": 4, "steps_per_ask": 2, "lambda": 0.001})
    );
    // Only one configuration may run (max_trials = 1): the next ask resumes it at step 3.
    let r = post_json(&s, "/api/studies/ft/ask", r#"{"worker": "w2"}"#).await;
    let a: serde_json::Value = r.json();
    assert_eq!(
        (a["number"].as_u64(), &a["steps"]["from"]),
        (Some(0), &serde_json::json!(3))
    );
    assert_eq!(a["steps"]["resume"], true);
}
