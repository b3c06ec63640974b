//! The routes of the API: one table ([`ROUTES`]) from which the router is built, the handlers
//! (thin adapters over the study calls the CLI makes), and the guard in front of them.
//!
//! Every handler parses its input into typed values (errors name the field), runs one study call
//! on the blocking pool ([`crate::pool`]) and writes the result as the CLI's `--json` output
//! does. The table is what `docs/openapi.json` is checked against (the crate's tests).

use crate::body;
use crate::dashboard;
use crate::error::ApiError;
use crate::security::{self, check_name};
use crate::state::{App, RateLimited};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{ConnectInfo, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use pandora_study::config::{CostKind, ObjectiveKind};
use pandora_study::space::{Direction, Param};
use pandora_study::{Ask, Report, Study, Trial};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// One route: an HTTP method and a path (axum's syntax, `{name}` for a path parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path.
    pub path: &'static str,
}

const fn route(method: &'static str, path: &'static str) -> Route {
    Route { method, path }
}

/// Every route the server answers; the router is built from this table only.
pub const ROUTES: &[Route] = &[
    route("GET", "/api/studies"),
    route("POST", "/api/studies"),
    route("GET", "/api/studies/{name}"),
    route("GET", "/api/studies/{name}/setup"),
    route("GET", "/api/studies/{name}/best"),
    route("GET", "/api/studies/{name}/trials"),
    route("GET", "/api/studies/{name}/trials/{number}"),
    route("POST", "/api/studies/{name}/ask"),
    route("POST", "/api/studies/{name}/trials/{number}/tell"),
    route("GET", "/api/studies/{name}/export"),
];

/// The handler of one route of [`ROUTES`] (`None` for a pair the table should not hold).
fn handler(r: Route) -> Option<MethodRouter<App>> {
    Some(match (r.method, r.path) {
        ("GET", "/api/studies") => get(list_studies),
        ("POST", "/api/studies") => post(create_study),
        ("GET", "/api/studies/{name}") => get(status),
        ("GET", "/api/studies/{name}/setup") => get(setup),
        ("GET", "/api/studies/{name}/best") => get(best),
        ("GET", "/api/studies/{name}/trials") => get(trials),
        ("GET", "/api/studies/{name}/trials/{number}") => get(trial),
        ("POST", "/api/studies/{name}/ask") => post(ask),
        ("POST", "/api/studies/{name}/trials/{number}/tell") => post(tell),
        ("GET", "/api/studies/{name}/export") => get(export),
        _ => return None,
    })
}

/// The router of [`ROUTES`] and the dashboard's files ([`dashboard::ASSETS`]), with the guard
/// (`guard`) and the body size limit.
pub fn router(app: App) -> axum::Router {
    let mut paths: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut router = axum::Router::new();
    for path in paths {
        let methods = ROUTES
            .iter()
            .filter(|r| r.path == path)
            .filter_map(|r| handler(*r))
            .reduce(MethodRouter::merge);
        if let Some(m) = methods {
            router = router.route(path, m);
        }
    }
    for asset in dashboard::ASSETS {
        router = router.route(asset.path, dashboard::handler(*asset));
    }
    let limit = app.max_body_bytes();
    router
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Rate limits (the client's, then the global one), then token (except for the dashboard's
/// files, which hold no data), then the request; every response gets `nosniff` and `no-store`.
async fn guard(State(app): State<App>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let mut response = if let Err(limited) = app.take_rate_token(peer) {
        too_many(limited)
    } else if !dashboard::is_asset(req.method(), req.uri().path())
        && !app.authorized(
            req.headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes()),
        )
    {
        security::unauthorized()
    } else {
        next.run(req).await
    };
    let h = response.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// 429 with `Retry-After` (whole seconds, at least 1).
fn too_many(limited: RateLimited) -> Response {
    let message = if limited.per_client {
        "too many requests from this client; retry later"
    } else {
        "too many requests (all clients together); retry later"
    };
    let mut r = ApiError::new(StatusCode::TOO_MANY_REQUESTS, None, message).into_response();
    let secs = limited.wait.as_secs_f64().ceil().max(1.0) as u64;
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

async fn no_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found("path", format!("no route {method} {}", uri.path()))
}

async fn wrong_method(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        Some("method"),
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// The study name of a path.
fn name_of(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(name) = path.map_err(|r| ApiError::bad_request("name", r.body_text()))?;
    check_name(&name)?;
    Ok(name)
}

/// The study name and trial number of a path.
fn name_and_number(
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<(String, u64), ApiError> {
    let Path((name, number)) = path.map_err(|r| ApiError::bad_request("name", r.body_text()))?;
    check_name(&name)?;
    let number = number.parse().map_err(|_| {
        ApiError::bad_request(
            "number",
            format!("expected a trial number (a whole number >= 0), got {number:?}"),
        )
    })?;
    Ok((name, number))
}

/// `GET /api/studies`.
#[derive(Debug, Serialize)]
struct StudyList {
    storage: String,
    studies: Vec<String>,
}

async fn list_studies(State(app): State<App>) -> Result<Json<StudyList>, ApiError> {
    let studies = app
        .pool()
        .with_storage(|mut s| {
            let r = s.studies();
            (Some(s), r)
        })
        .await?;
    Ok(Json(StudyList {
        storage: app.shown_url().to_string(),
        studies,
    }))
}

/// `POST /api/studies`.
#[derive(Debug, Serialize)]
struct Created {
    name: String,
    created: bool,
    storage: String,
}

async fn create_study(
    State(app): State<App>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Created>), ApiError> {
    let text = body::text(&raw)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let cfg = body::config(content_type, text, app.url())?;
    let name = cfg.study.name.clone();
    let created = app
        .pool()
        .with_storage(move |mut s| {
            let existed = match s.study_config(&cfg.study.name) {
                Ok(c) => c.is_some(),
                Err(e) => return (Some(s), Err(e)),
            };
            match Study::open(cfg, s) {
                Ok(study) => (Some(study.into_storage()), Ok(!existed)),
                Err(e) => (None, Err(e)),
            }
        })
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = Created {
        name,
        created,
        storage: app.shown_url().to_string(),
    };
    Ok((status, Json(body)))
}

/// `GET /api/studies/{name}`: the summary of `pandora status --json`.
#[derive(Debug, Serialize)]
struct Status {
    study: String,
    storage: String,
    status: serde_json::Value,
}

async fn status(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Status>, ApiError> {
    let name = name_of(path)?;
    let summary = app
        .pool()
        .with_study(name.clone(), |study| Ok(study.summary()?.to_json()))
        .await?;
    Ok(Json(Status {
        study: name,
        storage: app.shown_url().to_string(),
        status: summary,
    }))
}

/// `GET /api/studies/{name}/setup`: what a display needs of the stored configuration.
#[derive(Debug, Serialize)]
struct Setup {
    study: String,
    direction: Direction,
    objective: ObjectiveKind,
    acquisition: String,
    cost: CostKind,
    budget: SetupBudget,
    stopping: bool,
    cvs: bool,
    fidelity: Option<SetupFidelity>,
    space: Vec<Param>,
}

/// The `[fidelity]` part of [`Setup`] (studies with steps), `null` for other studies.
#[derive(Debug, Serialize)]
struct SetupFidelity {
    max_steps: u32,
    steps_per_ask: u32,
    lambda: f64,
}

/// The budget part of [`Setup`].
#[derive(Debug, Serialize)]
struct SetupBudget {
    total: Option<f64>,
    max_trials: Option<u64>,
    count_initial: bool,
}

impl Setup {
    fn of(name: String, study: &Study) -> Self {
        let c = study.config();
        Self {
            study: name,
            direction: c.study.direction,
            objective: c.objective_kind(),
            acquisition: c.policy.spec.name().to_string(),
            cost: c.cost.kind,
            budget: SetupBudget {
                total: c.budget.total,
                max_trials: c.budget.max_trials,
                count_initial: c.budget.count_initial,
            },
            stopping: c.policy.stopping.is_some(),
            cvs: c.cvs.is_some(),
            fidelity: c.fidelity.as_ref().map(|f| SetupFidelity {
                max_steps: f.max_steps,
                steps_per_ask: f.steps_per_ask,
                lambda: f.lambda,
            }),
            space: study.space().params.clone(),
        }
    }
}

async fn setup(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Setup>, ApiError> {
    let name = name_of(path)?;
    let shown = name.clone();
    let setup = app
        .pool()
        .with_study(name, move |study| Ok(Setup::of(shown, study)))
        .await?;
    Ok(Json(setup))
}

/// `GET /api/studies/{name}/best`.
#[derive(Debug, Serialize)]
struct Best {
    best: Option<Trial>,
}

async fn best(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Best>, ApiError> {
    let name = name_of(path)?;
    let best = app.pool().with_study(name, Study::best).await?;
    Ok(Json(Best { best }))
}

/// The most trials one page holds.
pub const MAX_PAGE: u64 = 1000;
/// Trials per page by default.
pub const DEFAULT_PAGE: u64 = 100;

/// `GET /api/studies/{name}/trials?offset=N&limit=M`.
#[derive(Debug, Serialize)]
struct TrialPage {
    total: u64,
    offset: u64,
    limit: u64,
    trials: Vec<Trial>,
}

async fn trials(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Json<TrialPage>, ApiError> {
    let name = name_of(path)?;
    let (mut offset, mut limit) = (0, DEFAULT_PAGE);
    for (k, v) in body::query(query.as_deref(), &["offset", "limit"])? {
        match k {
            "offset" => offset = body::whole(k, v)?,
            _ => limit = body::whole(k, v)?,
        }
    }
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("must be between 1 and {MAX_PAGE}, got {limit}"),
        ));
    }
    let page = app
        .pool()
        .with_study(name, move |study| study.trials_page(offset, limit))
        .await?;
    Ok(Json(TrialPage {
        total: page.total,
        offset,
        limit,
        trials: page.trials,
    }))
}

async fn trial(
    State(app): State<App>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Trial>, ApiError> {
    let (name, number) = name_and_number(path)?;
    app.pool()
        .with_study(name, move |study| study.trial(number))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("number", format!("no trial {number}")))
}

/// The body of `ask`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AskBody {
    #[serde(default = "default_worker")]
    worker: String,
}

impl Default for AskBody {
    fn default() -> Self {
        Self {
            worker: default_worker(),
        }
    }
}

fn default_worker() -> String {
    "http".to_string()
}

/// The longest worker name, in characters.
pub const MAX_WORKER_LEN: usize = 256;

async fn ask(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let name = name_of(path)?;
    let AskBody { worker } = body::json(body::text(&raw)?)?;
    if worker.is_empty() || worker.chars().count() > MAX_WORKER_LEN {
        return Err(ApiError::invalid(
            "worker",
            format!("must be 1 to {MAX_WORKER_LEN} characters long"),
        ));
    }
    if worker.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "worker",
            "must not contain control characters",
        ));
    }
    let asked: Ask = app
        .pool()
        .with_study(name, move |study| study.ask(&worker))
        .await?;
    Ok(Json(asked.to_json()))
}

/// What `tell` returns: the trial as stored, and the warning of a late outcome.
#[derive(Debug, Serialize)]
struct Told {
    trial: Trial,
    late: Option<String>,
}

async fn tell(
    State(app): State<App>,
    path: Result<Path<(String, String)>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<Told>, ApiError> {
    let (name, number) = name_and_number(path)?;
    let report: Report = body::json(body::text(&raw)?)?;
    let recorded = app
        .pool()
        .with_study(name, move |study| study.report(number, &report))
        .await?;
    Ok(Json(Told {
        late: recorded.late.as_ref().map(ToString::to_string),
        trial: recorded.trial,
    }))
}

async fn export(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let name = name_of(path)?;
    let mut csv = false;
    for (_, v) in body::query(query.as_deref(), &["format"])? {
        csv = match v {
            "csv" => true,
            "json" => false,
            other => {
                return Err(ApiError::bad_request(
                    "format",
                    format!("expected csv or json, got {other:?}"),
                ));
            }
        };
    }
    let file = match security::check_new_name(&name) {
        Ok(()) => name.clone(),
        Err(_) => "study".to_string(),
    };
    let (text, mime, ext) = app
        .pool()
        .with_study(name, move |study| {
            let trials = study.trials()?;
            Ok(if csv {
                (
                    pandora_study::export::csv(study, &trials),
                    "text/csv; charset=utf-8",
                    "csv",
                )
            } else {
                (
                    pandora_study::export::json(&trials)?,
                    "application/json",
                    "json",
                )
            })
        })
        .await?;
    let disposition = format!("attachment; filename=\"{file}.{ext}\"");
    let mut r = text.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}
