//! SQLite backend: one database file shared by any number of threads and processes.
//!
//! # Durability and locking
//!
//! * The database runs in WAL journal mode with `synchronous=FULL`, so every committed
//!   transaction (in particular every [`Storage::tell`]) has been fsynced to the write-ahead log
//!   before the call returns.
//! * Every method that writes runs inside one `BEGIN IMMEDIATE` transaction: the write lock is
//!   taken *before* anything is read, so a read-decide-write sequence (e.g.
//!   [`Storage::ask_with`]) cannot interleave with another connection's, whether it lives in
//!   another thread or another process.
//! * A `busy_timeout` (30 s by default) makes a connection wait for the lock instead of failing
//!   with `SQLITE_BUSY`.
//! * Foreign keys are enforced (a trial belongs to an existing study).
//!
//! # Schema
//!
//! The schema is versioned by the `schema_version` table (one row per applied migration).
//! Pending migrations are applied at [`SqliteStorage::open`] in one transaction; a database whose
//! version is newer than [`SCHEMA_VERSION`] is refused. Migration 1 creates:
//!
//! ```sql
//! studies(name TEXT PRIMARY KEY, config TEXT, state TEXT, created_at REAL)
//! trials(study TEXT, number INTEGER, state TEXT, params TEXT, x TEXT, objective REAL,
//!        cost REAL, worker TEXT, created_at REAL, finished_at REAL, heartbeat_at REAL,
//!        decision TEXT, error TEXT, PRIMARY KEY(study, number))
//! ```
//!
//! Migration 2 adds trials with steps (studies with a `[fidelity]` section):
//!
//! ```sql
//! ALTER TABLE trials ADD COLUMN step_to INTEGER;
//! steps(study TEXT, number INTEGER, step INTEGER, value REAL, cost REAL, at REAL,
//!       PRIMARY KEY(study, number, step))
//! ```
//!
//! `config`, `state`, `params`, `x` and `decision` hold JSON text; times are Unix seconds.
//!
//! # Late outcomes
//!
//! A trial marked abandoned by [`Storage::abandon_stale`] may still be told: the evaluation was
//! paid for, so its outcome (and its cost) is recorded, the trial becomes complete or failed, and
//! [`Storage::tell_outcome`] reports the outcome as late ([`Told::late`]).
//! Telling a trial that is already complete or failed is an error that changes nothing.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::storage::{
    Decide, GIVEN_UP_STATE_SQL, Snapshot, Storage, TrialPage, ValidOutcome, apply_step,
    attach_page_steps, check_study_name, finite, now, outcome_cost, validate_outcome,
};
use crate::trial::{
    Ask, Decided, NewTrial, Outcome, StepOutcome, StepReport, Told, Trial, TrialState,
};

/// The newest schema version this code knows (the number of migrations).
pub const SCHEMA_VERSION: i64 = 2;

/// How long a connection waits for another one's lock by default.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The migrations, in order: `MIGRATIONS[i]` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE studies (
        name TEXT PRIMARY KEY NOT NULL,
        config TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE TABLE trials (
        study TEXT NOT NULL REFERENCES studies(name),
        number INTEGER NOT NULL,
        state TEXT NOT NULL,
        params TEXT NOT NULL,
        x TEXT NOT NULL,
        objective REAL,
        cost REAL,
        worker TEXT,
        created_at REAL NOT NULL,
        finished_at REAL,
        heartbeat_at REAL NOT NULL,
        decision TEXT NOT NULL,
        error TEXT,
        PRIMARY KEY (study, number)
    );
",
    "
    ALTER TABLE trials ADD COLUMN step_to INTEGER;
    CREATE TABLE steps (
        study TEXT NOT NULL,
        number INTEGER NOT NULL,
        step INTEGER NOT NULL,
        value REAL NOT NULL,
        cost REAL NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (study, number, step),
        FOREIGN KEY (study, number) REFERENCES trials(study, number)
    );
",
];

/// The columns of `trials` in the order [`row_to_trial`] reads them.
const TRIAL_COLUMNS: &str = "number, state, params, x, objective, cost, worker, created_at, \
                             finished_at, heartbeat_at, decision, error, step_to";

/// [`Storage`] in an SQLite database (a file, or `:memory:`).
///
/// Each `SqliteStorage` owns one connection; open one per thread or process on the same file.
pub struct SqliteStorage {
    conn: Connection,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.conn.path())
            .finish()
    }
}

impl SqliteStorage {
    /// Opens (creating if needed) the database at `path` (`:memory:` for a private in-memory
    /// database), configures it (WAL, `synchronous=FULL`, busy timeout, foreign keys) and applies
    /// pending schema migrations.
    ///
    /// Fails with [`Error::Storage`] if the file cannot be opened or its schema version is newer
    /// than [`SCHEMA_VERSION`].
    pub fn open(path: &str) -> Result<Self> {
        Self::open_with_timeout(path, DEFAULT_BUSY_TIMEOUT)
    }

    /// Like [`SqliteStorage::open`], with the given busy timeout (how long to wait for another
    /// connection's lock before failing).
    pub fn open_with_timeout(path: &str, busy_timeout: Duration) -> Result<Self> {
        if path.is_empty() {
            return Err(Error::invalid("path", "empty database path"));
        }
        // SQLite answers some lock conflicts while a connection is set up (switching to WAL,
        // reading the WAL index another process is creating) with SQLITE_BUSY at once, without
        // consulting the busy handler. Several processes opening one fresh file at the same
        // moment hit this, so the whole setup is retried until the busy timeout has passed.
        let deadline = std::time::Instant::now() + busy_timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            match Self::open_once(path, busy_timeout) {
                Err(OpenFailure::Busy(e)) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(e.into());
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(OpenFailure::Other(e)) => return Err(e),
                Ok(storage) => return Ok(storage),
            }
        }
    }

    /// One attempt of [`SqliteStorage::open_with_timeout`].
    fn open_once(path: &str, busy_timeout: Duration) -> std::result::Result<Self, OpenFailure> {
        let conn = if path == ":memory:" {
            Connection::open_in_memory()?
        } else {
            create_private(path);
            Connection::open(path)?
        };
        conn.busy_timeout(busy_timeout)?;
        // `journal_mode` answers with the resulting mode, so it is a query, not an update.
        // In-memory databases report "memory", which is fine.
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if path != ":memory:" && !mode.eq_ignore_ascii_case("wal") {
            return Err(OpenFailure::Other(Error::Storage(format!(
                "could not enable WAL journal mode on {path} (got {mode})"
            ))));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        let mut storage = SqliteStorage { conn };
        storage.migrate()?;
        Ok(storage)
    }

    /// Opens a database given as a URL: `sqlite:///abs/path.db`, `sqlite://rel/path.db`,
    /// `sqlite:path.db`, `sqlite::memory:`, or a plain path. Other schemes are refused.
    pub fn open_url(url: &str) -> Result<Self> {
        Self::open(Self::path_of_url(url)?)
    }

    /// The path part of a URL accepted by [`SqliteStorage::open_url`].
    pub fn path_of_url(url: &str) -> Result<&str> {
        let path = if let Some(rest) = url.strip_prefix("sqlite://") {
            rest
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            rest
        } else if let Some((scheme, _)) = url.split_once("://") {
            return Err(Error::invalid(
                "storage URL",
                format!("unsupported scheme {scheme:?} in {url:?} (expected sqlite:)"),
            ));
        } else {
            url
        };
        if path.is_empty() {
            return Err(Error::invalid("storage URL", format!("no path in {url:?}")));
        }
        Ok(path)
    }

    /// The schema version of the open database (the last applied migration).
    pub fn schema_version(&self) -> Result<i64> {
        Ok(read_version(&self.conn)?)
    }

    /// Applies pending migrations in one `BEGIN IMMEDIATE` transaction (so that two processes
    /// opening a fresh file at once do not both migrate it).
    fn migrate(&mut self) -> std::result::Result<(), OpenFailure> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_version (
                 version INTEGER PRIMARY KEY NOT NULL,
                 applied_at REAL NOT NULL
             );",
        )?;
        let current = read_version(&tx)?;
        if current > SCHEMA_VERSION {
            return Err(OpenFailure::Other(Error::Storage(format!(
                "database schema version {current} is newer than this version of Pandora \
                 supports ({SCHEMA_VERSION}); upgrade Pandora to open it"
            ))));
        }
        if current < 0 {
            return Err(OpenFailure::Other(Error::Storage(format!(
                "corrupt schema_version table (version {current})"
            ))));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
            let version = i as i64 + 1;
            tx.execute_batch(sql).map_err(|e| {
                OpenFailure::Other(Error::Storage(format!("schema migration {version}: {e}")))
            })?;
            tx.execute(
                "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
                params![version, now()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Starts a transaction that holds the write lock from its first statement.
    fn immediate(&mut self) -> Result<Transaction<'_>> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }
}

/// Creates the database file `path`, if it does not exist, readable and writable by its owner
/// only (mode 0600 on Unix, whatever the umask): studies hold configurations and results that
/// are not everyone's to read. SQLite gives the `-wal` and `-shm` files it creates the mode of the
/// database file. An existing file keeps its mode; errors are left for SQLite to report.
fn create_private(path: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if !path.starts_with("file:") && !std::path::Path::new(path).exists() {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path);
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Why one attempt to open a database failed: a lock conflict worth retrying, or anything else.
enum OpenFailure {
    Busy(rusqlite::Error),
    Other(Error),
}

impl From<rusqlite::Error> for OpenFailure {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                OpenFailure::Busy(e)
            }
            _ => OpenFailure::Other(e.into()),
        }
    }
}

/// The highest applied migration (0 for an empty table).
fn read_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |r| r.get(0),
    )
}

/// Fails with [`Error::NotFound`] unless the study exists; returns its state text.
fn study_state(conn: &Connection, study: &str) -> Result<String> {
    conn.prepare_cached("SELECT state FROM studies WHERE name = ?1")?
        .query_row([study], |r| r.get::<_, String>(0))
        .optional()?
        .ok_or_else(|| Error::NotFound(format!("study {study:?}")))
}

/// Converts a trial number to SQLite's signed integers.
fn to_sql_number(number: u64) -> Result<i64> {
    i64::try_from(number).map_err(|_| Error::invalid("trial number", "too large"))
}

/// A not-found error for trial `number` of `study`, distinguishing a missing study.
fn trial_not_found(conn: &Connection, study: &str, number: u64) -> Error {
    match study_state(conn, study) {
        Err(e) => e,
        Ok(_) => Error::NotFound(format!("trial {number} of study {study:?}")),
    }
}

/// Reads one row selected with [`TRIAL_COLUMNS`].
fn row_to_trial(r: &rusqlite::Row<'_>) -> rusqlite::Result<Trial> {
    fn json_err(i: usize, e: serde_json::Error) -> rusqlite::Error {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    }
    let number: i64 = r.get(0)?;
    let state: String = r.get(1)?;
    let state = TrialState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Text,
            format!("unknown trial state {state:?}").into(),
        )
    })?;
    let params: String = r.get(2)?;
    let x: String = r.get(3)?;
    let decision: String = r.get(10)?;
    Ok(Trial {
        number: u64::try_from(number).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Integer, e.into())
        })?,
        state,
        params: serde_json::from_str(&params).map_err(|e| json_err(2, e))?,
        x: serde_json::from_str(&x).map_err(|e| json_err(3, e))?,
        objective: r.get(4)?,
        cost: r.get(5)?,
        worker: r.get(6)?,
        created_at: r.get(7)?,
        finished_at: r.get(8)?,
        heartbeat_at: r.get(9)?,
        decision: serde_json::from_str(&decision).map_err(|e| json_err(10, e))?,
        error: r.get(11)?,
        step_to: r.get(12)?,
        steps: Vec::new(),
    })
}

/// All trials of `study`, by number, with their steps (the study's existence is not checked).
fn load_trials(conn: &Connection, study: &str) -> Result<Vec<Trial>> {
    load_page(conn, study, 0, u64::MAX)
}

/// The trials of `study` numbered `from` and up, at most `limit`, by number, with their steps
/// (the study's existence is not checked). Both reads are ranges of a primary key.
fn load_page(conn: &Connection, study: &str, from: u64, limit: u64) -> Result<Vec<Trial>> {
    // Numbers and limits beyond SQLite's signed integers select everything there is.
    let from = i64::try_from(from).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {TRIAL_COLUMNS} FROM trials WHERE study = ?1 AND number >= ?2 \
         ORDER BY number LIMIT ?3"
    ))?;
    let rows = stmt.query_map(params![study, from, limit], row_to_trial)?;
    let mut trials = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    let (Some(first), Some(last)) = (trials.first(), trials.last()) else {
        return Ok(trials);
    };
    if trials.iter().any(|t| t.step_to.is_some()) {
        let (first, last) = (to_sql_number(first.number)?, to_sql_number(last.number)?);
        let mut stmt = conn.prepare_cached(
            "SELECT number, step, value, cost, at FROM steps WHERE study = ?1 \
             AND number BETWEEN ?2 AND ?3 ORDER BY number, step",
        )?;
        let rows = stmt.query_map(params![study, first, last], |r| {
            let number = u64::try_from(r.get::<_, i64>(0)?).unwrap_or(u64::MAX);
            Ok((number, step_of_row(r)?))
        })?;
        let steps = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        attach_page_steps(&mut trials, steps);
    }
    Ok(trials)
}

/// A `steps` row's step, value, cost and time (columns 1 to 4).
fn step_of_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StepReport> {
    Ok(StepReport {
        step: r.get(1)?,
        value: r.get(2)?,
        cost: r.get(3)?,
        at: r.get(4)?,
    })
}

/// Trial `number` of `study` with its steps, if it exists.
fn load_trial(conn: &Connection, study: &str, number: u64) -> Result<Option<Trial>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {TRIAL_COLUMNS} FROM trials WHERE study = ?1 AND number = ?2"
    ))?;
    let n = to_sql_number(number)?;
    let Some(mut trial) = stmt.query_row(params![study, n], row_to_trial).optional()? else {
        return Ok(None);
    };
    if trial.step_to.is_some() {
        let mut stmt = conn.prepare_cached(
            "SELECT number, step, value, cost, at FROM steps WHERE study = ?1 AND number = ?2 \
             ORDER BY step",
        )?;
        let rows = stmt.query_map(params![study, n], step_of_row)?;
        trial.steps = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    }
    Ok(Some(trial))
}

/// Puts paused trial `number` back to running for `worker`, up to step `step_to`.
fn resume_trial(
    tx: &Transaction<'_>,
    study: &str,
    number: u64,
    step_to: u32,
    worker: &str,
) -> Result<Trial> {
    let changed = tx
        .prepare_cached(
            "UPDATE trials SET state = 'running', worker = ?3, heartbeat_at = ?4, step_to = ?5, \
             error = NULL WHERE study = ?1 AND number = ?2 AND state = 'paused' \
             AND step_to IS NOT NULL",
        )?
        .execute(params![
            study,
            to_sql_number(number)?,
            worker,
            now(),
            step_to
        ])?;
    if changed != 1 {
        return Err(Error::invalid(
            format!("trial {number}"),
            "is not a paused trial with steps and cannot be resumed",
        ));
    }
    load_trial(tx, study, number)?.ok_or_else(|| trial_not_found(tx, study, number))
}

impl Storage for SqliteStorage {
    fn open_study(&mut self, name: &str, config_json: &str) -> Result<String> {
        check_study_name(name)?;
        serde_json::from_str::<serde_json::Value>(config_json)
            .map_err(|e| Error::invalid("study config", format!("not valid JSON: {e}")))?;
        let tx = self.immediate()?;
        tx.execute(
            "INSERT OR IGNORE INTO studies (name, config, state, created_at) \
             VALUES (?1, ?2, 'null', ?3)",
            params![name, config_json, now()],
        )?;
        let config: String =
            tx.query_row("SELECT config FROM studies WHERE name = ?1", [name], |r| {
                r.get(0)
            })?;
        tx.commit()?;
        Ok(config)
    }

    fn study_config(&mut self, name: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT config FROM studies WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?)
    }

    fn studies(&mut self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name FROM studies ORDER BY name")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(names.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn update_state(
        &mut self,
        study: &str,
        update: &mut dyn FnMut(&serde_json::Value) -> Result<Option<serde_json::Value>>,
    ) -> Result<serde_json::Value> {
        let tx = self.immediate()?;
        let state: serde_json::Value = serde_json::from_str(&study_state(&tx, study)?)?;
        match update(&state)? {
            Some(new_state) => {
                tx.prepare_cached("UPDATE studies SET state = ?2 WHERE name = ?1")?
                    .execute(params![study, serde_json::to_string(&new_state)?])?;
                tx.commit()?;
                Ok(new_state)
            }
            None => Ok(state),
        }
    }

    fn ask_with(&mut self, study: &str, worker: &str, decide: &mut Decide<'_>) -> Result<Ask> {
        // The write lock is held from here to the commit: nobody can insert a trial or change
        // the state between our read and our insert. Any early return drops `tx`, which rolls
        // back.
        let tx = self.immediate()?;
        let state_text = study_state(&tx, study)?;
        let state: serde_json::Value = serde_json::from_str(&state_text)?;
        let trials = load_trials(&tx, study)?;
        let (new, new_state) = match decide(&trials, &state)? {
            Decided::Trial(new, new_state) => (new, new_state),
            Decided::Resume {
                number,
                step_to,
                state,
            } => {
                let trial = resume_trial(&tx, study, number, step_to, worker)?;
                tx.prepare_cached("UPDATE studies SET state = ?2 WHERE name = ?1")?
                    .execute(params![study, serde_json::to_string(&state)?])?;
                tx.commit()?;
                return Ok(Ask::Trial(Box::new(trial)));
            }
            Decided::Finished(finished, new_state) => {
                if let Some(new_state) = new_state {
                    tx.prepare_cached("UPDATE studies SET state = ?2 WHERE name = ?1")?
                        .execute(params![study, serde_json::to_string(&new_state)?])?;
                    tx.commit()?;
                }
                return Ok(Ask::Finished(finished));
            }
        };
        let NewTrial {
            params: trial_params,
            x,
            decision,
            step_to,
        } = new;
        for (i, &xi) in x.iter().enumerate() {
            // serde_json would silently store NaN or ±inf as null.
            finite(&format!("x[{i}]"), xi)?;
        }
        let number = trials.last().map_or(0, |t| t.number + 1);
        let t = now();
        tx.prepare_cached(
            "INSERT INTO trials (study, number, state, params, x, objective, cost, worker, \
             created_at, finished_at, heartbeat_at, decision, error, step_to) \
             VALUES (?1, ?2, ?3, ?4, ?5, NULL, NULL, ?6, ?7, NULL, ?7, ?8, NULL, ?9)",
        )?
        .execute(params![
            study,
            to_sql_number(number)?,
            TrialState::Running.as_str(),
            serde_json::to_string(&trial_params)?,
            serde_json::to_string(&x)?,
            worker,
            t,
            serde_json::to_string(&decision)?,
            step_to,
        ])?;
        tx.prepare_cached("UPDATE studies SET state = ?2 WHERE name = ?1")?
            .execute(params![study, serde_json::to_string(&new_state)?])?;
        tx.commit()?;
        Ok(Ask::Trial(Box::new(Trial {
            number,
            state: TrialState::Running,
            params: trial_params,
            x,
            objective: None,
            cost: None,
            worker: Some(worker.to_owned()),
            created_at: t,
            finished_at: None,
            heartbeat_at: t,
            decision,
            error: None,
            step_to,
            steps: Vec::new(),
        })))
    }

    /// A deferred (read) transaction: in WAL mode it reads one snapshot of the database and never
    /// waits for the write lock.
    fn snapshot(&mut self, study: &str) -> Result<Snapshot> {
        let tx = self.conn.transaction()?;
        let state = serde_json::from_str(&study_state(&tx, study)?)?;
        let trials = load_trials(&tx, study)?;
        tx.finish()?;
        Ok(Snapshot { trials, state })
    }

    fn tell_outcome(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Told> {
        let valid = validate_outcome(outcome)?;
        let tx = self.immediate()?;
        let Some(trial) = load_trial(&tx, study, number)? else {
            return Err(trial_not_found(&tx, study, number));
        };
        let cost = outcome_cost(&trial, &valid)?;
        let ValidOutcome {
            state,
            objective,
            error,
            point,
            ..
        } = valid;
        match trial.state {
            TrialState::Running | TrialState::Abandoned | TrialState::Paused => {}
            done @ (TrialState::Complete | TrialState::Failed) => {
                return Err(Error::invalid(
                    format!("trial {number} of study {study:?}"),
                    format!("already {}, cannot be told again", done.as_str()),
                ));
            }
        }
        let finished_at = now();
        tx.prepare_cached(
            "UPDATE trials SET state = ?3, objective = ?4, cost = ?5, error = ?6, \
             finished_at = ?7 WHERE study = ?1 AND number = ?2",
        )?
        .execute(params![
            study,
            to_sql_number(number)?,
            state.as_str(),
            objective,
            cost,
            error,
            finished_at,
        ])?;
        let (params, x) = match point {
            Some((params_text, x_text)) => {
                tx.prepare_cached(
                    "UPDATE trials SET params = ?3, x = ?4 WHERE study = ?1 AND number = ?2",
                )?
                .execute(params![
                    study,
                    to_sql_number(number)?,
                    params_text,
                    x_text
                ])?;
                (
                    serde_json::from_str(&params_text)?,
                    serde_json::from_str(&x_text)?,
                )
            }
            None => (trial.params.clone(), trial.x.clone()),
        };
        tx.commit()?;
        let late = trial.state == TrialState::Abandoned;
        Ok(Told {
            trial: Trial {
                state,
                objective,
                cost,
                error: error.map(str::to_owned),
                finished_at: Some(finished_at),
                params,
                x,
                ..trial
            },
            late,
        })
    }

    fn tell_step(&mut self, study: &str, number: u64, step: &StepOutcome) -> Result<Trial> {
        let tx = self.immediate()?;
        let Some(mut trial) = load_trial(&tx, study, number)? else {
            return Err(trial_not_found(&tx, study, number));
        };
        let at = now();
        apply_step(&mut trial, step, at)?;
        let n = to_sql_number(number)?;
        tx.prepare_cached(
            "INSERT INTO steps (study, number, step, value, cost, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![study, n, step.step, step.value, step.cost, at])?;
        tx.prepare_cached(
            "UPDATE trials SET state = ?3, objective = ?4, cost = ?5, finished_at = ?6, \
             heartbeat_at = ?7 WHERE study = ?1 AND number = ?2",
        )?
        .execute(params![
            study,
            n,
            trial.state.as_str(),
            trial.objective,
            trial.cost,
            trial.finished_at,
            at
        ])?;
        tx.commit()?;
        Ok(trial)
    }

    fn trials(&mut self, study: &str) -> Result<Vec<Trial>> {
        // A read transaction gives a consistent snapshot of the study and its trials.
        let tx = self.conn.transaction()?;
        study_state(&tx, study)?;
        let trials = load_trials(&tx, study)?;
        tx.commit()?;
        Ok(trials)
    }

    fn trials_page(&mut self, study: &str, from: u64, limit: u64) -> Result<TrialPage> {
        // A read transaction gives a consistent snapshot of the count and the page.
        let tx = self.conn.transaction()?;
        study_state(&tx, study)?;
        let total: i64 = tx
            .prepare_cached("SELECT count(*) FROM trials WHERE study = ?1")?
            .query_row([study], |r| r.get(0))?;
        let trials = load_page(&tx, study, from, limit)?;
        tx.commit()?;
        Ok(TrialPage {
            total: u64::try_from(total).unwrap_or(0),
            trials,
        })
    }

    /// Refreshes `heartbeat_at`. A trial that is not running (e.g. already abandoned) is an
    /// [`Error::Invalid`] that changes nothing, which tells the worker it was given up on.
    fn heartbeat(&mut self, study: &str, number: u64) -> Result<()> {
        let tx = self.immediate()?;
        let state: Option<String> = tx
            .prepare_cached("SELECT state FROM trials WHERE study = ?1 AND number = ?2")?
            .query_row(params![study, to_sql_number(number)?], |r| r.get(0))
            .optional()?;
        match state.as_deref() {
            None => return Err(trial_not_found(&tx, study, number)),
            Some("running") => {}
            Some(other) => {
                return Err(Error::invalid(
                    format!("trial {number} of study {study:?}"),
                    format!("is {other}, not running"),
                ));
            }
        }
        tx.prepare_cached("UPDATE trials SET heartbeat_at = ?3 WHERE study = ?1 AND number = ?2")?
            .execute(params![study, to_sql_number(number)?, now()])?;
        tx.commit()?;
        Ok(())
    }

    fn abandon_stale(&mut self, study: &str, timeout_s: f64) -> Result<Vec<u64>> {
        let timeout_s = finite("timeout_s", timeout_s)?;
        if timeout_s < 0.0 {
            return Err(Error::invalid(
                "timeout_s",
                format!("must be >= 0, got {timeout_s}"),
            ));
        }
        let tx = self.immediate()?;
        study_state(&tx, study)?;
        let cutoff = now() - timeout_s;
        let numbers = {
            let mut stmt = tx.prepare_cached(
                "SELECT number FROM trials \
                 WHERE study = ?1 AND state = 'running' AND heartbeat_at < ?2 ORDER BY number",
            )?;
            let rows = stmt.query_map(params![study, cutoff], |r| r.get::<_, i64>(0))?;
            rows.map(|n| Ok(n? as u64)).collect::<Result<Vec<u64>>>()?
        };
        tx.prepare_cached(&format!(
            "UPDATE trials SET state = {GIVEN_UP_STATE_SQL}, error = ?3 \
             WHERE study = ?1 AND state = 'running' AND heartbeat_at < ?2"
        ))?
        .execute(params![
            study,
            cutoff,
            format!("abandoned: no heartbeat for more than {timeout_s} s"),
        ])?;
        tx.commit()?;
        Ok(numbers)
    }

    fn abandon(&mut self, study: &str, number: u64, reason: &str) -> Result<bool> {
        let n = to_sql_number(number)?;
        let tx = self.immediate()?;
        let changed = tx
            .prepare_cached(&format!(
                "UPDATE trials SET state = {GIVEN_UP_STATE_SQL}, error = ?3 \
                 WHERE study = ?1 AND number = ?2 AND state = 'running'"
            ))?
            .execute(params![study, n, reason])?;
        if changed == 0 {
            let exists = tx
                .prepare_cached("SELECT 1 FROM trials WHERE study = ?1 AND number = ?2")?
                .query_row(params![study, n], |_| Ok(()))
                .optional()?;
            if exists.is_none() {
                return Err(trial_not_found(&tx, study, number));
            }
        }
        tx.commit()?;
        Ok(changed == 1)
    }
}
