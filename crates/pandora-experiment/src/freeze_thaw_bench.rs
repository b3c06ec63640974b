//! `pandora freeze-thaw-bench CONFIG`: the freeze-thaw benchmark. Reads a TOML configuration
//! (instances: LCDB datasets, the epoch-wise MLP table and the synthetic family; policies; seeds; budget), plays every
//! (instance, policy, λ, seed) with `pandora_problems::freeze_thaw` (in parallel), and writes
//! `traces.csv` (every step), `summary.csv` (regret quartiles over seeds against cumulative
//! cost) and `final.csv` (regret at the budget) to the output directory, plus a figure. See
//! docs/freeze-thaw.md ("Benchmark") and `experiments/freeze_thaw_bench.toml`.
//!
//! `lambda` is one value or a sweep (`lambda = [0.002, 0.01, 0.05]`): the policies whose
//! decisions depend on it ([`PolicyName::uses_lambda`]) run once per value, the others once;
//! every output file has a `lambda` column (empty for the policies that ignore it).

use crate::plot::{Figure, Legend, Panel, Series, Style, render};
use crate::reporter::Reporter;
use anyhow::{Context, Result, bail};
use pandora_problems::freeze_thaw::model_policies::ModelSettings;
use pandora_problems::freeze_thaw::summary::{
    BenchSettings, PolicyName, fraction_grid, play_one, quartiles, regret_quartiles,
};
use pandora_problems::freeze_thaw::synthetic::{SyntheticSpec, instance as synthetic_instance};
use pandora_problems::freeze_thaw::{Table, Trace, epochs, lcdb};
use rayon::prelude::*;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Output directory.
    out: PathBuf,
    /// Figure path (PNG or SVG); default `OUT/freeze_thaw_bench.png`.
    figure: Option<PathBuf>,
    seeds: u64,
    #[serde(default = "all_policies")]
    policies: Vec<PolicyName>,
    #[serde(default = "default_budget")]
    budget_fraction: f64,
    #[serde(default)]
    lambda: Lambdas,
    #[serde(default = "default_eta")]
    eta: usize,
    #[serde(default = "default_three")]
    median_grace: usize,
    #[serde(default = "default_three")]
    median_min_runs: usize,
    /// Smallest cost fraction of the summary grid.
    #[serde(default = "default_grid_low")]
    grid_low: f64,
    #[serde(default = "default_grid_points")]
    grid_points: usize,
    #[serde(default)]
    model: ModelConfig,
    #[serde(default)]
    lcdb: Option<LcdbConfig>,
    #[serde(default)]
    epochs: Option<EpochsConfig>,
    #[serde(default)]
    synthetic: Option<SyntheticConfig>,
    #[serde(default)]
    smoke: Option<SmokeConfig>,
}

fn all_policies() -> Vec<PolicyName> {
    PolicyName::ALL.to_vec()
}
fn default_budget() -> f64 {
    0.3
}
fn default_eta() -> usize {
    3
}
fn default_three() -> usize {
    3
}
fn default_grid_low() -> f64 {
    1e-3
}
fn default_grid_points() -> usize {
    40
}

/// `lambda`: the value worth the whole budget, one value or a sweep.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Lambdas {
    One(f64),
    Sweep(Vec<f64>),
}

impl Default for Lambdas {
    fn default() -> Self {
        Lambdas::One(BenchSettings::default().lambda)
    }
}

impl Lambdas {
    fn values(&self) -> &[f64] {
        match self {
            Lambdas::One(l) => std::slice::from_ref(l),
            Lambdas::Sweep(v) => v,
        }
    }

    /// Refuses an empty sweep, a repeated value and values that are not finite and > 0.
    fn check(&self) -> Result<()> {
        let v = self.values();
        if v.is_empty() {
            bail!("lambda: give at least one value");
        }
        for (i, &l) in v.iter().enumerate() {
            if !(l.is_finite() && l > 0.0) {
                bail!("lambda: {l} must be finite and > 0");
            }
            if v[..i].contains(&l) {
                bail!("lambda: {l} is given twice");
            }
        }
        Ok(())
    }
}

/// One line of the benchmark: a policy, at one `λ` if it uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Variant {
    policy: PolicyName,
    lambda: Option<f64>,
}

impl Variant {
    /// Every policy, those that use `λ` once per value of `lambdas`.
    fn all(policies: &[PolicyName], lambdas: &[f64]) -> Vec<Variant> {
        policies
            .iter()
            .flat_map(|&policy| {
                let ls: Vec<Option<f64>> = if policy.uses_lambda() {
                    lambdas.iter().copied().map(Some).collect()
                } else {
                    vec![None]
                };
                ls.into_iter().map(move |lambda| Variant { policy, lambda })
            })
            .collect()
    }

    /// The `lambda` column: the value, or empty for a policy that ignores it.
    fn lambda_field(&self) -> String {
        self.lambda.map(|l| l.to_string()).unwrap_or_default()
    }

    /// The legend: the policy, with its `λ` when the configuration sweeps it.
    fn label(&self, sweep: bool) -> String {
        match self.lambda {
            Some(l) if sweep => format!("{} λ={l}", self.policy.as_str()),
            _ => self.policy.as_str().to_string(),
        }
    }

    /// The settings the variant plays with.
    fn settings(&self, base: &BenchSettings) -> BenchSettings {
        BenchSettings {
            lambda: self.lambda.unwrap_or(base.lambda),
            ..base.clone()
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ModelConfig {
    initial: usize,
    refit_every: usize,
    grid_points: usize,
    fit_restarts: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        let m = BenchSettings::default().model;
        Self {
            initial: m.initial,
            refit_every: m.refit_every,
            grid_points: m.grid_points,
            fit_restarts: m.fit_restarts,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LcdbConfig {
    /// OpenML ids (default: every dataset shipped).
    #[serde(default)]
    datasets: Option<Vec<u64>>,
}

/// The epoch-wise MLP table (`pandora_problems::freeze_thaw::epochs`): its first `configs`
/// configurations and `steps` epochs (default: all).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpochsConfig {
    #[serde(default)]
    configs: Option<usize>,
    #[serde(default)]
    steps: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SyntheticConfig {
    configs: usize,
    dim: usize,
    steps: usize,
    noise: f64,
}

/// Sizes replacing the full ones under `--smoke`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SmokeConfig {
    seeds: u64,
    lcdb_datasets: Vec<u64>,
    synthetic_configs: Option<usize>,
    synthetic_steps: Option<usize>,
    epochs_configs: Option<usize>,
    epochs_steps: Option<usize>,
    /// A smaller budget (fewer decisions).
    budget_fraction: Option<f64>,
}

/// An instance family: one table per seed (synthetic) or one for all seeds (LCDB).
enum Family {
    Fixed(Table),
    Synthetic(String, SyntheticSpec),
}

impl Family {
    fn name(&self) -> &str {
        match self {
            Family::Fixed(t) => t.name(),
            Family::Synthetic(n, _) => n,
        }
    }
    fn table(&self, seed: u64) -> Result<Table> {
        Ok(match self {
            Family::Fixed(t) => t.clone(),
            Family::Synthetic(_, spec) => synthetic_instance(spec, seed)?,
        })
    }
}

fn load(path: &str, smoke: bool) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let mut cfg: Config = toml::from_str(&text)
        .map_err(crate::plain)
        .with_context(|| format!("parsing {path}"))?;
    if smoke {
        let s = cfg
            .smoke
            .clone()
            .with_context(|| format!("{path}: --smoke needs a [smoke] section"))?;
        cfg.seeds = s.seeds;
        cfg.budget_fraction = s.budget_fraction.unwrap_or(cfg.budget_fraction);
        cfg.grid_low = cfg.grid_low.min(cfg.budget_fraction / 10.0);
        cfg.lcdb = Some(LcdbConfig {
            datasets: Some(s.lcdb_datasets),
        });
        if let Some(e) = &mut cfg.epochs {
            e.configs = s.epochs_configs.or(e.configs);
            e.steps = s.epochs_steps.or(e.steps);
        }
        if let Some(syn) = &mut cfg.synthetic {
            syn.configs = s.synthetic_configs.unwrap_or(syn.configs);
            syn.steps = s.synthetic_steps.unwrap_or(syn.steps);
        }
    }
    if cfg.seeds == 0 || cfg.policies.is_empty() {
        bail!("{path}: seeds and policies must not be empty");
    }
    if !(cfg.grid_low > 0.0 && cfg.grid_low < cfg.budget_fraction && cfg.grid_points >= 2) {
        bail!("{path}: grid_low must be in (0, budget_fraction) and grid_points ≥ 2");
    }
    cfg.lambda.check().with_context(|| path.to_string())?;
    settings(&cfg)
        .validate()
        .with_context(|| path.to_string())?;
    Ok(cfg)
}

fn settings(cfg: &Config) -> BenchSettings {
    BenchSettings {
        budget_fraction: cfg.budget_fraction,
        lambda: cfg.lambda.values()[0],
        eta: cfg.eta,
        median_grace: cfg.median_grace,
        median_min_runs: cfg.median_min_runs,
        model: ModelSettings {
            lambda: 1.0,
            initial: cfg.model.initial,
            refit_every: cfg.model.refit_every,
            grid_points: cfg.model.grid_points,
            fit_restarts: cfg.model.fit_restarts,
        },
    }
}

fn families(cfg: &Config) -> Result<Vec<Family>> {
    let mut out = Vec::new();
    if let Some(l) = &cfg.lcdb {
        let ids = match &l.datasets {
            Some(ids) => ids.clone(),
            None => lcdb::datasets()?,
        };
        for id in ids {
            out.push(Family::Fixed(
                lcdb::instance(id).with_context(|| "lcdb.datasets")?,
            ));
        }
    }
    if let Some(e) = &cfg.epochs {
        let rows = epochs::parse(epochs::EPOCHS_CSV)?;
        let rows = epochs::subset(&rows, e.configs, e.steps).context("epochs")?;
        out.push(Family::Fixed(epochs::instance_from(&rows)?));
    }
    if let Some(s) = &cfg.synthetic {
        let spec = SyntheticSpec {
            configs: s.configs,
            dim: s.dim,
            steps: s.steps,
            noise: s.noise,
        };
        synthetic_instance(&spec, 0).context("synthetic")?;
        out.push(Family::Synthetic(
            format!("synthetic-K{}-d{}-T{}", s.configs, s.dim, s.steps),
            spec,
        ));
    }
    if out.is_empty() {
        bail!("give [lcdb], [epochs] or [synthetic] instances");
    }
    Ok(out)
}

/// One played (instance, variant, seed).
struct Played {
    family: usize,
    variant: Variant,
    seed: u64,
    total_cost: f64,
    labels: Vec<String>,
    trace: Trace,
}

/// Runs the benchmark configured in the TOML file `config` (the `[smoke]` sizes with `smoke`)
/// into `out` (default: the configuration's `out`), tells `reporter` what it wrote, and returns
/// the printed table of final regrets (also `OUT/final.csv`).
pub fn run_config(
    config: &str,
    out: Option<&Path>,
    smoke: bool,
    reporter: &dyn Reporter,
) -> Result<String> {
    let cfg = load(config, smoke)?;
    let figure = cfg
        .figure
        .clone()
        .filter(|_| out.is_none())
        .unwrap_or_else(|| out.unwrap_or(&cfg.out).join("freeze_thaw_bench.png"));
    let out = out.map_or_else(|| cfg.out.clone(), Path::to_path_buf);
    let fams = families(&cfg)?;
    let s = settings(&cfg);
    let variants = Variant::all(&cfg.policies, cfg.lambda.values());
    let jobs: Vec<(usize, Variant, u64)> = (0..fams.len())
        .flat_map(|f| {
            variants
                .iter()
                .flat_map(move |&v| (0..cfg.seeds).map(move |seed| (f, v, seed)))
        })
        .collect();
    let start = std::time::Instant::now();
    let played: Vec<Played> = jobs
        .par_iter()
        .map(|&(f, v, seed)| {
            let table = fams[f].table(seed)?;
            let trace = play_one(&table, v.policy, &v.settings(&s), seed)?;
            Ok(Played {
                family: f,
                variant: v,
                seed,
                total_cost: table.total_cost(),
                labels: table.labels().to_vec(),
                trace,
            })
        })
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    write(&out.join("traces.csv"), &traces_csv(&fams, &played))?;
    let grid = fraction_grid(cfg.grid_low, cfg.budget_fraction, cfg.grid_points);
    let sweep = cfg.lambda.values().len() > 1;
    let (summary, fig, finals) = summarize(&fams, &variants, sweep, &played, &grid);
    write(&out.join("summary.csv"), &summary)?;
    write(&out.join("final.csv"), &finals)?;
    if let Some(dir) = figure.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    render(&fig, &figure)?;
    reporter.note(&format!(
        "{} runs in {:.1} s; wrote {} and {}",
        played.len(),
        start.elapsed().as_secs_f64(),
        out.display(),
        figure.display()
    ));
    Ok(finals)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn traces_csv(fams: &[Family], played: &[Played]) -> String {
    let mut s = String::from(
        "instance,policy,lambda,seed,run,config,label,step,cost,cumulative_cost,cost_fraction,value,regret\n",
    );
    for p in played {
        for r in &p.trace.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                fams[p.family].name(),
                p.variant.policy.as_str(),
                p.variant.lambda_field(),
                p.seed,
                r.run,
                r.config,
                p.labels[r.config],
                r.step,
                r.cost,
                r.cumulative_cost,
                r.cumulative_cost / p.total_cost,
                r.value,
                r.regret
            );
        }
    }
    s
}

/// `summary.csv`, the figure and `final.csv` (regret at the budget, cost spent, stops).
fn summarize(
    fams: &[Family],
    variants: &[Variant],
    sweep: bool,
    played: &[Played],
    grid: &[f64],
) -> (String, Figure, String) {
    let mut summary = String::from(
        "instance,policy,lambda,cost_fraction,seeds,regret_q25,regret_median,regret_q75\n",
    );
    let mut finals = String::from(
        "instance,policy,lambda,seeds,regret_q25,regret_median,regret_q75,spent_fraction_median,stopped\n",
    );
    let mut fig = Figure {
        title: "Freeze-thaw benchmark: regret of the final objective against cumulative cost (median, quartile band)".into(),
        panels: Vec::new(),
    };
    for (f, fam) in fams.iter().enumerate() {
        let mut panel = Panel {
            title: fam.name().to_string(),
            x_label: "log10(cost / cost of the whole table)".into(),
            y_label: "regret (test)".into(),
            legend: if f == 0 {
                Legend::UpperRight
            } else {
                Legend::Hidden
            },
            ..Panel::default()
        };
        for (i, v) in variants.iter().enumerate() {
            let runs: Vec<&Played> = played
                .iter()
                .filter(|r| r.family == f && r.variant == *v)
                .collect();
            let (name, lambda) = (v.policy.as_str(), v.lambda_field());
            let pairs: Vec<(&Trace, f64)> = runs.iter().map(|r| (&r.trace, r.total_cost)).collect();
            let q = regret_quartiles(&pairs, grid);
            for (g, q) in grid.iter().zip(&q) {
                let _ = writeln!(
                    summary,
                    "{},{name},{lambda},{g},{},{},{},{}",
                    fam.name(),
                    runs.len(),
                    q.q25,
                    q.median,
                    q.q75
                );
            }
            let spent: Vec<f64> = runs
                .iter()
                .map(|r| r.trace.rows.last().map_or(0.0, |x| x.cumulative_cost) / r.total_cost)
                .collect();
            let stopped = runs.iter().filter(|r| r.trace.stopped).count();
            let last = q[q.len() - 1];
            let sq = quartiles(&spent);
            let _ = writeln!(
                finals,
                "{},{name},{lambda},{},{:.5},{:.5},{:.5},{:.4},{stopped}",
                fam.name(),
                runs.len(),
                last.q25,
                last.median,
                last.q75,
                sq.median
            );
            let xs: Vec<f64> = grid.iter().map(|g| g.log10()).collect();
            panel.series.push(
                Series::line(v.label(sweep), xs, q.iter().map(|q| q.median).collect())
                    .with_band(
                        q.iter().map(|q| q.q25).collect(),
                        q.iter().map(|q| q.q75).collect(),
                    )
                    .with_color(i)
                    .with_style(if i < 10 { Style::Line } else { Style::Dashed }),
            );
        }
        fig.panels.push(panel);
    }
    (summary, fig, finals)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = include_str!("../../../experiments/freeze_thaw_bench.toml");
    const EPOCHS_CONFIG: &str = include_str!("../../../experiments/freeze_thaw_bench_epochs.toml");

    /// Runs the configuration file `config` at its smoke size into `out`; the final table.
    fn smoke_run(config: &Path, out: &Path) -> Result<String> {
        run_config(
            &config.to_string_lossy(),
            Some(out),
            true,
            &crate::reporter::Quiet,
        )
    }

    /// Writes `text` to `dir/NAME.toml` and runs it at its smoke size into `dir/NAME`; the final
    /// table and the output directory.
    fn smoke_text(dir: &Path, name: &str, text: &str) -> (String, PathBuf) {
        let cfg = dir.join(format!("{name}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let out = dir.join(name);
        (smoke_run(&cfg, &out).unwrap(), out)
    }

    /// The `policy,lambda` of a CSV line.
    fn policy_lambda(line: &str) -> String {
        line.split(',')
            .skip(1)
            .take(2)
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn the_smoke_run_writes_traces_summary_and_figure() {
        let dir = tempfile::tempdir().unwrap();
        let (_, out) = smoke_text(dir.path(), "c", CONFIG);
        let finals = std::fs::read_to_string(out.join("final.csv")).unwrap();
        // One line per (instance, policy): every policy on one LCDB dataset, the epochs table
        // and the synthetic family.
        assert_eq!(
            finals.lines().count(),
            1 + 3 * PolicyName::ALL.len(),
            "{finals}"
        );
        assert!(finals.contains("lcdb-901,gittins,0.05,2,"), "{finals}");
        assert!(
            finals.contains("mlp-digits-K16-T5,gittins,0.05,2,"),
            "{finals}"
        );
        // A policy that ignores λ has an empty `lambda` column.
        assert!(finals.contains("lcdb-901,asha,,2,"), "{finals}");
        let traces = std::fs::read_to_string(out.join("traces.csv")).unwrap();
        assert!(traces.lines().count() > 10);
        assert!(out.join("summary.csv").exists() && out.join("freeze_thaw_bench.png").exists());
    }

    #[test]
    fn the_epochs_config_runs_at_smoke_size() {
        let dir = tempfile::tempdir().unwrap();
        let (finals, _) = smoke_text(dir.path(), "e", EPOCHS_CONFIG);
        // The epochs table alone, at its smoke size, for every policy.
        assert_eq!(
            finals.lines().count(),
            1 + PolicyName::ALL.len(),
            "{finals}"
        );
        assert!(
            finals
                .lines()
                .skip(1)
                .all(|l| l.starts_with("mlp-digits-K16-T5,")),
            "{finals}"
        );
    }

    /// Every `experiments/freeze_thaw_bench*.toml` loads and runs at its smoke size (the
    /// tests above check what the main and epochs configurations write).
    #[test]
    fn every_shipped_config_runs_at_smoke_size() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut configs: Vec<PathBuf> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("freeze_thaw_bench") && n.ends_with(".toml"))
            })
            .collect();
        configs.sort();
        assert!(configs.len() >= 3, "{configs:?}");
        let dir = tempfile::tempdir().unwrap();
        for (i, c) in configs.iter().enumerate() {
            let out = dir.path().join(i.to_string());
            let finals = smoke_run(c, &out).unwrap_or_else(|e| panic!("{}: {e:#}", c.display()));
            assert!(finals.lines().count() > 1, "{}: {finals}", c.display());
        }
    }

    /// A sweep runs the policies that use λ once per value and the others once, and a value's
    /// lines are those of a run at that value alone.
    #[test]
    fn a_lambda_sweep_runs_each_value_and_matches_single_runs() {
        let dir = tempfile::tempdir().unwrap();
        let base = EPOCHS_CONFIG.replace(
            "policies = [\"gittins\", \"pbgi\", \"log_eipc\", \"hyperband\", \"asha\", \"median\", \"random\"]",
            "policies = [\"gittins\", \"pbgi\", \"asha\"]",
        );
        assert_ne!(base, EPOCHS_CONFIG, "the policies line did not match");
        let run = |name: &str, lambda: &str| {
            let text = base.replace("lambda = 0.05", &format!("lambda = {lambda}"));
            assert_ne!(text, base, "the lambda line did not match");
            let (finals, out) = smoke_text(dir.path(), name, &text);
            let traces = std::fs::read_to_string(out.join("traces.csv")).unwrap();
            (finals, traces)
        };
        let (sweep, sweep_traces) = run("sweep", "[0.002, 0.05]");
        let keys: Vec<String> = sweep.lines().skip(1).map(policy_lambda).collect();
        assert_eq!(
            keys,
            [
                "gittins,0.002",
                "gittins,0.05",
                "pbgi,0.002",
                "pbgi,0.05",
                "asha,"
            ],
            "{sweep}"
        );
        let (single, single_traces) = run("single", "5e-2");
        for line in single.lines().skip(1) {
            assert!(sweep.contains(line), "{line} not in\n{sweep}");
        }
        // The traces at 0.05 are the same rows in both runs; 0.002 changes the Gittins policy's.
        let rows = |t: &str, key: &str| -> Vec<String> {
            t.lines()
                .filter(|l| policy_lambda(l) == key)
                .map(String::from)
                .collect()
        };
        assert_eq!(
            rows(&sweep_traces, "gittins,0.05"),
            rows(&single_traces, "gittins,0.05")
        );
        assert!(!rows(&single_traces, "gittins,0.05").is_empty());
        assert_ne!(
            rows(&sweep_traces, "gittins,0.002"),
            rows(&sweep_traces, "gittins,0.05")
        );
    }

    #[test]
    fn configuration_errors_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (CONFIG.replace("seeds = 16", "seeds = \"x\""), "seeds"),
            (
                CONFIG.replace("policies = [", "policies = [\"tpe\", "),
                "tpe",
            ),
            (
                CONFIG.replace("budget_fraction = 0.3", "budget_fraction = 2.0"),
                "budget_fraction",
            ),
            (
                CONFIG.replace("refit_every = 5", "refit_evry = 5"),
                "refit_evry",
            ),
            (
                CONFIG.replace("datasets = [", "datasets = [7, "),
                "openmlid",
            ),
            (
                CONFIG.replace("[epochs]\n", "[epochs]\nconfigs = 999\n"),
                "epochs: configs",
            ),
            (
                CONFIG.replace("[epochs]\n", "[epochs]\nepoch = 3\n"),
                "epoch",
            ),
            (CONFIG.replace("lambda = 0.05", "lambda = []"), "lambda"),
            (
                CONFIG.replace("lambda = 0.05", "lambda = [0.01, 0.01]"),
                "lambda: 0.01 is given twice",
            ),
            (
                CONFIG.replace("lambda = 0.05", "lambda = [0.01, -1.0]"),
                "lambda: -1",
            ),
            (CONFIG.replace("lambda = 0.05", "lambda = \"x\""), "lambda"),
        ];
        for (i, (text, want)) in cases.into_iter().enumerate() {
            assert_ne!(text, CONFIG, "{want}: the replacement did not apply");
            let path = dir.path().join(format!("c{i}.toml"));
            std::fs::write(&path, text).unwrap();
            let e = load(path.to_str().unwrap(), false)
                .and_then(|c| families(&c).map(|_| ()))
                .unwrap_err();
            assert!(format!("{e:#}").contains(want), "{want}: {e:#}");
        }
    }
}
