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

/// Checks that `dir/figures` holds the PNG and SVG of every file stem in `stems`, each non-empty
/// and well formed (the PNG signature; an SVG document mentioning `must_mention`).
fn assert_figures(dir: &Path, stems: &[String], must_mention: &[&str]) {
    let fdir = dir.join("figures");
    let mut found: Vec<String> = std::fs::read_dir(&fdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut want: Vec<String> = stems
        .iter()
        .flat_map(|s| [format!("{s}.png"), format!("{s}.svg")])
        .collect();
    want.sort();
    assert_eq!(found, want);
    for stem in stems {
        let png = std::fs::read(fdir.join(format!("{stem}.png"))).unwrap();
        assert!(png.len() > 1000, "{stem}.png has {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png");
        let svg = std::fs::read_to_string(fdir.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.trim_start().starts_with("<svg"), "{stem}.svg");
        assert!(svg.trim_end().ends_with("</svg>"), "{stem}.svg");
        assert!(!svg.contains("NaN"), "{stem}.svg");
        for name in must_mention {
            assert!(svg.contains(name), "{name} missing from {stem}.svg");
        }
    }
}

/// Runs `experiments/FILE` at its smoke size into a temporary directory (kept alive by the
/// returned guard); returns the guard and the output directory.
fn run_smoke(file: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_path().replace("cvs_fig2.toml", file);
    let out = pandora(
        dir.path(),
        &["cvs", &cfg, "--smoke", "--quiet", "--out", "res"],
    );
    assert!(
        out.status.success(),
        "{file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let res = dir.path().join("res");
    (dir, res)
}

/// The reduced Figure 2 grids parse and run at their smoke size too, with their figures.
#[test]
fn reduced_figure_2_configs_run_at_smoke_size() {
    for (file, stems) in [
        (
            "cvs_fig2_small.toml",
            vec![
                "gp_sample_moderate_var0.04",
                "hartmann3_moderate_var0.04",
                "plant_moderate_var0.04",
            ],
        ),
        (
            "cvs_fig2_reduced.toml",
            vec![
                "gp_sample_moderate_var0.04",
                "hartmann3_moderate_var0.04",
                "plant_moderate_var0.04",
                "airfoil_moderate_var0.04",
            ],
        ),
    ] {
        let (_dir, res) = run_smoke(file);
        assert!(res.join("summary.csv").exists(), "{file}");
        // A figure per setting and one per objective.
        let mut all: Vec<String> = stems.iter().map(|s| s.to_string()).collect();
        all.extend(
            stems
                .iter()
                .map(|s| s.trim_end_matches("_moderate_var0.04").to_string()),
        );
        assert_figures(&res, &all, &["ucb-cvs", "gittins-d", "mean ± 1 s.e."]);
    }
}

/// The App. B grid (the naive per-unit-cost baselines) runs at its smoke size (which keeps the
/// first variance only), with the setting's figure and the objective's.
#[test]
fn appendix_b_config_runs_at_smoke_size() {
    let (_dir, res) = run_smoke("cvs_app_b_naive.toml");
    let summary = std::fs::read_to_string(res.join("summary.csv")).unwrap();
    assert!(summary.contains("ucb-naive") && summary.contains("etc-100"));
    let stems = [
        "gp_sample_moderate_var0.02".to_string(),
        "gp_sample".to_string(),
    ];
    assert_figures(&res, &stems, &["ucb-naive", "ucb-cvs", "mean ± 1 s.e."]);
}

/// A grid extended by a policy takes the reference optima from its finished runs instead of
/// searching them again: the new policy's runs hold the same optimum, bit for bit.
#[test]
fn an_extended_grid_reuses_the_reference_optima_of_its_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_path().replace("cvs_fig2.toml", "cvs_app_b_naive.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let names = r#"names = ["ucb-cvs", "etc-50", "etc-100", "etc-ada", "ts-psq", "ucb-psq", "ucb-naive", "random"]"#;
    assert!(text.contains(names), "the App. B policy list changed");
    // Runs the grid with `policies` into `res`; returns what it printed to stderr.
    let run = |policies: &str| -> String {
        let cfg = dir.path().join("grid.toml");
        std::fs::write(&cfg, text.replace(names, &format!("names = [{policies}]"))).unwrap();
        let out = pandora(
            dir.path(),
            &["cvs", "grid.toml", "--smoke", "--out", "res", "--quiet"],
        );
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        err
    };
    let err = run(r#""ucb-cvs", "random""#);
    assert!(
        err.contains("reference optima: 1 searched, 0 taken"),
        "{err}"
    );
    let err = run(r#""ucb-cvs", "random", "ucb-naive""#);
    assert!(
        err.contains("reference optima: 0 searched, 1 taken"),
        "{err}"
    );
    assert!(
        err.contains("1 run(s) carried out, 2 already complete"),
        "{err}"
    );
    let optimum = |policy: &str| -> u64 {
        let p = dir.path().join(format!(
            "res/runs/gp_sample_moderate_var0.02_{policy}_seed0.json"
        ));
        let r: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        r["optimum"].as_f64().unwrap().to_bits()
    };
    assert_eq!(optimum("ucb-naive"), optimum("ucb-cvs"));
    assert_eq!(optimum("ucb-naive"), optimum("random"));
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
    // Other settings (here the smoke budget) into the same directory are refused, not mixed in.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let smoke = text.find("[smoke]").unwrap();
    let (head, tail) = text.split_at(smoke);
    let changed = format!("{head}{}", tail.replacen("budget = 0.1", "budget = 0.2", 1));
    assert_ne!(changed, text);
    std::fs::write(dir.path().join("changed.toml"), changed).unwrap();
    let mixed = pandora(
        dir.path(),
        &["cvs", "changed.toml", "--smoke", "--out", "res", "--quiet"],
    );
    assert!(!mixed.status.success());
    let err = String::from_utf8_lossy(&mixed.stderr);
    assert!(err.contains("other settings"), "{err}");
    assert_eq!(std::fs::read(&runs[0]).unwrap(), before);

    let settings = [
        "gp_sample_cheap_var0.02",
        "hartmann3_cheap_var0.02",
        "plant_cheap_var0.02",
        "airfoil_cheap_var0.02",
    ];
    let mut stems: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
    stems.extend(["gp_sample", "hartmann3", "plant", "airfoil"].map(String::from));
    let res = dir.path().join("res");
    assert_figures(
        &res,
        &stems,
        &["ucb-cvs", "etc-100", "random", "cumulative cost"],
    );

    // Summarizing again rewrites the same table and the figures.
    std::fs::remove_dir_all(res.join("figures")).unwrap();
    let s = pandora(dir.path(), &["cvs", "summarize", "res"]);
    assert!(s.status.success());
    assert_eq!(String::from_utf8_lossy(&s.stdout), table);
    assert!(
        String::from_utf8_lossy(&s.stderr).contains("16 figure file(s)"),
        "{}",
        String::from_utf8_lossy(&s.stderr)
    );
    assert_figures(&res, &stems, &["ucb-cvs"]);
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

/// `pandora cvs --shard`: two shards give the runs of one process (wall time aside) and the same
/// summary; `summarize` names the missing runs while a shard has not run.
#[test]
fn shards_give_the_single_process_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"
[experiment]
name = "sharded"
seeds = 2
[policies]
names = ["ucb-cvs", "random"]
[[problem]]
objective = "hartmann3"
costs = ["moderate"]
variances = [0.02]
[smoke]
seeds = 2
budget = 0.6
bank_size = 16
raw_samples = 16
"#;
    std::fs::write(dir.path().join("c.toml"), config).unwrap();
    let run = |args: &[&str]| {
        let o = pandora(dir.path(), args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    run(&["cvs", "c.toml", "--smoke", "--quiet", "--out", "one"]);
    run(&["cvs", "c.toml", "--smoke", "--out", "two", "--shard", "1/2"]);
    assert!(!dir.path().join("two/summary.csv").exists());
    let o = pandora(dir.path(), &["cvs", "summarize", "two"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let missing: Vec<String> = std::fs::read_dir(dir.path().join("one/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !dir.path().join("two/runs").join(n).exists())
        .collect();
    assert!(!missing.is_empty() && missing.len() < 4, "{missing:?}");
    assert!(err.contains(&format!("{} run(s) of the grid are missing", missing.len())));
    for n in &missing {
        assert!(err.contains(n.as_str()), "{n} not named in {err}");
    }
    // The other shard from the Slurm array variables.
    let o = Command::new(env!("CARGO_BIN_EXE_pandora"))
        .args(["cvs", "c.toml", "--smoke", "--out", "two"])
        .env("SLURM_ARRAY_TASK_ID", "0")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    run(&["cvs", "summarize", "two"]);
    let records = |d: &str| -> Vec<(String, Value)> {
        let mut v: Vec<(String, Value)> = std::fs::read_dir(dir.path().join(d).join("runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                let mut r: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                r.as_object_mut().unwrap().remove("wall_seconds");
                r.as_object_mut().unwrap().remove("cpu_seconds");
                (p.file_name().unwrap().to_string_lossy().into_owned(), r)
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(records("one").len(), 4);
    assert_eq!(records("one"), records("two"));
    let summary = |d: &str| -> Vec<String> {
        std::fs::read_to_string(dir.path().join(d).join("summary.csv"))
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(',').unwrap().0.to_string())
            .collect()
    };
    assert_eq!(summary("one"), summary("two"));
}

/// The grid of the plan and lock tests: 2 settings × 2 policies × 2 seeds at smoke size.
const SMALL: &str = r#"
[experiment]
name = "planned"
seeds = 2
[policies]
names = ["ucb-cvs", "random"]
[[problem]]
objective = "hartmann3"
costs = ["moderate"]
variances = [0.02]
[[problem]]
objective = "gp_sample"
costs = ["expensive"]
variances = [0.04]
[smoke]
seeds = 2
budget = 0.6
bank_size = 16
raw_samples = 16
"#;

/// `pandora cvs plan`: run count, CPU-hours and the longest run from a calibration or from the
/// run records of an output directory, and an sbatch script whose command is `pandora cvs`.
#[test]
fn plan_estimates_and_writes_an_sbatch_script() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), SMALL).unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec!["cvs", "plan", "c.toml", "--smoke", "--out", "out"];
        args.extend_from_slice(extra);
        let o = pandora(dir.path(), &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // No records yet: every (setting, policy) group is calibrated, and the optima timed.
    let text = plan(&[]);
    assert!(
        text.contains("8 run(s) (2 setting(s) × 2 policy(ies)"),
        "{text}"
    );
    assert_eq!(
        text.matches("calibration (4 steps), CPU time").count(),
        4,
        "{text}"
    );
    // One calibration per (objective, policy): here every setting has its own objective.
    assert!(
        text.contains("calibrations run: 4, for 4 group(s)"),
        "{text}"
    );
    assert!(text.contains("clock: CPU time ("), "{text}");
    assert!(text.contains("hartmann3 moderate var=0.02"), "{text}");
    assert!(text.contains("of reference optima"), "{text}");
    assert!(
        text.contains("CPU-hours") && text.contains("longest run"),
        "{text}"
    );
    assert!(
        !dir.path().join("out/runs").exists(),
        "the calibration writes nothing there"
    );
    // With records, they are the source; complete runs are counted as done.
    let o = pandora(
        dir.path(),
        &["cvs", "c.toml", "--smoke", "--quiet", "--out", "out"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = plan(&[
        "--slurm",
        "grid.sbatch",
        "--shards",
        "3",
        "--cpus-per-task",
        "2",
        "--bin",
        "/opt/pandora/bin/pandora",
    ]);
    assert_eq!(
        text.matches("run records in the output directory").count(),
        4,
        "{text}"
    );
    assert!(text.contains("8 complete already"), "{text}");
    assert!(
        !text.contains("of reference optima"),
        "nothing left to set up: {text}"
    );
    let sb = std::fs::read_to_string(dir.path().join("grid.sbatch")).unwrap();
    let lines: Vec<&str> = sb.lines().collect();
    assert!(lines.contains(&"#SBATCH --array=0-2%3"), "{sb}");
    assert!(lines.contains(&"#SBATCH --cpus-per-task=2"), "{sb}");
    // Nothing left to run: the limit is the 10-minute allowance.
    assert!(lines.contains(&"#SBATCH --time=0-00:10:00"), "{sb}");
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    assert!(sb.contains(&format!("pandora cvs summarize {out}")), "{sb}");
    assert_eq!(
        *lines.last().unwrap(),
        format!(
            "/opt/pandora/bin/pandora cvs {}/c.toml --smoke --quiet --out {out} --shard \
             \"${{SLURM_ARRAY_TASK_ID:?submit with sbatch}}/3\" --jobs \
             \"${{SLURM_CPUS_PER_TASK:-1}}\"",
            dir.path().to_str().unwrap()
        )
    );
    // Bad options name themselves.
    let o = pandora(
        dir.path(),
        &["cvs", "plan", "c.toml", "--smoke", "--shards", "0"],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--shards must be at least 1"));
}

/// A run whose lock another process holds is refused, naming the holder; the other runs go on,
/// the exit is non-zero, and a rerun once the lock is released finishes the grid.
#[test]
fn a_run_locked_by_another_process_is_skipped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), SMALL).unwrap();
    let runs = dir.path().join("out/runs");
    std::fs::create_dir_all(&runs).unwrap();
    let name = "hartmann3_moderate_var0.02_random_seed1.json";
    let lock = std::fs::File::create(runs.join(format!("{name}.lock"))).unwrap();
    lock.try_lock().unwrap();
    std::fs::write(runs.join(format!("{name}.lock")), "pid 4242 on elsewhere\n").unwrap();
    let o = pandora(
        dir.path(),
        &["cvs", "c.toml", "--smoke", "--quiet", "--out", "out"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "run {name} skipped: another process is writing it (pid 4242 on elsewhere)"
        )),
        "{err}"
    );
    assert!(!runs.join(name).exists());
    let written = std::fs::read_dir(&runs)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(written, 7, "the other runs went on");
    drop(lock);
    let o = pandora(
        dir.path(),
        &["cvs", "c.toml", "--smoke", "--quiet", "--out", "out"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(runs.join(name).exists());
    assert!(
        !runs.join(format!("{name}.lock")).exists(),
        "the lock file is removed by the run that took it over"
    );
}
