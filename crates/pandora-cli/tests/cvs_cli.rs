//! `pandora cvs`: the BOCVS experiment grid at smoke size, resume, summaries and bad configs.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn pandora(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run pandora")
}

fn config_path() -> String {
    format!(
        "{}/../../experiments/cvs_fig2.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The reduced Figure 2 grid parses and runs at its smoke size too.
#[test]
fn reduced_figure_2_config_runs_at_smoke_size() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_path().replace("cvs_fig2.toml", "cvs_fig2_small.toml");
    let out = pandora(
        dir.path(),
        &["cvs", &cfg, "--smoke", "--quiet", "--out", "res"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("res/summary.csv").exists());
}

#[test]
fn figure_2_config_runs_at_smoke_size_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_path();
    let out = pandora(
        dir.path(),
        &["cvs", &cfg, "--smoke", "--out", "res", "--jobs", "2"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let runs: Vec<_> = std::fs::read_dir(dir.path().join("res/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // 4 objectives × 1 cost level × 1 variance × 8 policies × 1 seed.
    assert_eq!(runs.len(), 32);
    for p in &runs {
        let r: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        let budget = r["spec"]["budget"].as_f64().unwrap();
        let steps = r["steps"].as_array().unwrap();
        assert!(!steps.is_empty(), "{p:?}");
        let mut spent = 0.0;
        let mut prev = f64::INFINITY;
        for s in steps {
            spent += s["cost"].as_f64().unwrap();
            let cum = s["cumulative_cost"].as_f64().unwrap();
            assert!((cum - spent).abs() < 1e-9, "{p:?}");
            let regret = s["simple_regret"].as_f64().unwrap();
            assert!(regret.is_finite() && regret <= prev + 1e-12, "{p:?}");
            prev = regret;
        }
        assert!(spent <= budget + 1e-9, "{p:?} spent {spent} of {budget}");
        // The regret is the optimum minus the best expected value found so far.
        let best = steps
            .iter()
            .map(|s| s["value"].as_f64().unwrap())
            .fold(f64::NEG_INFINITY, f64::max);
        let optimum = r["optimum"].as_f64().unwrap();
        assert!((optimum - best - prev).abs() < 1e-9, "{p:?}");
    }
    for name in [
        "gp_sample",
        "hartmann3",
        "plant",
        "airfoil",
        "ucb-cvs",
        "gittins-d",
    ] {
        assert!(table.contains(name), "{name} missing from\n{table}");
    }
    let csv = std::fs::read_to_string(dir.path().join("res/summary.csv")).unwrap();
    // Header plus 4 settings × 8 policies × 4 budget fractions.
    assert_eq!(csv.lines().count(), 1 + 4 * 8 * 4);
    assert!(!csv.contains("NaN"), "{csv}");

    // Rerunning skips every complete run and leaves the files alone.
    let before = std::fs::read(&runs[0]).unwrap();
    let again = pandora(
        dir.path(),
        &["cvs", &cfg, "--smoke", "--out", "res", "--quiet"],
    );
    assert!(again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("0 run(s) carried out, 32 already complete"),
        "{err}"
    );
    assert_eq!(std::fs::read(&runs[0]).unwrap(), before);

    let s = pandora(dir.path(), &["cvs", "summarize", "res"]);
    assert!(s.status.success());
    assert_eq!(String::from_utf8_lossy(&s.stdout), table);
}

#[test]
fn bad_cvs_configs_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let base = r#"
[experiment]
name = "x"
seeds = 1
[policies]
names = ["ucb-cvs"]
[[problem]]
objective = "hartmann3"
costs = ["cheap"]
variances = [0.02]
[smoke]
seeds = 1
budget = 0.05
"#;
    let cases = [
        (base.replace("ucb-cvs", "nope"), "unknown policy"),
        (base.replace("hartmann3", "branin"), "unknown CVS objective"),
        (base.replace("cheap", "free"), "unknown cost level"),
        (base.replace("0.02", "0.5"), "variance"),
        (
            base.replace("seeds = 1", "seeds = 1\ncolour = 2"),
            "unknown field",
        ),
        (base.replace("budget = 0.05", "budget = -1.0"), "budget"),
    ];
    for (i, (text, msg)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&p, text).unwrap();
        let out = pandora(dir.path(), &["cvs", p.to_str().unwrap(), "--smoke"]);
        assert!(!out.status.success(), "case {i} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "case {i}: {err}");
    }
    assert!(!dir.path().join("results").exists());
    // The base itself is fine.
    std::fs::write(dir.path().join("ok.toml"), base).unwrap();
    let out = pandora(dir.path(), &["cvs", "ok.toml", "--smoke", "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
