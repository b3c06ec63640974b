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
