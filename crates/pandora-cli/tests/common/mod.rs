//! Helpers shared by the CLI's end-to-end tests (each test file is its own crate and uses only
//! some of them).
#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs the `pandora` binary in `dir`; returns the exit code, stdout and stderr.
pub fn pandora(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run pandora");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every trial of the study of `config` (run in `dir`), from `pandora export --format json`.
pub fn export(dir: &Path, config: &str) -> Vec<Value> {
    let (code, out, err) = pandora(dir, &["export", config, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("export prints a JSON array of trials")
}

/// The variable naming the PostgreSQL server of the tests.
pub const ENV: &str = "PANDORA_TEST_POSTGRES_URL";

/// A schema of its own for one test, dropped (with everything in it) when the guard goes.
pub struct TestSchema {
    base: String,
    schema: String,
}

impl TestSchema {
    /// A fresh schema name on the server of `PANDORA_TEST_POSTGRES_URL`. The tests that call
    /// this are `#[ignore]`d unless the variable was set at build time (`cfg(pandora_postgres)`,
    /// see build.rs); run with `--ignored` but without the variable, they fail here instead of
    /// passing without having run.
    pub fn new(test: &str) -> Self {
        let Some(base) = std::env::var(ENV).ok().filter(|s| !s.is_empty()) else {
            panic!("{test}: {ENV} is not set: this test needs a PostgreSQL server (see README.md)");
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let schema = format!("cli_{test}_{}_{nanos}", std::process::id());
        Self { base, schema }
    }

    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.base, self.schema)
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}
