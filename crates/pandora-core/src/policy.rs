//! One Bayesian-optimization step: initial design → fit the objective GP (and a log-cost GP when
//! costs are unknown) → build the configured acquisition → maximize it → a proposal.
//!
//! Everything is on the unit cube `[0,1]^d` and maximizes; the study layer maps user parameters,
//! bounds and directions to and from it. The step is a pure function of the history, the
//! configuration, the run context and a seed, so a run is reproducible and can resume anywhere.

use crate::acquisition::{
    AcquisitionName, AcquisitionParams, CostModel, OnModel, ThompsonSample, UnknownCost,
    build_pointwise, fit_log_cost_model,
};
use crate::error::{Error, Result};
use crate::gp::fit::FitOptions;
use crate::gp::{GpModel, GpParams, Transforms};
use crate::optim::multistart::{MultiStartOptions, maximize};
use crate::optim::sobol::Sobol;

/// How evaluation costs are known to the policy.
#[derive(Clone, Copy)]
pub enum CostSetting<'a> {
    /// Every evaluation costs the same.
    Uniform,
    /// A known cost function of the (unit-cube) point.
    Known(&'a dyn CostModel),
    /// Unknown: learned from the observed costs by a GP on log cost.
    Unknown,
}

/// Settings of a step that do not change during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    /// Which acquisition to maximize.
    pub acquisition: AcquisitionName,
    /// Its fixed parameters (β, α, convention, λ for fixed-λ PBGI); the incumbent, schedule
    /// indices, budgets and PBGI-D's λ come from the [`StepContext`].
    pub params: AcquisitionParams,
    /// Objective-model fit.
    pub fit: FitOptions,
    /// Log-cost-model fit (unknown costs).
    pub cost_fit: FitOptions,
    /// Acquisition maximization.
    pub multistart: MultiStartOptions,
    /// Standardize the objective values before fitting (the papers do, except for Bayesian regret).
    pub standardize: bool,
    /// Size of the initial scrambled-Sobol design (default `2(d + 1)`).
    pub initial_design: Option<usize>,
    /// Random Fourier features of Thompson-sampling paths.
    pub ts_features: usize,
    /// Seed of the initial design (the k-th observation gets point k of one scrambled Sobol
    /// sequence) and of random search.
    pub design_seed: u64,
}

impl Default for StepConfig {
    /// PBGI with λ = 1e-3 on the papers' model (Matérn-5/2 ARD, Gamma priors, noise 1e-4,
    /// standardized outcomes), 200·d raw samples and 10·d restarts.
    fn default() -> Self {
        Self {
            acquisition: AcquisitionName::Pbgi,
            params: AcquisitionParams {
                lambda: Some(1e-3),
                ..AcquisitionParams::default()
            },
            fit: FitOptions::default(),
            cost_fit: FitOptions::default(),
            multistart: MultiStartOptions::default(),
            standardize: true,
            initial_design: None,
            ts_features: 1024,
            design_seed: 0,
        }
    }
}

/// What a step needs to know about the run so far beyond the observations.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepContext {
    /// Cumulative cost of the BO phase so far (UCB schedule: `t = cost + 1`).
    pub cumulative_cost: f64,
    /// Remaining budget (cost cooling).
    pub remaining_budget: Option<f64>,
    /// Total budget (cost cooling).
    pub total_budget: Option<f64>,
    /// PBGI-D's current λ (overrides the configured λ).
    pub lambda: Option<f64>,
}

/// Observations so far on the unit cube: `x` row-major `n × d`, `y` maximized, `cost` > 0.
#[derive(Debug, Clone, Copy)]
pub struct History<'a> {
    /// Points, row-major.
    pub x: &'a [f64],
    /// Objective values (maximization).
    pub y: &'a [f64],
    /// Observed costs (used when costs are unknown).
    pub cost: &'a [f64],
    /// Points handed out but not yet evaluated (row-major): the model is conditioned on its own
    /// posterior mean there, so parallel workers do not pile onto one point.
    pub pending: &'a [f64],
}

/// How the proposal was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A point of the initial design.
    InitialDesign,
    /// A uniformly random point (`random` acquisition).
    Random,
    /// The maximizer of the acquisition on the fitted model.
    Model,
}

/// The outcome of a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The point to evaluate next, in `[0,1]^d`.
    pub x: Vec<f64>,
    /// How it was chosen.
    pub phase: Phase,
    /// The acquisition value at `x` (NaN outside the model phase).
    pub acquisition_value: f64,
    /// Objective-model hyperparameters (internal, standardized space).
    pub params: Option<GpParams>,
    /// Log-cost-model hyperparameters (unknown costs).
    pub cost_params: Option<GpParams>,
    /// λ used (PBGI, PBGI-D).
    pub lambda: Option<f64>,
    /// The expected cost `E[c(x)]` of the proposal under the cost setting (model phase only):
    /// 1 for uniform costs, `c(x)` for known costs, `exp(m + v/2)` under the log-cost GP.
    pub predicted_cost: Option<f64>,
}

/// Point `index` of the initial design: one scrambled Sobol sequence per `seed`.
pub fn design_point(d: usize, index: u64, seed: u64) -> Result<Vec<f64>> {
    let mut x = vec![0.0; d];
    Sobol::scrambled(d, seed)?.point(index, &mut x)?;
    Ok(x)
}

/// Proposes the next point. `warm` is the previous step's [`Proposal::params`] (a warm start for
/// the fit). Deterministic for a given history, configuration, context and `seed`.
pub fn propose(
    d: usize,
    history: History<'_>,
    config: &StepConfig,
    ctx: &StepContext,
    cost: CostSetting<'_>,
    seed: u64,
    warm: Option<&GpParams>,
) -> Result<Proposal> {
    let n = history.y.len();
    if d == 0 || history.x.len() != n * d {
        return Err(Error::dim("history.x", n * d, history.x.len()));
    }
    if matches!(cost, CostSetting::Unknown) && history.cost.len() != n {
        return Err(Error::dim("history.cost", n, history.cost.len()));
    }
    let n_init = config.initial_design.unwrap_or(2 * (d + 1)).max(1);
    let sobol = Sobol::scrambled(d, config.design_seed)?;
    let simple = |phase| -> Result<Proposal> {
        let mut x = vec![0.0; d];
        // The initial design is one seeded Sobol sequence, point k for the k-th trial handed
        // out (observed or pending), so parallel workers get distinct points; random search
        // continues the same sequence.
        sobol.point((n + history.pending.len() / d) as u64, &mut x)?;
        Ok(Proposal {
            x,
            phase,
            acquisition_value: f64::NAN,
            params: None,
            cost_params: None,
            lambda: None,
            predicted_cost: None,
        })
    };
    if n < n_init {
        return simple(Phase::InitialDesign);
    }
    if config.acquisition == AcquisitionName::Random {
        return simple(Phase::Random);
    }
    let transforms = Transforms {
        normalize_inputs: None,
        standardize_outcomes: config.standardize,
    };
    let fit_opts = FitOptions {
        seed,
        ..config.fit.clone()
    };
    let fitted = GpModel::fit(history.x, history.y, d, &transforms, &fit_opts, warm)?;
    if !history.pending.len().is_multiple_of(d) {
        return Err(Error::invalid(
            "history.pending",
            "length is not a multiple of d",
        ));
    }
    let model = fitted.with_fantasies(history.pending)?;
    let best_f = history.y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lambda = ctx.lambda.or(config.params.lambda);
    let ms = &config.multistart;
    if config.acquisition == AcquisitionName::Ts {
        let ts = ThompsonSample::draw(model.inner(), config.ts_features, seed ^ 0x7473)?;
        let r = maximize(&ts, ms, seed)?;
        return Ok(Proposal {
            x: r.x,
            phase: Phase::Model,
            acquisition_value: r.value,
            params: Some(fitted.params().clone()),
            cost_params: None,
            lambda: None,
            predicted_cost: None,
        });
    }
    let params = AcquisitionParams {
        best_f: Some(best_f),
        t: config.params.t.or(Some(ctx.cumulative_cost.max(0.0) + 1.0)),
        remaining_budget: ctx.remaining_budget.or(config.params.remaining_budget),
        total_budget: ctx.total_budget.or(config.params.total_budget),
        lambda,
        ..config.params
    };
    let acq = build_pointwise(config.acquisition, &params, d)?;
    let cost_model = match cost {
        CostSetting::Unknown => {
            let cost_opts = FitOptions {
                seed: seed ^ 0x636f_7374,
                ..config.cost_fit.clone()
            };
            Some(fit_log_cost_model(history.x, history.cost, d, &cost_opts)?)
        }
        _ => None,
    };
    let unknown = cost_model.as_ref().map(UnknownCost);
    let cost_ref: Option<&dyn CostModel> = match cost {
        CostSetting::Uniform => None,
        CostSetting::Known(c) => Some(c),
        CostSetting::Unknown => unknown.as_ref().map(|u| u as &dyn CostModel),
    };
    let cost_params = cost_model.as_ref().map(|m| m.params().clone());
    let obj = match cost_ref {
        Some(c) => OnModel::with_cost(&model, acq, c),
        None => OnModel::new(&model, acq),
    };
    let r = maximize(&obj, ms, seed)?;
    let predicted_cost = match cost_ref {
        Some(c) => {
            let lc = c.log_cost(&r.x, d, false)?;
            Some((lc.mean[0] + 0.5 * lc.var[0]).exp())
        }
        None => Some(1.0),
    };
    let uses_lambda = matches!(
        config.acquisition,
        AcquisitionName::Pbgi | AcquisitionName::PbgiD
    );
    Ok(Proposal {
        x: r.x,
        phase: Phase::Model,
        acquisition_value: r.value,
        params: Some(fitted.params().clone()),
        cost_params,
        lambda: if uses_lambda { lambda } else { None },
        predicted_cost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquisition::{LinearMeanCost, PbgiDecay};

    /// A smooth 2-D test function with its maximum 0 at (0.3, 0.7).
    fn f(x: &[f64]) -> f64 {
        -((x[0] - 0.3).powi(2) + (x[1] - 0.7).powi(2))
    }

    fn small_config(acq: AcquisitionName) -> StepConfig {
        StepConfig {
            acquisition: acq,
            params: AcquisitionParams {
                lambda: Some(1e-4),
                beta: Some(2.0),
                ..AcquisitionParams::default()
            },
            multistart: MultiStartOptions {
                raw_samples: Some(200),
                num_restarts: Some(6),
                ..MultiStartOptions::default()
            },
            ..StepConfig::default()
        }
    }

    fn run(acq: AcquisitionName, steps: usize, cost: CostSetting<'_>, seed: u64) -> Vec<Proposal> {
        let d = 2;
        let config = small_config(acq);
        let mut x = Vec::new();
        let mut y = Vec::new();
        let mut c = Vec::new();
        let mut out = Vec::new();
        let mut warm = None;
        let mut decay = PbgiDecay::default();
        for k in 0..steps {
            let lambda = (acq == AcquisitionName::PbgiD).then(|| decay.begin_iteration());
            let ctx = StepContext {
                cumulative_cost: c.iter().sum(),
                lambda,
                ..StepContext::default()
            };
            let hist = History {
                x: &x,
                y: &y,
                cost: &c,
                pending: &[],
            };
            let p = propose(d, hist, &config, &ctx, cost, seed + k as u64, warm.as_ref()).unwrap();
            assert!(p.x.iter().all(|v| (0.0..=1.0).contains(v)));
            let v = f(&p.x);
            x.extend_from_slice(&p.x);
            y.push(v);
            c.push(1.0 + 20.0 * (p.x[0] + p.x[1]) / 2.0);
            if p.phase == Phase::Model {
                let best = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                decay.end_iteration(p.acquisition_value, best);
            }
            warm = p.params.clone();
            out.push(p);
        }
        out
    }

    #[test]
    fn every_acquisition_finds_the_optimum_of_a_smooth_function() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        for (acq, cost) in [
            (AcquisitionName::LogEi, CostSetting::Uniform),
            (AcquisitionName::Pbgi, CostSetting::Known(&linear)),
            (AcquisitionName::PbgiD, CostSetting::Unknown),
            (AcquisitionName::LogEipc, CostSetting::Unknown),
            (AcquisitionName::Ucb, CostSetting::Uniform),
            (AcquisitionName::Ts, CostSetting::Uniform),
        ] {
            let props = run(acq, 20, cost, 11);
            assert_eq!(props[0].phase, Phase::InitialDesign);
            assert_eq!(props[6].phase, Phase::Model);
            let best = props
                .iter()
                .map(|p| f(&p.x))
                .fold(f64::NEG_INFINITY, f64::max);
            assert!(best > -2e-3, "{}: best {best}", acq.as_str());
        }
    }

    #[test]
    fn predicted_costs_follow_the_cost_setting() {
        let linear = LinearMeanCost {
            offset: 1.0,
            slope: 20.0,
        };
        let truth = |x: &[f64]| 1.0 + 20.0 * (x[0] + x[1]) / 2.0;
        for cost in [CostSetting::Known(&linear), CostSetting::Unknown] {
            let props = run(AcquisitionName::Pbgi, 16, cost, 2);
            let model: Vec<&Proposal> = props.iter().filter(|p| p.phase == Phase::Model).collect();
            for (k, p) in model.iter().enumerate() {
                let pc = p.predicted_cost.unwrap();
                assert!(pc.is_finite() && pc > 0.0);
                match cost {
                    CostSetting::Known(_) => assert!((pc - truth(&p.x)).abs() < 1e-12),
                    // Once the log-cost GP has ten or more observations its E[c] is within 5 %
                    // (early extrapolations to corners are inflated by the variance term).
                    _ if k + 5 >= model.len() => {
                        let t = truth(&p.x);
                        assert!((pc / t - 1.0).abs() < 0.05, "{pc} vs {t}");
                    }
                    _ => {}
                }
            }
        }
        let uniform = run(AcquisitionName::LogEi, 8, CostSetting::Uniform, 2);
        assert_eq!(uniform[7].predicted_cost, Some(1.0));
        assert_eq!(uniform[0].predicted_cost, None);
    }

    #[test]
    fn pending_points_are_not_proposed_again() {
        let d = 2;
        let config = small_config(AcquisitionName::LogEi);
        let x: Vec<f64> = (0..8)
            .flat_map(|i| [i as f64 / 8.0 + 0.05, (i * 3 % 8) as f64 / 8.0])
            .collect();
        let y: Vec<f64> = x.chunks(2).map(f).collect();
        let first = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &[],
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let second = propose(
            d,
            History {
                x: &x,
                y: &y,
                cost: &[],
                pending: &first.x,
            },
            &config,
            &StepContext::default(),
            CostSetting::Uniform,
            3,
            None,
        )
        .unwrap();
        let dist = ((first.x[0] - second.x[0]).powi(2) + (first.x[1] - second.x[1]).powi(2)).sqrt();
        assert!(
            dist > 1e-3,
            "the pending point {:?} was proposed again",
            first.x
        );
    }

    #[test]
    fn steps_are_deterministic_and_the_initial_design_is_one_sobol_sequence() {
        let key = |ps: Vec<Proposal>| -> Vec<(Vec<f64>, u64, Option<GpParams>)> {
            ps.into_iter()
                .map(|p| (p.x, p.acquisition_value.to_bits(), p.params))
                .collect()
        };
        let a = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        let b = key(run(AcquisitionName::Pbgi, 9, CostSetting::Uniform, 5));
        assert_eq!(a, b);
        // Random search proposes distinct points and no model.
        let r = run(AcquisitionName::Random, 8, CostSetting::Uniform, 1);
        assert!(
            r.iter()
                .skip(6)
                .all(|p| p.phase == Phase::Random && p.params.is_none())
        );
        let bad = propose(
            2,
            History {
                x: &[0.1],
                y: &[1.0],
                cost: &[],
                pending: &[],
            },
            &StepConfig::default(),
            &StepContext::default(),
            CostSetting::Uniform,
            0,
            None,
        );
        assert!(bad.is_err());
    }
}
