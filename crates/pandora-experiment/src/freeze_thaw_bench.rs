//! `pandora freeze-thaw-bench CONFIG`: the freeze-thaw benchmark. Reads a TOML configuration
//! (instances: LCDB datasets, the epoch-wise MLP table and the synthetic family; policies; seeds; budget), plays every
//! (instance, policy, seed) with `pandora_problems::freeze_thaw` (in parallel), and writes
//! `traces.csv` (every step), `summary.csv` (regret quartiles over seeds against cumulative
//! cost) and `final.csv` (regret at the budget) to the output directory, plus a figure. See
//! docs/freeze-thaw.md ("Benchmark") and `experiments/freeze_thaw_bench.toml`.

use crate::plot::{Figure, Legend, Panel, Series, render};
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
    #[serde(default = "default_lambda")]
    lambda: f64,
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
fn default_lambda() -> f64 {
    0.05
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
    settings(&cfg)
        .validate()
        .with_context(|| path.to_string())?;
    Ok(cfg)
}

fn settings(cfg: &Config) -> BenchSettings {
    BenchSettings {
        budget_fraction: cfg.budget_fraction,
        lambda: cfg.lambda,
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

/// One played (instance, policy, seed).
struct Played {
    family: usize,
    policy: PolicyName,
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
    let jobs: Vec<(usize, PolicyName, u64)> = (0..fams.len())
        .flat_map(|f| {
            cfg.policies
                .iter()
                .flat_map(move |&p| (0..cfg.seeds).map(move |seed| (f, p, seed)))
        })
        .collect();
    let start = std::time::Instant::now();
    let played: Vec<Played> = jobs
        .par_iter()
        .map(|&(f, p, seed)| {
            let table = fams[f].table(seed)?;
            let trace = play_one(&table, p, &s, seed)?;
            Ok(Played {
                family: f,
                policy: p,
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
    let (summary, fig, finals) = summarize(&fams, &cfg.policies, &played, &grid);
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
        "instance,policy,seed,run,config,label,step,cost,cumulative_cost,cost_fraction,value,regret\n",
    );
    for p in played {
        for r in &p.trace.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                fams[p.family].name(),
                p.policy.as_str(),
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
    policies: &[PolicyName],
    played: &[Played],
    grid: &[f64],
) -> (String, Figure, String) {
    let mut summary =
        String::from("instance,policy,cost_fraction,seeds,regret_q25,regret_median,regret_q75\n");
    let mut finals = String::from(
        "instance,policy,seeds,regret_q25,regret_median,regret_q75,spent_fraction_median,stopped\n",
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
        for (i, &p) in policies.iter().enumerate() {
            let runs: Vec<&Played> = played
                .iter()
                .filter(|r| r.family == f && r.policy == p)
                .collect();
            let pairs: Vec<(&Trace, f64)> = runs.iter().map(|r| (&r.trace, r.total_cost)).collect();
            let q = regret_quartiles(&pairs, grid);
            for (g, q) in grid.iter().zip(&q) {
                let _ = writeln!(
                    summary,
                    "{},{},{g},{},{},{},{}",
                    fam.name(),
                    p.as_str(),
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
                "{},{},{},{:.5},{:.5},{:.5},{:.4},{stopped}",
                fam.name(),
                p.as_str(),
                runs.len(),
                last.q25,
                last.median,
                last.q75,
                sq.median
            );
            let xs: Vec<f64> = grid.iter().map(|g| g.log10()).collect();
            panel.series.push(
                Series::line(p.as_str(), xs, q.iter().map(|q| q.median).collect())
                    .with_band(
                        q.iter().map(|q| q.q25).collect(),
                        q.iter().map(|q| q.q75).collect(),
                    )
                    .with_color(i),
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

    #[test]
    fn the_smoke_run_writes_traces_summary_and_figure() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, CONFIG).unwrap();
        let out = dir.path().join("out");
        run_config(
            &cfg.to_string_lossy(),
            Some(&out),
            true,
            &crate::reporter::Quiet,
        )
        .unwrap();
        let finals = std::fs::read_to_string(out.join("final.csv")).unwrap();
        // One line per (instance, policy): every policy on one LCDB dataset, the epochs table
        // and the synthetic family.
        assert_eq!(
            finals.lines().count(),
            1 + 3 * PolicyName::ALL.len(),
            "{finals}"
        );
        assert!(finals.contains("lcdb-901,gittins,2,"), "{finals}");
        assert!(finals.contains("mlp-digits-K16-T5,gittins,2,"), "{finals}");
        let traces = std::fs::read_to_string(out.join("traces.csv")).unwrap();
        assert!(traces.lines().count() > 10);
        assert!(out.join("summary.csv").exists() && out.join("freeze_thaw_bench.png").exists());
    }

    #[test]
    fn the_epochs_config_runs_at_smoke_size() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("e.toml");
        std::fs::write(&cfg, EPOCHS_CONFIG).unwrap();
        let out = dir.path().join("out");
        let finals = run_config(
            &cfg.to_string_lossy(),
            Some(&out),
            true,
            &crate::reporter::Quiet,
        )
        .unwrap();
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
