//! The `[stopping]` table of an experiment file, and the plan it resolves to.
//!
//! The table lists the λ values and the rules to evaluate offline, with the sizes of the
//! statistics' maximizations; [`StoppingSection::resolve`] checks it and works out which
//! statistics every run must record ([`StatisticsSpec`]). The plan is a leaf of the experiment
//! modules: the experiment configuration holds it, and the recording and the evaluation in
//! [`super`] read it.

use anyhow::{Context, Result, bail};
use pandora_core::stopping::pbgi::Timing;
use pandora_core::stopping::prb::SampleSchedule;
use pandora_core::stopping::{OptimizerConfig, RuleConfig, StoppingConfig};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

fn yes() -> bool {
    true
}

/// The `[stopping]` table of an experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoppingSection {
    /// Cost scales λ at which every rule is evaluated (`R_λ = regret + λ·cost`; the PBGI rule's
    /// threshold is `log λ`).
    pub lambdas: Vec<f64>,
    /// Rules: a name (`"pbgi"`, `"ucb-lcb"`, …, every default) or a table as in
    /// `pandora_core::stopping::StoppingConfig` (`{ rule = "fixed-budget", max_iterations = 50 }`,
    /// `{ rule = "pbgi", window = 20, burn_in = 20 }`), with an optional `label`.
    pub rules: Vec<toml::Value>,
    /// Evaluate a fixed-λ PBGI policy only at its own λ (the paper pairs PBGI(λ) with the rule
    /// at λ; default true). Its λ must then be one of `lambdas`.
    #[serde(default = "yes")]
    pub policy_lambda_only: bool,
    /// Raw Sobol points of the statistics' maximizations (default `200·d`).
    pub raw_samples: Option<usize>,
    /// L-BFGS-B restarts of the statistics' maximizations (default `10·d`).
    pub num_restarts: Option<usize>,
    /// 1-D problems only: also evaluate the LogEIPC and UCB statistics on this many evenly spaced
    /// points of `[0, 1]` (the paper used an exhaustive 10 001-point grid in 1-D).
    pub grid: Option<usize>,
    /// 1-D problems only: maximize PRB's sample paths exhaustively on this many evenly spaced
    /// points (paths sharing one frequency draw, evaluated together) instead of by multi-start
    /// L-BFGS-B path by path.
    pub prb_grid: Option<usize>,
    /// Replacements under `--smoke`.
    pub smoke: Option<StoppingSmoke>,
}

/// `[stopping.smoke]`: cheaper statistics under `--smoke`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoppingSmoke {
    /// PRB's sample schedule (`{ initial, growth, max }`).
    pub prb_schedule: Option<SampleSchedule>,
    /// PRB's random Fourier features per path.
    pub prb_features: Option<usize>,
    /// Raw samples of the statistics' maximizations.
    pub raw_samples: Option<usize>,
    /// Restarts of the statistics' maximizations.
    pub num_restarts: Option<usize>,
    /// 1-D grid size (0 turns the grid off).
    pub grid: Option<usize>,
    /// PRB's 1-D grid size (0 turns it off).
    pub prb_grid: Option<usize>,
}

/// A rule with its label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledRule {
    /// Label in the CSVs.
    pub label: String,
    /// The rule.
    pub config: StoppingConfig,
}

/// PRB's statistic settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrbSpec {
    /// Regret tolerance ε.
    pub epsilon: f64,
    /// Sample schedule (`S_0 = initial`, `S_{t+1} = min(⌈growth·S_t⌉, max)`).
    pub schedule: SampleSchedule,
    /// Random Fourier features per path.
    pub num_features: usize,
    /// 1-D grid on which the paths are maximized (`None`: multi-start L-BFGS-B per path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<usize>,
}

impl PrbSpec {
    /// The number of sample paths at iteration `t`.
    pub fn samples_at(&self, t: usize) -> usize {
        let mut s = self.schedule.initial;
        for _ in 0..t {
            let next = self.schedule.next(s);
            if next == s {
                break;
            }
            s = next;
        }
        s
    }
}

/// Which statistics a run records, and how they are maximized. This (not the replay settings)
/// is part of a run's settings: changing λ or adding a rule that needs no new statistic keeps the
/// traces valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatisticsSpec {
    /// `max LogEIPC` (PBGI rule).
    pub log_eipc: bool,
    /// `max LogEIPC` on the posterior of `D_{t−1}` with the incumbent of `D_t` (the PBGI rule
    /// with `timing = "before-update"`). Not written when false, so the settings of runs
    /// recorded before it existed are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log_eipc_before_update: bool,
    /// `max LogEIPC-inv` (LogEIPC-med).
    pub log_eipc_inv: bool,
    /// UCB-LCB.
    pub ucb_lcb: bool,
    /// SRGap.
    pub srgap: bool,
    /// PRB.
    pub prb: Option<PrbSpec>,
    /// Raw samples of the maximizations.
    pub raw_samples: Option<usize>,
    /// Restarts of the maximizations.
    pub num_restarts: Option<usize>,
    /// 1-D grid size.
    pub grid: Option<usize>,
}

impl StatisticsSpec {
    /// The evenly spaced grids the statistics are also evaluated on (`grid`, PRB's `grid`).
    fn grids(&self) -> impl Iterator<Item = usize> {
        [self.grid, self.prb.and_then(|p| p.grid)]
            .into_iter()
            .flatten()
    }

    /// How the statistics are maximized.
    pub fn optimizer(&self) -> OptimizerConfig {
        OptimizerConfig {
            raw_samples: self.raw_samples,
            num_restarts: self.num_restarts,
        }
    }
}

/// The resolved `[stopping]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoppingPlan {
    /// The λ values.
    pub lambdas: Vec<f64>,
    /// The rules.
    pub rules: Vec<LabelledRule>,
    /// See [`StoppingSection::policy_lambda_only`].
    pub policy_lambda_only: bool,
    /// What every run records.
    pub statistics: StatisticsSpec,
}

fn rule_name(c: &RuleConfig) -> &'static str {
    match c {
        RuleConfig::Pbgi { .. } => "pbgi",
        RuleConfig::UcbLcb { .. } => "ucb-lcb",
        RuleConfig::LogEipcMed { .. } => "log-eipc-med",
        RuleConfig::SrgapMed { .. } => "srgap-med",
        RuleConfig::Prb { .. } => "prb",
        RuleConfig::Convergence { .. } => "convergence",
        RuleConfig::Gss { .. } => "gss",
        RuleConfig::FixedBudget { .. } => "fixed-budget",
        RuleConfig::Never => "never",
    }
}

fn parse_rule(v: &toml::Value) -> Result<LabelledRule> {
    match v {
        toml::Value::String(name) => {
            let config = StoppingConfig::from_name(name)?;
            Ok(LabelledRule {
                label: rule_name(&config.rule).to_string(),
                config,
            })
        }
        toml::Value::Table(t) => {
            let mut t = t.clone();
            let label = match t.remove("label") {
                Some(toml::Value::String(s)) => Some(s),
                Some(other) => bail!("a rule's label must be a string, got {other}"),
                None => None,
            };
            if t.contains_key("optimizer") {
                bail!(
                    "set the statistics' maximization with [stopping] raw_samples / num_restarts, \
                     not per rule"
                );
            }
            let config: StoppingConfig = toml::Value::Table(t.clone())
                .try_into()
                .with_context(|| format!("rule {}", toml::Value::Table(t.clone())))?;
            let label = label.unwrap_or_else(|| {
                let params: Vec<String> = t
                    .iter()
                    .filter(|(k, _)| k.as_str() != "rule")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if params.is_empty() {
                    rule_name(&config.rule).to_string()
                } else {
                    format!("{}({})", rule_name(&config.rule), params.join(","))
                }
            });
            Ok(LabelledRule { label, config })
        }
        other => bail!("a rule is a name or a table, got {other}"),
    }
}

impl StoppingSection {
    /// Resolves the section (with `[stopping.smoke]` if `smoke`). The checks against the
    /// experiment's problems and policies (grids on 1-D problems only, a fixed-λ PBGI policy's λ
    /// among `lambdas`) are [`StoppingPlan::check_problem`] and
    /// [`StoppingPlan::check_pbgi_policy`].
    pub fn resolve(&self, smoke: bool) -> Result<StoppingPlan> {
        if self.lambdas.is_empty() {
            bail!("[stopping] lambdas is empty");
        }
        let mut seen = Vec::new();
        for &l in &self.lambdas {
            if !(l.is_finite() && l > 0.0) {
                bail!("[stopping] every lambda must be finite and > 0, got {l}");
            }
            if seen.contains(&l) {
                bail!("[stopping] lambda {l} is listed twice");
            }
            seen.push(l);
        }
        if self.rules.is_empty() {
            bail!("[stopping] rules is empty");
        }
        let mut rules = Vec::new();
        let mut labels = HashSet::new();
        for v in &self.rules {
            let r = parse_rule(v).context("[stopping] rules")?;
            if !labels.insert(r.label.clone()) {
                bail!(
                    "[stopping] two rules have the label '{}'; set distinct `label`s",
                    r.label
                );
            }
            if let RuleConfig::Pbgi {
                lambda: Some(_), ..
            } = r.config.rule
            {
                bail!(
                    "[stopping] rule '{}': λ comes from `lambdas`, do not set it per rule",
                    r.label
                );
            }
            // Validates the parameters.
            r.config
                .build(Some(self.lambdas[0]))
                .with_context(|| format!("[stopping] rule '{}'", r.label))?;
            rules.push(r);
        }
        let s = if smoke {
            self.smoke.clone().unwrap_or_default()
        } else {
            StoppingSmoke::default()
        };
        let mut prb: Option<PrbSpec> = None;
        let mut spec = StatisticsSpec {
            log_eipc: false,
            log_eipc_before_update: false,
            log_eipc_inv: false,
            ucb_lcb: false,
            srgap: false,
            prb: None,
            raw_samples: s.raw_samples.or(self.raw_samples),
            num_restarts: s.num_restarts.or(self.num_restarts),
            grid: match s.grid.or(self.grid) {
                Some(0) | None => None,
                Some(g) => Some(g),
            },
        };
        for r in &rules {
            match &r.config.rule {
                RuleConfig::Pbgi { timing, .. } => match timing {
                    Timing::AfterUpdate => spec.log_eipc = true,
                    Timing::BeforeUpdate => spec.log_eipc_before_update = true,
                },
                RuleConfig::LogEipcMed { .. } => spec.log_eipc_inv = true,
                RuleConfig::UcbLcb { .. } => spec.ucb_lcb = true,
                RuleConfig::SrgapMed { .. } => spec.srgap = true,
                RuleConfig::Prb {
                    epsilon,
                    schedule,
                    num_features,
                    ..
                } => {
                    let p = PrbSpec {
                        epsilon: *epsilon,
                        schedule: s.prb_schedule.unwrap_or(*schedule),
                        num_features: s.prb_features.unwrap_or(*num_features),
                        grid: match s.prb_grid.or(self.prb_grid) {
                            Some(0) | None => None,
                            Some(g) => Some(g),
                        },
                    };
                    match prb {
                        Some(q) if q != p => bail!(
                            "[stopping] PRB rules must share epsilon, schedule and num_features \
                             (their statistic is recorded once per iteration)"
                        ),
                        _ => prb = Some(p),
                    }
                }
                _ => {}
            }
        }
        spec.prb = prb;
        for g in spec.grids() {
            if !(2..=1_000_000).contains(&g) {
                bail!("[stopping] grid must be between 2 and 1 000 000 points, got {g}");
            }
        }
        Ok(StoppingPlan {
            lambdas: self.lambdas.clone(),
            rules,
            policy_lambda_only: self.policy_lambda_only,
            statistics: spec,
        })
    }
}

impl StoppingPlan {
    /// Checks a problem (`label`, input dimension `dim`) against the plan: the statistics' grids
    /// are for 1-D problems only.
    pub fn check_problem(&self, label: &str, dim: usize) -> Result<()> {
        if self.statistics.grids().next().is_some() && dim != 1 {
            bail!("[stopping] grid is for 1-D problems; '{label}' has d = {dim}");
        }
        Ok(())
    }

    /// Checks a fixed-λ PBGI policy (`label`, its λ) against the plan: with
    /// `policy_lambda_only`, its λ must be one of `lambdas`.
    pub fn check_pbgi_policy(&self, label: &str, lambda: f64) -> Result<()> {
        if self.policy_lambda_only && !self.lambdas.contains(&lambda) {
            bail!(
                "[stopping] policy '{label}' has λ = {lambda}, which is not in `lambdas` \
                 (policy_lambda_only = true evaluates it only at its own λ)"
            );
        }
        Ok(())
    }

    /// The λ values at which runs of a policy are evaluated: its own λ alone for a fixed-λ PBGI
    /// policy (`pbgi_lambda`) under `policy_lambda_only`, else every λ.
    pub fn lambdas_for(&self, pbgi_lambda: Option<f64>) -> Vec<f64> {
        match pbgi_lambda {
            Some(l) if self.policy_lambda_only => vec![l],
            _ => self.lambdas.clone(),
        }
    }
}
