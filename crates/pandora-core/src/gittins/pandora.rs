//! Weitzman's Pandora's Box problem with independent boxes.
//!
//! Box `i` holds a reward `Xᵢ` (discrete or normal) and costs `Cᵢ ≥ 0` to open (deterministic or
//! random, independent of everything else). Opening boxes one at a time, the decision maker stops
//! at any point and collects `max(y₀, max_{opened} Xᵢ)` where `y₀` is the optional fallback; with no
//! fallback at least one box must be opened. The net utility is that reward minus the total cost.
//!
//! The **index** (reservation value, Gittins index) of box `i` is the `gᵢ` solving
//! `E[max(Xᵢ − gᵢ, 0)] = E[Cᵢ]`. Weitzman's policy opens boxes in decreasing index order and stops
//! as soon as the best reward seen (or the fallback) is `≥` the next index; it is optimal.
//!
//! Its expected net utility is computed exactly with the amortization identity
//! `E[utility] = E[max(y₀, maxᵢ κᵢ)]`, `κᵢ = min(Xᵢ, gᵢ)`, which holds for this policy because a box
//! that is opened with `Xᵢ > gᵢ` is always the one collected. For discrete boxes this is a finite sum
//! (and [`discrete_policy_value`] recomputes it by an independent recursion over the opening order);
//! for normal boxes it is the 1-D integral `E[M] = U − ∫_{−∞}^{U} P(M ≤ t) dt` with
//! `U = max(y₀, maxᵢ gᵢ)`, evaluated by adaptive Gauss–Legendre quadrature.

use crate::acquisition::pbgi_index;
use crate::error::{Error, Result};
use crate::math::norm_cdf;
use rand::RngExt;
use rand::SeedableRng;
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Distribution of a box's reward.
#[derive(Debug, Clone, PartialEq)]
pub enum Reward {
    /// Finitely many values `values[j]` with probabilities `probs[j]` (summing to 1).
    Discrete {
        /// Support points (finite).
        values: Vec<f64>,
        /// Probabilities (non-negative, summing to 1 within `1e-9`).
        probs: Vec<f64>,
    },
    /// Normal `N(mean, std²)`; `std = 0` is a point mass.
    Normal {
        /// Mean (finite).
        mean: f64,
        /// Standard deviation (finite, `≥ 0`).
        std: f64,
    },
}

/// Cost of opening a box. Only its mean enters the optimal policy; random costs matter for
/// simulation.
#[derive(Debug, Clone, PartialEq)]
pub enum Cost {
    /// A known cost `c ≥ 0`.
    Fixed(f64),
    /// A random cost taking `values[j] ≥ 0` with probabilities `probs[j]`.
    Discrete {
        /// Cost values (finite, `≥ 0`).
        values: Vec<f64>,
        /// Probabilities (non-negative, summing to 1 within `1e-9`).
        probs: Vec<f64>,
    },
}

impl Cost {
    /// `E[C]`.
    pub fn mean(&self) -> f64 {
        match self {
            Cost::Fixed(c) => *c,
            Cost::Discrete { values, probs } => values.iter().zip(probs).map(|(v, p)| v * p).sum(),
        }
    }

    /// The cost scaled by `λ` (every realization multiplied).
    pub fn scaled(&self, lambda: f64) -> Cost {
        match self {
            Cost::Fixed(c) => Cost::Fixed(lambda * c),
            Cost::Discrete { values, probs } => Cost::Discrete {
                values: values.iter().map(|v| lambda * v).collect(),
                probs: probs.clone(),
            },
        }
    }
}

/// One box: its reward distribution and its opening cost.
#[derive(Debug, Clone, PartialEq)]
pub struct PandoraBox {
    /// Reward distribution.
    pub reward: Reward,
    /// Opening cost.
    pub cost: Cost,
}

impl PandoraBox {
    /// A box with a discrete reward and a fixed cost.
    pub fn discrete(values: Vec<f64>, probs: Vec<f64>, cost: f64) -> Self {
        PandoraBox {
            reward: Reward::Discrete { values, probs },
            cost: Cost::Fixed(cost),
        }
    }

    /// A box with a normal reward and a fixed cost.
    pub fn normal(mean: f64, std: f64, cost: f64) -> Self {
        PandoraBox {
            reward: Reward::Normal { mean, std },
            cost: Cost::Fixed(cost),
        }
    }

    /// `P(X ≤ t)` (`strict = false`) or `P(X < t)` (`strict = true`).
    fn cdf(&self, t: f64, strict: bool) -> f64 {
        match &self.reward {
            Reward::Discrete { values, probs } => values
                .iter()
                .zip(probs)
                .filter(|(v, _)| if strict { **v < t } else { **v <= t })
                .map(|(_, p)| p)
                .sum::<f64>()
                .min(1.0),
            Reward::Normal { mean, std } => {
                if *std == 0.0 {
                    let inside = if strict { *mean < t } else { *mean <= t };
                    if inside { 1.0 } else { 0.0 }
                } else {
                    norm_cdf((t - mean) / std)
                }
            }
        }
    }

    fn is_discrete(&self) -> bool {
        match &self.reward {
            Reward::Discrete { .. } => true,
            Reward::Normal { std, .. } => *std == 0.0,
        }
    }

    /// Support of a discrete (or point-mass) reward.
    fn support(&self) -> Option<(Vec<f64>, Vec<f64>)> {
        match &self.reward {
            Reward::Discrete { values, probs } => Some((values.clone(), probs.clone())),
            Reward::Normal { mean, std } if *std == 0.0 => Some((vec![*mean], vec![1.0])),
            Reward::Normal { .. } => None,
        }
    }
}

fn check_distribution(what: &str, values: &[f64], probs: &[f64]) -> Result<()> {
    if values.is_empty() {
        return Err(Error::invalid(
            format!("{what}.values"),
            "must not be empty",
        ));
    }
    if values.len() != probs.len() {
        return Err(Error::dim(
            format!("{what}.probs"),
            values.len(),
            probs.len(),
        ));
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        return Err(Error::invalid(
            format!("{what}.values"),
            format!("must be finite, got {v}"),
        ));
    }
    if let Some(p) = probs.iter().find(|p| !(p.is_finite() && **p >= 0.0)) {
        return Err(Error::invalid(
            format!("{what}.probs"),
            format!("must be finite and non-negative, got {p}"),
        ));
    }
    let s: f64 = probs.iter().sum();
    if (s - 1.0).abs() > 1e-9 {
        return Err(Error::invalid(
            format!("{what}.probs"),
            format!("must sum to 1, got {s}"),
        ));
    }
    Ok(())
}

/// Validate one box (`i` names it in errors).
fn check_box(i: usize, b: &PandoraBox) -> Result<()> {
    let name = format!("boxes[{i}]");
    match &b.reward {
        Reward::Discrete { values, probs } => {
            check_distribution(&format!("{name}.rewards"), values, probs)?
        }
        Reward::Normal { mean, std } => {
            if !mean.is_finite() {
                return Err(Error::invalid(
                    format!("{name}.normal.mean"),
                    format!("must be finite, got {mean}"),
                ));
            }
            if !(std.is_finite() && *std >= 0.0) {
                return Err(Error::invalid(
                    format!("{name}.normal.std"),
                    format!("must be finite and non-negative, got {std}"),
                ));
            }
        }
    }
    match &b.cost {
        Cost::Fixed(c) => {
            if !(c.is_finite() && *c >= 0.0) {
                return Err(Error::invalid(
                    format!("{name}.cost"),
                    format!("must be finite and non-negative, got {c}"),
                ));
            }
        }
        Cost::Discrete { values, probs } => {
            check_distribution(&format!("{name}.cost"), values, probs)?;
            if let Some(v) = values.iter().find(|v| **v < 0.0) {
                return Err(Error::invalid(
                    format!("{name}.cost.values"),
                    format!("must be non-negative, got {v}"),
                ));
            }
        }
    }
    if !b.is_discrete() && b.cost.mean() <= 0.0 {
        return Err(Error::invalid(
            format!("{name}.cost"),
            "a normal box needs a positive expected cost (its index is +inf otherwise)",
        ));
    }
    Ok(())
}

/// The index `g` of a discrete reward: the root of the piecewise-linear, decreasing
/// `φ(g) = Σⱼ pⱼ max(vⱼ − g, 0) = c`, exact up to rounding. For `c = 0` it is the largest value
/// with positive probability.
pub fn discrete_index(values: &[f64], probs: &[f64], cost: f64) -> f64 {
    let mut vp: Vec<(f64, f64)> = values
        .iter()
        .copied()
        .zip(probs.iter().copied())
        .filter(|(_, p)| *p > 0.0)
        .collect();
    vp.sort_by(|a, b| b.0.total_cmp(&a.0));
    if cost <= 0.0 {
        return vp.first().map_or(f64::NEG_INFINITY, |x| x.0);
    }
    // On [v_{k+1}, v_k] (values descending), φ(g) = S_k − P_k g.
    let (mut s, mut p) = (0.0, 0.0);
    for k in 0..vp.len() {
        s += vp[k].0 * vp[k].1;
        p += vp[k].1;
        let last = k + 1 == vp.len();
        if last || s - p * vp[k + 1].0 >= cost {
            return (s - cost) / p;
        }
    }
    f64::NEG_INFINITY
}

/// A Pandora's Box instance: boxes and an optional fallback `y₀` (absent: at least one box must be
/// opened).
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The boxes.
    pub boxes: Vec<PandoraBox>,
    /// The fallback reward collected when nothing better has been found, if any.
    pub fallback: Option<f64>,
}

/// Weitzman's policy for a [`Problem`] and its exact performance.
#[derive(Debug, Clone, PartialEq)]
pub struct WeitzmanPolicy {
    /// Index `gᵢ` of every box (in input order): `E[max(Xᵢ − gᵢ, 0)] = E[Cᵢ]`.
    pub indices: Vec<f64>,
    /// Opening order: box numbers by decreasing index (ties: lower number first), leaving out boxes
    /// whose index is `≤` the fallback (they are never opened).
    pub order: Vec<usize>,
    /// `P(box i is opened)`, in input order.
    pub open_probs: Vec<f64>,
    /// `E[collected reward] = E[max(y₀, max_{opened} Xᵢ)]`.
    pub expected_reward: f64,
    /// `E[total cost paid] = Σᵢ P(open i)·E[Cᵢ]`.
    pub expected_cost: f64,
    /// `E[reward] − E[cost]`.
    pub expected_utility: f64,
}

/// Summary of a Monte Carlo run of Weitzman's policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonteCarlo {
    /// Sample mean of the net utility.
    pub mean_utility: f64,
    /// Standard error of `mean_utility`.
    pub std_error: f64,
    /// Sample mean of the collected reward.
    pub mean_reward: f64,
    /// Sample mean of the total cost.
    pub mean_cost: f64,
    /// Number of simulated episodes.
    pub samples: usize,
}

impl Problem {
    /// Validate and build an instance. Errors name the offending field (`boxes[i].rewards.probs`,
    /// `fallback`, ...).
    pub fn new(boxes: Vec<PandoraBox>, fallback: Option<f64>) -> Result<Self> {
        let p = Problem { boxes, fallback };
        p.validate()?;
        Ok(p)
    }

    /// Check every field (see [`Problem::new`]).
    pub fn validate(&self) -> Result<()> {
        if self.boxes.is_empty() && self.fallback.is_none() {
            return Err(Error::invalid(
                "boxes",
                "must not be empty when there is no fallback",
            ));
        }
        if let Some(y) = self.fallback
            && !y.is_finite()
        {
            return Err(Error::invalid(
                "fallback",
                format!("must be finite, got {y}"),
            ));
        }
        for (i, b) in self.boxes.iter().enumerate() {
            check_box(i, b)?;
        }
        Ok(())
    }

    /// The same instance with every cost multiplied by `λ ≥ 0`.
    pub fn with_scaled_costs(&self, lambda: f64) -> Problem {
        Problem {
            boxes: self
                .boxes
                .iter()
                .map(|b| PandoraBox {
                    reward: b.reward.clone(),
                    cost: b.cost.scaled(lambda),
                })
                .collect(),
            fallback: self.fallback,
        }
    }

    /// `true` when every reward is discrete (or a point mass).
    pub fn is_discrete(&self) -> bool {
        self.boxes.iter().all(|b| b.is_discrete())
    }

    /// Index of every box: exact piecewise-linear root for discrete rewards; for a normal reward
    /// `g = μ − σu` with `σh(u) = c`, `h(u) = φ(u) − u(1−Φ(u))` ([`pbgi_index`]).
    pub fn indices(&self) -> Result<Vec<f64>> {
        self.validate()?;
        Ok(self.indices_unchecked())
    }

    fn indices_unchecked(&self) -> Vec<f64> {
        self.boxes
            .iter()
            .map(|b| {
                let c = b.cost.mean();
                match b.support() {
                    Some((v, p)) => discrete_index(&v, &p, c),
                    None => match b.reward {
                        Reward::Normal { mean, std } => pbgi_index(mean, std, c.ln()).g,
                        Reward::Discrete { .. } => unreachable!("support() covers discrete"),
                    },
                }
            })
            .collect()
    }

    /// Weitzman's policy and its exact expected reward, cost and net utility.
    pub fn weitzman(&self) -> Result<WeitzmanPolicy> {
        self.validate()?;
        let indices = self.indices_unchecked();
        if let Some(i) = indices.iter().position(|g| !g.is_finite()) {
            return Err(Error::Numerical(format!(
                "index of boxes[{i}] is not finite ({})",
                indices[i]
            )));
        }
        let y0 = self.fallback.unwrap_or(f64::NEG_INFINITY);
        let mut order: Vec<usize> = (0..self.boxes.len()).filter(|&i| indices[i] > y0).collect();
        order.sort_by(|&a, &b| indices[b].total_cmp(&indices[a]).then(a.cmp(&b)));
        // P(open k-th) = 1[y₀ < g_k] Πⱼ<k P(Xⱼ < g_k).
        let supports = self.supports();
        let open_probs = match &supports {
            Some(s) => super::sweep::open_probs(s, &indices, &order),
            None => self.open_probs_direct(&indices, &order),
        };
        let expected_cost = order
            .iter()
            .map(|&i| open_probs[i] * self.boxes[i].cost.mean())
            .sum();
        let expected_utility = self.kappa_expectation(&indices, y0, supports.as_deref())?;
        Ok(WeitzmanPolicy {
            indices,
            order,
            open_probs,
            expected_reward: expected_utility + expected_cost,
            expected_cost,
            expected_utility,
        })
    }

    /// Every box's sorted support, if every reward is discrete (or a point mass): the near-linear
    /// sweeps of [`super::sweep`] apply.
    fn supports(&self) -> Option<Vec<super::sweep::Support>> {
        self.boxes
            .iter()
            .map(|b| b.support().map(|(v, p)| super::sweep::Support::new(&v, &p)))
            .collect()
    }

    /// `P(open order[k]) = Πⱼ<ₖ P(X_{order[j]} < g_{order[k]})` by box, evaluated directly:
    /// `O(n²)` distribution evaluations (normal rewards; the reference of the sweep's tests).
    fn open_probs_direct(&self, g: &[f64], order: &[usize]) -> Vec<f64> {
        let mut out = vec![0.0; self.boxes.len()];
        for (k, &i) in order.iter().enumerate() {
            out[i] = order[..k]
                .iter()
                .map(|&j| self.boxes[j].cdf(g[i], true))
                .product();
        }
        out
    }

    /// `E[max(y₀, maxᵢ min(Xᵢ, gᵢ))]`; with `supports` (all rewards discrete) by the sweep of
    /// [`super::sweep::kappa_expectation`], otherwise by direct products.
    fn kappa_expectation(
        &self,
        g: &[f64],
        y0: f64,
        supports: Option<&[super::sweep::Support]>,
    ) -> Result<f64> {
        let u = g.iter().copied().fold(y0, f64::max);
        // G(t) = P(M ≤ t) for t < U.
        let cdf = |t: f64| -> f64 {
            if t < y0 {
                return 0.0;
            }
            self.boxes
                .iter()
                .zip(g)
                .map(|(b, &gi)| if t >= gi { 1.0 } else { b.cdf(t, false) })
                .product()
        };
        // Breakpoints: the fallback, every index and every atom below U.
        let mut pts: Vec<f64> = g.to_vec();
        if y0.is_finite() {
            pts.push(y0);
        }
        for b in &self.boxes {
            if let Some((v, _)) = b.support() {
                pts.extend(v.into_iter().filter(|&x| x < u));
            }
        }
        if self.is_discrete() {
            // M is discrete: E[M] = Σ t (G(t) − G(t⁻)) over the sorted breakpoints.
            pts.retain(|&t| t >= y0 && t <= u);
            pts.sort_by(f64::total_cmp);
            pts.dedup();
            if let Some(s) = supports {
                return Ok(super::sweep::kappa_expectation(s, g, &pts, u));
            }
            let mut prev = 0.0;
            let mut e = 0.0;
            for &t in &pts {
                let c = if t >= u { 1.0 } else { cdf(t) };
                e += t * (c - prev);
                prev = c;
            }
            return Ok(e);
        }
        // E[M] = U − ∫_L^U G(t) dt, with G negligible (or zero) below L.
        let mut lo = y0;
        for (b, &gi) in self.boxes.iter().zip(g) {
            let l = match &b.reward {
                Reward::Normal { mean, std } if *std > 0.0 => mean - 12.0 * std,
                _ => {
                    let (v, _) = b.support().expect("discrete support");
                    v.into_iter().fold(gi, f64::min)
                }
            };
            lo = lo.max(l);
        }
        if lo >= u {
            return Ok(u);
        }
        pts.retain(|&t| t > lo && t < u);
        pts.push(lo);
        pts.push(u);
        pts.sort_by(f64::total_cmp);
        pts.dedup();
        let scale = pts.iter().fold(1.0_f64, |m, t| m.max(t.abs()));
        let mut integral = 0.0;
        for w in pts.windows(2) {
            integral += adaptive_gl(&cdf, w[0], w[1], 1e-15 * scale, 0);
        }
        let e = u - integral;
        if e.is_finite() {
            Ok(e)
        } else {
            Err(Error::Numerical("expected utility is not finite".into()))
        }
    }

    /// Simulate Weitzman's policy `samples` times with a seeded RNG (Xoshiro256++): the realized
    /// costs are drawn from their distributions, the rewards from theirs.
    pub fn simulate(&self, samples: usize, seed: u64) -> Result<MonteCarlo> {
        let pol = self.weitzman()?;
        if samples < 2 {
            return Err(Error::invalid("samples", "need at least 2"));
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let y0 = self.fallback.unwrap_or(f64::NEG_INFINITY);
        let (mut su, mut su2, mut sr, mut sc) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..samples {
            let mut best = y0;
            let mut cost = 0.0;
            for &i in &pol.order {
                if best >= pol.indices[i] {
                    break;
                }
                let b = &self.boxes[i];
                cost += match &b.cost {
                    Cost::Fixed(c) => *c,
                    Cost::Discrete { values, probs } => sample_discrete(&mut rng, values, probs),
                };
                let x = match &b.reward {
                    Reward::Discrete { values, probs } => sample_discrete(&mut rng, values, probs),
                    Reward::Normal { mean, std } => {
                        mean + std * rng.sample::<f64, _>(StandardNormal)
                    }
                };
                best = best.max(x);
            }
            let u = best - cost;
            su += u;
            su2 += u * u;
            sr += best;
            sc += cost;
        }
        let n = samples as f64;
        let mean = su / n;
        let var = ((su2 - n * mean * mean) / (n - 1.0)).max(0.0);
        Ok(MonteCarlo {
            mean_utility: mean,
            std_error: (var / n).sqrt(),
            mean_reward: sr / n,
            mean_cost: sc / n,
            samples,
        })
    }
}

fn sample_discrete(rng: &mut Xoshiro256PlusPlus, values: &[f64], probs: &[f64]) -> f64 {
    let u: f64 = rng.random();
    let mut acc = 0.0;
    for (v, p) in values.iter().zip(probs) {
        acc += p;
        if u < acc {
            return *v;
        }
    }
    // Rounding left a sliver of mass: the last value with positive probability.
    values
        .iter()
        .zip(probs)
        .rev()
        .find(|(_, p)| **p > 0.0)
        .map_or(values[values.len() - 1], |(v, _)| *v)
}

/// Exact recursion over the opening order for discrete instances: the distribution of the best
/// reward among still-searching episodes is carried from box to box; mass whose best reaches the
/// next index stops. Returns `(E[reward], E[cost])` of Weitzman's policy; an independent check of
/// [`Problem::weitzman`].
pub fn discrete_policy_value(problem: &Problem) -> Result<(f64, f64)> {
    if !problem.is_discrete() {
        return Err(Error::invalid(
            "boxes",
            "discrete_policy_value needs discrete rewards",
        ));
    }
    let pol = problem.weitzman()?;
    let y0 = problem.fallback.unwrap_or(f64::NEG_INFINITY);
    let mut active: Vec<(f64, f64)> = vec![(y0, 1.0)];
    let (mut reward, mut cost) = (0.0, 0.0);
    for &i in &pol.order {
        let g = pol.indices[i];
        let (stop, go): (Vec<_>, Vec<_>) = active.into_iter().partition(|(y, _)| *y >= g);
        reward += stop.iter().map(|(y, p)| y * p).sum::<f64>();
        let mass: f64 = go.iter().map(|(_, p)| p).sum();
        cost += mass * problem.boxes[i].cost.mean();
        let (v, q) = problem.boxes[i].support().expect("discrete");
        let mut next: Vec<(f64, f64)> = Vec::with_capacity(go.len() * v.len());
        for (y, p) in &go {
            for (x, r) in v.iter().zip(&q) {
                next.push((y.max(*x), p * r));
            }
        }
        next.sort_by(|a, b| a.0.total_cmp(&b.0));
        active = Vec::with_capacity(next.len());
        for (y, p) in next {
            match active.last_mut() {
                Some(last) if last.0 == y => last.1 += p,
                _ => active.push((y, p)),
            }
        }
    }
    reward += active.iter().map(|(y, p)| y * p).sum::<f64>();
    Ok((reward, cost))
}

const GL_X: [f64; 5] = [
    0.148_874_338_981_631_2,
    0.433_395_394_129_247_2,
    0.679_409_568_299_024_4,
    0.865_063_366_688_984_5,
    0.973_906_528_517_171_7,
];
const GL_W: [f64; 5] = [
    0.295_524_224_714_752_9,
    0.269_266_719_309_996_4,
    0.219_086_362_515_982,
    0.149_451_349_150_580_6,
    0.066_671_344_308_688_1,
];

fn gl10(f: &dyn Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    let (m, h) = (0.5 * (a + b), 0.5 * (b - a));
    let mut s = 0.0;
    for (x, w) in GL_X.iter().zip(GL_W) {
        s += w * (f(m - h * x) + f(m + h * x));
    }
    s * h
}

/// Adaptive 10-point Gauss–Legendre: split until the halves agree with the whole to `tol`.
fn adaptive_gl(f: &dyn Fn(f64) -> f64, a: f64, b: f64, tol: f64, depth: u32) -> f64 {
    let whole = gl10(f, a, b);
    let m = 0.5 * (a + b);
    let halves = gl10(f, a, m) + gl10(f, m, b);
    if depth >= 40 || (whole - halves).abs() <= tol.max(1e-15 * halves.abs()) {
        halves
    } else {
        adaptive_gl(f, a, m, 0.5 * tol, depth + 1) + adaptive_gl(f, m, b, 0.5 * tol, depth + 1)
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    /// A random discrete instance: `n` boxes of 1 to 4 values (some shared between boxes, some
    /// ties with the fallback), fixed or random costs, with or without a fallback.
    fn random_instance(rng: &mut Xoshiro256PlusPlus, n: usize) -> Problem {
        let grid = |rng: &mut Xoshiro256PlusPlus| (rng.random_range(0..40) as f64) / 8.0 - 1.0;
        let boxes = (0..n)
            .map(|_| {
                let m = rng.random_range(1..=4);
                let values: Vec<f64> = (0..m)
                    .map(|_| {
                        if rng.random_bool(0.5) {
                            grid(rng)
                        } else {
                            rng.random_range(-1.0..4.0)
                        }
                    })
                    .collect();
                let w: Vec<f64> = (0..m).map(|_| rng.random_range(0.05..1.0)).collect();
                let total: f64 = w.iter().sum();
                let probs = w.iter().map(|x| x / total).collect();
                let cost = rng.random_range(0.0..0.5);
                let cost = if rng.random_bool(0.3) {
                    Cost::Discrete {
                        values: vec![0.0, 2.0 * cost],
                        probs: vec![0.5, 0.5],
                    }
                } else {
                    Cost::Fixed(cost)
                };
                PandoraBox {
                    reward: Reward::Discrete { values, probs },
                    cost,
                }
            })
            .collect();
        let fallback = rng.random_bool(0.5).then(|| grid(rng));
        Problem::new(boxes, fallback).unwrap()
    }

    fn close(a: f64, b: f64, what: &str) {
        let scale = a.abs().max(b.abs()).max(f64::MIN_POSITIVE);
        assert!(
            (a - b).abs() <= 1e-12 * scale,
            "{what}: sweep {a} vs direct {b}"
        );
    }

    #[test]
    fn sweeps_agree_with_the_direct_products_on_random_instances() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        for case in 0..300 {
            let n = [1, 2, 3, 5, 10, 40, 200][case % 7];
            let p = random_instance(&mut rng, n);
            let w = p.weitzman().unwrap();
            let g = p.indices().unwrap();
            let direct = p.open_probs_direct(&g, &w.order);
            for (i, (a, b)) in w.open_probs.iter().zip(&direct).enumerate() {
                close(*a, *b, &format!("case {case}: open_probs[{i}]"));
            }
            let y0 = p.fallback.unwrap_or(f64::NEG_INFINITY);
            let e = p.kappa_expectation(&g, y0, None).unwrap();
            close(
                w.expected_utility,
                e,
                &format!("case {case}: expected utility"),
            );
        }
    }
}
