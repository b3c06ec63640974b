//! End-to-end tests of the study commands on SQLite.

mod common;
use common::{export, pandora};
use serde_json::Value;

const BUILTIN: &str = r#"
[study]
name = "t"
storage = "sqlite:study.db"
[objective]
builtin = "ackley"
dim = 2
[cost]
kind = "known"
formula = "linear_mean"
[budget]
total = 120.0
[policy]
acquisition = "pbgi_d"
seed = 1
"#;

#[test]
fn run_respects_the_budget_resumes_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), BUILTIN).unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let s = &v["summary"];
    let complete = s["complete"].as_u64().unwrap();
    assert!(complete >= 6, "{out}");
    assert!(s["budget_spent"].as_f64().unwrap() <= 120.0 + 1e-9);
    assert!(v["stopped"].as_str().unwrap().contains("budget"));
    // Resuming a finished study adds nothing and keeps every trial.
    let (code, out2, _) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0);
    let v2: Value = serde_json::from_str(&out2).unwrap();
    assert_eq!(v2["summary"]["complete"].as_u64().unwrap(), complete);
    // status and best agree.
    let (code, st, _) = pandora(dir.path(), &["status", "--json", "s.toml"]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_str(&st).unwrap();
    let (code, best, _) = pandora(dir.path(), &["best", "--json", "s.toml"]);
    assert_eq!(code, 0);
    let best: Value = serde_json::from_str(&best).unwrap();
    assert_eq!(best["objective"], st["best"]["objective"]);
    assert!(st["lambda"].as_f64().unwrap() > 0.0);
    // Export: one CSV row per trial with the parameters as columns; JSON round-trips.
    let (code, csv, _) = pandora(dir.path(), &["export", "s.toml", "--format", "csv"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("number,state,objective,cost"));
    assert!(lines[0].ends_with("param.x0,param.x1"));
    assert_eq!(lines.len() as u64, complete + 1);
    let (code, js, _) = pandora(dir.path(), &["export", "s.toml", "--format", "json"]);
    assert_eq!(code, 0);
    let js: Value = serde_json::from_str(&js).unwrap();
    assert_eq!(js.as_array().unwrap().len() as u64, complete);
    let (code, _, err) = pandora(dir.path(), &["export", "s.toml", "--format", "xml"]);
    assert_eq!(code, 2);
    assert!(err.contains("--format"));
}

#[test]
fn ask_and_tell_drive_a_study_from_outside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), BUILTIN).unwrap();
    for k in 0..3u64 {
        let (code, out, err) = pandora(dir.path(), &["ask", "--json", "s.toml"]);
        assert_eq!(code, 0, "{err}");
        let t: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(t["number"].as_u64().unwrap(), k);
        assert!(t["params"]["x0"].is_number());
        let (code, out, err) = pandora(
            dir.path(),
            &[
                "tell",
                "--json",
                "s.toml",
                &k.to_string(),
                "--objective",
                "-1.5",
            ],
        );
        assert_eq!(code, 0, "{err}");
        let t: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(t["state"], "complete");
        assert!(t["cost"].as_f64().unwrap() >= 1.0);
    }
    // Telling twice is an error that changes nothing.
    let (code, _, err) = pandora(
        dir.path(),
        &["tell", "--json", "s.toml", "0", "--objective", "5"],
    );
    assert_eq!(code, 2, "{err}");
    let (_, best, _) = pandora(dir.path(), &["best", "--json", "s.toml"]);
    let best: Value = serde_json::from_str(&best).unwrap();
    assert_eq!(best["objective"].as_f64().unwrap(), -1.5);
}

#[test]
fn failing_commands_become_failed_trials_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    // Fails for x > 0.8, prints NaN for 0.6 < x <= 0.8, malformed output for 0.5 < x <= 0.6.
    std::fs::write(
        dir.path().join("obj.py"),
        r#"import json, sys
p = json.load(sys.stdin)
x = p["x"]
if x > 0.8:
    sys.stderr.write("boom: x too large\n"); sys.exit(3)
if x > 0.6:
    print("NaN")
elif x > 0.5:
    print("not json")
else:
    print(json.dumps({"objective": -(x - 0.3) ** 2, "cost": 1.0 + x}))
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        r#"
[study]
name = "cmd"
storage = "sqlite:study.db"
direction = "maximize"
[objective]
command = ["python3", "obj.py"]
timeout_s = 30
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[cost]
kind = "reported"
[budget]
max_trials = 12
[policy]
acquisition = "log_ei"
"#,
    )
    .unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let s = &v["summary"];
    let (complete, failed) = (
        s["complete"].as_u64().unwrap(),
        s["failed"].as_u64().unwrap(),
    );
    assert_eq!(complete + failed, 12, "{out}");
    assert!(failed >= 1, "the Sobol design covers x > 0.5: {out}");
    assert!(complete >= 1);
}

#[test]
fn bad_configs_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (bad, field) in [
        (BUILTIN.replace("dim = 2", "dim = 2\nbogus = 1"), "bogus"),
        (
            BUILTIN.replace("total = 120.0", "total = -1.0"),
            "budget.total",
        ),
        (
            BUILTIN.replace("\"ackley\"", "\"sphere\""),
            "objective.builtin",
        ),
        (
            BUILTIN.replace("\"pbgi_d\"", "\"gittins\""),
            "policy.acquisition: unknown acquisition 'gittins'",
        ),
        (
            BUILTIN.replace("sqlite:study.db", "mysql://x"),
            "study.storage",
        ),
    ] {
        std::fs::write(dir.path().join("bad.toml"), bad).unwrap();
        let (code, _, err) = pandora(dir.path(), &["run", "--json", "bad.toml"]);
        assert_eq!(code, 2);
        assert!(err.contains(field), "'{err}' should name {field}");
    }
}

#[test]
fn reported_costs_stop_before_the_predicted_cost_exceeds_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("obj.py"),
        r#"import json, sys
x = json.load(sys.stdin)["x"]
print(json.dumps({"objective": -(x - 0.3) ** 2, "cost": 1.0 + 4.0 * x}))
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        r#"
[study]
name = "reported"
storage = "sqlite:study.db"
[objective]
command = ["python3", "obj.py"]
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[cost]
kind = "reported"
[budget]
total = 25.0
[policy]
acquisition = "pbgi_d"
"#,
    )
    .unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["stopped"].as_str().unwrap().contains("budget"), "{out}");
    // Costs are at most 5 each: stopping on the prediction keeps the overshoot within one trial.
    let spent = v["summary"]["budget_spent"].as_f64().unwrap();
    assert!(spent <= 25.0 + 5.0, "{spent}");
    assert!(v["summary"]["complete"].as_u64().unwrap() >= 4);
}

#[test]
fn storage_and_study_flags_and_plots_work_on_a_stored_study() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), BUILTIN).unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, by_config, _) = pandora(dir.path(), &["best", "--json", "s.toml"]);
    assert_eq!(code, 0);
    let flags = ["--storage", "sqlite:study.db", "--study", "t"];
    let (code, by_flags, err) = pandora(dir.path(), &[&["best", "--json"][..], &flags].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(by_config, by_flags, "the same best trial either way");
    // Unknown study, and both or neither of CONFIG and --storage/--study: clear errors.
    let (code, _, err) = pandora(
        dir.path(),
        &[
            "status",
            "--json",
            "--storage",
            "sqlite:study.db",
            "--study",
            "nope",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("nope"), "{err}");
    let (code, _, _) = pandora(
        dir.path(),
        &[&["status", "--json", "s.toml"][..], &flags].concat(),
    );
    assert_ne!(code, 0);
    let (code, _, _) = pandora(dir.path(), &["status", "--json"]);
    assert_ne!(code, 0);
    // Plots in both formats, from the config and from the flags.
    let (code, _, err) = pandora(dir.path(), &["plot", "--json", "s.toml", "--out", "a.png"]);
    assert_eq!(code, 0, "{err}");
    let png = std::fs::read(dir.path().join("a.png")).unwrap();
    assert!(png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let (code, _, err) = pandora(
        dir.path(),
        &[&["plot", "--json"][..], &flags, &["--out", "a.svg"]].concat(),
    );
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(dir.path().join("a.svg")).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("best so far"),
        "{}",
        &svg[..200.min(svg.len())]
    );
}

/// A study with the PBGI stopping rule and a large λ stops early; `status` shows the statistic
/// against its threshold and the reason, in JSON and in text.
#[test]
fn status_shows_the_stopping_statistic_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BUILTIN.replace("total = 120.0", "max_trials = 40").replace(
        "seed = 1",
        "seed = 1\nstopping = { rule = \"pbgi\", lambda = 1.0 }",
    );
    std::fs::write(dir.path().join("s.toml"), cfg).unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["stopped"].as_str().unwrap().contains("stopping rule"),
        "{out}"
    );
    let complete = v["summary"]["complete"].as_u64().unwrap();
    assert!(complete < 40, "{out}");

    let (code, st, err) = pandora(dir.path(), &["status", "--json", "s.toml"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&st).unwrap();
    let stop = &st["stopping"];
    assert_eq!(stop["rule"], "pbgi", "{st}");
    assert_eq!(stop["fired"], true, "{st}");
    assert_eq!(stop["lambda"].as_f64().unwrap(), 1.0);
    assert_eq!(
        stop["threshold"].as_f64().unwrap(),
        0.0,
        "threshold is log λ"
    );
    assert!(
        stop["value"].as_f64().unwrap() <= 0.0,
        "fired, so the statistic is at most its threshold: {st}"
    );
    let reason = st["stop_reason"].as_str().unwrap();
    assert!(!reason.is_empty());

    let (code, text, err) = pandora(dir.path(), &["status", "s.toml", "--format", "text"]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains(&format!("{complete} complete")), "{text}");
    assert!(text.contains("threshold 0.0000"), "{text}");
    assert!(text.contains("(fired)"), "{text}");
    assert!(reason.starts_with("stopping rule fired: "), "{reason}");
    assert!(text.contains(&format!("finished: {reason}")), "{text}");

    let (code, _, err) = pandora(dir.path(), &["status", "s.toml", "--format", "yaml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--format"), "{err}");
}

const EXTERNAL: &str = r#"
[study]
name = "ext"
storage = "sqlite:ext.db"
direction = "minimize"
[objective]
kind = "external"
[[space]]
name = "lr"
type = "float"
low = 0.001
high = 0.1
log = true
[[space]]
name = "opt"
type = "categorical"
choices = ["adam", "sgd"]
[budget]
max_trials = 5
[policy]
initial_design = 3
"#;

/// A study whose trials are evaluated outside Pandora (as the Python package creates them):
/// `ask`, `tell`, `status`, `best`, `export` and `plot` work; `pandora run` refuses with exit
/// code 2 and a message that says what to do, without handing out a trial.
#[test]
fn external_objectives_work_with_ask_and_tell_and_run_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("e.toml"), EXTERNAL).unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "e.toml", "--quiet"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("external objective") && err.contains("pandora ask"),
        "{err}"
    );
    let (code, st, err) = pandora(dir.path(), &["status", "--json", "e.toml"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&st).unwrap();
    assert_eq!(
        st["running"].as_u64(),
        Some(0),
        "run created no trial: {st}"
    );
    // Five trials by ask/tell, objective (lr - 0.01)^2 computed here.
    let mut told = Vec::new();
    for k in 0..5u64 {
        let (code, out, err) = pandora(dir.path(), &["ask", "--json", "e.toml"]);
        assert_eq!(code, 0, "{err}");
        let t: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(t["number"].as_u64(), Some(k), "{out}");
        let lr = t["params"]["lr"].as_f64().unwrap();
        assert!((0.001..=0.1).contains(&lr), "{out}");
        let v = (lr - 0.01).powi(2);
        let (code, _, err) = pandora(
            dir.path(),
            &[
                "tell",
                "--json",
                "e.toml",
                &k.to_string(),
                "--objective",
                &v.to_string(),
            ],
        );
        assert_eq!(code, 0, "{err}");
        told.push(v);
    }
    let (code, out, _) = pandora(dir.path(), &["ask", "--json", "e.toml"]);
    assert_eq!(code, 0);
    assert!(out.contains("reached max_trials = 5"), "{out}");
    let (code, best, err) = pandora(dir.path(), &["best", "--json", "e.toml"]);
    assert_eq!(code, 0, "{err}");
    let best: Value = serde_json::from_str(&best).unwrap();
    let min = told.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(best["objective"].as_f64(), Some(min), "minimize: {best}");
    let (code, csv, err) = pandora(dir.path(), &["export", "e.toml", "--format", "csv"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(csv.lines().count(), 6, "{csv}");
    assert!(csv.lines().next().unwrap().contains("param.opt"), "{csv}");
    let (code, _, err) = pandora(dir.path(), &["plot", "--json", "e.toml", "--out", "e.svg"]);
    assert_eq!(code, 0, "{err}");
    // The same from the stored configuration (--storage/--study), as for a Python study.
    let flags = ["--storage", "sqlite:ext.db", "--study", "ext"];
    let (code, _, err) = pandora(
        dir.path(),
        &[&["run", "--json", "--quiet"][..], &flags].concat(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("external objective"), "{err}");
    let (code, by_flags, err) = pandora(dir.path(), &[&["best", "--json"][..], &flags].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&by_flags).unwrap(), best);
    // `kind = "external"` with a command, or without a space: errors naming the field.
    for (bad, field) in [
        (
            EXTERNAL.replace(
                "kind = \"external\"",
                "kind = \"external\"\ncommand = [\"x\"]",
            ),
            "objective",
        ),
        (
            EXTERNAL.split("[[space]]").next().unwrap().to_string(),
            "space",
        ),
        (EXTERNAL.replace("\"external\"", "\"remote\""), "kind"),
    ] {
        std::fs::write(dir.path().join("bad.toml"), bad).unwrap();
        let (code, _, err) = pandora(dir.path(), &["status", "--json", "bad.toml"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(field), "'{err}' should name {field}");
    }
}

/// `acquisition = "b_ms_ei"` in a study: each ask records the suggested budget and the refill
/// lower bound in its decision and keeps the carry (with the trees for the warm start) in the
/// study state, so the refill rule holds across asks made by separate processes.
#[test]
fn bmsei_study_carries_the_refill_state_between_asks() {
    let dir = tempfile::tempdir().unwrap();
    let config = BUILTIN.replace("total = 120.0", "total = 110.0").replace(
        "acquisition = \"pbgi_d\"",
        "acquisition = \"b_ms_ei\"\ntree = [1, 1, 1]",
    );
    std::fs::write(dir.path().join("s.toml"), &config).unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let trials = common::export(dir.path(), "s.toml");
    let model: Vec<&Value> = trials
        .iter()
        .filter(|t| t["decision"]["phase"] == "model")
        .collect();
    assert!(model.len() >= 3, "{} model trials", model.len());
    let mut refills = 0;
    for pair in model.windows(2) {
        let a = &pair[0]["decision"]["bmsei"];
        let b = &pair[1]["decision"]["bmsei"];
        let left = a["suggested_budget"].as_f64().unwrap() - pair[0]["cost"].as_f64().unwrap();
        if left > a["lower_bound"].as_f64().unwrap() {
            refills += 1;
            assert_eq!(b["suggested_budget"].as_f64().unwrap(), left);
            assert_eq!(b["lower_bound"], a["lower_bound"]);
        }
    }
    assert!(refills >= 1, "no ask refilled");
    // The tree options belong to b_ms_ei only.
    std::fs::write(
        dir.path().join("bad.toml"),
        BUILTIN.replace("seed = 1", "seed = 1\nrefill = false"),
    )
    .unwrap();
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "bad.toml", "--quiet"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown field `refill`"), "{err}");
}

/// Issue 20.9: the README's first command. The quickstart spends most of its budget on trials the
/// policy chose and gets close to the optimum, and `run` ends with a summary in words (best value
/// and parameters, cost against the budget, why it stopped, the time, what to run next); `--json`
/// gives the machine-readable form.
#[test]
fn the_quickstart_optimizes_visibly_and_ends_with_a_summary_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.toml"
    );
    std::fs::copy(example, dir.path().join("q.toml")).unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "q.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    for words in [
        "study quickstart: ",
        "finished: budget exhausted: spent ",
        "best: ",
        "; the optimum is 0",
        "of the budget of 300.0 spent",
        "trials the policy chose",
        "time: optimizer ",
        "next: pandora status q.toml",
        "pandora plot q.toml",
    ] {
        assert!(out.contains(words), "'{words}' missing from:\n{out}");
    }
    assert!(serde_json::from_str::<Value>(&out).is_err(), "{out}");
    let (code, st, err) = pandora(dir.path(), &["status", "q.toml", "--json"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(&st).unwrap();
    assert!(st["best"]["objective"].as_f64().unwrap() > -0.1, "{st}");
    assert_eq!(
        st["time"]["optimizer_trials"].as_u64(),
        st["complete"].as_u64()
    );
    // Most of the budget goes to the policy's trials, not to the initial design.
    let trials = export(dir.path(), "q.toml");
    let cost = |phase: &str| -> f64 {
        trials
            .iter()
            .filter(|t| t["decision"]["phase"] == phase)
            .map(|t| t["cost"].as_f64().unwrap())
            .sum()
    };
    let (initial, model) = (cost("initial"), cost("model"));
    assert!(model > 2.0 * initial, "initial {initial}, model {model}");
    // In words by default, JSON with --json, for status and best too.
    let (_, text, _) = pandora(dir.path(), &["status", "q.toml"]);
    assert!(text.contains("finished: budget exhausted"), "{text}");
    let (_, best, _) = pandora(dir.path(), &["best", "q.toml"]);
    assert!(best.starts_with("trial "), "{best}");
    let (code, again, err) = pandora(dir.path(), &["run", "q.toml", "--quiet", "--json"]);
    assert_eq!(code, 0, "{err}");
    let again: Value = serde_json::from_str(&again).unwrap();
    assert!(
        again["summary"]["stop_reason"]
            .as_str()
            .unwrap()
            .starts_with("budget exhausted")
    );
}

/// `pandora serve` refuses a non-loopback address without a token, a short token and a storage
/// that does not open (without printing its password).
#[test]
fn serve_refuses_unsafe_or_broken_settings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, _, err) = pandora(
        d,
        &["serve", "--storage", "sqlite:s.db", "--bind", "0.0.0.0:0"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--token-file"), "{err}");
    std::fs::write(d.join("token"), "short\n").unwrap();
    let (code, _, err) = pandora(
        d,
        &["serve", "--storage", "sqlite:s.db", "--token-file", "token"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 16"), "{err}");
    let url = "postgresql://u:pw-secret-9@127.0.0.1:1/db?connect_timeout=5";
    let (code, _, err) = pandora(d, &["serve", "--storage", url, "--bind", "127.0.0.1:0"]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("pw-secret-9"), "{err}");
    assert!(err.contains("127.0.0.1"), "{err}");
}

/// A real `pandora serve` on a free loopback port: it answers, and exits 0 on SIGTERM, after
/// answering the request in flight (half its body sent before the signal, the rest after).
#[cfg(unix)]
#[test]
fn serve_answers_and_stops_on_sigterm() {
    use std::io::{BufRead, Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["serve", "--storage", "sqlite:s.db", "--bind", "127.0.0.1:0"])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /api/studies HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let body = "[study]\nname = \"inflight\"\ndirection = \"minimize\"\n[objective]\nkind = \"external\"\n\
                [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n\
                [budget]\nmax_trials = 2\n";
    let (first, second) = body.split_at(body.len() / 2);
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "POST /api/studies HTTP/1.1\r\nHost: x\r\nContent-Type: application/toml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{first}",
        body.len()
    )
    .unwrap();
    // Let the server read the headers and start the request (it then waits for the body).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "pandora serve exited with a request in flight"
    );
    conn.write_all(second.as_bytes()).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("shutting down"), "{rest}");
    let (code, out, err) = pandora(
        dir.path(),
        &["status", "--storage", "sqlite:s.db", "--study", "inflight"],
    );
    assert_eq!(code, 0, "{out}{err}");
}
