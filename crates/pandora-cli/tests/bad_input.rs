//! Bad input end to end: objective commands that misbehave, `tell` with bad values, and configs
//! that cannot work. Each must give a failed trial with the reason or a clear error naming the
//! problem, and nothing already stored may change.

mod common;
use common::{export, pandora};

use serde_json::Value;

/// The objective's behaviour for each call, in order (the script counts its calls in a file).
const MODES: [(&str, &str); 12] = [
    ("ok", ""),
    ("exit", "boom: the solver diverged"),
    ("nan", "not finite"),
    ("inf", "not finite"),
    ("malformed", "malformed output"),
    ("missing", "no \"objective\" field"),
    ("string", "\"objective\" is not a number"),
    ("negcost", "cost must be finite and > 0, got -1"),
    ("zerocost", "cost must be finite and > 0, got 0"),
    ("nocost", "output has no \"cost\""),
    ("timeout", "timed out after 1.0 s"),
    ("ok", ""),
];

const SCRIPT: &str = r#"import json, sys, time
p = json.load(sys.stdin)
try:
    k = int(open("calls").read())
except FileNotFoundError:
    k = 0
open("calls", "w").write(str(k + 1))
mode = sys.argv[1].split(",")[k]
x = p["x"]
if mode == "ok":
    print(json.dumps({"objective": -(x - 0.3) ** 2, "cost": 1.0 + x}))
elif mode == "exit":
    sys.stderr.write("lots of output\n" * 50 + "boom: the solver diverged\n"); sys.exit(3)
elif mode == "nan":
    print("NaN")
elif mode == "inf":
    print(json.dumps({"objective": float("inf"), "cost": 1.0}))
elif mode == "malformed":
    print("loss went down")
elif mode == "missing":
    print(json.dumps({"cost": 1.0}))
elif mode == "string":
    print(json.dumps({"objective": "0.5", "cost": 1.0}))
elif mode == "negcost":
    print(json.dumps({"objective": 0.5, "cost": -1}))
elif mode == "zerocost":
    print(json.dumps({"objective": 0.5, "cost": 0}))
elif mode == "nocost":
    print(json.dumps({"objective": 0.5}))
elif mode == "timeout":
    time.sleep(30)
"#;

fn command_config(modes: &str) -> String {
    format!(
        r#"
[study]
name = "bad"
storage = "sqlite:study.db"
direction = "maximize"
[objective]
command = ["python3", "obj.py", "{modes}"]
timeout_s = 1.0
[[space]]
name = "x"
type = "float"
low = 0.0
high = 1.0
[cost]
kind = "reported"
[budget]
max_trials = {}
[policy]
acquisition = "log_ei"
"#,
        MODES.len()
    )
}

#[test]
fn misbehaving_commands_become_failed_trials_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("obj.py"), SCRIPT).unwrap();
    let modes: Vec<&str> = MODES.iter().map(|m| m.0).collect();
    std::fs::write(dir.path().join("s.toml"), command_config(&modes.join(","))).unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "the run goes on after failures: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["summary"]["complete"], 2, "{out}");
    assert_eq!(v["summary"]["failed"], MODES.len() as u64 - 2, "{out}");

    let trials = export(dir.path(), "s.toml");
    assert_eq!(trials.len(), MODES.len());
    for (t, (mode, reason)) in trials.iter().zip(MODES) {
        if mode == "ok" {
            assert_eq!(t["state"], "complete", "{t}");
            assert!(t["objective"].as_f64().unwrap().is_finite());
            continue;
        }
        assert_eq!(t["state"], "failed", "{mode}: {t}");
        assert!(t["objective"].is_null(), "{mode}: {t}");
        let error = t["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(reason),
            "{mode}: the reason '{error}' should contain '{reason}'"
        );
    }
    // The stderr tail is kept, not the whole output.
    let exit_error = trials[1]["error"].as_str().unwrap();
    assert!(exit_error.len() < 1200, "{exit_error}");
    // Reported costs: a failed trial without a reported cost has no cost.
    assert!(trials[1]["cost"].is_null(), "{}", trials[1]);
}

#[test]
fn bad_tells_are_errors_that_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), command_config("ok")).unwrap();
    for _ in 0..2 {
        let (code, _, err) = pandora(dir.path(), &["ask", "--json", "s.toml"]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = pandora(
        dir.path(),
        &[
            "tell",
            "--json",
            "s.toml",
            "0",
            "--objective",
            "-2.5",
            "--cost",
            "3",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let before = export(dir.path(), "s.toml");

    for (args, expected) in [
        (&["1", "--objective", "NaN", "--cost", "1"][..], "objective"),
        (&["1", "--objective", "inf", "--cost", "1"][..], "objective"),
        (&["1", "--objective", "1", "--cost", "-1"][..], "cost"),
        (
            &["1", "--objective", "1", "--cost", "0"][..],
            "cost must be > 0",
        ),
        (&["1", "--objective", "1", "--cost", "NaN"][..], "cost"),
        (&["1", "--objective", "1"][..], "--cost"),
        (&["1"][..], "--objective"),
        (&["1", "--objective", "1", "--failed", "x"][..], "either"),
        (&["1", "--failed", "oom", "--cost", "-2"][..], "cost"),
        (&["0", "--objective", "1", "--cost", "1"][..], "0"),
        (&["7", "--objective", "1", "--cost", "1"][..], "7"),
        (&["one", "--objective", "1", "--cost", "1"][..], "one"),
        (&["1", "--objective", "abc", "--cost", "1"][..], "abc"),
    ] {
        let (code, out, err) = pandora(
            dir.path(),
            &[&["tell", "--json", "s.toml"][..], args].concat(),
        );
        assert_eq!(code, 2, "tell {args:?} should fail: {out}{err}");
        assert!(
            err.contains(expected),
            "tell {args:?}: '{err}' should mention '{expected}'"
        );
        assert_eq!(
            export(dir.path(), "s.toml"),
            before,
            "tell {args:?} changed the study"
        );
    }
    // A failed trial may have cost nothing (it crashed at once); a complete one may not.
    let (code, out, err) = pandora(
        dir.path(),
        &[
            "tell",
            "--json",
            "s.toml",
            "1",
            "--failed",
            "crashed at start",
            "--cost",
            "0",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(t["state"], "failed");
    assert_eq!(t["cost"].as_f64(), Some(0.0));
}

#[test]
fn impossible_configs_are_errors_naming_the_problem_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("obj.py"), SCRIPT).unwrap();
    let good = command_config("ok");
    let space = "[[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
    let cases: Vec<(String, &str)> = vec![
        (
            good.replace("low = 0.0\nhigh = 1.0", "low = 1.0\nhigh = 0.0"),
            "space.x: needs low < high",
        ),
        (
            good.replace("high = 1.0", "high = 1.0\nlog = true"),
            "space.x: log scale needs low > 0",
        ),
        (
            good.replace("high = 1.0", "high = inf"),
            "space.x: bounds must be finite",
        ),
        (
            good.replace("high = 1.0", "high = 1.0\nstep = 3"),
            "unknown field `step`",
        ),
        (
            good.replace(
                space,
                "[[space]]\nname = \"c\"\ntype = \"categorical\"\nchoices = []\n",
            ),
            "space.c: needs at least 2 choices",
        ),
        (
            good.replace(space, &format!("{space}{space}")),
            "space.x: duplicate parameter name",
        ),
        (good.replace(space, ""), "needs a [[space]] list"),
        (
            good.replace("timeout_s = 1.0", "timeout_s = 0.0"),
            "objective.timeout_s",
        ),
        (
            good.replace(
                "command = [\"python3\", \"obj.py\", \"ok\"]",
                "command = []",
            ),
            "objective.command",
        ),
        (
            good.replace("max_trials = 12", "total = -5.0"),
            "budget.total",
        ),
        (
            good.replace("\"reported\"", "\"free\""),
            "unknown variant `free`",
        ),
        (
            good.replace("direction = \"maximize\"", "direction = \"up\""),
            "unknown variant `up`",
        ),
        (good.replace("[policy]", "[polcy]"), "polcy"),
        (
            good.replace("max_trials = 12\n", ""),
            "budget: the study has no limit",
        ),
        (
            good.replace("max_trials = 12", "max_trials = 2.5"),
            "expected a whole number >= 0",
        ),
    ];
    for (cfg, expected) in cases {
        assert_ne!(
            cfg, good,
            "the case for '{expected}' did not change the config"
        );
        std::fs::write(dir.path().join("bad.toml"), &cfg).unwrap();
        let (code, _, err) = pandora(dir.path(), &["run", "--json", "bad.toml", "--quiet"]);
        assert_eq!(code, 2, "{cfg}");
        assert!(
            err.contains(expected),
            "'{err}' should contain '{expected}'"
        );
        assert!(
            !dir.path().join("study.db").exists(),
            "a bad config created the database"
        );
    }
}
