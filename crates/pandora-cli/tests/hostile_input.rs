//! Hostile input end to end: output pipes that close early, requests too large to allocate,
//! values that look like flags, names too long for the database, spreadsheet formulas in CSV
//! cells, file modes under a permissive umask, and a fuzz-style test over config TOML,
//! `eval`/`boxes` JSON and `tell` arguments. Nothing may panic, abort or hang; every refusal exits
//! with code 2 and names the field.

mod common;
use common::pandora;

use proptest::prelude::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// A study with an external objective (trials are asked and told by hand).
const EXTERNAL: &str = r#"
[study]
name = "ext"
storage = "sqlite:ext.db"
[objective]
kind = "external"
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[[space]]
name = "opt"
type = "categorical"
choices = ["=1+1", "@SUM(A1)"]
[budget]
max_trials = 50
[policy]
acquisition = "random"
"#;

/// A valid `eval` request (two dimensions).
const EVAL: &str = r#"{"train_x": [[0.1, 0.2], [0.7, 0.4]], "train_y": [1.0, 0.5],
 "kernel": {"type": "matern52", "lengthscales": [0.3, 0.5], "outputscale": 1.7},
 "noise": 1e-4, "mean": 0.2, "points": [[0.5, 0.5]],
 "acquisitions": [{"name": "log_ei", "best_f": 1.0}, {"name": "ts", "seed": 3, "num_features": 64}],
 "optimize": {"acquisition": 0, "raw_samples": 64, "restarts": 2, "seed": 1}}"#;

/// A valid `boxes` instance.
const BOXES: &str = r#"{"boxes": [{"cost": 0.3, "rewards": {"values": [0.0, 1.0, 4.0], "probs": [0.5, 0.3, 0.2]}},
 {"cost": 0.1, "normal": {"mean": 0.5, "std": 1.0}}], "fallback": 0.2}"#;

/// Runs `pandora args` with its stdout closed before it writes anything: the command must end
/// quietly (SIGPIPE or exit 0), never with a panic.
fn assert_quiet_on_closed_pipe(dir: &Path, args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away, as `head` does
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{args:?}: {err}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.code() == Some(0) || out.status.signal() == Some(libc_sigpipe()),
            "{args:?} ended with {:?}: {err}",
            out.status
        );
    }
}

/// SIGPIPE's number (13 on every Unix Pandora runs on).
#[cfg(unix)]
fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn commands_piped_into_a_closed_reader_end_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), EXTERNAL).unwrap();
    for _ in 0..3 {
        assert_eq!(pandora(d, &["ask", "--json", "s.toml"]).0, 0);
    }
    assert_eq!(
        pandora(d, &["tell", "--json", "s.toml", "0", "--objective", "1"]).0,
        0
    );
    let many_boxes: Vec<String> = (0..3000)
        .map(|i| {
            format!(
                "{{\"cost\": 0.1, \"rewards\": {{\"values\": [0, {i}], \"probs\": [0.5, 0.5]}}}}"
            )
        })
        .collect();
    std::fs::write(
        d.join("boxes.json"),
        format!("{{\"boxes\": [{}]}}", many_boxes.join(",")),
    )
    .unwrap();
    std::fs::write(d.join("eval.json"), EVAL).unwrap();
    for args in [
        &["export", "s.toml"][..],
        &["export", "s.toml", "--format", "json"],
        &["status", "--json", "s.toml"],
        &["status", "s.toml", "--format", "text"],
        &["best", "--json", "s.toml"],
        &["eval", "eval.json"],
        &["boxes", "boxes.json"],
    ] {
        assert_quiet_on_closed_pipe(d, args);
    }
}

/// Requests that would allocate far too much are refused before allocating, naming the field and
/// the limit.
#[test]
fn oversized_requests_are_refused_naming_the_field_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows = |n: usize| vec!["[0.1, 0.2]"; n].join(",");
    let cases = [
        (
            format!(
                r#"{{"train_x": [{}], "train_y": [{}], "kernel": {{"type": "rbf", "lengthscales": 0.3}}, "points": [[0.5, 0.5]]}}"#,
                rows(200_000),
                vec!["1.0"; 200_000].join(",")
            ),
            "train_x (rows): 200000 is more than the limit of 5000",
        ),
        (
            format!(
                r#"{{"train_x": [{}], "train_y": [{}], "kernel": {{"type": "rbf", "lengthscales": 0.3}}, "points": [[0.5, 0.5]]}}"#,
                rows(20_000),
                vec!["1.0"; 20_000].join(",")
            ),
            "train_x (rows): 20000 is more than the limit of 5000",
        ),
        (
            format!(
                r#"{{"kernel": {{"type": "rbf", "lengthscales": 0.3}}, "points": [{}]}}"#,
                rows(20_000)
            ),
            "points (rows): 20000 is more than the limit of 10000",
        ),
        (
            EVAL.replace("\"raw_samples\": 64", "\"raw_samples\": 1000000000"),
            "optimize.raw_samples: 1000000000 is more than the limit of 100000",
        ),
        (
            EVAL.replace("\"restarts\": 2", "\"restarts\": 1000000"),
            "optimize.restarts: 1000000 is more than the limit of 1000",
        ),
        (
            EVAL.replace("\"num_features\": 64", "\"num_features\": 100000000"),
            "acquisitions[1].num_features: 100000000 is more than the limit of 4096",
        ),
        (
            format!(
                r#"{{"kernel": {{"type": "rbf", "lengthscales": 0.3}}, "points": [[{}]]}}"#,
                vec!["0.5"; 2000].join(",")
            ),
            "kernel.lengthscales (dimensions): 2000 is more than the limit of 1000",
        ),
    ];
    for (request, expected) in cases {
        std::fs::write(d.join("r.json"), &request).unwrap();
        let (code, out, err) = pandora(d, &["eval", "r.json"]);
        assert_eq!(code, 2, "{expected}: {out}");
        assert!(
            err.contains(expected),
            "'{err}' should contain '{expected}'"
        );
    }
    // Normal rewards keep the quadratic evaluation, and their limit.
    let mut boxes: Vec<&str> =
        vec![r#"{"cost": 0.1, "rewards": {"values": [0, 1], "probs": [0.5, 0.5]}}"#; 5_000];
    boxes.push(r#"{"cost": 0.1, "normal": {"mean": 0, "std": 1}}"#);
    std::fs::write(
        d.join("b.json"),
        format!("{{\"boxes\": [{}]}}", boxes.join(",")),
    )
    .unwrap();
    let (code, _, err) = pandora(d, &["boxes", "b.json"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("boxes: 5001 boxes with a \"normal\" reward"),
        "{err}"
    );
    assert!(err.contains("limit of 5000"), "{err}");
}

/// Item by item: negative values are values, `max_trials = 0` and over-long study names are
/// refused naming the field, and a wrongly typed bound names its parameter and key.
#[test]
fn small_refusals_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), EXTERNAL).unwrap();
    assert_eq!(pandora(d, &["ask", "--json", "s.toml"]).0, 0);
    // `-inf` is a value (refused: not finite), not an unknown flag; `-1.5` is accepted.
    let (code, _, err) = pandora(d, &["tell", "--json", "s.toml", "0", "--objective", "-inf"]);
    assert_eq!(code, 2);
    assert!(err.contains("objective") && err.contains("finite"), "{err}");
    let (code, _, err) = pandora(
        d,
        &[
            "tell",
            "--json",
            "s.toml",
            "0",
            "--objective",
            "1",
            "--cost",
            "-inf",
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("cost"), "{err}");
    let (code, _, err) = pandora(d, &["tell", "--json", "s.toml", "0", "--objective", "-1.5"]);
    assert_eq!(code, 0, "{err}");

    for (from, to, expected) in [
        (
            "max_trials = 50",
            "max_trials = 0",
            "budget.max_trials: must be at least 1",
        ),
        ("low = 0.0", "low = \"a\"", "low"),
        ("high = 1.0", "high = [1]", "high"),
    ] {
        std::fs::write(
            d.join("bad.toml"),
            EXTERNAL.replace(from, to).replace("ext.db", "bad.db"),
        )
        .unwrap();
        let (code, _, err) = pandora(d, &["ask", "--json", "bad.toml"]);
        assert_eq!(code, 2, "{to}");
        assert!(
            err.contains(expected),
            "{to}: '{err}' should contain '{expected}'"
        );
        assert!(
            !d.join("bad.db").exists(),
            "{to}: the refusal created the database"
        );
    }
    let long = "n".repeat(3000);
    std::fs::write(
        d.join("long.toml"),
        EXTERNAL.replace("name = \"ext\"", &format!("name = \"{long}\"")),
    )
    .unwrap();
    let (code, _, err) = pandora(d, &["ask", "--json", "long.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("study name: is 3000 bytes long; at most 1024 bytes"),
        "{err}"
    );
}

/// CSV cells that a spreadsheet would run are neutralized; numbers, negative ones included, are
/// not touched.
#[test]
fn csv_export_neutralizes_formulas_but_not_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), EXTERNAL).unwrap();
    for _ in 0..2 {
        let (code, _, err) = pandora(
            d,
            &["ask", "--json", "s.toml", "--worker", "=HYPERLINK(\"x\")"],
        );
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(
        pandora(d, &["tell", "--json", "s.toml", "0", "--objective", "-1.5"]).0,
        0
    );
    assert_eq!(
        pandora(
            d,
            &["tell", "--json", "s.toml", "1", "--failed", "@cmd|calc"]
        )
        .0,
        0
    );
    let (code, out, err) = pandora(d, &["export", "s.toml"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows[1].starts_with("0,complete,-1.5,"), "{}", rows[1]);
    assert!(
        rows[1].contains(",\"'=HYPERLINK(\"\"x\"\")\","),
        "{}",
        rows[1]
    );
    assert!(rows[2].contains(",'@cmd|calc"), "{}", rows[2]);
    for row in &rows[1..] {
        let last = row.rsplit(',').next().unwrap();
        assert!(last == "'=1+1" || last == "'@SUM(A1)", "{row}");
    }
    // JSON keeps the values as they are.
    let (_, json, _) = pandora(d, &["export", "s.toml", "--format", "json"]);
    assert!(
        json.contains("\"worker\": \"=HYPERLINK(\\\"x\\\")\""),
        "{json}"
    );
}

/// A new SQLite file is private even under umask 022.
#[cfg(unix)]
#[test]
fn sqlite_files_are_created_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("s.toml"), EXTERNAL).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 022; exec '{}' ask s.toml",
            env!("CARGO_BIN_EXE_pandora")
        ))
        .current_dir(d)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    for f in ["ext.db", "ext.db-wal", "ext.db-shm"] {
        let Ok(meta) = std::fs::metadata(d.join(f)) else {
            continue; // the WAL may be checkpointed away
        };
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{f} has mode {mode:o}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzz-style: one field at a time replaced by a hostile value.

/// Hostile TOML values.
const TOML_VALUES: &[&str] = &[
    "\"a\"",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "true",
    "[]",
    "{}",
    "\"\"",
    "18446744073709551616",
    "-9223372036854775809",
    "1e-320",
    "0.5",
    "[1, \"a\"]",
    "2",
];

/// Hostile JSON values.
const JSON_VALUES: &[&str] = &[
    "\"a\"",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "true",
    "null",
    "[]",
    "{}",
    "[[1e308]]",
    "1e999",
    "18446744073709551616",
    "1000000000",
    "[[0.1, 0.2], [0.3]]",
    "[-1, 2]",
    "0.5",
    "[0.5]",
    "{\"values\": [1], \"probs\": [2]}",
];

/// Hostile `tell` argument values.
const TELL_VALUES: &[&str] = &[
    "-inf",
    "inf",
    "nan",
    "-1e309",
    "1e309",
    "",
    "abc",
    "-",
    "--",
    "0x10",
    "1_000",
    "-0",
    "-1.5",
    "99999999999999999999999",
    "-5",
    "1e-320",
    "+3",
];

/// The config keys the fuzz replaces (section, key) in a study that runs in milliseconds.
const CONFIG_KEYS: &[&str] = &[
    "name",
    "direction",
    "builtin",
    "dim",
    "max_trials",
    "total",
    "low",
    "high",
    "type",
    "acquisition",
    "kind",
    "initial_design",
    "seed",
];

const FUZZ_CONFIG: &str = "[study]\nname = \"f\"\nstorage = \"sqlite:f.db\"\ndirection = \
    \"minimize\"\n[objective]\nbuiltin = \"ackley\"\n[[space]]\nname = \"x\"\ntype = \
    \"float\"\nlow = 0.0\nhigh = 1.0\n[[space]]\nname = \"y\"\ntype = \"float\"\nlow = -1.0\n\
    high = 1.0\n[cost]\nkind = \"uniform\"\n[budget]\nmax_trials = 2\ntotal = 3.0\n[policy]\n\
    acquisition = \"log_ei\"\ninitial_design = 2\nseed = 1\n";

/// The JSON keys the fuzz replaces in the `eval` request and the `boxes` instance.
const EVAL_KEYS: &[&str] = &[
    "train_x",
    "train_y",
    "type",
    "lengthscales",
    "outputscale",
    "noise",
    "mean",
    "points",
    "name",
    "best_f",
    "seed",
    "num_features",
    "acquisition",
    "raw_samples",
    "restarts",
];
const BOXES_KEYS: &[&str] = &[
    "cost", "values", "probs", "mean", "std", "fallback", "boxes",
];

/// Replaces the value of the first `key = ...` line (TOML) with `value`; optionally adds `dim`.
fn mutate_toml(key: &str, value: &str) -> String {
    let mut done = false;
    let mut out: Vec<String> = FUZZ_CONFIG
        .lines()
        .map(|l| {
            if !done && l.split(" = ").next() == Some(key) {
                done = true;
                format!("{key} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !done {
        // `dim` is not in the base config: add it to [objective].
        let i = out.iter().position(|l| l.starts_with("builtin")).unwrap();
        out.insert(i + 1, format!("{key} = {value}"));
    }
    out.join("\n")
}

/// Replaces the value of the first `"key": ...` in a JSON text with `value` (the old value ends
/// at the matching bracket or the next `,`/`}`).
fn mutate_json(text: &str, key: &str, value: &str) -> String {
    let pat = format!("\"{key}\": ");
    let Some(start) = text.find(&pat).map(|i| i + pat.len()) else {
        return text.to_string();
    };
    let bytes = text.as_bytes();
    let mut depth = 0i32;
    let mut end = start;
    let mut in_str = false;
    while end < bytes.len() {
        let c = bytes[end];
        match c {
            b'"' => in_str = !in_str,
            b'[' | b'{' if !in_str => depth += 1,
            b']' | b'}' if !in_str && depth > 0 => depth -= 1,
            b',' | b'}' | b']' if !in_str && depth == 0 => break,
            _ => {}
        }
        end += 1;
        if depth == 0 && !in_str && (c == b']' || c == b'}') {
            break;
        }
    }
    format!("{}{value}{}", &text[..start], &text[end..])
}

/// Runs one fuzz case: no panic, no abort; exit 0, or exit 2 with a message naming one of
/// `names`.
fn check_case(dir: &Path, args: &[&str], names: &[&str], input: &str) {
    let (code, out, err) = pandora(dir, args);
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "{args:?} on\n{input}\npanicked: {err}"
    );
    assert!(
        code == 0 || code == 2,
        "{args:?} on\n{input}\nexit {code}: {out}{err}"
    );
    if code == 2 {
        assert!(
            names.iter().any(|n| err.contains(n)),
            "{args:?} on\n{input}\nthe refusal '{err}' names none of {names:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_config_toml(key in prop::sample::select(CONFIG_KEYS), value in prop::sample::select(TOML_VALUES)) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = mutate_toml(key, value);
        std::fs::write(dir.path().join("f.toml"), &cfg).unwrap();
        // A refusal names the key (or the TOML line it is on).
        check_case(dir.path(), &["run", "--json", "f.toml", "--quiet"], &[key], &cfg);
    }

    #[test]
    fn fuzz_eval_json(key in prop::sample::select(EVAL_KEYS), value in prop::sample::select(JSON_VALUES)) {
        let dir = tempfile::tempdir().unwrap();
        let req = mutate_json(EVAL, key, value);
        std::fs::write(dir.path().join("r.json"), &req).unwrap();
        // Values that change the dimension may be blamed on the other arrays of points.
        check_case(
            dir.path(),
            &["eval", "r.json"],
            &[key, "train_x", "points", "lengthscales", "optimize", "acquisitions", "line"],
            &req,
        );
    }

    #[test]
    fn fuzz_boxes_json(key in prop::sample::select(BOXES_KEYS), value in prop::sample::select(JSON_VALUES)) {
        let dir = tempfile::tempdir().unwrap();
        let inst = mutate_json(BOXES, key, value);
        std::fs::write(dir.path().join("b.json"), &inst).unwrap();
        check_case(dir.path(), &["boxes", "b.json"], &[key, "boxes", "line"], &inst);
    }

    #[test]
    fn fuzz_tell_arguments(
        number in prop::sample::select(TELL_VALUES),
        objective in prop::sample::select(TELL_VALUES),
        cost in prop::sample::select(TELL_VALUES),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("s.toml"), EXTERNAL).unwrap();
        prop_assert_eq!(pandora(d, &["ask", "--json", "s.toml"]).0, 0);
        let args = ["tell", "s.toml", number, "--objective", objective, "--cost", cost];
        check_case(d, &args, &["NUMBER", "objective", "cost", "trial", "--"], &args.join(" "));
    }
}
