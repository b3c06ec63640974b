//! PostgreSQL backend: one database shared by any number of worker processes on any number of
//! machines.
//!
//! # URL
//!
//! `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...]` (or `postgres://`). Every
//! connection parameter of libpq's URL form that the `postgres` crate understands is accepted
//! (`connect_timeout`, `application_name`, `options`, `sslmode=disable`, ...). Two more parameters
//! are Pandora's own:
//!
//! * `schema=NAME`: the PostgreSQL schema that holds Pandora's tables (default
//!   [`DEFAULT_SCHEMA`], i.e. `pandora`). It is created if missing. `NAME` is a plain identifier
//!   (letters, digits and `_`, not starting with a digit, at most 63 bytes); it is used with its
//!   case preserved. Separate schemas isolate separate sets of studies in one database (the tests
//!   give every test its own).
//! * `password_file=PATH`: read the password from the first line of that file (which must not be
//!   readable by group or others on Unix), so that it is neither in the URL, the configuration
//!   file nor the process list.
//!
//! # The password
//!
//! It is taken from, in this order: the URL (userinfo or `password=`; raw special characters
//! work, see [`crate::redact`]), the `password_file=` file, the `PGPASSWORD` environment variable
//! (libpq's name). A password both in the URL and in a file is refused. The password is taken out
//! of the URL before the driver parses it ([`crate::redact::split_password`]) and set on the
//! connection on its own, so no driver message can echo it.
//!
//! Connections are not encrypted (no TLS): use a trusted network, a VPN or an SSH tunnel between
//! machines. Passwords never appear in error messages ([`redact_url`]).
//!
//! # Schema
//!
//! The schema version is kept in the `schema_version` table (one row per applied migration).
//! Pending migrations are applied by [`PostgresStorage::open_url`] in one transaction that holds a
//! transaction-scoped advisory lock ([`MIGRATION_LOCK_KEY`]), so workers starting at the same time
//! do not migrate twice; a database whose version is newer than [`SCHEMA_VERSION`] is refused.
//! Migration 1 creates:
//!
//! ```sql
//! studies(name TEXT PRIMARY KEY, config TEXT, state TEXT, created_at DOUBLE PRECISION)
//! trials(study TEXT REFERENCES studies, number BIGINT, state TEXT, params TEXT, x TEXT,
//!        objective DOUBLE PRECISION, cost DOUBLE PRECISION, worker TEXT,
//!        created_at DOUBLE PRECISION, finished_at DOUBLE PRECISION,
//!        heartbeat_at DOUBLE PRECISION, decision TEXT, error TEXT,
//!        PRIMARY KEY (study, number))
//! ```
//!
//! `config`, `state`, `params`, `x` and `decision` hold JSON text (so that `f64` values round-trip
//! bit for bit and the stored configuration is returned exactly as given). Times are Unix seconds
//! taken from the *server's* clock, so heartbeats and [`Storage::abandon_stale`] compare times of
//! one clock even when the workers' clocks disagree.
//!
//! # Locking and durability
//!
//! * [`Storage::ask_with`] runs in one transaction that first locks the study's row
//!   (`SELECT ... FROM studies WHERE name = $1 FOR UPDATE`), then reads the trials and the study
//!   state, calls `decide`, inserts the new trial and updates the state, and commits. Every other
//!   `ask_with` on the same study waits for the lock, and (in PostgreSQL's default `READ
//!   COMMITTED` isolation) reads the trials with a snapshot taken after it got the lock: no two
//!   workers receive the same trial number, and each decision sees every trial handed out
//!   before, pending or not. An error (from `decide` or the database) rolls everything back.
//! * [`Storage::heartbeat`] and [`Storage::abandon_stale`] are single conditional `UPDATE`
//!   statements (`... WHERE state = 'running'`); [`Storage::tell_outcome`] locks the trial's row
//!   (`SELECT state ... FOR UPDATE`), refuses a complete or failed trial and updates a running or
//!   abandoned one, in one transaction. Row locks decide races: a trial is told at most once, and
//!   a trial told while being abandoned ends up either complete/failed or abandoned-then-told
//!   (reported as late), never lost.
//! * Each statement commits before the call returns. The connection runs with
//!   `synchronous_commit` on (it is switched on for the session if the server has it off), so a
//!   returned `tell` has been flushed to the server's write-ahead log.
//! * If the server has no `idle_in_transaction_session_timeout`, the session sets one
//!   ([`IDLE_IN_TRANSACTION_TIMEOUT`]): a worker whose machine vanishes in the middle of an
//!   `ask_with` releases the study lock after that time instead of blocking every other worker
//!   until TCP notices. (A killed process releases it at once.)

use std::error::Error as _;
use std::time::Duration;

use postgres::{Client, IsolationLevel, NoTls, Row, Statement};

use crate::error::{Error, Result};
use crate::storage::{
    Decide, GIVEN_UP_STATE_SQL, Snapshot, Storage, TrialPage, ValidOutcome, apply_step,
    attach_page_steps, check_study_name, finite, outcome_cost, redact_url, validate_outcome,
};
use crate::trial::{
    Ask, Decided, NewTrial, Outcome, StepOutcome, StepReport, Told, Trial, TrialState,
};

/// The newest schema version this code knows (the number of migrations).
pub const SCHEMA_VERSION: i64 = 2;

/// The PostgreSQL schema used when the URL has no `schema=` parameter.
pub const DEFAULT_SCHEMA: &str = "pandora";

/// The connection timeout used when the URL has no `connect_timeout` parameter.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `idle_in_transaction_session_timeout` set for the session when the server has none.
pub const IDLE_IN_TRANSACTION_TIMEOUT: &str = "5min";

/// The key of the transaction-scoped advisory lock taken while checking and applying migrations
/// (the ASCII bytes of "pandora").
pub const MIGRATION_LOCK_KEY: i64 = 0x0070_616e_646f_7261;

/// The migrations, in order: `MIGRATIONS[i]` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE studies (
        name TEXT PRIMARY KEY NOT NULL,
        config TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE trials (
        study TEXT NOT NULL REFERENCES studies(name),
        number BIGINT NOT NULL CHECK (number >= 0),
        state TEXT NOT NULL CHECK (state IN ('running', 'complete', 'failed', 'abandoned')),
        params TEXT NOT NULL,
        x TEXT NOT NULL,
        objective DOUBLE PRECISION,
        cost DOUBLE PRECISION,
        worker TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        heartbeat_at DOUBLE PRECISION NOT NULL,
        decision TEXT NOT NULL,
        error TEXT,
        PRIMARY KEY (study, number)
    );
    CREATE INDEX trials_running ON trials (study, heartbeat_at) WHERE state = 'running';
",
    "
    ALTER TABLE trials DROP CONSTRAINT trials_state_check;
    ALTER TABLE trials ADD CONSTRAINT trials_state_check
        CHECK (state IN ('running', 'complete', 'failed', 'abandoned', 'paused'));
    ALTER TABLE trials ADD COLUMN step_to INTEGER CHECK (step_to >= 1);
    CREATE TABLE steps (
        study TEXT NOT NULL,
        number BIGINT NOT NULL,
        step INTEGER NOT NULL CHECK (step >= 1),
        value DOUBLE PRECISION NOT NULL,
        cost DOUBLE PRECISION NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (study, number, step),
        FOREIGN KEY (study, number) REFERENCES trials (study, number)
    );
",
];

/// The server's clock in Unix seconds, constant within one statement.
const NOW: &str = "extract(epoch from statement_timestamp())::float8";

/// The columns of `trials` in the order [`row_to_trial`] reads them.
const TRIAL_COLUMNS: &str = "number, state, params, x, objective, cost, worker, created_at, \
                             finished_at, heartbeat_at, decision, error, step_to";

/// The same columns qualified with the alias `t`.
const T_TRIAL_COLUMNS: &str = "t.number, t.state, t.params, t.x, t.objective, t.cost, t.worker, \
                               t.created_at, t.finished_at, t.heartbeat_at, t.decision, t.error, \
                               t.step_to";

/// Statements prepared once per connection.
struct Statements {
    insert_study: Statement,
    study_config: Statement,
    studies: Statement,
    study_exists: Statement,
    read_state: Statement,
    lock_study: Statement,
    load_trials: Statement,
    insert_trial: Statement,
    tell: Statement,
    trial_state: Statement,
    lock_trial: Statement,
    study_trials: Statement,
    heartbeat: Statement,
    abandon: Statement,
    abandon_one: Statement,
    study_steps: Statement,
    trial_steps: Statement,
    count_trials: Statement,
    trial_page: Statement,
    page_steps: Statement,
    insert_step: Statement,
    update_stepped: Statement,
    resume: Statement,
}

impl Statements {
    fn prepare(c: &mut Client) -> std::result::Result<Self, postgres::Error> {
        let steps = "SELECT number, step, value, cost, at FROM steps WHERE study = $1";
        Ok(Self {
            study_steps: c.prepare(&format!("{steps} ORDER BY number, step"))?,
            trial_steps: c.prepare(&format!("{steps} AND number = $2 ORDER BY step"))?,
            count_trials: c.prepare("SELECT count(*) FROM trials WHERE study = $1")?,
            trial_page: c.prepare(&format!(
                "SELECT {TRIAL_COLUMNS} FROM trials WHERE study = $1 AND number >= $2 \
                 ORDER BY number LIMIT $3"
            ))?,
            page_steps: c.prepare(&format!(
                "{steps} AND number BETWEEN $2 AND $3 ORDER BY number, step"
            ))?,
            insert_step: c.prepare(
                "INSERT INTO steps (study, number, step, value, cost, at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )?,
            update_stepped: c.prepare(
                "UPDATE trials SET state = $3, objective = $4, cost = $5, finished_at = $6, \
                 heartbeat_at = $7 WHERE study = $1 AND number = $2",
            )?,
            resume: c.prepare(&format!(
                "UPDATE trials SET state = 'running', worker = $3, heartbeat_at = {NOW}, \
                 step_to = $4, error = NULL \
                 WHERE study = $1 AND number = $2 AND state = 'paused' AND step_to IS NOT NULL \
                 RETURNING {TRIAL_COLUMNS}"
            ))?,
            insert_study: c.prepare(&format!(
                "INSERT INTO studies (name, config, state, created_at) \
                 VALUES ($1, $2, 'null', {NOW}) ON CONFLICT (name) DO NOTHING"
            ))?,
            study_config: c.prepare("SELECT config FROM studies WHERE name = $1")?,
            studies: c.prepare("SELECT name FROM studies ORDER BY name COLLATE \"C\"")?,
            study_exists: c.prepare("SELECT 1 FROM studies WHERE name = $1")?,
            read_state: c.prepare("SELECT state FROM studies WHERE name = $1")?,
            lock_study: c.prepare("SELECT state FROM studies WHERE name = $1 FOR UPDATE")?,
            load_trials: c.prepare(&format!(
                "SELECT {TRIAL_COLUMNS} FROM trials WHERE study = $1 ORDER BY number"
            ))?,
            insert_trial: c.prepare(&format!(
                "WITH ins AS ( \
                     INSERT INTO trials (study, number, state, params, x, objective, cost, \
                         worker, created_at, finished_at, heartbeat_at, decision, error, \
                         step_to) \
                     VALUES ($1, $2, 'running', $3, $4, NULL, NULL, $5, {NOW}, NULL, {NOW}, $6, \
                         NULL, $8) \
                     RETURNING created_at), \
                 upd AS (UPDATE studies SET state = $7 WHERE name = $1) \
                 SELECT created_at FROM ins"
            ))?,
            tell: c.prepare(&format!(
                "UPDATE trials SET state = $3, objective = $4, cost = $5, error = $6, \
                 finished_at = {NOW}, params = COALESCE($7::text, params), \
                 x = COALESCE($8::text, x) \
                 WHERE study = $1 AND number = $2 \
                 AND state IN ('running', 'abandoned', 'paused') \
                 RETURNING {TRIAL_COLUMNS}"
            ))?,
            trial_state: c.prepare("SELECT state FROM trials WHERE study = $1 AND number = $2")?,
            lock_trial: c.prepare(&format!(
                "SELECT {TRIAL_COLUMNS} FROM trials WHERE study = $1 AND number = $2 FOR UPDATE"
            ))?,
            study_trials: c.prepare(&format!(
                "SELECT {T_TRIAL_COLUMNS} FROM studies s LEFT JOIN trials t ON t.study = s.name \
                 WHERE s.name = $1 ORDER BY t.number"
            ))?,
            heartbeat: c.prepare(&format!(
                "UPDATE trials SET heartbeat_at = {NOW} \
                 WHERE study = $1 AND number = $2 AND state = 'running'"
            ))?,
            abandon: c.prepare(&format!(
                "UPDATE trials SET state = {GIVEN_UP_STATE_SQL}, error = $3 \
                 WHERE study = $1 AND state = 'running' AND heartbeat_at < {NOW} - $2::float8 \
                 RETURNING number"
            ))?,
            abandon_one: c.prepare(&format!(
                "UPDATE trials SET state = {GIVEN_UP_STATE_SQL}, error = $3 \
                 WHERE study = $1 AND number = $2 AND state = 'running'"
            ))?,
        })
    }
}

/// [`Storage`] in a PostgreSQL database.
///
/// Each `PostgresStorage` owns one connection; open one per thread or process.
pub struct PostgresStorage {
    client: Client,
    schema: String,
    target: String,
    st: Statements,
}

impl std::fmt::Debug for PostgresStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStorage")
            .field("url", &self.target)
            .field("schema", &self.schema)
            .finish()
    }
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::Postgres(describe(&e))
    }
}

/// A readable description of a driver error: the server's message (with SQLSTATE, detail and
/// hint) or the client-side error and its causes.
fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{db} (SQLSTATE {})", db.code().code());
    }
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// Quotes an SQL identifier.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Checks a `schema=` value: a plain identifier of at most 63 bytes.
fn check_schema(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = name.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "storage URL",
            format!(
                "schema {name:?} is not a plain identifier (letters, digits and _, not starting \
                 with a digit, at most 63 bytes)"
            ),
        ))
    }
}

/// Pandora's own parameters of a PostgreSQL URL (see the module docs), split off before the URL
/// goes to the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PandoraParams {
    /// The URL for the driver, without Pandora's parameters.
    pub driver_url: String,
    /// `schema=NAME` ([`DEFAULT_SCHEMA`] if absent).
    pub schema: String,
    /// `password_file=PATH` (percent-decoded), if given.
    pub password_file: Option<String>,
}

/// Splits Pandora's own parameters (`schema=`, `password_file=`) off a PostgreSQL URL that holds
/// no password (see [`crate::redact::split_password`]). A parameter given twice is an error.
pub fn split_params(url: &str) -> Result<PandoraParams> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, q),
        None => (url, ""),
    };
    let mut schema = None;
    let mut password_file = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let slot = match pair.split_once('=') {
            Some(("schema", v)) => {
                check_schema(v)?;
                &mut schema
            }
            Some(("password_file", v)) if !v.is_empty() => &mut password_file,
            Some(("password_file", _)) => {
                return Err(Error::invalid("storage URL", "password_file is empty"));
            }
            _ => {
                rest.push(pair);
                continue;
            }
        };
        let (key, v) = pair.split_once('=').expect("matched key=value");
        if slot.is_some() {
            return Err(Error::invalid(
                "storage URL",
                format!("the {key} parameter is given twice"),
            ));
        }
        *slot = Some(v.to_owned());
    }
    let driver_url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok(PandoraParams {
        driver_url,
        schema: schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()),
        password_file: password_file
            .map(|f| String::from_utf8_lossy(&crate::redact::percent_decode(&f)).into_owned()),
    })
}

/// Splits Pandora's own `schema=NAME` parameter off a PostgreSQL URL: returns the URL for the
/// driver and the schema ([`DEFAULT_SCHEMA`] if absent). See [`split_params`].
pub fn split_schema(url: &str) -> Result<(String, String)> {
    let p = split_params(url)?;
    Ok((p.driver_url, p.schema))
}

/// The password to connect with: the one in the URL, else the first line of the
/// `password_file=` file, else the `PGPASSWORD` environment variable, else none. A password both
/// in the URL and in a file is an error.
fn resolve_password(
    in_url: Option<Vec<u8>>,
    password_file: Option<&str>,
) -> Result<Option<Vec<u8>>> {
    let err = |reason: String| Error::invalid("storage URL", reason);
    match (in_url, password_file) {
        (Some(_), Some(_)) => Err(err(
            "give the password either in the URL or in password_file, not both".into(),
        )),
        (Some(p), None) => Ok(Some(p)),
        (None, Some(path)) => read_password_file(path).map(Some).map_err(err),
        (None, None) => Ok(std::env::var_os("PGPASSWORD")
            .filter(|p| !p.is_empty())
            .map(|p| p.to_string_lossy().into_owned().into_bytes())),
    }
}

/// Reads a password file: its first line (without the line end). On Unix the file must not be
/// readable by group or others (as `ssh` and libpq's `.pgpass` require).
fn read_password_file(path: &str) -> std::result::Result<Vec<u8>, String> {
    let text = std::fs::read(path).map_err(|e| format!("password_file {path:?}: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| format!("password_file {path:?}: {e}"))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "password_file {path:?} can be read or written by other users (mode {:o}); \
                 run `chmod 600 {path}`",
                mode & 0o777
            ));
        }
    }
    let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(format!("password_file {path:?}: the first line is empty"));
    }
    Ok(line.to_vec())
}

/// Text for a TEXT column: PostgreSQL text cannot hold NUL characters, which are replaced by
/// U+FFFD (e.g. in a command's stderr tail).
fn pg_text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{fffd}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Refuses names that PostgreSQL text cannot store.
fn check_name(what: &str, name: &str) -> Result<()> {
    if name.contains('\0') {
        return Err(Error::invalid(what, "must not contain NUL characters"));
    }
    Ok(())
}

/// Converts a trial number to PostgreSQL's signed integers.
fn to_sql_number(number: u64) -> Result<i64> {
    i64::try_from(number).map_err(|_| Error::invalid("trial number", "too large"))
}

/// Fills in the steps of `trials` (all of `study`, by number) if any has steps.
fn attach_steps(
    c: &mut impl postgres::GenericClient,
    st: &Statements,
    study: &str,
    trials: &mut [Trial],
) -> Result<()> {
    if trials.iter().all(|t| t.step_to.is_none()) {
        return Ok(());
    }
    for row in c.query(&st.study_steps, &[&study])? {
        let (number, step) = row_to_step(&row)?;
        // Trials are numbered 0, 1, ... in order, so the number is the index.
        if let Some(t) = usize::try_from(number).ok().and_then(|i| trials.get_mut(i)) {
            t.steps.push(step);
        }
    }
    Ok(())
}

/// Fills in the steps of one trial if it has steps.
fn attach_trial_steps(
    c: &mut impl postgres::GenericClient,
    st: &Statements,
    study: &str,
    trial: &mut Trial,
) -> Result<()> {
    if trial.step_to.is_some() {
        let n = to_sql_number(trial.number)?;
        for row in c.query(&st.trial_steps, &[&study, &n])? {
            trial.steps.push(row_to_step(&row)?.1);
        }
    }
    Ok(())
}

/// A `steps` row (selected as in [`Statements::study_steps`]): the trial number and the step.
fn row_to_step(row: &Row) -> Result<(i64, StepReport)> {
    let step: i32 = row.try_get(1)?;
    Ok((
        row.try_get(0)?,
        StepReport {
            step: u32::try_from(step)
                .map_err(|e| Error::Storage(format!("corrupt step row: step: {e}")))?,
            value: row.try_get(2)?,
            cost: row.try_get(3)?,
            at: row.try_get(4)?,
        },
    ))
}

/// A read-only `REPEATABLE READ` transaction: every query in it sees one snapshot, and it takes
/// no row lock (it never waits for [`Storage::ask_with`]).
fn read_snapshot(client: &mut Client) -> Result<postgres::Transaction<'_>> {
    Ok(client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?)
}

/// Reads a trial from the thirteen columns of [`TRIAL_COLUMNS`] in `row`.
fn row_to_trial(row: &Row) -> Result<Trial> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        Error::Storage(format!("corrupt trial row: {what}: {e}"))
    };
    let number: i64 = row.try_get(0)?;
    let state: String = row.try_get(1)?;
    let state = TrialState::parse(&state)
        .ok_or_else(|| bad("state", &format!("unknown trial state {state:?}")))?;
    let params: String = row.try_get(2)?;
    let x: String = row.try_get(3)?;
    let decision: String = row.try_get(10)?;
    Ok(Trial {
        number: u64::try_from(number).map_err(|e| bad("number", &e))?,
        state,
        params: serde_json::from_str(&params).map_err(|e| bad("params", &e))?,
        x: serde_json::from_str(&x).map_err(|e| bad("x", &e))?,
        objective: row.try_get(4)?,
        cost: row.try_get(5)?,
        worker: row.try_get(6)?,
        created_at: row.try_get(7)?,
        finished_at: row.try_get(8)?,
        heartbeat_at: row.try_get(9)?,
        decision: serde_json::from_str(&decision).map_err(|e| bad("decision", &e))?,
        error: row.try_get(11)?,
        step_to: row
            .try_get::<_, Option<i32>>(12)?
            .map(u32::try_from)
            .transpose()
            .map_err(|e| bad("step_to", &e))?,
        steps: Vec::new(),
    })
}

impl PostgresStorage {
    /// Connects to the database of a `postgresql://` (or `postgres://`) URL (see the module
    /// docs), creates the schema if needed and applies pending migrations.
    ///
    /// Fails with [`Error::Invalid`] for a malformed URL, [`Error::Postgres`] if the server cannot
    /// be reached or refuses the login or a statement, and [`Error::Storage`] if the schema
    /// version is newer than [`SCHEMA_VERSION`]. No message contains the password.
    pub fn open_url(url: &str) -> Result<Self> {
        if !(url.starts_with("postgresql://") || url.starts_with("postgres://")) {
            return Err(Error::invalid(
                "storage URL",
                format!(
                    "{:?} is not a PostgreSQL URL (expected postgresql://USER@HOST/DB)",
                    redact_url(url)
                ),
            ));
        }
        let target = redact_url(url);
        // The driver never sees the password in a string it might echo in an error: it is taken
        // out of the URL and set on its own.
        let (no_password, in_url) = crate::redact::split_password(url);
        let params = split_params(&no_password)?;
        let mut config: postgres::Config = params
            .driver_url
            .parse()
            .map_err(|e| Error::invalid("storage URL", format!("{target}: {}", describe(&e))))?;
        if let Some(p) = resolve_password(in_url, params.password_file.as_deref())? {
            config.password(p);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("pandora");
        }
        let client = config
            .connect(NoTls)
            .map_err(|e| Error::Postgres(format!("connecting to {target}: {}", describe(&e))))?;
        Self::setup(client, params.schema, target)
    }

    /// Session settings, migrations and prepared statements of a fresh connection.
    fn setup(mut client: Client, schema: String, target: String) -> Result<Self> {
        client.batch_execute(&format!("SET search_path TO {}", quote_ident(&schema)))?;
        let sync: String = client
            .query_one("SHOW synchronous_commit", &[])?
            .try_get(0)?;
        if sync == "off" {
            client.batch_execute("SET synchronous_commit TO on")?;
        }
        let idle: String = client
            .query_one("SHOW idle_in_transaction_session_timeout", &[])?
            .try_get(0)?;
        if idle == "0" {
            client.batch_execute(&format!(
                "SET idle_in_transaction_session_timeout TO '{IDLE_IN_TRANSACTION_TIMEOUT}'"
            ))?;
        }
        migrate(&mut client, &schema)?;
        let st = Statements::prepare(&mut client)?;
        Ok(Self {
            client,
            schema,
            target,
            st,
        })
    }

    /// The PostgreSQL schema holding this storage's tables.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The schema version of the database (the last applied migration).
    pub fn schema_version(&mut self) -> Result<i64> {
        Ok(read_version(&mut self.client)?)
    }

    /// A not-found error for trial `number` of `study`, distinguishing a missing study.
    fn trial_not_found(&mut self, study: &str, number: u64) -> Error {
        match self.client.query_opt(&self.st.study_exists, &[&study]) {
            Err(e) => e.into(),
            Ok(None) => Error::NotFound(format!("study {study:?}")),
            Ok(Some(_)) => Error::NotFound(format!("trial {number} of study {study:?}")),
        }
    }
}

/// The highest applied migration (0 for an empty table).
fn read_version(c: &mut impl postgres::GenericClient) -> std::result::Result<i64, postgres::Error> {
    c.query_one(
        "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_version",
        &[],
    )?
    .try_get(0)
}

/// Creates the schema if needed and applies pending migrations, all in one transaction under the
/// migration advisory lock.
fn migrate(client: &mut Client, schema: &str) -> Result<()> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])?;
    // Checking first avoids needing the CREATE privilege on the database when the schema exists.
    if tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])?
        .is_none()
    {
        tx.batch_execute(&format!("CREATE SCHEMA {}", quote_ident(schema)))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (
             version INTEGER PRIMARY KEY NOT NULL,
             applied_at DOUBLE PRECISION NOT NULL
         )",
    )?;
    let current = read_version(&mut tx)?;
    if current > SCHEMA_VERSION {
        return Err(Error::Storage(format!(
            "database schema version {current} (schema {schema:?}) is newer than this version \
             of Pandora supports ({SCHEMA_VERSION}); upgrade Pandora to open it"
        )));
    }
    if current < 0 {
        return Err(Error::Storage(format!(
            "corrupt schema_version table (version {current})"
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = i as i32 + 1;
        tx.batch_execute(sql).map_err(|e| {
            Error::Postgres(format!("schema migration {version}: {}", describe(&e)))
        })?;
        tx.execute(
            &format!("INSERT INTO schema_version (version, applied_at) VALUES ($1, {NOW})"),
            &[&version],
        )?;
    }
    tx.commit()?;
    Ok(())
}

impl Storage for PostgresStorage {
    fn open_study(&mut self, name: &str, config_json: &str) -> Result<String> {
        check_study_name(name)?;
        serde_json::from_str::<serde_json::Value>(config_json)
            .map_err(|e| Error::invalid("study config", format!("not valid JSON: {e}")))?;
        let config_text = pg_text(config_json);
        self.client
            .execute(&self.st.insert_study, &[&name, &config_text.as_ref()])?;
        // A new statement: sees the row whether we or a concurrent opener inserted it.
        let row = self.client.query_one(&self.st.study_config, &[&name])?;
        Ok(row.try_get(0)?)
    }

    fn study_config(&mut self, name: &str) -> Result<Option<String>> {
        check_name("study name", name)?;
        Ok(
            match self.client.query_opt(&self.st.study_config, &[&name])? {
                Some(row) => Some(row.try_get(0)?),
                None => None,
            },
        )
    }

    fn studies(&mut self) -> Result<Vec<String>> {
        let rows = self.client.query(&self.st.studies, &[])?;
        rows.iter()
            .map(|r| Ok(r.try_get::<_, String>(0)?))
            .collect()
    }

    fn update_state(
        &mut self,
        study: &str,
        update: &mut dyn FnMut(&serde_json::Value) -> Result<Option<serde_json::Value>>,
    ) -> Result<serde_json::Value> {
        check_name("study name", study)?;
        // The same row lock as `ask_with`: a state change cannot interleave with an ask.
        let mut tx = self.client.transaction()?;
        let Some(row) = tx.query_opt(&self.st.lock_study, &[&study])? else {
            return Err(Error::NotFound(format!("study {study:?}")));
        };
        let state_text: String = row.try_get(0)?;
        let state: serde_json::Value = serde_json::from_str(&state_text)?;
        match update(&state)? {
            Some(new_state) => {
                let text = serde_json::to_string(&new_state)?;
                tx.execute(
                    "UPDATE studies SET state = $2 WHERE name = $1",
                    &[&study, &text],
                )?;
                tx.commit()?;
                Ok(new_state)
            }
            None => Ok(state),
        }
    }

    fn ask_with(&mut self, study: &str, worker: &str, decide: &mut Decide<'_>) -> Result<Ask> {
        check_name("study name", study)?;
        let worker_text = pg_text(worker);
        // The study row stays locked until the commit: no other ask can read or insert in
        // between. Any early return drops `tx`, which rolls back.
        let mut tx = self.client.transaction()?;
        let Some(row) = tx.query_opt(&self.st.lock_study, &[&study])? else {
            return Err(Error::NotFound(format!("study {study:?}")));
        };
        let state_text: String = row.try_get(0)?;
        let state: serde_json::Value = serde_json::from_str(&state_text)?;
        // A statement after the lock: its snapshot includes every trial committed before.
        let mut trials = tx
            .query(&self.st.load_trials, &[&study])?
            .iter()
            .map(row_to_trial)
            .collect::<Result<Vec<_>>>()?;
        // Steps told meanwhile may show up here beyond their trial row's state (a later
        // snapshot); their trial is then still running in this decision, so nothing is resumed
        // twice.
        attach_steps(&mut tx, &self.st, study, &mut trials)?;
        let (new, new_state) = match decide(&trials, &state)? {
            Decided::Trial(new, new_state) => (new, new_state),
            Decided::Resume {
                number,
                step_to,
                state,
            } => {
                let n = to_sql_number(number)?;
                let step_to_sql =
                    i32::try_from(step_to).map_err(|_| Error::invalid("step_to", "too large"))?;
                let Some(row) = tx.query_opt(
                    &self.st.resume,
                    &[&study, &n, &worker_text.as_ref(), &step_to_sql],
                )?
                else {
                    return Err(Error::invalid(
                        format!("trial {number}"),
                        "is not a paused trial with steps and cannot be resumed",
                    ));
                };
                let mut trial = row_to_trial(&row)?;
                attach_trial_steps(&mut tx, &self.st, study, &mut trial)?;
                let text = serde_json::to_string(&state)?;
                tx.execute(
                    "UPDATE studies SET state = $2 WHERE name = $1",
                    &[&study, &text],
                )?;
                tx.commit()?;
                return Ok(Ask::Trial(Box::new(trial)));
            }
            Decided::Finished(finished, new_state) => {
                if let Some(new_state) = new_state {
                    let text = serde_json::to_string(&new_state)?;
                    tx.execute(
                        "UPDATE studies SET state = $2 WHERE name = $1",
                        &[&study, &text],
                    )?;
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
        let step_to_sql = step_to
            .map(i32::try_from)
            .transpose()
            .map_err(|_| Error::invalid("step_to", "too large"))?;
        let number = trials.last().map_or(0, |t| t.number + 1);
        let params_text = serde_json::to_string(&trial_params)?;
        let x_text = serde_json::to_string(&x)?;
        let decision_text = serde_json::to_string(&decision)?;
        let state_text = serde_json::to_string(&new_state)?;
        let row = tx.query_one(
            &self.st.insert_trial,
            &[
                &study,
                &to_sql_number(number)?,
                &params_text,
                &x_text,
                &worker_text.as_ref(),
                &decision_text,
                &state_text,
                &step_to_sql,
            ],
        )?;
        let created_at: f64 = row.try_get(0)?;
        tx.commit()?;
        Ok(Ask::Trial(Box::new(Trial {
            number,
            state: TrialState::Running,
            params: trial_params,
            x,
            objective: None,
            cost: None,
            worker: Some(worker_text.into_owned()),
            created_at,
            finished_at: None,
            heartbeat_at: created_at,
            decision,
            error: None,
            step_to,
            steps: Vec::new(),
        })))
    }

    fn tell_outcome(&mut self, study: &str, number: u64, outcome: &Outcome) -> Result<Told> {
        let valid = validate_outcome(outcome)?;
        check_name("study name", study)?;
        let n = to_sql_number(number)?;
        // One transaction: the trial's row is locked, its state read (a late outcome is told
        // apart), and only a running, abandoned or paused trial changes.
        let mut tx = self.client.transaction()?;
        let before = match tx.query_opt(&self.st.lock_trial, &[&study, &n])? {
            None => {
                drop(tx);
                return Err(self.trial_not_found(study, number));
            }
            Some(row) => row_to_trial(&row)?,
        };
        if matches!(before.state, TrialState::Complete | TrialState::Failed) {
            return Err(Error::invalid(
                format!("trial {number} of study {study:?}"),
                format!("already {}, cannot be told again", before.state.as_str()),
            ));
        }
        let cost = outcome_cost(&before, &valid)?;
        let ValidOutcome {
            state,
            objective,
            error,
            point,
            ..
        } = valid;
        let error = error.map(pg_text);
        let error = error.as_deref();
        let row = tx.query_one(
            &self.st.tell,
            &[
                &study,
                &n,
                &state.as_str(),
                &objective,
                &cost,
                &error,
                &point.as_ref().map(|p| p.0.as_str()),
                &point.as_ref().map(|p| p.1.as_str()),
            ],
        )?;
        let mut trial = row_to_trial(&row)?;
        attach_trial_steps(&mut tx, &self.st, study, &mut trial)?;
        tx.commit()?;
        Ok(Told {
            trial,
            late: before.state == TrialState::Abandoned,
        })
    }

    fn tell_step(&mut self, study: &str, number: u64, step: &StepOutcome) -> Result<Trial> {
        check_name("study name", study)?;
        let n = to_sql_number(number)?;
        let mut tx = self.client.transaction()?;
        let mut trial = match tx.query_opt(&self.st.lock_trial, &[&study, &n])? {
            None => {
                drop(tx);
                return Err(self.trial_not_found(study, number));
            }
            Some(row) => row_to_trial(&row)?,
        };
        attach_trial_steps(&mut tx, &self.st, study, &mut trial)?;
        // The server's clock, as for every other timestamp (heartbeats are compared with it).
        let at: f64 = tx.query_one(&format!("SELECT {NOW}"), &[])?.try_get(0)?;
        apply_step(&mut trial, step, at)?;
        let step_sql = i32::try_from(step.step).map_err(|_| Error::invalid("step", "too large"))?;
        tx.execute(
            &self.st.insert_step,
            &[&study, &n, &step_sql, &step.value, &step.cost, &at],
        )?;
        tx.execute(
            &self.st.update_stepped,
            &[
                &study,
                &n,
                &trial.state.as_str(),
                &trial.objective,
                &trial.cost,
                &trial.finished_at,
                &at,
            ],
        )?;
        tx.commit()?;
        Ok(trial)
    }

    fn trials(&mut self, study: &str) -> Result<Vec<Trial>> {
        check_name("study name", study)?;
        // One statement: a consistent snapshot of the study and its trials.
        let rows = self.client.query(&self.st.study_trials, &[&study])?;
        if rows.is_empty() {
            return Err(Error::NotFound(format!("study {study:?}")));
        }
        let mut trials = Vec::with_capacity(rows.len());
        for row in &rows {
            // A study without trials gives one row of NULLs.
            if row.try_get::<_, Option<i64>>(0)?.is_some() {
                trials.push(row_to_trial(row)?);
            }
        }
        // Steps told after the statement above may show up beyond their trial row's state.
        attach_steps(&mut self.client, &self.st, study, &mut trials)?;
        Ok(trials)
    }

    /// Reads in a `REPEATABLE READ` read-only transaction (no row lock: it never waits for
    /// [`Storage::ask_with`]): the state, the trials and their steps come from one snapshot.
    fn snapshot(&mut self, study: &str) -> Result<Snapshot> {
        check_name("study name", study)?;
        let mut tx = read_snapshot(&mut self.client)?;
        let Some(row) = tx.query_opt(&self.st.read_state, &[&study])? else {
            return Err(Error::NotFound(format!("study {study:?}")));
        };
        let state_text: String = row.try_get(0)?;
        let state = serde_json::from_str(&state_text)?;
        let mut trials = tx
            .query(&self.st.load_trials, &[&study])?
            .iter()
            .map(row_to_trial)
            .collect::<Result<Vec<_>>>()?;
        attach_steps(&mut tx, &self.st, study, &mut trials)?;
        tx.commit()?;
        Ok(Snapshot { trials, state })
    }

    /// Reads in a `REPEATABLE READ` read-only transaction: the count, the page and its steps
    /// come from one snapshot.
    fn trials_page(&mut self, study: &str, from: u64, limit: u64) -> Result<TrialPage> {
        check_name("study name", study)?;
        // Numbers and limits beyond PostgreSQL's BIGINT select everything there is.
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut tx = read_snapshot(&mut self.client)?;
        if tx.query_opt(&self.st.study_exists, &[&study])?.is_none() {
            return Err(Error::NotFound(format!("study {study:?}")));
        }
        let total: i64 = tx.query_one(&self.st.count_trials, &[&study])?.try_get(0)?;
        let mut trials = tx
            .query(&self.st.trial_page, &[&study, &from, &limit])?
            .iter()
            .map(row_to_trial)
            .collect::<Result<Vec<_>>>()?;
        if let (Some(first), Some(last)) = (trials.first(), trials.last())
            && trials.iter().any(|t| t.step_to.is_some())
        {
            let (first, last) = (to_sql_number(first.number)?, to_sql_number(last.number)?);
            let steps = tx
                .query(&self.st.page_steps, &[&study, &first, &last])?
                .iter()
                .map(|row| {
                    let (number, step) = row_to_step(row)?;
                    Ok((u64::try_from(number).unwrap_or(u64::MAX), step))
                })
                .collect::<Result<Vec<_>>>()?;
            attach_page_steps(&mut trials, steps);
        }
        tx.commit()?;
        Ok(TrialPage {
            total: u64::try_from(total).unwrap_or(0),
            trials,
        })
    }

    /// Refreshes `heartbeat_at`. A trial that is not running (e.g. already abandoned) is an
    /// [`Error::Invalid`] that changes nothing, which tells the worker it was given up on.
    fn heartbeat(&mut self, study: &str, number: u64) -> Result<()> {
        check_name("study name", study)?;
        let n = to_sql_number(number)?;
        if self.client.execute(&self.st.heartbeat, &[&study, &n])? == 1 {
            return Ok(());
        }
        match self.client.query_opt(&self.st.trial_state, &[&study, &n])? {
            None => Err(self.trial_not_found(study, number)),
            Some(row) => {
                let other: String = row.try_get(0)?;
                Err(Error::invalid(
                    format!("trial {number} of study {study:?}"),
                    format!("is {other}, not running"),
                ))
            }
        }
    }

    fn abandon_stale(&mut self, study: &str, timeout_s: f64) -> Result<Vec<u64>> {
        let timeout_s = finite("timeout_s", timeout_s)?;
        if timeout_s < 0.0 {
            return Err(Error::invalid(
                "timeout_s",
                format!("must be >= 0, got {timeout_s}"),
            ));
        }
        check_name("study name", study)?;
        let reason = format!("abandoned: no heartbeat for more than {timeout_s} s");
        let rows = self
            .client
            .query(&self.st.abandon, &[&study, &timeout_s, &reason])?;
        if rows.is_empty()
            && self
                .client
                .query_opt(&self.st.study_exists, &[&study])?
                .is_none()
        {
            return Err(Error::NotFound(format!("study {study:?}")));
        }
        let mut numbers = rows
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(0)?;
                u64::try_from(n).map_err(|e| Error::Storage(format!("corrupt trial number: {e}")))
            })
            .collect::<Result<Vec<u64>>>()?;
        numbers.sort_unstable();
        Ok(numbers)
    }

    fn abandon(&mut self, study: &str, number: u64, reason: &str) -> Result<bool> {
        check_name("study name", study)?;
        let n = to_sql_number(number)?;
        if self
            .client
            .execute(&self.st.abandon_one, &[&study, &n, &reason])?
            == 1
        {
            return Ok(true);
        }
        match self.client.query_opt(&self.st.trial_state, &[&study, &n])? {
            None => Err(self.trial_not_found(study, number)),
            Some(_) => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_parameter_is_split_off_and_checked() {
        assert_eq!(
            split_schema("postgresql://u@h/db").unwrap(),
            ("postgresql://u@h/db".to_owned(), DEFAULT_SCHEMA.to_owned())
        );
        assert_eq!(
            split_schema("postgresql://u@h/db?schema=t_1").unwrap(),
            ("postgresql://u@h/db".to_owned(), "t_1".to_owned())
        );
        assert_eq!(
            split_schema("postgres://u@h/db?connect_timeout=3&schema=Ab&application_name=x")
                .unwrap(),
            (
                "postgres://u@h/db?connect_timeout=3&application_name=x".to_owned(),
                "Ab".to_owned()
            )
        );
        for bad in ["1a", "", "a-b", "a\"b", "a;drop", &"x".repeat(64)] {
            let url = format!("postgresql://h/db?schema={bad}");
            assert!(
                matches!(split_schema(&url), Err(Error::Invalid { .. })),
                "{bad:?}"
            );
        }
        assert!(split_schema("postgresql://h/db?schema=a&schema=b").is_err());
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn nul_characters_are_replaced_in_text() {
        assert_eq!(pg_text("a\0b"), "a\u{fffd}b");
        assert!(matches!(pg_text("ab"), std::borrow::Cow::Borrowed("ab")));
        assert!(check_name("study name", "a\0").is_err());
    }
}
