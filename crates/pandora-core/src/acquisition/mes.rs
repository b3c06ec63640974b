//! Max-value entropy search (Wang & Jegelka, 2017) with the Gumbel approximation of the
//! max-value distribution, and its cost-weighted variant (information gain per unit cost).
//!
//! **Max-value samples.** On a candidate set `{x_j}` (the PBGI paper: `1000·d` uniform points in
//! `[0,1]^d`, redrawn every iteration; Pandora also appends the training inputs, as BoTorch does),
//! the distribution of `f* = max_j f(x_j)` is approximated by treating the marginals as
//! independent: `P(f* ≤ y) ≈ Π_j Φ((y − μ_j)/σ_j)`. Its 25 %, 50 % and 75 % quantiles
//! `y₁, y₂, y₃` (found by bisection) fix a Gumbel law `F(y) = exp(−exp(−(y − a)/β))` with
//! `β = (y₃ − y₁)/(ln(−ln ¼) − ln(−ln ¾))` and `a = y₂ + β ln(−ln ½)`, and the `K` max-value
//! samples are `y*_k = a − β ln(−ln U_k)` with seeded uniform `U_k` (BoTorch default `K = 10`).
//!
//! **Acquisition** (noiseless closed form): with `γ_k = (y*_k − μ(x))/σ(x)`,
//!
//! `MES(x) = (1/K) Σ_k [ γ_k φ(γ_k) / (2 Φ(γ_k)) − ln Φ(γ_k) ]`,
//!
//! the expected reduction of the entropy of `f*` from observing `f(x)`.
//! `∂/∂γ [γ r/2 − ln Φ(γ)] = −(r/2)(1 + γ(γ + r))` with `r = φ(γ)/Φ(γ)`, and
//! `∂γ/∂μ = −1/σ`, `∂γ/∂σ = −γ/σ`.
//!
//! Deviation from BoTorch's `qMaxValueEntropy`: BoTorch accounts for observation noise by Monte
//! Carlo over 128 fantasized observations; Pandora uses the latent (noiseless) closed form, which
//! is what BoTorch computes in the limit of zero noise (the PBGI/B-MS-EI models use a noise variance
//! of 1e-4 to 1e-3 in standardized units, where the two agree to about that relative accuracy).
//!
//! **Step** ([`MesStep`]): `K = 10` max values drawn **once** per step ([`mes_for_step_in`]) on
//! [`MES_CANDIDATES_PER_DIM`]` · d` seeded uniform points (projected onto the valid points of a
//! mixed space) plus the training inputs; every restart of the step's maximization uses these same
//! samples. `mes_cost` divides by the cost model (convention `expected` by default: `E[c]`).

use super::acquirer::{Acquired, Acquirer, StepInputs};
use super::analytic::CostConvention;
use super::{LogCost, OnModel, Partials, PointwiseAcquisition};
use crate::error::{Error, Result};
use crate::gp::{GpModel, Posterior};
use crate::math::{log_norm_cdf, log_norm_pdf};
use crate::optim::domain::maximize_in;
use crate::optim::mixed::MixedSpace;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// MES draws its max values on `MES_CANDIDATES_PER_DIM · d` uniform points (the PBGI paper's
/// setting), plus the training inputs.
pub const MES_CANDIDATES_PER_DIM: usize = 1000;

/// BoTorch's default number of max-value samples.
pub const DEFAULT_NUM_MAX_VALUES: usize = 10;

/// Smallest standard deviation used for a candidate in the Gumbel fit (as BoTorch's clamp of the
/// variance at 1e-8).
const MIN_STD: f64 = 1e-4;

/// `ln P(max ≤ y) = Σ_j ln Φ((y − μ_j)/σ_j)` under independent marginals.
fn log_cdf_max(y: f64, mean: &[f64], std: &[f64]) -> f64 {
    mean.iter()
        .zip(std)
        .map(|(m, s)| log_norm_cdf((y - m) / s))
        .sum()
}

/// The `q`-quantile of the independent-marginals max distribution, by bisection.
fn quantile_max(q: f64, mean: &[f64], std: &[f64]) -> Result<f64> {
    let lq = q.ln();
    let mmax = mean.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let smax = std.iter().copied().fold(0.0, f64::max);
    let mut lo = mmax - 10.0 * smax.max(MIN_STD);
    let mut hi = mean
        .iter()
        .zip(std)
        .map(|(m, s)| m + 10.0 * s)
        .fold(f64::NEG_INFINITY, f64::max);
    // Widen the bracket if needed (very large candidate sets).
    let mut step = smax.max(MIN_STD);
    for _ in 0..200 {
        if log_cdf_max(lo, mean, std) <= lq {
            break;
        }
        lo -= step;
        step *= 2.0;
    }
    let mut step = smax.max(MIN_STD);
    for _ in 0..200 {
        if log_cdf_max(hi, mean, std) >= lq {
            break;
        }
        hi += step;
        step *= 2.0;
    }
    if !(log_cdf_max(lo, mean, std) <= lq && log_cdf_max(hi, mean, std) >= lq) {
        return Err(Error::Numerical(
            "could not bracket a quantile of the max-value distribution".into(),
        ));
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if log_cdf_max(mid, mean, std) < lq {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// Location `a` and scale `β` of the Gumbel law fitted to the 25/50/75 % quantiles of the max of
/// independent normals `N(mean_j, std_j²)` (std clamped at 1e-4).
pub fn gumbel_fit(mean: &[f64], std: &[f64]) -> Result<(f64, f64)> {
    if mean.is_empty() || mean.len() != std.len() {
        return Err(Error::dim("candidate std", mean.len().max(1), std.len()));
    }
    if mean.iter().chain(std).any(|v| !v.is_finite()) {
        return Err(Error::invalid("candidate posterior", "non-finite value"));
    }
    let std: Vec<f64> = std.iter().map(|s| s.max(MIN_STD)).collect();
    let y1 = quantile_max(0.25, mean, &std)?;
    let y2 = quantile_max(0.5, mean, &std)?;
    let y3 = quantile_max(0.75, mean, &std)?;
    let l1 = (-(0.25f64).ln()).ln();
    let l3 = (-(0.75f64).ln()).ln();
    let beta = ((y3 - y1) / (l1 - l3)).max(0.0);
    let a = y2 + beta * (-(0.5f64).ln()).ln();
    Ok((a, beta))
}

/// `n` max-value samples from the Gumbel approximation of `max_j f(x_j)` with posterior
/// marginals `N(mean_j, std_j²)`, from a seeded generator.
pub fn gumbel_max_values(mean: &[f64], std: &[f64], n: usize, seed: u64) -> Result<Vec<f64>> {
    if n == 0 {
        return Err(Error::invalid("num_max_values", "must be at least 1"));
    }
    let (a, beta) = gumbel_fit(mean, std)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Ok((0..n)
        .map(|_| {
            let u: f64 = rng.random::<f64>().clamp(1e-12, 1.0 - 1e-12);
            a - beta * (-u.ln()).ln()
        })
        .collect())
}

/// The MES value and partials `(value, ∂/∂μ, ∂/∂σ)` at posterior `N(mu, sigma²)` for the given
/// max-value samples (the closed form of the module documentation).
pub fn mes_value(mu: f64, sigma: f64, max_values: &[f64]) -> Partials {
    let k = max_values.len().max(1) as f64;
    let (mut v, mut dmu, mut ds) = (0.0, 0.0, 0.0);
    for &y in max_values {
        let g = (y - mu) / sigma;
        let lc = log_norm_cdf(g);
        let r = (log_norm_pdf(g) - lc).exp();
        v += 0.5 * g * r - lc;
        let dg = -0.5 * r * (1.0 + g * (g + r));
        dmu += dg * (-1.0 / sigma);
        ds += dg * (-g / sigma);
    }
    Partials::new(v / k, dmu / k, ds / k)
}

/// Max-value entropy search with fixed max-value samples (a [`PointwiseAcquisition`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MaxValueEntropy {
    /// The max-value samples `y*_k`.
    pub max_values: Vec<f64>,
}

impl MaxValueEntropy {
    /// Samples `num_max_values` max values from the Gumbel approximation on `candidates`
    /// (row-major `m × d`) plus `extra` points (e.g. the training inputs; may be empty), using the
    /// model's latent posterior.
    pub fn from_model<P: Posterior + ?Sized>(
        model: &P,
        candidates: &[f64],
        extra: &[f64],
        num_max_values: usize,
        seed: u64,
    ) -> Result<Self> {
        let mut pts = candidates.to_vec();
        pts.extend_from_slice(extra);
        if pts.is_empty() {
            return Err(Error::invalid("candidates", "empty candidate set"));
        }
        let post = model.posterior(&pts, false)?;
        let std = post.std();
        Ok(Self {
            max_values: gumbel_max_values(&post.mean, &std, num_max_values, seed)?,
        })
    }
}

impl PointwiseAcquisition for MaxValueEntropy {
    fn eval(&self, mu: f64, sigma: f64, _cost: LogCost) -> Partials {
        mes_value(mu, sigma, &self.max_values)
    }
}

/// Cost-weighted MES: information gain per unit cost, `MES(x) · w(x)`.
///
/// For a known cost (`v = 0`) `w = 1/c(x)` (BoTorch's `InverseCostWeightedUtility`, as in the PBGI
/// paper's MF-MES baseline). For an unknown log-normal cost the convention chooses
/// `w = 1/E[c] = exp(−m − v/2)` ([`CostConvention::Expected`], the default: divide by the expected
/// cost, as `InverseCostWeightedUtility` with the posterior-mean cost) or
/// `w = E[1/c] = exp(−m + v/2)` ([`CostConvention::Inverse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CostWeightedMaxValueEntropy {
    /// The underlying MES.
    pub mes: MaxValueEntropy,
    /// Unknown-cost convention.
    pub convention: CostConvention,
}

impl PointwiseAcquisition for CostWeightedMaxValueEntropy {
    fn eval(&self, mu: f64, sigma: f64, cost: LogCost) -> Partials {
        let p = mes_value(mu, sigma, &self.mes.max_values);
        let sign = match self.convention {
            CostConvention::Inverse => 1.0,
            CostConvention::Expected => -1.0,
        };
        let w = (-cost.mean + sign * 0.5 * cost.var).exp();
        Partials {
            value: p.value * w,
            d_mu: p.d_mu * w,
            d_sigma: p.d_sigma * w,
            d_cost_mean: -p.value * w,
            d_cost_var: sign * 0.5 * p.value * w,
        }
    }
}

/// The max-value entropy search of one step: `K = 10` max values drawn **once** from the Gumbel
/// approximation on `1000·d` seeded uniform points plus the training inputs `train_x`; every
/// restart of the step's maximization uses these same samples.
pub fn mes_for_step(
    model: &GpModel,
    train_x: &[f64],
    d: usize,
    seed: u64,
) -> Result<MaxValueEntropy> {
    mes_for_step_in(model, train_x, d, seed, None)
}

/// [`mes_for_step`] with the max values drawn on valid points of `space` (the uniform points
/// projected), so they are the maxima over the set a study can propose.
pub fn mes_for_step_in(
    model: &GpModel,
    train_x: &[f64],
    d: usize,
    seed: u64,
    space: Option<&MixedSpace>,
) -> Result<MaxValueEntropy> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6d65_735f_6361_6e64);
    let mut cand: Vec<f64> = (0..MES_CANDIDATES_PER_DIM * d)
        .map(|_| rng.random::<f64>())
        .collect();
    if let Some(s) = space.filter(|s| !s.is_continuous()) {
        s.project_rows(&mut cand);
    }
    MaxValueEntropy::from_model(
        model,
        &cand,
        train_x,
        DEFAULT_NUM_MAX_VALUES,
        seed ^ 0x6d65_735f_6d61_7876,
    )
}

/// The `mes` and `mes_cost` acquisitions' step (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct MesStep {
    /// Divide by the cost (`mes_cost`).
    pub per_cost: bool,
}

impl Acquirer for MesStep {
    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        let model = s.model()?;
        let (d, ms, seed) = (s.d, s.ms, s.seed);
        let mes = mes_for_step_in(model, s.train_x, d, seed, s.domain.space)?;
        let r = if !self.per_cost {
            maximize_in(&OnModel::new(model, mes), d, s.domain, ms, seed)?
        } else {
            let acq = CostWeightedMaxValueEntropy {
                mes,
                convention: s.params.convention.unwrap_or(CostConvention::Expected),
            };
            match s.cost_ref {
                Some(c) => maximize_in(&OnModel::with_cost(model, acq, c), d, s.domain, ms, seed)?,
                None => maximize_in(&OnModel::new(model, acq), d, s.domain, ms, seed)?,
            }
        };
        Ok(Acquired::point(r.x, r.value))
    }
}
