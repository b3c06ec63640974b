//! The posterior at a node of a one-shot scenario tree, in closed form from root quantities.
//!
//! A node at look-ahead depth `n` sees the root GP conditioned on fantasized observations at its
//! ancestors `q_0 … q_{n−1}`. Each is drawn on the model conditioned on the earlier ones,
//! `ŷ_i = μ_i(q_i) + z_i √(σ_i²(q_i) + σ_n²)`, with fixed base samples `z_i`. Let `M` be the
//! *root* posterior covariance of the path `[q_0, …, q_{n−1}, x]`, with the noise `σ_n²` added on
//! the ancestors' diagonal, and `M = L Lᵀ`. Sequential conditioning whitens the innovations, so
//!
//! - the fantasies are `ŷ = μ_0(q) + L_{<n,<n} z`, and
//! - the node's latent posterior at `x` is `μ(x) = μ_0(x) + Σ_{j<n} L_nj z_j`, `σ²(x) = L_nn²`.
//!
//! A node's value is therefore a smooth function of `n + 1` root means and an `(n+1) × (n+1)`
//! matrix of root posterior covariances (no conditioned GP is ever built). The tree gradient is
//! computed exactly: the input gradients of those root quantities are analytic
//! ([`crate::gp::ExactGp::posterior_pairs`]), and they are pushed through the small per-node
//! computation (Cholesky, fantasies, incumbent, budget, budgeted EI) by forward-mode automatic
//! differentiation over the path's `(n + 1)·d` coordinates with `num-dual`'s dynamic dual vectors.

use super::LogCost;
use super::budgeted::budgeted_ei;
use nalgebra::DVector;
use num_dual::{Derivative, DualDVec64, DualNum};

/// Smallest pivot of an ancestor, relative to its root variance (the pivots include the
/// observation noise, so this only guards a noise-free model).
const PIVOT_FLOOR: f64 = 1e-12;

/// A scalar of the per-node computation: `f64` for values, a dual vector for gradients.
pub(crate) trait PathScalar: DualNum<Primitive = f64> + Clone {
    /// A constant.
    fn constant(v: f64) -> Self;
    /// An input with value `v` whose partials with respect to the path coordinates are given by
    /// `blocks`: `(i, g)` sets directions `i·d … i·d + d − 1` to `g` (`d = g.len()`). `dirs` is the
    /// total number of directions.
    fn input(v: f64, dirs: usize, blocks: &[(usize, &[f64])]) -> Self;
    /// The partials, if any (`None` means all zero).
    fn partials(&self) -> Option<&[f64]>;
}

impl PathScalar for f64 {
    fn constant(v: f64) -> Self {
        v
    }
    fn input(v: f64, _: usize, _: &[(usize, &[f64])]) -> Self {
        v
    }
    fn partials(&self) -> Option<&[f64]> {
        None
    }
}

impl PathScalar for DualDVec64 {
    fn constant(v: f64) -> Self {
        DualDVec64::from_re(v)
    }
    fn input(v: f64, dirs: usize, blocks: &[(usize, &[f64])]) -> Self {
        if dirs == 0 || blocks.iter().all(|(_, g)| g.is_empty()) {
            return DualDVec64::from_re(v);
        }
        let mut eps = DVector::zeros(dirs);
        for &(i, g) in blocks {
            let d = g.len();
            eps.as_mut_slice()[i * d..(i + 1) * d].copy_from_slice(g);
        }
        DualDVec64::new(v, Derivative::some(eps))
    }
    fn partials(&self) -> Option<&[f64]> {
        self.eps.0.as_ref().map(|e| e.as_slice())
    }
}

/// Conditions along a path. `mu` holds the root means of `[q_0, …, q_{n−1}, x]`, `cov` their
/// root covariance (row-major `(n+1)²`, noise already on the ancestors' diagonal) and `z` the
/// base samples of the ancestors' fantasies. Returns the fantasized observations at the
/// ancestors, and the node's conditional mean and variance `L_nn²` (which can be slightly
/// negative through rounding; callers clamp).
pub(crate) fn condition_path<T: PathScalar>(mu: &[T], cov: &[T], z: &[f64]) -> (Vec<T>, T, T) {
    let k = mu.len();
    let n = k - 1;
    debug_assert_eq!(cov.len(), k * k);
    debug_assert_eq!(z.len(), n);
    let mut l: Vec<T> = vec![T::constant(0.0); k * k];
    for i in 0..k {
        for j in 0..=i {
            let mut s = cov[i * k + j].clone();
            for t in 0..j {
                s -= l[i * k + t].clone() * &l[j * k + t];
            }
            l[i * k + j] = if i != j {
                s / &l[j * k + j]
            } else if i < n {
                let floor = PIVOT_FLOOR * cov[i * k + i].re().abs() + 1e-300;
                if s.re() > floor {
                    s.sqrt()
                } else {
                    T::constant(floor.sqrt())
                }
            } else {
                s
            };
        }
    }
    let shift = |row: usize, upto: usize| -> T {
        let mut acc = mu[row].clone();
        for (j, &zj) in z.iter().enumerate().take(upto) {
            acc += l[row * k + j].clone() * zj;
        }
        acc
    };
    let ys = (0..n).map(|i| shift(i, i + 1)).collect();
    let mean = shift(n, n);
    (ys, mean, l[n * k + n].clone())
}

/// The budgeted EI of Proposition 1, `EI(μ, σ; best) · Φ((ln b − m)/√v)`, on path scalars: the
/// value and partials of [`budgeted_ei`] composed by the chain rule. `∂/∂best = −∂/∂μ` and
/// `∂/∂b = −(∂/∂m)/b` follow from the formula.
pub(crate) fn budgeted_ei_path<T: PathScalar>(
    mu: T,
    sigma: T,
    m: T,
    v: T,
    best: T,
    budget: T,
) -> T {
    let b = budget.re();
    let p = budgeted_ei(
        mu.re(),
        sigma.re(),
        LogCost {
            mean: m.re(),
            var: v.re(),
        },
        best.re(),
        b,
    );
    let tangent = |x: T| {
        let r = x.re();
        x - r
    };
    // An infinite budget (multi-step EI: no budget) has no tangent: ∂/∂b = 0 there.
    let budget_term = if b.is_finite() {
        tangent(budget) / b
    } else {
        T::constant(0.0)
    };
    T::constant(p.value)
        + (tangent(mu) - tangent(best)) * p.d_mu
        + tangent(sigma) * p.d_sigma
        + (tangent(m) - budget_term) * p.d_cost_mean
        + tangent(v) * p.d_cost_var
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path formulas against explicit sequential conditioning of a small Gaussian vector.
    #[test]
    fn condition_path_matches_sequential_conditioning() {
        // A 3-point path: two ancestors with noise 0.1 on the diagonal, then the node.
        let k0 = [[1.0, 0.6, 0.3], [0.6, 1.2, 0.5], [0.3, 0.5, 0.9]];
        let noise = 0.1;
        let mu0 = [0.2, -0.4, 0.7];
        let z = [0.8, -1.3];
        let mut cov = vec![0.0; 9];
        for i in 0..3 {
            for j in 0..3 {
                cov[i * 3 + j] = k0[i][j] + if i == j && i < 2 { noise } else { 0.0 };
            }
        }
        let (ys, mean, var) = condition_path::<f64>(&mu0, &cov, &z);
        // Sequential: y0 = μ0 + z0 √(K00 + σ²).
        let y0 = mu0[0] + z[0] * (k0[0][0] + noise).sqrt();
        // Conditioned on y0 (noisy observation at q0).
        let c = |a: usize, b: usize| k0[a][b] - k0[a][0] * k0[0][b] / (k0[0][0] + noise);
        let m1 = |a: usize| mu0[a] + k0[a][0] * (y0 - mu0[0]) / (k0[0][0] + noise);
        let y1 = m1(1) + z[1] * (c(1, 1) + noise).sqrt();
        // Conditioned on y1 as well.
        let mean2 = m1(2) + c(2, 1) * (y1 - m1(1)) / (c(1, 1) + noise);
        let var2 = c(2, 2) - c(2, 1) * c(1, 2) / (c(1, 1) + noise);
        assert!((ys[0] - y0).abs() < 1e-14 && (ys[1] - y1).abs() < 1e-14);
        assert!((mean - mean2).abs() < 1e-14, "{mean} vs {mean2}");
        assert!((var - var2).abs() < 1e-14, "{var} vs {var2}");
    }

    /// The dual-number chain rule of `budgeted_ei_path` against finite differences in its six
    /// arguments.
    #[test]
    fn budgeted_ei_path_partials_match_finite_differences() {
        let x0 = [0.3, 0.7, -0.2, 0.4, 0.1, 1.9];
        let f = |x: &[f64]| budgeted_ei_path(x[0], x[1], x[2], x[3], x[4], x[5]);
        let duals: Vec<DualDVec64> = x0
            .iter()
            .enumerate()
            .map(|(i, &v)| DualDVec64::from_re(v).derivative(6, i))
            .collect();
        let r = budgeted_ei_path(
            duals[0].clone(),
            duals[1].clone(),
            duals[2].clone(),
            duals[3].clone(),
            duals[4].clone(),
            duals[5].clone(),
        );
        assert!((r.re - f(&x0)).abs() < 1e-15);
        let g = r.partials().unwrap();
        for i in 0..6 {
            let h = 1e-6;
            let mut up = x0;
            up[i] += h;
            let mut down = x0;
            down[i] -= h;
            let num = (f(&up) - f(&down)) / (2.0 * h);
            assert!((num - g[i]).abs() < 1e-7, "argument {i}: {} vs {num}", g[i]);
        }
    }
}
