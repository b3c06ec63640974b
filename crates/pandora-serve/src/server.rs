//! Running the server: binding, the startup line, and graceful shutdown.
//!
//! On SIGTERM or SIGINT the server stops accepting connections and waits for the requests in
//! flight to finish (axum's graceful shutdown); study calls already on the blocking pool run to
//! their end, so every transaction either commits or never started.

use crate::routes::router;
use crate::security::check_bind;
use crate::state::{App, Options};
use std::future::Future;
use std::net::SocketAddr;

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The settings are refused (e.g. a non-loopback address without a token).
    #[error("{0}")]
    Refused(String),
    /// Binding or serving failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The storage could not be opened.
    #[error("--storage {url}: {source}")]
    Storage {
        /// The storage URL, redacted.
        url: String,
        /// The error.
        source: pandora_study::Error,
    },
}

/// Serves `options` on `bind` until `shutdown` resolves (see the module docs). Checks the
/// loopback rule and that the storage opens before binding; prints one line to stderr when
/// listening (with the storage URL redacted), `listening` receives the bound address.
pub async fn serve(
    options: Options,
    bind: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    check_bind(&bind, options.token.is_some()).map_err(ServeError::Refused)?;
    let shown = pandora_study::redact::redact_url(&options.storage_url);
    let url = options.storage_url.clone();
    let opened = tokio::task::spawn_blocking(move || pandora_study::storage::open(&url).map(drop))
        .await
        .map_err(|e| ServeError::Refused(format!("opening the storage: {e}")))?;
    opened.map_err(|source| ServeError::Storage {
        url: shown.clone(),
        source,
    })?;
    serve_app(App::new(options), bind, shutdown, listening).await
}

/// Serves `app` (e.g. made with [`App::with_opener`]) on `bind` until `shutdown` resolves, as
/// [`serve`] does but without checking that the storage opens (the loopback rule is checked).
pub async fn serve_app(
    app: App,
    bind: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    check_bind(&bind, app.has_token()).map_err(ServeError::Refused)?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| ServeError::Io {
            what: format!("--bind {bind}"),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io {
        what: "local address".into(),
        source,
    })?;
    let auth = if app.has_token() {
        "bearer token required"
    } else {
        "no token (loopback only)"
    };
    let shown = app.shown_url().to_string();
    eprintln!("pandora serve: storage {shown}, listening on http://{addr} ({auth})");
    listening(addr);
    // The peer's address goes with each request, for the per-client rate limit.
    let service = router(app).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServeError::Io {
            what: "serving".into(),
            source,
        })
}

/// Resolves on SIGINT (Ctrl-C) or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    eprintln!("pandora serve: shutting down (finishing requests in flight)");
}

/// `pandora serve`: runs [`serve`] on a new multi-threaded runtime until SIGINT or SIGTERM.
pub fn run(options: Options, bind: SocketAddr) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io {
            what: "starting the runtime".into(),
            source,
        })?;
    runtime.block_on(serve(options, bind, shutdown_signal(), |_| {}))
}
