//! The dashboard's routes in process: the page and its assets (types, Content-Security-Policy,
//! served without the token that `/api/` needs), the script's safety rule (no markup-parsing
//! calls), and a study whose parameter name and choices are HTML: the page stays constant bytes
//! and the data reaches the browser only as JSON. The DOM itself is checked in a real browser by
//! crates/pandora-cli/tests/dashboard.rs.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use pandora_serve::dashboard::{ASSETS, CSP};
use pandora_serve::{App, Options, Token, router};
use serde::Deserialize;
use tower::ServiceExt;

const TOKEN: &str = "0123456789abcdef-test-token";
const EVIL: &str = "<script>window.pwned=1</script>";
const EVIL_CHOICE: &str = "<img src=x onerror=\"window.pwned=2\">";

struct Reply {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn call(
    r: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Reply {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if method == "POST" {
        let ct = if path == "/api/studies" {
            "application/toml"
        } else {
            "application/json"
        };
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let resp = r
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
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

fn server(dir: &tempfile::TempDir, token: Option<&str>) -> axum::Router {
    let mut opts = Options::new(format!("sqlite:{}", dir.path().join("s.db").display()));
    opts.token = token.map(|t| Token::new(t).unwrap());
    router(App::new(opts))
}

fn header(r: &Reply, name: header::HeaderName) -> &str {
    r.headers
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// Every asset is served with its type, the CSP, `nosniff`, and without the token the API needs.
#[tokio::test]
async fn the_page_and_its_assets_are_served_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let r = server(&dir, Some(TOKEN));
    for asset in ASSETS {
        let reply = call(&r, "GET", asset.path, None, "").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", asset.path);
        assert_eq!(reply.body, asset.body, "{}", asset.path);
        assert_eq!(header(&reply, header::CONTENT_TYPE), asset.content_type);
        assert_eq!(header(&reply, header::CONTENT_SECURITY_POLICY), CSP);
        assert_eq!(header(&reply, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    }
    let page = call(&r, "GET", "/", None, "").await;
    assert!(page.body.starts_with("<!doctype html>"), "{}", page.body);
    for src in ["/assets/dashboard.js", "/assets/dashboard.css"] {
        assert!(
            page.body.contains(&format!("\"{src}\"")),
            "{src} not linked"
        );
    }
    // No CDN: no asset names another host (the script's one URL is the SVG namespace, a name).
    for asset in ASSETS {
        let body = asset.body.replace("\"http://www.w3.org/2000/svg\"", "");
        for scheme in ["http:", "https:", "\"//", "'//", "url("] {
            assert!(!body.contains(scheme), "{} refers to {scheme}", asset.path);
        }
    }
    // The data still needs the token, and POSTing to the page is not a way around it.
    let api = call(&r, "GET", "/api/studies", None, "").await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    let post = call(&r, "POST", "/", None, "").await;
    assert_eq!(post.status, StatusCode::UNAUTHORIZED);
    let api = call(&r, "GET", "/api/studies", Some(TOKEN), "").await;
    assert_eq!(api.status, StatusCode::OK);
    let head = call(&r, "HEAD", "/", None, "").await;
    assert_eq!(head.status, StatusCode::OK);
    // A path beside the assets is not an asset.
    let other = call(&r, "GET", "/assets/other.js", None, "").await;
    assert_eq!(other.status, StatusCode::UNAUTHORIZED);
}

/// The CSP runs only this server's script: no inline script, no `eval`, no other origin.
#[test]
fn the_content_security_policy_allows_no_inline_code() {
    assert!(CSP.contains("default-src 'none'"));
    assert!(CSP.contains("script-src 'self'"));
    assert!(!CSP.contains("unsafe-inline") && !CSP.contains("unsafe-eval"));
    assert!(!CSP.contains('*') && !CSP.contains("http"));
}

/// The script builds the page from text nodes and attributes only: the calls that parse a
/// string as markup or code are absent (the safety rule at the top of dashboard.js).
#[test]
fn the_script_never_parses_strings_as_markup() {
    let js = ASSETS
        .iter()
        .find(|a| a.path.ends_with(".js"))
        .unwrap()
        .body;
    for banned in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "DOMParser",
        "createContextualFragment",
        "srcdoc",
        "javascript:",
    ] {
        assert!(!js.contains(banned), "dashboard.js uses {banned}");
    }
}

#[derive(Debug, Deserialize)]
struct Setup {
    study: String,
    direction: String,
    cost: String,
    budget: Budget,
    stopping: bool,
    space: Vec<Param>,
}

#[derive(Debug, Deserialize)]
struct Budget {
    total: Option<f64>,
    max_trials: Option<u64>,
    count_initial: bool,
}

#[derive(Debug, Deserialize)]
struct Param {
    #[serde(rename = "type")]
    kind: String,
    name: String,
    choices: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct Asked {
    number: u64,
}

/// A study whose parameter name and categorical choice are HTML: its set-up and trials come back
/// as JSON (`nosniff`), and the page is the same constant bytes as before the study existed.
#[tokio::test]
async fn html_in_names_and_choices_stays_data() {
    let dir = tempfile::tempdir().unwrap();
    let r = server(&dir, None);
    let before = call(&r, "GET", "/", None, "").await.body;
    let config = format!(
        "[study]\nname = \"evil\"\ndirection = \"minimize\"\n[objective]\nkind = \"external\"\n\
         [[space]]\nname = {evil:?}\ntype = \"categorical\"\nchoices = [{choice:?}, \"plain\"]\n\
         [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n\
         [cost]\nkind = \"reported\"\n[budget]\ntotal = 50.0\n",
        evil = EVIL,
        choice = EVIL_CHOICE
    );
    let created = call(&r, "POST", "/api/studies", None, &config).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let asked = call(&r, "POST", "/api/studies/evil/ask", None, "{}").await;
    let Asked { number } = serde_json::from_str(&asked.body).unwrap();
    let told = call(
        &r,
        "POST",
        &format!("/api/studies/evil/trials/{number}/tell"),
        None,
        r#"{"objective": 1.5, "cost": 2.0}"#,
    )
    .await;
    assert_eq!(told.status, StatusCode::OK, "{}", told.body);

    let setup = call(&r, "GET", "/api/studies/evil/setup", None, "").await;
    assert_eq!(setup.status, StatusCode::OK, "{}", setup.body);
    assert_eq!(header(&setup, header::CONTENT_TYPE), "application/json");
    assert_eq!(header(&setup, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let s: Setup = serde_json::from_str(&setup.body).unwrap();
    assert_eq!(s.study, "evil");
    assert_eq!(
        (s.direction.as_str(), s.cost.as_str()),
        ("minimize", "reported")
    );
    assert_eq!(s.budget.total, Some(50.0));
    assert_eq!(s.budget.max_trials, None);
    assert!(s.budget.count_initial && !s.stopping);
    assert!(setup.body.contains(r#""fidelity":null"#), "{}", setup.body);
    assert_eq!(s.space[0].kind, "categorical");
    assert_eq!(s.space[0].name, EVIL);
    assert_eq!(s.space[0].choices.as_deref().unwrap()[0], EVIL_CHOICE);
    assert_eq!(
        (s.space[1].kind.as_str(), s.space[1].name.as_str()),
        ("float", "x")
    );

    let after = call(&r, "GET", "/?study=evil", None, "").await;
    assert_eq!(after.body, before, "the page must not depend on the data");
    assert!(!after.body.contains("pwned"));
    let missing = call(&r, "GET", "/api/studies/nosuch/setup", None, "").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}
