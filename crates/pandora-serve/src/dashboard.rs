//! The live dashboard at `/`: one static page, its script and its style sheet, compiled into the
//! binary, that draw every study of the storage from the JSON API.
//!
//! ## What it is
//!
//! Three assets ([`ASSETS`], embedded with `include_str!`, so a server on an air-gapped node needs
//! no network and no files beside its binary): `index.html` (an empty frame), `dashboard.js`
//! (hand-written, no library) and `dashboard.css`. The script reads `?study=NAME` from the page's
//! address; without it, it lists the studies (`GET /api/studies` and each study's status), with
//! it, it polls the study's status, set-up and trials every few seconds and redraws its panels as
//! SVG: best value against cumulative cost, cost per trial and budget remaining, λ and the
//! stopping statistic against its threshold, the cost model's prediction against the observed
//! cost, each parameter against the objective, and a sortable table of the trials with their
//! decision data (docs/serve.md, "Dashboard").
//!
//! ## Why the browser draws
//!
//! The page must update while a study runs and sort its table on a click: both are the
//! browser's work whatever draws the plots, so drawing there too keeps one source of truth (the
//! JSON API, which other clients read as well) and the server free of plotting (no fonts, no
//! raster code, no re-rendering per viewer and poll). SVG built with `createElementNS` is a few
//! hundred lines; a vendored chart library would be tens of thousands that we would have to
//! review for the same escaping guarantees.
//!
//! ## Injection
//!
//! The server never splices data into a page: the assets are constant bytes. The script puts
//! every user-controlled string (study, parameter and worker names, categorical values, failure
//! reasons) into the page as text nodes or attribute values (`textContent`, `setAttribute`),
//! never as markup (a test checks that the script has no `innerHTML`, `outerHTML`,
//! `insertAdjacentHTML`, `document.write` or `eval`). As a second wall, the page is served with a
//! Content-Security-Policy that runs only the server's own script ([`CSP`]): an injected
//! `<script>` or event handler would not execute.
//!
//! ## Access
//!
//! The assets hold no data, so they are served without the bearer token (a browser cannot add
//! an `Authorization` header to a page load); the data comes from `/api/`, which needs the token
//! when the server has one. On a 401 the script asks for the token and keeps it in the tab's
//! `sessionStorage`. The rate limit applies to the assets too.

use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

/// One embedded file: its path, its media type and its text.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The path it is served at.
    pub path: &'static str,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The contents.
    pub body: &'static str,
}

/// The dashboard's files, served with `GET` (and `HEAD`) without a token.
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../assets/index.html"),
    },
    Asset {
        path: "/assets/dashboard.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/dashboard.js"),
    },
    Asset {
        path: "/assets/dashboard.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/dashboard.css"),
    },
];

/// The Content-Security-Policy of every asset: only this server's script and style sheet, data
/// only from this server, no frames, no plugins, no inline code.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                       connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; \
                       frame-ancestors 'none'";

/// Whether a request for `path` with `method` asks for one of [`ASSETS`] (`GET` or `HEAD`):
/// those are served without a token.
pub fn is_asset(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD) && ASSETS.iter().any(|a| a.path == path)
}

/// The response of one asset, with its type and [`CSP`].
fn respond(asset: Asset) -> Response {
    let mut r = asset.body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// The `GET` handler of `asset`.
pub fn handler(asset: Asset) -> MethodRouter<crate::state::App> {
    get(move || async move { respond(asset) })
}
