//! The experiment configuration (TOML) and its resolution into a list of runs.
//!
//! A file has an `[experiment]` table, one or more `[[problem]]` and `[[policy]]` tables and an
//! optional `[smoke]` table whose values replace the experiment's sizes under `--smoke`, and an
//! optional `[stopping]` table (see [`super::stopping`]). See docs/experiments.md for every key.

use super::format::label_number;
use super::legacy::LegacyPolicy;
pub use super::policy::PolicyConfig;
use super::stopping::plan::{StoppingPlan, StoppingSection};
use anyhow::{Context, Result, bail};
use pandora_core::acquisition::{FantasyTree, TreeBudget};
use pandora_core::gp::KernelKind;
use pandora_core::gp::fit::{FitOptions, NoiseSpec, Priors};
use pandora_core::optim::multistart::MultiStartOptions;
use pandora_core::policy::{Refit, RefitName, StepConfig};
use pandora_core::run::spec::PolicySpec;
use pandora_problems::{Problem, ProblemSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// Seeds: a count `n` (seeds `0..n`) or an explicit list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Seeds {
    /// Seeds `0, 1, …, n − 1`.
    Count(u64),
    /// These seeds.
    List(Vec<u64>),
}

impl Seeds {
    /// The seeds in order.
    pub fn to_vec(&self) -> Vec<u64> {
        match self {
            Seeds::Count(n) => (0..*n).collect(),
            Seeds::List(v) => v.clone(),
        }
    }
}

/// How a run's regret curve is read at costs between its evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Linear between consecutive (cumulative cost, regret) points, as the papers' plots do.
    #[default]
    Linear,
    /// The regret of the last evaluation paid for by that cost (a right-continuous step).
    Step,
}

/// The `[experiment]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSection {
    /// Name (the default output directory is `results/NAME`).
    pub name: String,
    /// Seeds of every (problem, policy) pair.
    pub seeds: Seeds,
    /// Budget in cost units for the BO phase (the initial design's cost is not counted).
    pub budget: Option<f64>,
    /// Budget as a multiple of the problem dimension (`budget = budget_per_dim · d`).
    pub budget_per_dim: Option<f64>,
    /// Maximum number of BO-phase evaluations (after the initial design).
    pub max_evaluations: Option<usize>,
    /// Maximum BO-phase evaluations as a multiple of the dimension.
    pub max_evaluations_per_dim: Option<usize>,
    /// Initial-design size (default `2(d + 1)`).
    pub initial_design: Option<usize>,
    /// Raw samples of the acquisition maximization (default `200·d`).
    pub raw_samples: Option<usize>,
    /// L-BFGS-B restarts of the acquisition maximization (default `10·d`).
    pub num_restarts: Option<usize>,
    /// Points of the summary's cost grid `0..horizon` (default `floor(horizon) + 1`).
    pub grid_points: Option<usize>,
    /// How regret curves are interpolated onto the grid.
    #[serde(default)]
    pub interpolation: Interpolation,
}

/// GP-model settings of a problem (`[problem.model]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Kernel: `matern12`, `matern32`, `matern52` (default) or `rbf`.
    pub kernel: Option<String>,
    /// A fixed isotropic lengthscale: the kernel is frozen (the Bayesian-regret setting) instead
    /// of fitted by MAP with ARD lengthscales.
    pub lengthscale: Option<f64>,
    /// The fixed outputscale of a frozen kernel (default 1).
    pub outputscale: Option<f64>,
    /// Observation-noise variance: a number fixes it (default 1e-4); `[low, high]` has the fit
    /// learn it within those bounds (the PBGI repository's BMSEI model: `[1e-4, 1e-3]`).
    pub noise: Option<NoiseConfig>,
    /// Standardize objective values before fitting (default true; false for Bayesian regret).
    pub standardize: Option<bool>,
    /// Use the problem's known prior amplitude `s(x)` in the kernel, `s(x) s(x') k(x, x')` (the
    /// PBGI paper's variable-amplitude kernel of the 1-D counterexamples; default false).
    pub amplitude: Option<bool>,
    /// How the hyperparameters are refitted from one step to the next: `warm` (the default, a
    /// single start from the previous step's with full refits on a schedule; see
    /// `pandora_core::policy::Refit`) or `always` (a full multi-start fit at every step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit: Option<RefitName>,
}

/// The observation noise of a `[problem.model]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NoiseConfig {
    /// A fixed noise variance (`noise = 1e-4`).
    Fixed(f64),
    /// A noise variance the fit learns within `[low, high]` (`noise = [1e-4, 1e-3]`), also when
    /// the kernel is frozen.
    Learned([f64; 2]),
}

/// One `[[problem]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemConfig {
    /// Label in traces and summaries (default `OBJECTIVE-dD-COST`).
    pub label: Option<String>,
    /// Objective name (see `pandora_problems::build`).
    pub objective: String,
    /// Dimension.
    pub dim: usize,
    /// Cost name (default `uniform`).
    #[serde(default = "uniform")]
    pub cost: String,
    /// How policies see the cost: `uniform`, `known` or `unknown` (default: `uniform` for
    /// uniform-cost problems, `known` otherwise).
    pub cost_setting: Option<String>,
    /// Overrides the experiment's budget.
    pub budget: Option<f64>,
    /// Overrides the experiment's budget per dimension.
    pub budget_per_dim: Option<f64>,
    /// Overrides the experiment's maximum BO-phase evaluations.
    pub max_evaluations: Option<usize>,
    /// Overrides the experiment's maximum BO-phase evaluations per dimension.
    pub max_evaluations_per_dim: Option<usize>,
    /// Overrides the initial-design size.
    pub initial_design: Option<usize>,
    /// Explicit initial points on the unit cube (replace the Sobol design).
    pub initial_points: Option<Vec<Vec<f64>>>,
    /// Factor applied to regret (e.g. 100 for Levy to report the unscaled function's regret).
    pub regret_scale: Option<f64>,
    /// The value summaries measure regret against, instead of the optimum (or the best value
    /// observed when the optimum is unknown): e.g. 0 for robot pushing, whose objective is minus
    /// the distance to the goal, so that regret is that distance. Only summaries read it, so
    /// it is not part of a run's settings and changing it keeps the traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regret_reference: Option<f64>,
    /// Problem-specific options passed to the problem registry (e.g. `kernel`, `lengthscale` of
    /// `gp_sample`), written as a TOML table.
    #[serde(default)]
    pub options: BTreeMap<String, toml::Value>,
    /// The BO model.
    #[serde(default)]
    pub model: ModelConfig,
}

fn uniform() -> String {
    "uniform".into()
}

/// The `[smoke]` table: replaces sizes under `--smoke`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmokeSection {
    /// Seeds.
    pub seeds: Option<Seeds>,
    /// Budget (replaces every budget and budget per dimension).
    pub budget: Option<f64>,
    /// Budget per dimension (replaces every budget and budget per dimension).
    pub budget_per_dim: Option<f64>,
    /// Maximum BO-phase evaluations (replaces every maximum).
    pub max_evaluations: Option<usize>,
    /// Keep only these problems (labels as in the full-size configuration).
    pub problems: Option<Vec<String>>,
    /// Dimension of every problem kept (labels then use it).
    pub dim: Option<usize>,
    /// Initial-design size.
    pub initial_design: Option<usize>,
    /// Raw samples of the acquisition maximization.
    pub raw_samples: Option<usize>,
    /// Restarts of the acquisition maximization.
    pub num_restarts: Option<usize>,
    /// Grid points of the summary.
    pub grid_points: Option<usize>,
}

/// A whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// `[experiment]`.
    pub experiment: ExperimentSection,
    /// `[[problem]]`.
    pub problem: Vec<ProblemConfig>,
    /// `[[policy]]`.
    pub policy: Vec<PolicyConfig>,
    /// `[smoke]`.
    pub smoke: Option<SmokeSection>,
    /// `[stopping]`: record stopping-rule statistics and evaluate the rules offline.
    pub stopping: Option<StoppingSection>,
}

/// How the policy sees evaluation costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSettingName {
    /// Every evaluation costs the same.
    Uniform,
    /// The problem's cost function and gradient.
    Known,
    /// Learned from observed costs by a GP on log cost.
    Unknown,
}

/// A problem with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedProblem {
    /// Label.
    pub label: String,
    /// The configuration as written (after smoke overrides).
    pub config: ProblemConfig,
    /// The cost setting.
    pub cost_setting: CostSettingName,
    /// BO-phase budget in cost units.
    pub budget: Option<f64>,
    /// Maximum BO-phase evaluations.
    pub max_evaluations: Option<usize>,
    /// Initial-design size.
    pub initial_design: usize,
    /// Regret factor.
    pub regret_scale: f64,
    /// Raw samples of the acquisition maximization.
    pub raw_samples: Option<usize>,
    /// Restarts of the acquisition maximization.
    pub num_restarts: Option<usize>,
}

/// A policy with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedPolicy {
    /// Label.
    pub label: String,
    /// The configuration as written (read back in the earlier form too: `summarize` reads the
    /// `experiment.json` of earlier releases).
    #[serde(deserialize_with = "super::legacy::policy_config")]
    pub config: PolicyConfig,
}

impl ResolvedPolicy {
    /// The λ of a fixed-λ PBGI policy (`acquisition = "pbgi"` with `lambda`), else `None`.
    pub fn fixed_pbgi_lambda(&self) -> Option<f64> {
        self.config.spec.fixed_lambda()
    }
}

/// One run: a problem instance, a policy and a seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpec {
    /// Index into [`Plan::problems`].
    pub problem: usize,
    /// Index into [`Plan::policies`].
    pub policy: usize,
    /// The run's seed.
    pub seed: u64,
}

/// A resolved experiment: what to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// Experiment name.
    pub name: String,
    /// Whether the smoke sizes are used.
    pub smoke: bool,
    /// Problems.
    pub problems: Vec<ResolvedProblem>,
    /// Policies.
    pub policies: Vec<ResolvedPolicy>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Summary grid points (None: `floor(horizon) + 1`).
    pub grid_points: Option<usize>,
    /// Summary interpolation.
    pub interpolation: Interpolation,
    /// The resolved `[stopping]` section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<StoppingPlan>,
}

/// SplitMix64: the seed derivation used for every per-run seed.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seed of the problem instance of run seed `seed` (the seed itself: every policy sees the same
/// instance for the same seed).
pub fn problem_seed(seed: u64) -> u64 {
    seed
}

/// Seed of the initial design of run seed `seed` (shared by all policies, so that runs with the
/// same seed start from the same points).
pub fn design_seed(seed: u64) -> u64 {
    splitmix64(seed ^ 0x6465_7369_676e)
}

/// Seed of BO step `k` of run seed `seed`.
pub fn step_seed(seed: u64, k: usize) -> u64 {
    splitmix64(splitmix64(seed ^ 0x706f_6c69_6379).wrapping_add(k as u64))
}

/// Parses a configuration file's text.
pub fn parse(text: &str) -> Result<ExperimentFile> {
    toml::from_str(text)
        .map_err(crate::plain)
        .context("invalid experiment configuration")
}

/// Reads and parses a configuration file.
pub fn load(path: &str) -> Result<ExperimentFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse(&text).with_context(|| format!("in {path}"))
}

/// The problem options as the `key = value` strings the problem registry takes.
pub fn option_strings(p: &ProblemConfig) -> BTreeMap<String, String> {
    p.options
        .iter()
        .map(|(k, v)| {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), s)
        })
        .collect()
}

/// Builds the problem instance of `p` for run seed `seed`.
pub fn build_problem(p: &ProblemConfig, seed: u64) -> Result<Box<dyn Problem>> {
    let spec = ProblemSpec {
        objective: p.objective.clone(),
        dim: p.dim,
        cost: p.cost.clone(),
        seed: problem_seed(seed),
        options: option_strings(p),
    };
    pandora_problems::build(&spec).with_context(|| format!("problem '{}'", p.objective))
}

fn default_problem_label(p: &ProblemConfig) -> String {
    format!("{}-d{}-{}", p.objective, p.dim, p.cost)
}

fn default_policy_label(p: &PolicyConfig) -> String {
    match p.spec {
        PolicySpec::Pbgi { lambda } => format!("pbgi({})", label_number(lambda)),
        PolicySpec::PbgiPlain { lambda } => format!("pbgi_plain({})", label_number(lambda)),
        PolicySpec::PbgiD { lambda0, decay } => {
            format!("pbgi_d({},{})", label_number(lambda0), label_number(decay))
        }
        PolicySpec::BMsEi {
            tree,
            refill,
            warm_start,
            tree_budget,
        } => {
            let flags = [
                (refill == Some(false), "no_refill"),
                (warm_start == Some(false), "cold"),
                (tree_budget == Some(TreeBudget::RecentCosts), "recent_costs"),
            ];
            tree_label("b_ms_ei", tree, &flags)
        }
        PolicySpec::MsEi { tree, warm_start } => {
            tree_label("ms_ei", tree, &[(warm_start == Some(false), "cold")])
        }
        _ => p.spec.name().to_string(),
    }
}

/// `name(stages;flags)` of a scenario-tree acquisition: the flags that are set, in order.
fn tree_label(name: &str, tree: Option<FantasyTree>, flags: &[(bool, &str)]) -> String {
    let stages: Vec<String> = tree
        .unwrap_or_default()
        .stages()
        .iter()
        .map(ToString::to_string)
        .collect();
    let flags: String = (flags.iter())
        .filter(|(set, _)| *set)
        .map(|(_, flag)| format!(";{flag}"))
        .collect();
    format!("{name}({}{flags})", stages.join(","))
}

/// A label as a file-name component: characters outside `[A-Za-z0-9._-]` become `_`.
pub fn file_component(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn check_policy(p: &PolicyConfig) -> Result<()> {
    p.spec
        .validate()
        .with_context(|| format!("policy '{}'", default_policy_label(p)))
}

impl ExperimentFile {
    /// Resolves the configuration (with the `[smoke]` overrides if `smoke`) into a plan,
    /// validating every problem and policy.
    pub fn resolve(&self, smoke: bool) -> Result<Plan> {
        let e = &self.experiment;
        let empty = SmokeSection::default();
        let s = match (smoke, &self.smoke) {
            (true, Some(s)) => s,
            (true, None) => bail!("--smoke needs a [smoke] section in the configuration"),
            (false, _) => &empty,
        };
        if self.problem.is_empty() {
            bail!("the configuration has no [[problem]]");
        }
        if self.policy.is_empty() {
            bail!("the configuration has no [[policy]]");
        }
        let seeds = s.seeds.as_ref().unwrap_or(&e.seeds).to_vec();
        if seeds.is_empty() {
            bail!("`seeds` is empty");
        }
        let smoke_budget = s.budget.is_some() || s.budget_per_dim.is_some();
        let mut problems = Vec::new();
        let mut labels = HashSet::new();
        let full_label =
            |p: &ProblemConfig| p.label.clone().unwrap_or_else(|| default_problem_label(p));
        if let Some(keep) = &s.problems {
            for k in keep {
                if !self.problem.iter().any(|p| &full_label(p) == k) {
                    bail!("[smoke] problems: no problem is labelled '{k}'");
                }
            }
        }
        for p0 in &self.problem {
            if let Some(keep) = &s.problems
                && !keep.contains(&full_label(p0))
            {
                continue;
            }
            let mut p = p0.clone();
            if let Some(d) = s.dim {
                p.dim = d;
                p.initial_points = p0
                    .initial_points
                    .as_ref()
                    .filter(|pts| pts.iter().all(|x| x.len() == d))
                    .cloned();
            }
            if smoke_budget {
                p.budget = s.budget;
                p.budget_per_dim = s.budget_per_dim;
            }
            if s.max_evaluations.is_some() {
                p.max_evaluations = s.max_evaluations;
                p.max_evaluations_per_dim = None;
            }
            let label = p.label.clone().unwrap_or_else(|| default_problem_label(&p));
            if !labels.insert(file_component(&label)) {
                bail!("two problems have the label '{label}'; set distinct `label`s");
            }
            let d = p.dim as f64;
            let (budget, budget_per_dim) = if smoke_budget || p.budget.is_some() {
                (p.budget, p.budget_per_dim)
            } else if p.budget_per_dim.is_some() {
                (None, p.budget_per_dim)
            } else {
                (e.budget, e.budget_per_dim)
            };
            let budget = budget.or(budget_per_dim.map(|b| b * d));
            if let Some(b) = budget
                && !(b.is_finite() && b > 0.0)
            {
                bail!("problem '{label}': the budget must be finite and > 0, got {b}");
            }
            let max_evaluations = p
                .max_evaluations
                .or(p.max_evaluations_per_dim.map(|m| m * p.dim))
                .or(if s.max_evaluations.is_some() {
                    None
                } else {
                    e.max_evaluations
                        .or(e.max_evaluations_per_dim.map(|m| m * p.dim))
                });
            if budget.is_none() && max_evaluations.is_none() {
                bail!(
                    "problem '{label}': set a budget (`budget`, `budget_per_dim`) or \
                     `max_evaluations`"
                );
            }
            let initial_design = match &p.initial_points {
                Some(pts) => {
                    if pts.is_empty() {
                        bail!("problem '{label}': `initial_points` is empty");
                    }
                    for x in pts {
                        if x.len() != p.dim || x.iter().any(|v| !(0.0..=1.0).contains(v)) {
                            bail!(
                                "problem '{label}': every initial point needs {} coordinates \
                                 in [0, 1]",
                                p.dim
                            );
                        }
                    }
                    pts.len()
                }
                None => s
                    .initial_design
                    .or(p.initial_design)
                    .or(e.initial_design)
                    .unwrap_or(2 * (p.dim + 1)),
            };
            if initial_design == 0 {
                bail!("problem '{label}': the initial design needs at least one point");
            }
            let problem = build_problem(&p, seeds[0])?;
            let cost_setting = match p.cost_setting.as_deref() {
                None if problem.uniform_cost() => CostSettingName::Uniform,
                None | Some("known") => CostSettingName::Known,
                Some("uniform") => CostSettingName::Uniform,
                Some("unknown") => CostSettingName::Unknown,
                Some(other) => bail!(
                    "problem '{label}': unknown cost_setting '{other}' (expected uniform, \
                     known or unknown)"
                ),
            };
            let regret_scale = p.regret_scale.unwrap_or(1.0);
            if !(regret_scale.is_finite() && regret_scale > 0.0) {
                bail!("problem '{label}': regret_scale must be finite and > 0");
            }
            if p.regret_reference.is_some_and(|r| !r.is_finite()) {
                bail!("problem '{label}': regret_reference must be finite");
            }
            let resolved = ResolvedProblem {
                label,
                cost_setting,
                budget,
                max_evaluations,
                initial_design,
                regret_scale,
                raw_samples: s.raw_samples.or(e.raw_samples),
                num_restarts: s.num_restarts.or(e.num_restarts),
                config: p,
            };
            // Validate the model settings now rather than in every run.
            model_fit_options(&resolved.config.model)
                .with_context(|| format!("problem '{}'", resolved.label))?;
            problems.push(resolved);
        }
        let mut policies = Vec::new();
        let mut labels = HashSet::new();
        for p in &self.policy {
            check_policy(p)?;
            let label = p.name.clone().unwrap_or_else(|| default_policy_label(p));
            if !labels.insert(file_component(&label)) {
                bail!("two policies have the label '{label}'; set distinct `name`s");
            }
            policies.push(ResolvedPolicy {
                label,
                config: p.clone(),
            });
        }
        let stopping = self
            .stopping
            .as_ref()
            .map(|st| st.resolve(smoke))
            .transpose()?;
        if let Some(sp) = &stopping {
            for p in &problems {
                sp.check_problem(&p.label, p.config.dim)?;
            }
            for p in &policies {
                if let Some(l) = p.fixed_pbgi_lambda() {
                    sp.check_pbgi_policy(&p.label, l)?;
                }
            }
        }
        Ok(Plan {
            name: e.name.clone(),
            smoke,
            problems,
            policies,
            seeds,
            grid_points: s.grid_points.or(e.grid_points),
            interpolation: e.interpolation,
            stopping,
        })
    }
}

/// The objective-model fit options of a problem's `[problem.model]`.
pub fn model_fit_options(m: &ModelConfig) -> Result<FitOptions> {
    let kind = KernelKind::parse(m.kernel.as_deref().unwrap_or("matern52")).context("model")?;
    let mut fit = FitOptions {
        kind,
        ..FitOptions::default()
    };
    match m.noise.unwrap_or(NoiseConfig::Fixed(1e-4)) {
        NoiseConfig::Fixed(noise) => {
            if !(noise.is_finite() && noise >= 0.0) {
                bail!("model: noise must be finite and >= 0");
            }
            fit.noise = NoiseSpec::Fixed(noise);
        }
        NoiseConfig::Learned([low, high]) => {
            if !(low.is_finite() && high.is_finite() && low > 0.0 && low <= high) {
                bail!("model: noise = [low, high] needs 0 < low <= high, both finite");
            }
            fit.noise = NoiseSpec::Learned { floor: low };
            fit.max_noise = high;
        }
    }
    if let Some(l) = m.lengthscale {
        if !(l.is_finite() && l > 0.0) {
            bail!("model: lengthscale must be finite and > 0");
        }
        let os = m.outputscale.unwrap_or(1.0);
        if !(os.is_finite() && os > 0.0) {
            bail!("model: outputscale must be finite and > 0");
        }
        // Equal bounds freeze the coordinates: only the constant mean is fitted (as the papers'
        // Bayesian-regret runs do).
        fit.ard = false;
        fit.priors = Priors::none();
        fit.lengthscale_bounds = (l, l);
        fit.fixed_outputscale = Some(os);
        fit.restarts = 0;
    } else if m.outputscale.is_some() {
        bail!("model: outputscale is only used with a fixed lengthscale");
    }
    Ok(fit)
}

impl Plan {
    /// Every run, problem-major, then policy, then seed.
    pub fn runs(&self) -> Vec<RunSpec> {
        let mut v = Vec::new();
        for problem in 0..self.problems.len() {
            for policy in 0..self.policies.len() {
                for &seed in &self.seeds {
                    v.push(RunSpec {
                        problem,
                        policy,
                        seed,
                    });
                }
            }
        }
        v
    }

    /// The trace file name of a run.
    pub fn trace_name(&self, r: &RunSpec) -> String {
        format!(
            "{}__{}__s{}.jsonl",
            file_component(&self.problems[r.problem].label),
            file_component(&self.policies[r.policy].label),
            r.seed
        )
    }

    /// The step configuration of a run (everything but the per-step context).
    pub fn step_config(&self, r: &RunSpec) -> Result<StepConfig> {
        let p = &self.problems[r.problem];
        let pol = &self.policies[r.policy].config;
        let fit = model_fit_options(&p.config.model)?;
        Ok(StepConfig {
            acquisition: pol.spec.name(),
            params: pol.spec.params(),
            fit,
            multistart: MultiStartOptions {
                raw_samples: p.raw_samples,
                num_restarts: p.num_restarts,
                ..MultiStartOptions::default()
            },
            standardize: p.config.model.standardize.unwrap_or(true),
            initial_design: Some(p.initial_design),
            design_seed: design_seed(r.seed),
            refit: p
                .config
                .model
                .refit
                .map_or(Refit::DEFAULT, RefitName::refit),
            ..StepConfig::default()
        })
    }

    /// The settings a run's trace must agree with to be resumed (as JSON).
    pub fn run_settings(&self, r: &RunSpec) -> serde_json::Value {
        // The policy in the form of earlier releases, so that their traces are resumed.
        let policy = &self.policies[r.policy];
        let mut v = serde_json::json!({
            "problem": self.problems[r.problem],
            "policy": {"label": policy.label, "config": LegacyPolicy::of(&policy.config)},
            "seed": r.seed,
        });
        // Only what the run records: the replay settings (λ, rule thresholds) and the summaries'
        // regret reference can change without invalidating traces.
        if let Some(c) = v["problem"]["config"].as_object_mut() {
            c.remove("regret_reference");
        }
        if let Some(s) = &self.stopping {
            v["stopping_statistics"] = serde_json::json!(s.statistics);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[experiment]
name = "t"
seeds = 2
budget = 10

[[problem]]
objective = "ackley"
dim = 3

[[policy]]
acquisition = "pbgi"
lambda = 1e-4
"#;

    /// `model.noise` fixes the noise with a number and has the fit learn it within `[low, high]`
    /// with a pair, also on a frozen kernel; the learned noise stays in its bounds (noisy data
    /// push it to the ceiling, noiseless data to the floor); bad pairs are refused by name.
    #[test]
    fn model_noise_is_fixed_or_learned_within_bounds() {
        let model = |noise: &str| -> Result<FitOptions> {
            let toml = format!("lengthscale = 0.3\nstandardize = false\nnoise = {noise}\n");
            let m: ModelConfig = toml::from_str(&toml)?;
            model_fit_options(&m)
        };
        assert_eq!(model("1e-6").unwrap().noise, NoiseSpec::Fixed(1e-6));
        let learned = model("[1e-4, 1e-3]").unwrap();
        assert_eq!(learned.noise, NoiseSpec::Learned { floor: 1e-4 });
        assert_eq!(learned.max_noise, 1e-3);
        assert_eq!(learned.lengthscale_bounds, (0.3, 0.3));
        for bad in ["[1e-3, 1e-4]", "[0.0, 1e-3]", "[-1.0, 1.0]"] {
            let e = format!("{:#}", model(bad).unwrap_err());
            assert!(e.contains("noise"), "{bad}: {e}");
        }
        assert!(model("[1e-4]").is_err(), "one bound is not a pair");

        // The fit on 1-D data: a smooth function with and without noise of variance 0.01.
        let x: Vec<f64> = (0..40).map(|i| i as f64 / 39.0).collect();
        let smooth: Vec<f64> = x.iter().map(|&t| (6.0 * t).sin()).collect();
        let noisy: Vec<f64> = smooth
            .iter()
            .enumerate()
            .map(|(i, v)| v + 0.1 * if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let fit = |y: &[f64]| {
            pandora_core::gp::fit::fit(&x, y, 1, &learned, None)
                .unwrap()
                .params
                .noise
        };
        let (high, low) = (fit(&noisy), fit(&smooth));
        assert!((high - 1e-3).abs() <= 1e-12, "noisy data: {high}");
        assert!((1e-4..1.5e-4).contains(&low), "noiseless data: {low}");
    }

    #[test]
    fn resolves_defaults_and_labels() {
        let plan = parse(BASE).unwrap().resolve(false).unwrap();
        assert_eq!(plan.problems[0].label, "ackley-d3-uniform");
        assert_eq!(plan.problems[0].initial_design, 8);
        assert_eq!(plan.problems[0].cost_setting, CostSettingName::Uniform);
        assert_eq!(plan.policies[0].label, "pbgi(0.0001)");
        assert_eq!(plan.runs().len(), 2);
        assert_eq!(
            plan.trace_name(&plan.runs()[1]),
            "ackley-d3-uniform__pbgi_0.0001___s1.jsonl"
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let bad = BASE.replace("\"pbgi\"", "\"pbgj\"");
        let e = parse(&bad).unwrap_err();
        assert!(format!("{e:#}").contains("unknown variant `pbgj`"), "{e:#}");
        let bad = BASE.replace("lambda = 1e-4", "");
        let e = parse(&bad).unwrap_err();
        assert!(format!("{e:#}").contains("missing field `lambda`"), "{e:#}");
        let bad = BASE.replace("lambda = 1e-4", "lambda = -1.0");
        let e = parse(&bad).unwrap().resolve(false).unwrap_err();
        assert!(format!("{e:#}").contains("policy 'pbgi(-1)'"), "{e:#}");
        assert!(format!("{e:#}").contains("lambda"), "{e:#}");
        let e = parse(BASE).unwrap().resolve(true).unwrap_err();
        assert!(format!("{e:#}").contains("[smoke]"));
        let bad = BASE.replace("budget = 10", "");
        let e = parse(&bad).unwrap().resolve(false).unwrap_err();
        assert!(format!("{e:#}").contains("set a budget"), "{e:#}");
        let bad = BASE.replace("dim = 3", "dim = 3\noptions = { kernel = \"rbf\" }");
        let e = parse(&bad).unwrap().resolve(false).unwrap_err();
        assert!(format!("{e:#}").contains("kernel"), "{e:#}");
    }

    #[test]
    fn policies_refuse_keys_that_do_not_apply_and_name_moved_ones() {
        let policy = |table: &str| BASE.replace("acquisition = \"pbgi\"\nlambda = 1e-4", table);
        let e = parse(&policy("acquisition = \"ucb\"\nucb_beta = 0.5")).unwrap_err();
        assert!(
            format!("{e:#}").contains("`ucb_beta` is now called `beta`"),
            "{e:#}"
        );
        let e = parse(&policy("acquisition = \"pbgi_d\"\nbeta = 4.0")).unwrap_err();
        assert!(
            format!("{e:#}").contains("`beta` is now called `decay`"),
            "{e:#}"
        );
        let e = parse(&policy("acquisition = \"ei\"\nalpha = 0.5")).unwrap_err();
        assert!(format!("{e:#}").contains("unknown field `alpha`"), "{e:#}");
        // The new names, with the labels of before.
        let plan = parse(&policy("acquisition = \"pbgi_d\"\ndecay = 4.0"))
            .unwrap()
            .resolve(false)
            .unwrap();
        assert_eq!(plan.policies[0].label, "pbgi_d(0.1,4)");
        let plan = parse(&policy("name = \"u\"\nacquisition = \"ucb\"\nbeta = 0.5"))
            .unwrap()
            .resolve(false)
            .unwrap();
        assert_eq!(plan.policies[0].label, "u");
        let step = plan.step_config(&plan.runs()[0]).unwrap();
        assert_eq!(step.params.beta, Some(0.5));
        let plan = parse(&policy(
            "acquisition = \"b_ms_ei\"\ntree = [2, 1]\nrefill = false",
        ))
        .unwrap()
        .resolve(false)
        .unwrap();
        assert_eq!(plan.policies[0].label, "b_ms_ei(2,1;no_refill)");
    }

    #[test]
    fn regret_reference_is_checked_and_kept_out_of_run_settings() {
        let plan = parse(BASE).unwrap().resolve(false).unwrap();
        let with = BASE.replace("dim = 3", "dim = 3\nregret_reference = 0.0");
        let plan_ref = parse(&with).unwrap().resolve(false).unwrap();
        assert_eq!(plan_ref.problems[0].config.regret_reference, Some(0.0));
        // Traces written without the reference are reused with it (and the other way round).
        let r = plan.runs()[0];
        assert_eq!(plan.run_settings(&r), plan_ref.run_settings(&r));
        // ... but the plan written next to the traces keeps it for `summarize`.
        let json = serde_json::to_string(&plan_ref).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(back.problems[0].config.regret_reference, Some(0.0));
        // A real setting still changes the run settings.
        let other = BASE.replace("dim = 3", "dim = 3\nregret_scale = 2.0");
        let plan_other = parse(&other).unwrap().resolve(false).unwrap();
        assert_ne!(plan.run_settings(&r), plan_other.run_settings(&r));
        let bad = BASE.replace("dim = 3", "dim = 3\nregret_reference = nan");
        let e = parse(&bad).unwrap().resolve(false).unwrap_err();
        assert!(
            format!("{e:#}").contains("regret_reference must be finite"),
            "{e:#}"
        );
    }

    #[test]
    fn seeds_are_distinct_and_stable() {
        assert_eq!(problem_seed(7), 7);
        assert_ne!(design_seed(0), design_seed(1));
        assert_ne!(step_seed(0, 0), step_seed(0, 1));
        assert_ne!(step_seed(0, 1), step_seed(1, 0));
        // SplitMix64's published first output for state 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
    }
}
