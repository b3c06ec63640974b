//! End-to-end tests of studies with cost-varying variable subsets (`[cvs]`): `pandora run` on a
//! simulated builtin problem, `ask`/`tell` with realized random values, and bad input.

mod common;
use common::{export, pandora};
use serde_json::Value;
use std::path::Path;

/// ETC-Ada with costs 2, 4 and 8: `⌊4/2⌋ = 2` plays of the cheapest group, `⌊4/4⌋ = 1` of the
/// middle one, then commit.
const SIMULATED: &str = r#"
[study]
name = "sim"
storage = "sqlite:sim.db"
[objective]
builtin = "ackley"
dim = 3
[budget]
total = 40.0
[policy]
seed = 3
[cvs]
policy = "etc-ada"
initial_design = 3
bank_size = 64
control_sets = [
  { params = ["x0"], cost = 2.0, name = "cheap" },
  { params = ["x0", "x1"], cost = 4.0 },
  { params = ["x0", "x1", "x2"], cost = 8.0, name = "full" },
]
[cvs.random]
x1 = { dist = "truncated_normal", mean = 0.5, sd = 0.2 }
x2 = { dist = "discrete", values = [0.1, 0.5, 0.9], weights = [1, 2, 1] }
"#;

#[test]
fn run_simulates_nature_follows_etc_and_respects_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), SIMULATED).unwrap();
    let (code, out, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["stopped"].as_str().unwrap().contains("budget"), "{out}");
    let trials = export(dir.path(), "s.toml");
    let spent: f64 = trials.iter().map(|t| t["cost"].as_f64().unwrap()).sum();
    assert!(spent <= 40.0 + 1e-9, "{spent}");
    // Nothing affordable is left: the cheapest set costs 2.
    assert!(spent > 38.0, "{spent}");
    let mut phases = Vec::new();
    for t in &trials {
        assert_eq!(t["state"], "complete", "{t}");
        let c = &t["decision"]["cvs"];
        let set = c["control_set"].as_u64().unwrap() as usize;
        assert_eq!(
            t["cost"].as_f64().unwrap(),
            [2.0, 4.0, 8.0][set],
            "the cost is the control set's"
        );
        // Every parameter is recorded, inside its bounds; the controlled ones as decided.
        let p = &t["params"];
        let x: Vec<f64> = (0..3)
            .map(|k| p[format!("x{k}")].as_f64().unwrap())
            .collect();
        assert!(x.iter().all(|v| (0.0..=1.0).contains(v)), "{p}");
        let x_ctrl: Vec<f64> = c["x_ctrl"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(&x[..x_ctrl.len()], &x_ctrl[..], "{t}");
        // The discrete law's values only.
        if set < 2 {
            assert!([0.1, 0.5, 0.9].contains(&x[2]), "{p}");
        }
        // The stored unit-cube point is the realized one.
        let tx: Vec<f64> = t["x"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(tx, x);
        phases.push((
            t["decision"]["phase"].as_str().unwrap().to_string(),
            c["etc_phase"].as_str().unwrap_or("").to_string(),
            set,
        ));
    }
    // Initial design: the cheapest set; then the hand-computed ETC-Ada trace, replayed from
    // the stored trials at every ask.
    let expect_start = [
        ("initial", "", 0),
        ("initial", "", 0),
        ("initial", "", 0),
        ("model", "explore 0", 0),
        ("model", "explore 0", 0),
        ("model", "explore 1", 1),
    ];
    for (k, (ph, etc, set)) in expect_start.iter().enumerate() {
        assert_eq!(
            (phases[k].0.as_str(), phases[k].1.as_str(), phases[k].2),
            (*ph, *etc, *set),
            "trial {k}: {phases:?}"
        );
    }
    assert!(phases[6..].iter().all(|p| p.1 == "commit"), "{phases:?}");
    // Resuming a finished study adds nothing.
    let (code, _, err) = pandora(dir.path(), &["run", "--json", "s.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(export(dir.path(), "s.toml").len(), trials.len());
    // Export as CSV names the control set and the random parameters.
    let (code, csv, _) = pandora(dir.path(), &["export", "s.toml", "--format", "csv"]);
    assert_eq!(code, 0);
    let mut lines = csv.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .contains("control_set,random,param.x0")
    );
    assert!(lines.next().unwrap().contains(",0,x1 x2,"), "{csv}");
}

/// A greenhouse: temperature and pH can be controlled (at a price), humidity never.
const EXTERNAL: &str = r#"
[study]
name = "greenhouse"
storage = "sqlite:g.db"
direction = "minimize"
[objective]
kind = "external"
[[space]]
type = "float"
name = "temp"
low = 10.0
high = 30.0
[[space]]
type = "float"
name = "ph"
low = 5.0
high = 8.0
[[space]]
type = "float"
name = "humidity"
low = 0.0
high = 100.0
[budget]
total = 6.0
[cvs]
policy = "gittins-d"
lambda = 0.5
initial_design = 2
bank_size = 64
control_sets = [
  { params = ["temp"], cost = 0.5 },
  { params = ["temp", "ph"], cost = 1.5, name = "temp and pH" },
]
[cvs.random]
ph = { dist = "truncated_normal", mean = 6.5, sd = 0.5 }
humidity = { dist = "uniform", low = 40.0, high = 90.0 }
"#;

fn ask(dir: &Path) -> Value {
    let (code, out, err) = pandora(dir, &["ask", "--json", "g.toml"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn yield_of(temp: f64, ph: f64, humidity: f64) -> f64 {
    (temp - 22.0).powi(2) / 10.0 + (ph - 6.0).powi(2) + (humidity - 60.0).abs() / 50.0
}

#[test]
fn ask_hands_out_a_control_set_and_tell_takes_the_realized_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("g.toml"), EXTERNAL).unwrap();
    let a = ask(d);
    assert_eq!(a["number"], 0);
    // The initial design uses the cheapest set: only the temperature is set.
    let cs = &a["control_set"];
    assert_eq!(cs["controlled"], serde_json::json!(["temp"]));
    assert_eq!(cs["random"], serde_json::json!(["ph", "humidity"]));
    assert_eq!(cs["cost"], 0.5);
    let params = a["params"].as_object().unwrap();
    assert_eq!(params.keys().collect::<Vec<_>>(), vec!["temp"]);
    let temp = params["temp"].as_f64().unwrap();
    assert!((10.0..=30.0).contains(&temp));

    // Bad tells are refused with exit code 2 and change nothing.
    for (args, why) in [
        (vec!["--objective", "1.0"], "leaves ph, humidity random"),
        (vec!["--objective", "1.0", "--random", "ph=6.1"], "humidity"),
        (
            vec![
                "--objective",
                "1",
                "--random",
                "ph=6.1",
                "--random",
                "humidity=120",
            ],
            "outside the parameter's bounds",
        ),
        (
            vec![
                "--objective",
                "1",
                "--random",
                "ph=6.1",
                "--random",
                "humidity=50",
                "--random",
                "temp=20",
            ],
            "controlled",
        ),
        (
            vec![
                "--objective",
                "1",
                "--random",
                "ph=6.1",
                "--random",
                "humidity=50",
                "--random",
                "co2=3",
            ],
            "no random parameter 'co2'",
        ),
        (vec!["--objective", "1", "--random", "ph"], "NAME=VALUE"),
        (
            vec!["--objective", "1", "--random", "ph=acid"],
            "not a number",
        ),
        (
            vec!["--failed", "flooded", "--random", "ph=6.1"],
            "only with --objective",
        ),
    ] {
        let mut all = vec!["tell", "--json", "g.toml", "0"];
        all.extend(args.iter());
        let (code, _, err) = pandora(d, &all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let t = &export(d, "g.toml")[0];
    assert_eq!(t["state"], "running");

    // The right tell records the realized values: parameters and unit-cube point.
    let obj = yield_of(temp, 6.1, 50.0);
    let (code, out, err) = pandora(
        d,
        &[
            "tell",
            "--json",
            "g.toml",
            "0",
            "--objective",
            &obj.to_string(),
            "--random",
            "ph=6.1",
            "--random",
            "humidity=50",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let told: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(told["params"]["ph"], 6.1);
    assert_eq!(told["params"]["humidity"], 50.0);
    assert_eq!(told["cost"], 0.5);
    let x: Vec<f64> = told["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!((x[1] - (6.1 - 5.0) / 3.0).abs() < 1e-12 && (x[2] - 0.5).abs() < 1e-12);
    // Telling it again is refused.
    let (code, _, _) = pandora(
        d,
        &[
            "tell",
            "--json",
            "g.toml",
            "0",
            "--objective",
            "1",
            "--random",
            "ph=6",
            "--random",
            "humidity=50",
        ],
    );
    assert_eq!(code, 2);

    // Drive the study to the end of its budget, as a farmer would: nature sets the rest.
    let mut lambdas = Vec::new();
    let mut n = 1;
    loop {
        let a = ask(d);
        if a.get("finished").is_some() {
            assert!(a["finished"].as_str().unwrap().contains("budget"), "{a}");
            break;
        }
        assert_eq!(a["number"], n);
        let p = &a["params"];
        let temp = p["temp"].as_f64().unwrap();
        let random = a["control_set"]["random"].as_array().unwrap().clone();
        let ph = p["ph"].as_f64().unwrap_or(5.5 + 0.1 * (n % 7) as f64);
        let humidity = 45.0 + 4.0 * (n % 10) as f64;
        let mut args = vec![
            "tell".to_string(),
            "g.toml".into(),
            n.to_string(),
            "--objective".into(),
            yield_of(temp, ph, humidity).to_string(),
        ];
        for r in random {
            let name = r.as_str().unwrap();
            let v = if name == "ph" { ph } else { humidity };
            args.extend(["--random".to_string(), format!("{name}={v}")]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = pandora(d, &args);
        assert_eq!(code, 0, "{err}");
        n += 1;
        assert!(n < 20, "the budget of 6 allows at most 12 trials");
    }
    let trials = export(d, "g.toml");
    let spent: f64 = trials.iter().map(|t| t["cost"].as_f64().unwrap()).sum();
    assert!(spent <= 6.0 + 1e-9 && spent > 5.5 - 1e-9, "{spent}");
    for t in &trials[2..] {
        assert_eq!(t["decision"]["phase"], "model");
        lambdas.push(t["decision"]["lambda"].as_f64().unwrap());
    }
    // Gittins-D's λ starts at 0.5 and only ever halves, replayed across processes.
    assert_eq!(lambdas[0], 0.5);
    assert!(
        lambdas
            .windows(2)
            .all(|w| w[1] == w[0] || w[1] == w[0] / 2.0),
        "{lambdas:?}"
    );
    // status reports the last λ; best is in the study's direction (minimize).
    let (code, st, _) = pandora(d, &["status", "--json", "g.toml"]);
    assert_eq!(code, 0);
    let st: Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["lambda"].as_f64(), lambdas.last().copied());
    let best = trials
        .iter()
        .map(|t| t["objective"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(st["best"]["objective"].as_f64(), Some(best));
    // `pandora run` refuses an external study.
    let (code, _, err) = pandora(d, &["run", "--json", "g.toml"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn impossible_cvs_configurations_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: [(&str, &str, &str); 8] = [
        (
            "name = \"humidity\"\nlow = 0.0\nhigh = 100.0",
            "name = \"humidity\"\nlow = 1.0\nhigh = 100.0\nlog = true",
            "space.humidity",
        ),
        (
            "humidity = { dist = \"uniform\", low = 40.0, high = 90.0 }",
            "",
            "cvs.random",
        ),
        (
            "{ params = [\"temp\"], cost = 0.5 }",
            "{ params = [\"tmp\"], cost = 0.5 }",
            "unknown parameter 'tmp'",
        ),
        (
            "{ params = [\"temp\"], cost = 0.5 }",
            "{ params = [\"temp\"], cost = 0.0 }",
            "cost",
        ),
        (
            "policy = \"gittins-d\"",
            "policy = \"ucb-magic\"",
            "cvs.policy",
        ),
        (
            "mean = 6.5, sd = 0.5",
            "mean = 6.5, sd = -1.0",
            "cvs.random.ph",
        ),
        (
            "low = 40.0, high = 90.0",
            "low = 40.0, high = 190.0",
            "cvs.random.humidity.high",
        ),
        (
            "[budget]",
            "[cost]\nkind = \"known\"\nformula = \"linear_mean\"\n[budget]",
            "cost",
        ),
    ];
    for (from, to, field) in cases {
        assert!(EXTERNAL.contains(from), "{from}");
        let text = EXTERNAL.replacen(from, to, 1);
        std::fs::write(d.join("bad.toml"), &text).unwrap();
        let (code, _, err) = pandora(d, &["ask", "--json", "bad.toml"]);
        assert_eq!(code, 2, "{field}: {err}");
        assert!(err.contains(field), "{field}: {err}");
        assert!(!d.join("g.db").exists(), "no database for a refused config");
    }
}

/// The shipped examples run: the simulated one to the end of its budget, the greenhouse one
/// hands out a control set.
#[test]
fn examples_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["cvs_simulated.toml", "cvs_greenhouse.toml"] {
        std::fs::copy(root.join(name), d.join(name)).unwrap();
    }
    let (code, out, err) = pandora(d, &["run", "--json", "cvs_simulated.toml", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["stopped"].as_str().unwrap().contains("budget"), "{out}");
    assert!(v["summary"]["budget_spent"].as_f64().unwrap() <= 20.0 + 1e-9);
    let (code, out, err) = pandora(d, &["ask", "--json", "cvs_greenhouse.toml"]);
    assert_eq!(code, 0, "{err}");
    let a: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(a["control_set"]["name"], "temperature");
}

/// A study's control sets and random laws cannot change once it exists (its trials refer to
/// them); its policy can.
#[test]
fn control_sets_of_an_existing_study_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("g.toml"), EXTERNAL).unwrap();
    assert_eq!(ask(d)["number"], 0);
    let changed = EXTERNAL.replacen("cost = 0.5", "cost = 0.7", 1);
    std::fs::write(d.join("g2.toml"), changed).unwrap();
    let (code, _, err) = pandora(d, &["ask", "--json", "g2.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("other control sets"), "{err}");
    let other_policy = EXTERNAL.replacen("policy = \"gittins-d\"", "policy = \"etc-ada\"", 1);
    std::fs::write(d.join("g3.toml"), other_policy).unwrap();
    let (code, _, err) = pandora(d, &["ask", "--json", "g3.toml"]);
    assert_eq!(code, 0, "{err}");
}
