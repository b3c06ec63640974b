//! Study configuration files (TOML).
//!
//! ```toml
//! [study]
//! name = "quickstart"
//! storage = "sqlite:pandora.db"   # a file next to the config unless absolute
//! direction = "maximize"          # or "minimize"
//!
//! [objective]
//! builtin = "ackley"              # a problem of `pandora_problems::names()`, on [0,1]^dim
//! dim = 4
//! # or: command = ["python3", "train.py"], timeout_s = 600, and a [[space]] list
//! # or: kind = "external" and a [[space]] list: trials are evaluated outside Pandora
//! #     (`pandora ask`/`tell`, the Python package); `pandora run` refuses such a study
//!
//! [cost]
//! kind = "known"                  # uniform | known | reported | runtime
//! formula = "linear_mean"         # known costs: c = offset + slope * mean(x) on the unit cube
//!
//! [budget]
//! total = 200.0                   # in cost units; optional
//! max_trials = 500                # optional
//! count_initial = true            # whether the initial design's cost counts (papers: false)
//! predicted_cost_must_fit = true  # unknown costs: stop if E[c] of the next point exceeds the rest
//! # unbounded = true              # required when a builtin or command study has no total, no
//! #                               # max_trials and no stopping rule: it then runs until stopped
//!
//! [policy]
//! acquisition = "pbgi_d"
//! lambda0 = 0.1                   # PBGI-D; `lambda` for fixed-λ PBGI
//! seed = 0
//! stopping = { rule = "pbgi", lambda = "auto" }   # optional cost-aware stopping rule
//! ```

pub mod stored;

use crate::error::{Error, Result, plain_words};
use crate::space::{Direction, Param, SearchSpace};
use crate::trial::Trial;
use pandora_core::acquisition::AcquisitionName;
use pandora_core::policy::RefitName;
use pandora_core::run::spec::PolicySpec;
use pandora_core::stopping::{RuleConfig, StoppingConfig};
use serde::{Deserialize, Serialize};

/// The longest duration a configuration may give, in seconds (30 days): longer ones are refused
/// (they are mistakes, and converting them to a time may overflow).
pub const MAX_DURATION_S: f64 = 30.0 * 24.0 * 3600.0;

/// A whole study configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyConfig {
    /// Name, storage and direction.
    pub study: StudySection,
    /// What to evaluate.
    pub objective: ObjectiveSection,
    /// The search space (required for command objectives; builtins default to `x0 … x{d−1}` in
    /// `[0, 1]`).
    #[serde(default)]
    pub space: Option<Vec<Param>>,
    /// Costs.
    #[serde(default)]
    pub cost: CostSection,
    /// Budget.
    #[serde(default)]
    pub budget: BudgetSection,
    /// The optimization policy.
    #[serde(default)]
    pub policy: PolicySection,
    /// Cost-varying variable subsets: control sets with costs and the distributions of the
    /// parameters left random (see `docs/cvs.md`, "Studies"). Such a study hands out a control set
    /// and values for its parameters, and is told the realized values of the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvs: Option<crate::cvs::section::CvsSection>,
    /// Trials with steps (cost-aware freeze-thaw): runs of up to `max_steps` steps, paused and
    /// resumed by the Gittins index policy (see `docs/freeze-thaw.md`, "Studies with steps").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::fidelity::section::FidelitySection>,
}

/// `[study]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudySection {
    /// Study name (several studies can share one storage).
    pub name: String,
    /// Storage URL: `sqlite:PATH` (default `sqlite:pandora.db`).
    #[serde(default = "default_storage")]
    pub storage: String,
    /// Optimization direction.
    #[serde(default = "default_direction")]
    pub direction: Direction,
    /// How `ask` decides when workers share the study (default `locked`).
    #[serde(default, skip_serializing_if = "DecideMode::is_locked")]
    pub decide: DecideMode,
}

/// How `ask` decides (`[study] decide`): under the storage's lock, or on a snapshot with a
/// short claim under the lock ([`crate::claim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecideMode {
    /// The whole decision (model fit, acquisition maximization) under the lock: asks of
    /// different workers run one after another. Best when the workers share few cores.
    #[default]
    Locked,
    /// Decide on a snapshot read without the lock, then claim under it, checking that the
    /// decision still holds (else decide again): decisions of different workers run at once.
    /// Pays when each worker has cores of its own (a cluster); on a few shared cores the
    /// parallel fits slow each other down and identical decisions must be retried.
    Snapshot,
}

impl DecideMode {
    fn is_locked(&self) -> bool {
        *self == DecideMode::Locked
    }
}

fn default_storage() -> String {
    "sqlite:pandora.db".into()
}

fn default_direction() -> Direction {
    Direction::Maximize
}

/// What kind of objective a study has (`[objective] kind`; inferred from `builtin`/`command`
/// when not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectiveKind {
    /// A built-in test problem (`builtin`, `dim`).
    Builtin,
    /// A command run by `pandora run` (`command`).
    Command,
    /// Evaluated outside Pandora: trials are handed out by `ask` and reported by `tell` (the
    /// `pandora ask`/`tell` commands, or the Python package's `Study`). `pandora run` refuses it.
    External,
}

impl ObjectiveKind {
    /// The name used in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveKind::Builtin => "builtin",
            ObjectiveKind::Command => "command",
            ObjectiveKind::External => "external",
        }
    }
}

/// `[objective]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveSection {
    /// The kind of objective (optional for `builtin` and `command`, which imply it; required for
    /// `"external"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ObjectiveKind>,
    /// A built-in test problem.
    pub builtin: Option<String>,
    /// Its dimension.
    pub dim: Option<usize>,
    /// A command that reads the parameters as JSON on stdin and prints the result on stdout.
    pub command: Option<Vec<String>>,
    /// Seconds before a command is killed and the trial failed.
    pub timeout_s: Option<f64>,
}

/// How costs are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CostKind {
    /// Every evaluation costs 1.
    #[default]
    Uniform,
    /// A known formula of the parameters.
    Known,
    /// Reported by the objective command (`{"objective": v, "cost": c}`).
    Reported,
    /// The measured wall time of the evaluation, in seconds.
    Runtime,
}

/// `[cost]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSection {
    /// How costs are known.
    #[serde(default)]
    pub kind: CostKind,
    /// For `known`: the formula (`linear_mean`).
    pub formula: Option<String>,
    /// `linear_mean` offset (default 1).
    #[serde(default = "one")]
    pub offset: f64,
    /// `linear_mean` slope (default 20).
    #[serde(default = "twenty")]
    pub slope: f64,
}

impl Default for CostSection {
    fn default() -> Self {
        Self {
            kind: CostKind::Uniform,
            formula: None,
            offset: 1.0,
            slope: 20.0,
        }
    }
}

fn one() -> f64 {
    1.0
}

fn twenty() -> f64 {
    20.0
}

/// `[budget]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    /// Total budget in cost units.
    pub total: Option<f64>,
    /// Maximum number of trials.
    pub max_trials: Option<u64>,
    /// Whether the initial design's cost counts toward the budget (default true; the papers
    /// exclude it).
    #[serde(default = "yes")]
    pub count_initial: bool,
    /// With reported or runtime costs: stop instead of proposing a point whose predicted cost
    /// (`E[c]` under the log-cost GP) exceeds the remaining budget (default true).
    #[serde(default = "yes")]
    pub predicted_cost_must_fit: bool,
    /// Says that a study Pandora evaluates (builtin or command objective) has no limit on purpose:
    /// without `total`, `max_trials` and a stopping rule, validation refuses it unless this is
    /// true (`pandora run` would otherwise run until it is killed).
    #[serde(default, skip_serializing_if = "is_false")]
    pub unbounded: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for BudgetSection {
    fn default() -> Self {
        Self {
            total: None,
            max_trials: None,
            count_initial: true,
            predicted_cost_must_fit: true,
            unbounded: false,
        }
    }
}

fn yes() -> bool {
    true
}

/// `[policy]`: the acquisition and its settings ([`PolicySpec`], flattened: `acquisition =
/// "pbgi_d"` selects the keys that apply, and every other key is refused) and the keys every
/// policy has. Without `acquisition`, the policy is PBGI-D.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PolicySection {
    /// The acquisition and the settings that apply to it (see `docs/acquisitions.md`).
    #[serde(flatten, deserialize_with = "spec_or_pbgi_d")]
    pub spec: PolicySpec,
    /// Initial design size (default 2(d+1)).
    #[serde(default)]
    pub initial_design: Option<usize>,
    /// Seed of the run.
    #[serde(default)]
    pub seed: u64,
    /// How the objective model's hyperparameters follow the data from one step to the next:
    /// `warm` (the default: the previous step's kept or refined by one L-BFGS-B run, with full
    /// multi-start refits on a schedule) or `always` (a full fit at every step); the same key and
    /// meaning as an experiment's `[problem.model] refit` ([`RefitName`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit: Option<RefitName>,
    /// The cost-aware stopping rule (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<StudyStopping>,
}

/// The flattened [`PolicySpec`], PBGI-D when the table names no acquisition (serde's tagged enums
/// have no default variant: the keys are buffered and the tag supplied).
fn spec_or_pbgi_d<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<PolicySpec, D::Error> {
    let mut keys = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    if keys.get("acquisition").is_some_and(|v| !v.is_string()) {
        return Err(serde::de::Error::custom(
            "policy.acquisition: expected the name of an acquisition as a string, e.g. \
             acquisition = \"pbgi_d\" (see docs/acquisitions.md)",
        ));
    }
    if let Some(serde_json::Value::String(name)) = keys.get("acquisition")
        && let Err(e) = AcquisitionName::parse(name)
    {
        let why = match e {
            pandora_core::Error::InvalidInput { reason, .. } => reason,
            other => other.to_string(),
        };
        return Err(serde::de::Error::custom(format!(
            "policy.acquisition: {why}"
        )));
    }
    keys.entry("acquisition")
        .or_insert_with(|| AcquisitionName::PbgiD.as_str().into());
    // The buffer is JSON, which has no infinities or NaN: such a TOML value arrives as null,
    // whose error would not say where it came from. Name the keys that hold one.
    let nulls: Vec<String> = keys
        .iter()
        .filter(|(_, v)| v.is_null())
        .map(|(k, _)| format!("policy.{k}"))
        .collect();
    <PolicySpec as Deserialize>::deserialize(serde_json::Value::Object(keys)).map_err(|e| {
        serde::de::Error::custom(match nulls.is_empty() {
            true => e.to_string(),
            false => format!("{}: not a finite number ({e})", nulls.join(", ")),
        })
    })
}

impl StudyConfig {
    /// Parses and validates a TOML configuration.
    pub fn from_toml(text: &str) -> Result<Self> {
        let cfg: StudyConfig = toml::from_str(text).map_err(|e| {
            // Serde loses the key inside a tagged `[[space]]` entry: name it ourselves.
            space_type_error(text)
                .unwrap_or_else(|| Error::invalid("config", plain_words(&e.to_string())))
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the configuration for contradictions; errors name the field.
    pub fn validate(&self) -> Result<()> {
        if self.study.name.trim().is_empty() {
            return Err(Error::invalid("study.name", "must not be empty"));
        }
        let o = &self.objective;
        match (o.kind, &o.builtin, &o.command) {
            (Some(ObjectiveKind::External), b, c) => {
                if b.is_some() || c.is_some() || o.dim.is_some() || o.timeout_s.is_some() {
                    return Err(Error::invalid(
                        "objective",
                        "kind = \"external\" takes no `builtin`, `dim`, `command` or \
                         `timeout_s`: its trials are evaluated outside Pandora",
                    ));
                }
                if self.space.is_none() {
                    return Err(Error::invalid(
                        "space",
                        "an external objective needs a [[space]] list",
                    ));
                }
            }
            (Some(ObjectiveKind::Builtin), None, _) => {
                return Err(Error::invalid(
                    "objective.builtin",
                    "required by kind = \"builtin\"",
                ));
            }
            (Some(ObjectiveKind::Command), _, None) => {
                return Err(Error::invalid(
                    "objective.command",
                    "required by kind = \"command\"",
                ));
            }
            (_, Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "objective",
                    "give either `builtin` or `command`, not both",
                ));
            }
            (_, None, None) => {
                return Err(Error::invalid(
                    "objective",
                    "give `builtin`, `command`, or kind = \"external\"",
                ));
            }
            (_, Some(b), None) => {
                if !pandora_problems::names().contains(&b.as_str()) {
                    return Err(Error::invalid(
                        "objective.builtin",
                        format!(
                            "unknown problem '{b}' (available: {})",
                            pandora_problems::names().join(", ")
                        ),
                    ));
                }
                match o.dim {
                    Some(d) if (1..=64).contains(&d) => {}
                    Some(d) => {
                        return Err(Error::invalid(
                            "objective.dim",
                            format!("must be between 1 and 64, got {d}"),
                        ));
                    }
                    None if self.space.is_some() => {}
                    None => return Err(Error::invalid("objective.dim", "required by `builtin`")),
                }
            }
            (_, None, Some(cmd)) => {
                if cmd.is_empty() {
                    return Err(Error::invalid("objective.command", "must not be empty"));
                }
                if self.space.is_none() {
                    return Err(Error::invalid(
                        "space",
                        "a command objective needs a [[space]] list",
                    ));
                }
            }
        }
        if let Some(t) = o.timeout_s
            && !(t.is_finite() && t > 0.0 && t <= MAX_DURATION_S)
        {
            return Err(Error::invalid(
                "objective.timeout_s",
                format!(
                    "must be a number of seconds > 0 and at most {MAX_DURATION_S} (30 days), got {t}"
                ),
            ));
        }
        if let Some(s) = &self.space {
            SearchSpace { params: s.clone() }.validate()?;
        }
        match self.cost.kind {
            CostKind::Known => match self.cost.formula.as_deref() {
                Some("linear_mean") => {
                    if !(self.cost.offset > 0.0
                        && self.cost.offset + self.cost.slope.min(0.0) > 0.0)
                    {
                        return Err(Error::invalid(
                            "cost",
                            "linear_mean must be positive on the whole unit cube",
                        ));
                    }
                }
                Some(f) => {
                    return Err(Error::invalid(
                        "cost.formula",
                        format!("unknown formula '{f}' (available: linear_mean)"),
                    ));
                }
                None => {
                    return Err(Error::invalid(
                        "cost.formula",
                        "required by kind = \"known\"",
                    ));
                }
            },
            CostKind::Reported if self.objective.builtin.is_some() => {
                return Err(Error::invalid(
                    "cost.kind",
                    "a builtin problem cannot report costs; use known, uniform or runtime",
                ));
            }
            _ => {}
        }
        self.validate_limits()?;
        self.policy
            .spec
            .validate()
            .map_err(|e| e.within("policy"))?;
        if self.policy.spec.name() == AcquisitionName::BMsEi && self.budget.total.is_none() {
            return Err(Error::invalid(
                "budget.total",
                "required by acquisition = \"b_ms_ei\" (its tree spends a budget)",
            ));
        }
        if let Some(s) = &self.policy.stopping {
            s.validate(self)?;
        }
        if let Some(c) = &self.cvs {
            self.validate_cvs_fit()?;
            c.validate(&self.search_space())?;
        }
        if let Some(f) = &self.fidelity {
            f.validate()?;
            self.validate_fidelity_fit()?;
        }
        Ok(())
    }

    /// The parts of a study a `[fidelity]` study cannot use (yet): see `docs/freeze-thaw.md`.
    fn validate_fidelity_fit(&self) -> Result<()> {
        if self.cvs.is_some() {
            return Err(Error::invalid(
                "fidelity",
                "a study cannot have both [fidelity] and [cvs]",
            ));
        }
        if self.policy.stopping.is_some() {
            return Err(Error::invalid(
                "policy.stopping",
                "a [fidelity] study stops by its own index rule (no run's index above the best \
                 complete run's value): remove policy.stopping",
            ));
        }
        if self.objective.builtin.is_some() {
            return Err(Error::invalid(
                "objective",
                "a builtin problem has no steps: give a [fidelity] study a command (pandora run) \
                 or kind = \"external\" (pandora ask / pandora tell --step, or Python)",
            ));
        }
        Ok(())
    }

    /// Checks the sections a `[cvs]` study replaces or cannot use: its costs are its control
    /// sets' (no `[cost]`), it has no stopping rule, and it is evaluated outside Pandora or on a
    /// builtin problem (no command).
    fn validate_cvs_fit(&self) -> Result<()> {
        if self.cost.kind != CostKind::Uniform || self.cost.formula.is_some() {
            return Err(Error::invalid(
                "cost",
                "a [cvs] study's costs are its control sets' costs: remove the [cost] section",
            ));
        }
        if self.policy.stopping.is_some() {
            return Err(Error::invalid(
                "policy.stopping",
                "stopping rules are not available for [cvs] studies",
            ));
        }
        if self.objective.command.is_some() {
            return Err(Error::invalid(
                "objective",
                "a [cvs] study is evaluated outside Pandora (kind = \"external\", with \
                 pandora ask/tell) or simulated on a builtin problem; commands are not supported",
            ));
        }
        Ok(())
    }

    /// Checks `[budget]`: a positive total, a positive `max_trials`, and some limit (a total,
    /// `max_trials` or a stopping rule) on a study that Pandora evaluates itself, unless it says
    /// `unbounded = true`. External studies are driven by the caller's own loop and need none.
    fn validate_limits(&self) -> Result<()> {
        let b = &self.budget;
        if let Some(t) = b.total
            && !(t.is_finite() && t > 0.0)
        {
            return Err(Error::invalid("budget.total", "must be > 0"));
        }
        if b.max_trials == Some(0) {
            return Err(Error::invalid("budget.max_trials", "must be at least 1"));
        }
        let limited = b.total.is_some() || b.max_trials.is_some() || self.policy.stopping.is_some();
        if b.unbounded && limited {
            return Err(Error::invalid(
                "budget.unbounded",
                "true means the study has no limit, but budget.total, budget.max_trials or \
                 policy.stopping is set: remove one of them",
            ));
        }
        if !limited && !b.unbounded && self.objective_kind() != ObjectiveKind::External {
            return Err(Error::invalid(
                "budget",
                "the study has no limit and would run until it is killed: give budget.total \
                 (in cost units), budget.max_trials and/or policy.stopping, or set \
                 budget.unbounded = true to run it without one",
            ));
        }
        Ok(())
    }

    /// The kind of objective: the configured `kind`, else implied by `builtin`/`command`.
    pub fn objective_kind(&self) -> ObjectiveKind {
        match (self.objective.kind, &self.objective.builtin) {
            (Some(k), _) => k,
            (None, Some(_)) => ObjectiveKind::Builtin,
            (None, None) => ObjectiveKind::Command,
        }
    }

    /// The search space: the configured one, or `x0 … x{d−1}` floats in `[0, 1]` for builtins.
    pub fn search_space(&self) -> SearchSpace {
        match &self.space {
            Some(s) => SearchSpace { params: s.clone() },
            None => SearchSpace {
                params: (0..self.objective.dim.unwrap_or(1))
                    .map(|k| Param::Float {
                        name: format!("x{k}"),
                        low: 0.0,
                        high: 1.0,
                        log: false,
                    })
                    .collect(),
            },
        }
    }

    /// The unit-cube dimension.
    pub fn dim(&self) -> usize {
        self.search_space().dim()
    }

    /// The builtin problem (`[objective] builtin`) on the unit cube of the search space, from
    /// `pandora_problems`' registry (every problem it lists; instances that depend on a seed use
    /// `[policy] seed`), or `None` for other objectives. The study prices evaluations itself
    /// (`[cost]`), so the problem's own cost is not used.
    ///
    /// Errors (naming `objective.builtin`) on a dimension or option the problem does not accept.
    pub fn builtin_problem(&self) -> Result<Option<Box<dyn pandora_problems::Problem>>> {
        let Some(name) = &self.objective.builtin else {
            return Ok(None);
        };
        let spec = pandora_problems::ProblemSpec {
            objective: name.clone(),
            dim: self.dim(),
            cost: "uniform".into(),
            seed: self.policy.seed,
            ..Default::default()
        };
        pandora_problems::build(&spec)
            .map(Some)
            .map_err(|e| Error::invalid("objective.builtin", e.to_string()))
    }
}

/// Whether a trial's cost is charged to the budget (the initial design's only if
/// `[budget] count_initial`).
pub(crate) fn counts_toward_budget(config: &StudyConfig, t: &Trial) -> bool {
    config.budget.count_initial || t.decision.phase != pandora_core::policy::Phase::InitialDesign
}

/// How the stopping rule's λ is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StoppingLambda {
    /// Given in the stopping table (`lambda = 1e-5`).
    Fixed(f64),
    /// `lambda = "auto"`: `λ = U/(B − C)` from `[budget] total`, computed once at the first model
    /// step after the initial design (see `docs/stopping.md`).
    Auto,
    /// Not given: the study's fixed λ (`[policy] lambda`, acquisition `pbgi`).
    Study,
}

/// `[policy] stopping`: a stopping rule of `pandora_core::stopping` plus the study-level
/// settings. Reads from a rule name (`stopping = "pbgi"`) or a table (`rule = "pbgi"`, the rule's
/// parameters, `lambda = 1e-5 | "auto"`, `u_samples`). Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value", into = "serde_json::Value")]
pub struct StudyStopping {
    /// The core rule configuration (its `lambda` is set when λ is [`StoppingLambda::Fixed`]).
    pub rule: StoppingConfig,
    /// How λ is chosen.
    pub lambda: StoppingLambda,
    /// Prior sample paths used to estimate `U` for `lambda = "auto"` (default 64).
    pub u_samples: usize,
    /// With `lambda = "auto"` and acquisition `pbgi_d`: PBGI-D starts from the automatic λ
    /// instead of `lambda0` (default false).
    pub start_pbgi_d: bool,
}

/// Default number of prior paths in the `U` estimate of `lambda = "auto"`.
pub const DEFAULT_U_SAMPLES: usize = 64;

/// Rules a study can check (the others need state or data a study step does not keep).
const STUDY_RULES: &str = "pbgi (alias log-eipc)";

/// Every key of `given` must exist (recursively) in `known`.
fn check_known_keys(
    given: &serde_json::Value,
    known: &serde_json::Value,
    path: &str,
) -> std::result::Result<(), String> {
    if let (Some(g), Some(k)) = (given.as_object(), known.as_object()) {
        for (key, v) in g {
            match k.get(key) {
                None => {
                    let mut names: Vec<&str> = k.keys().map(String::as_str).collect();
                    if path == "policy.stopping" {
                        names.extend(["u_samples", "start_pbgi_d"]);
                    }
                    return Err(format!(
                        "{path}: unknown key '{key}' (known: {})",
                        names.join(", ")
                    ));
                }
                Some(kv) => check_known_keys(v, kv, &format!("{path}.{key}"))?,
            }
        }
    }
    Ok(())
}

impl TryFrom<serde_json::Value> for StudyStopping {
    type Error = String;
    fn try_from(v: serde_json::Value) -> std::result::Result<Self, String> {
        let (rule, lambda, u_samples, start_pbgi_d) = match v {
            serde_json::Value::String(name) => (
                StoppingConfig::from_name(&name).map_err(|e| e.to_string())?,
                StoppingLambda::Study,
                DEFAULT_U_SAMPLES,
                false,
            ),
            serde_json::Value::Object(mut m) => {
                if !m.get("rule").is_some_and(|r| r.is_string()) {
                    return Err("policy.stopping: a table needs `rule = \"pbgi\"`".into());
                }
                let lambda = match m.get("lambda") {
                    None => StoppingLambda::Study,
                    Some(serde_json::Value::String(s)) if s == "auto" => {
                        m.remove("lambda");
                        StoppingLambda::Auto
                    }
                    Some(l) => match l.as_f64() {
                        Some(x) if x.is_finite() && x > 0.0 => StoppingLambda::Fixed(x),
                        _ => {
                            return Err(format!(
                                "policy.stopping.lambda: must be a number > 0 or \"auto\", got {l}"
                            ));
                        }
                    },
                };
                let u_samples = match m.remove("u_samples") {
                    None => DEFAULT_U_SAMPLES,
                    Some(u) => match u.as_u64() {
                        Some(n) if n >= 2 => n as usize,
                        _ => {
                            return Err(format!(
                                "policy.stopping.u_samples: must be an integer >= 2, got {u}"
                            ));
                        }
                    },
                };
                let start_pbgi_d = match m.remove("start_pbgi_d") {
                    None => false,
                    Some(serde_json::Value::Bool(b)) => b,
                    Some(o) => {
                        return Err(format!(
                            "policy.stopping.start_pbgi_d: must be true or false, got {o}"
                        ));
                    }
                };
                match m.get("timing").and_then(|t| t.as_str()) {
                    None => {}
                    // The default, which a serialized rule leaves out.
                    Some("after-update") => {
                        m.remove("timing");
                    }
                    Some(_) => {
                        return Err(format!(
                            "policy.stopping.timing: a study checks its rule after the posterior \
                             update (\"after-update\"); \"before-update\" is for offline \
                             comparison in `pandora experiment`, got {}",
                            m["timing"]
                        ));
                    }
                }
                let given = serde_json::Value::Object(m);
                let rule: StoppingConfig = serde_json::from_value(given.clone())
                    .map_err(|e| format!("policy.stopping: {e}"))?;
                let known = serde_json::to_value(&rule).map_err(|e| e.to_string())?;
                check_known_keys(&given, &known, "policy.stopping")?;
                (rule, lambda, u_samples, start_pbgi_d)
            }
            other => {
                return Err(format!(
                    "policy.stopping: expected a rule name or a table, got {other}"
                ));
            }
        };
        if !matches!(rule.rule, RuleConfig::Pbgi { .. }) {
            return Err(format!(
                "policy.stopping: only the {STUDY_RULES} rule can stop a study; the other rules \
                 are for offline evaluation (pandora_core::stopping::replay)"
            ));
        }
        Ok(Self {
            rule,
            lambda,
            u_samples,
            start_pbgi_d,
        })
    }
}

impl From<StudyStopping> for serde_json::Value {
    fn from(s: StudyStopping) -> Self {
        let mut v = serde_json::to_value(&s.rule).unwrap_or(serde_json::Value::Null);
        if let Some(m) = v.as_object_mut() {
            if s.lambda == StoppingLambda::Auto {
                m.insert("lambda".into(), "auto".into());
            }
            if s.u_samples != DEFAULT_U_SAMPLES {
                m.insert("u_samples".into(), s.u_samples.into());
            }
            if s.start_pbgi_d {
                m.insert("start_pbgi_d".into(), true.into());
            }
        }
        v
    }
}

impl StudyStopping {
    /// λ when it is known from the configuration alone (`None` for `"auto"`).
    pub fn configured_lambda(&self, config: &StudyConfig) -> Option<f64> {
        match self.lambda {
            StoppingLambda::Fixed(l) => Some(l),
            StoppingLambda::Auto => None,
            StoppingLambda::Study => config.policy.spec.fixed_lambda(),
        }
    }

    fn validate(&self, config: &StudyConfig) -> Result<()> {
        let err = |r: String| Error::invalid("policy.stopping", r);
        match self.lambda {
            StoppingLambda::Auto if config.budget.total.is_none() => {
                return Err(Error::invalid(
                    "policy.stopping.lambda",
                    "\"auto\" chooses lambda from the budget: it needs [budget] total",
                ));
            }
            _ if self.start_pbgi_d
                && (self.lambda != StoppingLambda::Auto
                    || config.policy.spec.name() != AcquisitionName::PbgiD) =>
            {
                return Err(Error::invalid(
                    "policy.stopping.start_pbgi_d",
                    "needs lambda = \"auto\" and acquisition = \"pbgi_d\"",
                ));
            }
            StoppingLambda::Study if config.policy.spec.fixed_lambda().is_none() => {
                return Err(Error::invalid(
                    "policy.stopping.lambda",
                    "the pbgi rule needs a cost scale: set `lambda = <number>` or \
                     `lambda = \"auto\"` (with a budget) in the stopping table, or use \
                     acquisition = \"pbgi\" with [policy] lambda",
                ));
            }
            _ => {}
        }
        // Every other parameter (debounce, window, ...) is checked by building the rule.
        let lam = self.configured_lambda(config).unwrap_or(1.0);
        self.rule.build(Some(lam)).map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

/// The storage URL with its password hidden (see [`crate::redact`]). Studies store their
/// configuration in the database (readable by everyone with access to it) with the storage URL
/// redacted this way; the URL used to connect is never taken from the stored copy.
pub use crate::redact::redact_url;

/// For a configuration that does not deserialize: the first `[[space]]` entry key whose value has
/// the wrong type, as an error naming `space.NAME.KEY` (serde reports such errors without the
/// key, because the entry is an internally tagged enum).
fn space_type_error(text: &str) -> Option<Error> {
    let table: toml::Table = text.parse().ok()?;
    let entries = table.get("space")?.as_array()?;
    for (i, entry) in entries.iter().enumerate() {
        let entry = entry.as_table()?;
        let name = entry
            .get("name")
            .and_then(toml::Value::as_str)
            .map_or_else(|| format!("[{i}]"), |n| format!(".{n}"));
        for (key, value) in entry {
            let expected = match key.as_str() {
                "low" | "high" if !(value.is_integer() || value.is_float()) => "a number",
                "log" if !value.is_bool() => "true or false",
                "name" | "type" if !value.is_str() => "a string",
                "values" | "choices" if !value.is_array() => "an array",
                _ => continue,
            };
            return Some(Error::invalid(
                format!("space{name}.{key}"),
                format!("expected {expected}, got {value}"),
            ));
        }
    }
    None
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    const BUILTIN: &str = "[study]\nname = \"s\"\n[objective]\nbuiltin = \"ackley\"\ndim = 2\n";

    fn err(text: &str) -> (String, String) {
        match StudyConfig::from_toml(text) {
            Err(Error::Invalid { what, reason }) => (what, reason),
            other => panic!("expected an invalid-config error for\n{text}\ngot {other:?}"),
        }
    }

    #[test]
    fn a_study_without_any_limit_is_refused_naming_the_fields() {
        let (what, reason) = err(BUILTIN);
        assert_eq!(what, "budget");
        for field in [
            "budget.total",
            "budget.max_trials",
            "policy.stopping",
            "budget.unbounded = true",
        ] {
            assert!(reason.contains(field), "{field}: {reason}");
        }
        let command = "[study]\nname = \"c\"\n[objective]\ncommand = [\"python3\", \"f.py\"]\n\
                       [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
        assert_eq!(err(command).0, "budget");
        // Each limit on its own is enough.
        for limit in [
            "[budget]\ntotal = 10.0\n",
            "[budget]\nmax_trials = 5\n",
            "[policy]\nstopping = { rule = \"pbgi\", lambda = 1e-3 }\n",
            "[budget]\nunbounded = true\n",
        ] {
            StudyConfig::from_toml(&format!("{BUILTIN}{limit}")).unwrap();
            StudyConfig::from_toml(&format!("{command}{limit}")).unwrap();
        }
    }

    #[test]
    fn external_studies_need_no_limit_and_unbounded_round_trips() {
        let external = "[study]\nname = \"e\"\n[objective]\nkind = \"external\"\n\
                        [[space]]\nname = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n";
        StudyConfig::from_toml(external).unwrap();
        let cfg =
            StudyConfig::from_toml(&format!("{BUILTIN}[budget]\nunbounded = true\n")).unwrap();
        assert!(cfg.budget.unbounded);
        let back = StudyConfig::from_toml(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
        // Configurations without the field serialize as before.
        let bounded = StudyConfig::from_toml(&format!("{BUILTIN}[budget]\ntotal = 5.0\n")).unwrap();
        assert!(
            !serde_json::to_string(&bounded)
                .unwrap()
                .contains("unbounded")
        );
    }

    #[test]
    fn unbounded_with_a_limit_is_a_contradiction() {
        for limit in [
            "[budget]\nunbounded = true\ntotal = 10.0\n",
            "[budget]\nunbounded = true\nmax_trials = 3\n",
            "[budget]\nunbounded = true\n[policy]\nstopping = { rule = \"pbgi\", lambda = 1e-3 }\n",
        ] {
            assert_eq!(
                err(&format!("{BUILTIN}{limit}")).0,
                "budget.unbounded",
                "{limit}"
            );
        }
        assert_eq!(
            err(&format!("{BUILTIN}[budget]\nmax_trials = 0\n")).0,
            "budget.max_trials"
        );
    }

    #[test]
    fn type_errors_use_user_words() {
        for (bad, words) in [
            (
                "[budget]\nmax_trials = \"ten\"\n",
                "expected a whole number >= 0",
            ),
            (
                "[budget]\nmax_trials = -3\n",
                "expected a whole number >= 0",
            ),
            ("[budget]\ntotal = \"lots\"\n", "expected a number"),
            ("[budget]\ntotal = [1.0]\n", "invalid type: list"),
        ] {
            let (what, reason) = err(&format!("{BUILTIN}{bad}"));
            assert_eq!(what, "config");
            assert!(reason.contains(words), "{bad}: {reason}");
            for jargon in ["usize", "u64", "f64", "sequence"] {
                assert!(!reason.contains(jargon), "{bad}: {reason}");
            }
        }
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    fn builtin(name: &str, dim: usize) -> String {
        format!(
            "[study]\nname = \"b\"\n[objective]\nbuiltin = \"{name}\"\ndim = {dim}\n\
             [budget]\nmax_trials = 5\n"
        )
    }

    #[test]
    fn every_registry_problem_is_a_builtin() {
        // Problems beyond the PBGI paper's three, at dimensions they are defined for.
        for (name, dim, optimum) in [
            ("branin", 2, -5.0 / (4.0 * std::f64::consts::PI)),
            ("hartmann3", 3, 3.86278),
            ("ackley", 3, 0.0),
        ] {
            let cfg = StudyConfig::from_toml(&builtin(name, dim)).unwrap();
            let p = cfg.builtin_problem().unwrap().expect("a builtin problem");
            assert_eq!((p.name(), p.dim()), (name, dim));
            let x = p.argmax().expect("a known maximizer");
            assert!(
                (p.eval(&x) - optimum).abs() < 1e-4,
                "{name}: {}",
                p.eval(&x)
            );
        }
        for name in pandora_problems::names() {
            assert!(
                StudyConfig::from_toml(&builtin(name, 1)).is_ok(),
                "{name}: the name is accepted (the dimension is checked when it is built)"
            );
        }
    }

    #[test]
    fn builtin_errors_name_the_field() {
        let cfg = StudyConfig::from_toml(&builtin("branin", 3)).unwrap();
        match cfg.builtin_problem() {
            Err(Error::Invalid { what, reason }) => {
                assert_eq!(what, "objective.builtin");
                assert!(reason.contains("dim = 2"), "{reason}");
            }
            Err(other) => panic!("expected an invalid-config error, got {other:?}"),
            Ok(_) => panic!("branin is not defined in 3-D"),
        }
        match StudyConfig::from_toml(&builtin("nosuch", 2)) {
            Err(Error::Invalid { what, reason }) => {
                assert_eq!(what, "objective.builtin");
                assert!(
                    reason.contains("lunar_lander"),
                    "lists every name: {reason}"
                );
            }
            other => panic!("expected an invalid-config error, got {other:?}"),
        }
        let command = "[study]\nname = \"c\"\n[objective]\ncommand = [\"f\"]\n[[space]]\n\
                       name = \"x\"\ntype = \"float\"\nlow = 0.0\nhigh = 1.0\n\
                       [budget]\nmax_trials = 5\n";
        let cfg = StudyConfig::from_toml(command).unwrap();
        assert!(cfg.builtin_problem().unwrap().is_none());
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    const BASE: &str = "[study]\nname = \"s\"\n[objective]\nbuiltin = \"ackley\"\ndim = 2\n\
                        [budget]\ntotal = 10.0\n";

    fn with_policy(policy: &str) -> Result<StudyConfig> {
        StudyConfig::from_toml(&format!("{BASE}[policy]\n{policy}"))
    }

    #[test]
    fn the_policy_table_is_a_policy_spec_with_the_common_keys_beside_it() {
        let c =
            with_policy("acquisition = \"ucb\"\nbeta = 0.5\nseed = 3\ninitial_design = 4").unwrap();
        assert_eq!(c.policy.spec, PolicySpec::Ucb { beta: Some(0.5) });
        assert_eq!((c.policy.seed, c.policy.initial_design), (3, Some(4)));
        // No acquisition: PBGI-D, with its keys.
        let c = with_policy("seed = 2\ndecay = 4.0").unwrap();
        assert_eq!(
            c.policy.spec,
            PolicySpec::PbgiD {
                lambda0: 0.1,
                decay: 4.0
            }
        );
        assert_eq!(c.policy.seed, 2);
        let c = StudyConfig::from_toml(BASE).unwrap();
        assert_eq!(c.policy, PolicySection::default());
        // Written out and read back.
        let c = with_policy("acquisition = \"b_ms_ei\"\ntree = [2, 1]\nrefill = false").unwrap();
        let back = StudyConfig::from_toml(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    /// Values of the wrong type, and infinities (which the JSON buffer of the flattened spec
    /// cannot hold), name their key.
    #[test]
    fn wrong_types_and_infinities_name_the_key() {
        for (policy, key) in [
            ("acquisition = inf", "policy.acquisition"),
            ("acquisition = 3", "policy.acquisition"),
            ("acquisition = [\"ei\"]", "policy.acquisition"),
            ("acquisition = \"pbgi_d\"\nlambda0 = inf", "policy.lambda0"),
            ("acquisition = \"pbgi\"\nlambda = nan", "policy.lambda"),
        ] {
            let e = with_policy(policy).unwrap_err().to_string();
            assert!(e.contains(key), "{policy}: {e}");
        }
    }

    #[test]
    fn refit_is_a_policy_key_with_the_experiments_names() {
        assert_eq!(with_policy("seed = 1").unwrap().policy.refit, None);
        for (name, refit) in [("warm", RefitName::Warm), ("always", RefitName::Always)] {
            let c = with_policy(&format!("acquisition = \"log_ei\"\nrefit = \"{name}\"")).unwrap();
            assert_eq!(c.policy.refit, Some(refit));
            // Written back, it reads the same.
            let again = StudyConfig::from_toml(&toml::to_string(&c).unwrap()).unwrap();
            assert_eq!(again.policy.refit, Some(refit));
        }
        let e = with_policy("refit = \"sometimes\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sometimes") && e.contains("warm"), "{e}");
    }

    #[test]
    fn keys_that_do_not_apply_are_refused_naming_them() {
        for (policy, key) in [
            ("acquisition = \"log_ei\"\nlambda = 0.1", "lambda"),
            (
                "acquisition = \"pbgi\"\nlambda = 0.1\nlambda0 = 0.1",
                "lambda0",
            ),
            ("acquisition = \"ms_ei\"\nrefill = false", "refill"),
            ("acquisition = \"ei\"\ntree = [1]", "tree"),
            ("seed = 1\nbogus = 2", "bogus"),
        ] {
            let e = with_policy(policy).unwrap_err().to_string();
            assert!(
                e.contains(&format!("unknown field `{key}`")),
                "{policy}: {e}"
            );
        }
        let e = with_policy("acquisition = \"ucb\"\nucb_beta = 1.0").unwrap_err();
        assert!(
            e.to_string().contains("`ucb_beta` is now called `beta`"),
            "{e}"
        );
        let e = with_policy("acquisition = \"pbgi\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `lambda`"), "{e}");
    }

    #[test]
    fn values_are_checked_naming_the_field() {
        for (policy, field) in [
            ("acquisition = \"pbgi_d\"\ndecay = 1.0", "policy.decay"),
            ("acquisition = \"pbgi_d\"\nlambda0 = 0.0", "policy.lambda0"),
            ("acquisition = \"pbgi\"\nlambda = -1.0", "policy.lambda"),
            ("acquisition = \"ucb\"\nbeta = -1.0", "policy.beta"),
        ] {
            let e = with_policy(policy).unwrap_err().to_string();
            assert!(e.contains(field), "{policy}: {e}");
        }
    }
}
