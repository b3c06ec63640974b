//! Serializable configuration of a stopping rule.
//!
//! A config is either just a rule name with every default (`stopping = "pbgi"` in TOML) or a
//! table with `rule = "..."` and the rule's parameters plus the shared `burn_in`, `debounce` and
//! `optimizer` keys:
//!
//! ```toml
//! [stopping]
//! rule = "pbgi"
//! lambda = 1e-5     # optional: defaults to the study's λ
//! window = 1
//! burn_in = 0
//! debounce = 1
//! ```
//!
//! | rule | parameters (defaults) |
//! |---|---|
//! | `pbgi` (alias `log-eipc`) | `lambda` (the caller's λ), `window = 1`, `timing = "after-update"` (or `"before-update"`) |
//! | `ucb-lcb` | `threshold = 0.01`, `window = 1` |
//! | `log-eipc-med` | `eta = 0.01`, `initial = 20` |
//! | `srgap-med` | `chi = 0.01`, `initial = 20` |
//! | `prb` | `epsilon = 0.05`, `delta = 0.05`, `schedule = {initial = 64, growth = 1.5, max = 1000}`, `num_features = 1024` |
//! | `convergence` | `window = 5` |
//! | `gss` | `window = 5`, `phi = 0.01`, `iqr_of_best = false` |
//! | `fixed-budget` | `max_iterations`, `max_cost` (at least one) |
//! | `never` | — |

use super::heuristics::{Convergence, FixedBudget, Gss, Never};
use super::median::{LogEipcMed, SrGapMed};
use super::optimizer::OptimizerConfig;
use super::pbgi::{PbgiStopping, Timing};
use super::prb::{Prb, SampleSchedule};
use super::ucb_lcb::UcbLcb;
use super::{Guard, StoppingRule};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

fn one() -> usize {
    1
}
fn five() -> usize {
    5
}
fn twenty() -> usize {
    20
}
fn p01() -> f64 {
    0.01
}
fn p05() -> f64 {
    0.05
}
fn features() -> usize {
    1024
}

/// Which rule, with its parameters (see the [module documentation](self) for defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum RuleConfig {
    /// The PBGI/LogEIPC rule.
    #[serde(alias = "log-eipc")]
    Pbgi {
        /// Cost scale λ (`None`: the λ given to [`StoppingConfig::build`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lambda: Option<f64>,
        /// Moving-average window (1 = none).
        #[serde(default = "one")]
        window: usize,
        /// Indices after (default) or before the posterior update.
        #[serde(default, skip_serializing_if = "Timing::is_after_update")]
        timing: Timing,
    },
    /// UCB-LCB.
    UcbLcb {
        /// Absolute threshold θ.
        #[serde(default = "p01")]
        threshold: f64,
        /// Moving-average window (1 = none).
        #[serde(default = "one")]
        window: usize,
    },
    /// LogEIPC-med.
    LogEipcMed {
        /// Fraction η of the median.
        #[serde(default = "p01")]
        eta: f64,
        /// Number of initial values in the median, `I`.
        #[serde(default = "twenty")]
        initial: usize,
    },
    /// SRGap-med.
    SrgapMed {
        /// Fraction χ of the median.
        #[serde(default = "p01")]
        chi: f64,
        /// Number of initial values in the median, `I`.
        #[serde(default = "twenty")]
        initial: usize,
    },
    /// The probabilistic regret bound.
    Prb {
        /// Regret tolerance ε (objective units).
        #[serde(default = "p05")]
        epsilon: f64,
        /// Stop when the probability is at least `1 − δ`.
        #[serde(default = "p05")]
        delta: f64,
        /// Posterior-sample schedule.
        #[serde(default)]
        schedule: SampleSchedule,
        /// Random Fourier features per sample path.
        #[serde(default = "features")]
        num_features: usize,
    },
    /// No improvement during `window` evaluations.
    Convergence {
        /// The window `w`.
        #[serde(default = "five")]
        window: usize,
    },
    /// The global stopping strategy.
    Gss {
        /// The window `w`.
        #[serde(default = "five")]
        window: usize,
        /// Fraction φ of the IQR.
        #[serde(default = "p01")]
        phi: f64,
        /// IQR of the best-value history instead of the observations.
        #[serde(default)]
        iqr_of_best: bool,
    },
    /// A fixed number of BO evaluations and/or a cost budget.
    FixedBudget {
        /// Stop after this many BO evaluations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_iterations: Option<usize>,
        /// Stop once the BO-phase cumulative cost reaches this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost: Option<f64>,
    },
    /// Never stop.
    Never,
}

impl RuleConfig {
    /// The rule called `name` with all defaults (`fixed-budget` has no defaults).
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name {
            "pbgi" | "log-eipc" => RuleConfig::Pbgi {
                lambda: None,
                window: 1,
                timing: Timing::AfterUpdate,
            },
            "ucb-lcb" => RuleConfig::UcbLcb {
                threshold: 0.01,
                window: 1,
            },
            "log-eipc-med" => RuleConfig::LogEipcMed {
                eta: 0.01,
                initial: 20,
            },
            "srgap-med" => RuleConfig::SrgapMed {
                chi: 0.01,
                initial: 20,
            },
            "prb" => RuleConfig::Prb {
                epsilon: 0.05,
                delta: 0.05,
                schedule: SampleSchedule::default(),
                num_features: 1024,
            },
            "convergence" => RuleConfig::Convergence { window: 5 },
            "gss" => RuleConfig::Gss {
                window: 5,
                phi: 0.01,
                iqr_of_best: false,
            },
            "never" | "none" => RuleConfig::Never,
            "fixed-budget" => {
                return Err(Error::invalid(
                    "stopping",
                    "fixed-budget needs max_iterations or max_cost: use a table",
                ));
            }
            other => {
                return Err(Error::invalid(
                    "stopping",
                    format!(
                        "unknown rule '{other}' (pbgi, log-eipc, ucb-lcb, log-eipc-med, \
                         srgap-med, prb, convergence, gss, fixed-budget, never)"
                    ),
                ));
            }
        })
    }
}

/// A stopping rule with its shared settings. Deserializes from a rule name or a table (see the
/// [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Repr")]
pub struct StoppingConfig {
    /// The rule and its parameters.
    #[serde(flatten)]
    pub rule: RuleConfig,
    /// Burn-in and debounce.
    #[serde(flatten)]
    pub guard: Guard,
    /// Maximization settings of model-based rules.
    #[serde(default)]
    pub optimizer: OptimizerConfig,
}

#[derive(Deserialize)]
struct Full {
    #[serde(flatten)]
    rule: RuleConfig,
    #[serde(flatten)]
    guard: Guard,
    #[serde(default)]
    optimizer: OptimizerConfig,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Repr {
    Name(String),
    Full(Full),
}

impl TryFrom<Repr> for StoppingConfig {
    type Error = String;
    fn try_from(r: Repr) -> std::result::Result<Self, String> {
        match r {
            Repr::Name(n) => StoppingConfig::from_name(&n).map_err(|e| e.to_string()),
            Repr::Full(f) => Ok(StoppingConfig {
                rule: f.rule,
                guard: f.guard,
                optimizer: f.optimizer,
            }),
        }
    }
}

impl Default for StoppingConfig {
    /// The PBGI/LogEIPC rule with the caller's λ, no window, no burn-in, no debounce.
    fn default() -> Self {
        Self {
            rule: RuleConfig::Pbgi {
                lambda: None,
                window: 1,
                timing: Timing::AfterUpdate,
            },
            guard: Guard::default(),
            optimizer: OptimizerConfig::default(),
        }
    }
}

impl StoppingConfig {
    /// The rule called `name` with all defaults.
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(Self {
            rule: RuleConfig::from_name(name)?,
            ..Self::default()
        })
    }

    /// Builds the rule. `lambda` is the run's cost scale, used by `pbgi` when the config does not
    /// set its own.
    pub fn build(&self, lambda: Option<f64>) -> Result<Box<dyn StoppingRule>> {
        let g = self.guard;
        if g.debounce == 0 {
            return Err(Error::invalid("stopping debounce", "must be at least 1"));
        }
        let o = self.optimizer;
        Ok(match &self.rule {
            RuleConfig::Pbgi {
                lambda: l,
                window,
                timing,
            } => {
                let lam = l.or(lambda).ok_or_else(|| {
                    Error::invalid(
                        "stopping lambda",
                        "the pbgi rule needs a cost scale lambda (set it or give the study's)",
                    )
                })?;
                Box::new(PbgiStopping::new(lam, *window, g, o)?.with_timing(*timing))
            }
            RuleConfig::UcbLcb { threshold, window } => {
                Box::new(UcbLcb::new(*threshold, *window, g, o)?)
            }
            RuleConfig::LogEipcMed { eta, initial } => {
                Box::new(LogEipcMed::new(*eta, *initial, g, o)?)
            }
            RuleConfig::SrgapMed { chi, initial } => Box::new(SrGapMed::new(*chi, *initial, g)?),
            RuleConfig::Prb {
                epsilon,
                delta,
                schedule,
                num_features,
            } => Box::new(Prb::new(*epsilon, *delta, *schedule, *num_features, g, o)?),
            RuleConfig::Convergence { window } => Box::new(Convergence::new(*window, g)?),
            RuleConfig::Gss {
                window,
                phi,
                iqr_of_best,
            } => Box::new(Gss::new(*window, *phi, *iqr_of_best, g)?),
            RuleConfig::FixedBudget {
                max_iterations,
                max_cost,
            } => Box::new(FixedBudget::new(*max_iterations, *max_cost)?),
            RuleConfig::Never => Box::new(Never),
        })
    }
}
