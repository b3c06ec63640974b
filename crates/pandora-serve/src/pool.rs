//! Storage connections for blocking study calls.
//!
//! Study calls block (SQLite file locks, PostgreSQL round trips, Gaussian-process fits), so each
//! runs on tokio's blocking thread pool ([`tokio::task::spawn_blocking`]) with a storage
//! connection taken from a small pool of idle ones (opened on demand, at most
//! [`Pool::new`]'s `max_connections` in use at once: further requests wait for a permit). A
//! connection whose call failed in the storage itself ([`pandora_study::Error::Storage`] or
//! [`pandora_study::Error::Postgres`]) is dropped rather than reused.
//!
//! A request whose client disconnects stops waiting, but its blocking call runs to its end: the
//! storage's transactions are never cut in the middle, so nothing is half-written.
//!
//! When the pool is dropped (the server stops), its idle connections are closed on a thread of
//! their own, never on a thread of tokio's runtime, where closing a PostgreSQL connection (which
//! blocks) would panic and abort the process.

use crate::error::ApiError;
use pandora_study::Study;
use pandora_study::storage::Storage;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Opens a new connection to the server's storage.
pub type Opener = dyn Fn() -> pandora_study::Result<Box<dyn Storage>> + Send + Sync;

/// A pool of storage connections (see the module docs).
pub struct Pool {
    open: Box<Opener>,
    idle: Mutex<Vec<Box<dyn Storage>>>,
    permits: Semaphore,
}

impl Drop for Pool {
    /// Closes the idle connections on a thread of their own. The server drops its state, and so
    /// this pool, on a thread of tokio's runtime when it shuts down; closing a PostgreSQL
    /// connection blocks (the driver runs a runtime of its own to say goodbye to the server),
    /// which on a runtime thread panics, and a panic while dropping aborts the process.
    fn drop(&mut self) {
        let idle = std::mem::take(
            self.idle
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !idle.is_empty() {
            // Joined, so that the connections are closed before the server returns.
            let _ = std::thread::spawn(move || drop(idle)).join();
        }
    }
}

/// What a blocking call gives back: the connection (if still good) and its result.
pub type Returned<T> = (Option<Box<dyn Storage>>, pandora_study::Result<T>);

impl Pool {
    /// A pool that opens connections with `open`, at most `max_connections` (>= 1) in use.
    pub fn new(open: Box<Opener>, max_connections: usize) -> Self {
        Self {
            open,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max_connections.max(1)),
        }
    }

    fn take(&self) -> pandora_study::Result<Box<dyn Storage>> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        match idle {
            Some(s) => Ok(s),
            None => (self.open)(),
        }
    }

    fn give_back(&self, storage: Box<dyn Storage>) {
        if let Ok(mut v) = self.idle.lock() {
            v.push(storage);
        }
    }

    /// Runs `f` with a connection on the blocking thread pool.
    pub async fn with_storage<T, F>(self: &Arc<Self>, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(Box<dyn Storage>) -> Returned<T> + Send + 'static,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ApiError::internal("the server is shutting down"))?;
        let pool = Arc::clone(self);
        let joined = tokio::task::spawn_blocking(move || {
            let storage = pool.take()?;
            let (back, result) = f(storage);
            let broken = matches!(
                result,
                Err(pandora_study::Error::Storage(_) | pandora_study::Error::Postgres(_))
            );
            if let (Some(s), false) = (back, broken) {
                pool.give_back(s);
            }
            result
        })
        .await;
        match joined {
            Ok(result) => result.map_err(ApiError::from),
            Err(e) => Err(ApiError::internal(format!("a study call failed: {e}"))),
        }
    }

    /// Runs `f` on the existing study `name` (404 naming `name` if there is none).
    pub async fn with_study<T, F>(self: &Arc<Self>, name: String, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Study) -> pandora_study::Result<T> + Send + 'static,
    {
        self.with_storage(move |mut storage| {
            match storage.study_config(&name) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    let e = pandora_study::Error::NotFound(format!("study {name:?}"));
                    return (Some(storage), Err(e));
                }
                Err(e) => return (Some(storage), Err(e)),
            }
            let mut study = match Study::load(&name, storage) {
                Ok(s) => s,
                Err(e) => return (None, Err(e)),
            };
            let result = f(&mut study);
            (Some(study.into_storage()), result)
        })
        .await
    }
}
