//! The log marginal likelihood of an exact GP and its analytic gradient with respect to the
//! log-hyperparameters.
//!
//! With `K = k(X, X) + σ_n² I`, `r = y − c` and `α = K⁻¹ r`:
//!
//! `log p(y | X, θ) = −½ rᵀ α − ½ log det K − (n/2) log 2π`
//!
//! and for any kernel hyperparameter `θ_p`, `∂/∂θ_p = ½ tr((α αᵀ − K⁻¹) ∂K/∂θ_p)`. `W = α αᵀ − K⁻¹`
//! is formed once (`O(n³)`); every gradient entry is then an `O(n²)` contraction, accumulated for
//! all lengthscales in one pass over the pairs `i < j`. The mean gradient is `∂/∂c = Σ α_i`.

use crate::error::Result;
use crate::gp::kernel::Kernel;
use crate::gp::model::{dot, kernel_matrix_lower, scaled_transpose};
use crate::linalg::{Cholesky, JitterPolicy};
use multiversion::multiversion;

/// Log marginal likelihood and its gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct LmlGrad {
    /// `log p(y | X, θ)`.
    pub value: f64,
    /// Gradient with respect to `(log ℓ_1, …, log ℓ_d, log σ², log σ_n², c)`.
    pub grad: Vec<f64>,
    /// Jitter that had to be added to `K` (0 if none).
    pub jitter: f64,
}

/// Evaluates the log marginal likelihood of the data `(x, y)` (row-major `x`, `n × d`) under the
/// kernel, observation-noise variance `noise` and constant mean `mean`, with its gradient with
/// respect to `(log ℓ_1, …, log ℓ_d, log σ², log σ_n², c)` (length `d + 3`).
pub fn log_marginal_likelihood(
    kernel: &Kernel,
    noise: f64,
    mean: f64,
    x: &[f64],
    y: &[f64],
) -> Result<LmlGrad> {
    Ok(log_marginal_likelihood_profiled(kernel, noise, Some(mean), x, y)?.0)
}

/// As [`log_marginal_likelihood`], but with `mean = None` the constant mean is set to its
/// maximum-likelihood value `c* = 1ᵀK⁻¹y / 1ᵀK⁻¹1` (from the same factorization). Returns the
/// result and the mean used. At `c*` the mean gradient is zero, so the other gradient entries are
/// the gradient of the profiled likelihood (envelope theorem).
pub fn log_marginal_likelihood_profiled(
    kernel: &Kernel,
    noise: f64,
    mean: Option<f64>,
    x: &[f64],
    y: &[f64],
) -> Result<(LmlGrad, f64)> {
    lml_profiled_with_factor(kernel, noise, mean, x, y).map(|(l, c, _)| (l, c))
}

/// As [`log_marginal_likelihood_profiled`], also returning the factor of `K + σ_n² I` it used, so
/// that a caller who keeps these hyperparameters conditions the GP on it instead of factorizing
/// the same matrix again (`gp::fit`: a kept warm start).
pub(crate) fn lml_profiled_with_factor(
    kernel: &Kernel,
    noise: f64,
    mean: Option<f64>,
    x: &[f64],
    y: &[f64],
) -> Result<(LmlGrad, f64, Cholesky)> {
    let d = kernel.dim();
    let n = y.len();
    // Lower triangles only: the factorization and the gradient below read nothing else.
    let (k, gmat) = kernel_matrix_lower(kernel, x, noise, true);
    let chol = Cholesky::factor(k.as_ref(), JitterPolicy::default())?;
    let mean = match mean {
        Some(c) => c,
        None => ml_mean(&chol, y),
    };
    let r: Vec<f64> = y.iter().map(|v| v - mean).collect();
    let alpha = chol.solve_vec(&r);
    let fit: f64 = r.iter().zip(&alpha).map(|(a, b)| a * b).sum();
    let value =
        -0.5 * fit - 0.5 * chol.log_det() - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();

    // W = α αᵀ − K⁻¹ (only the lower triangle and diagonal are used). Column by column, with
    // w_i = W_ij for i > j:
    //   ∂/∂log ℓ_p = −2 Σ_{i>j} W_ij G_ij (x̃_ip − x̃_jp)²,   ∂/∂log σ² = ½ Σ_i W_ii σ² + Σ_{i>j} W_ij K_ij.
    let kinv = chol.inverse_lower();
    let s2 = kernel.outputscale;
    let xt = scaled_transpose(kernel, x);
    let mut grad = vec![0.0; d + 3];
    let mut g_out = 0.0;
    let mut trace_w = 0.0;
    let mut w = vec![0.0; n];
    for j in 0..n {
        let wjj = alpha[j] * alpha[j] - kinv[(j, j)];
        trace_w += wjj;
        g_out += 0.5 * wjj * s2;
        let len = n - j - 1;
        if len == 0 {
            continue;
        }
        let kinv_col = &kinv.col_as_slice(j)[j + 1..];
        let kcol = &k.col_as_slice(j)[j + 1..];
        let gcol = &gmat.col_as_slice(j)[j + 1..];
        let wj = &mut w[..len];
        let aj = alpha[j];
        for (t, wv) in wj.iter_mut().enumerate() {
            *wv = alpha[j + 1 + t] * aj - kinv_col[t];
        }
        g_out += dot(wj, kcol);
        for (t, wv) in wj.iter_mut().enumerate() {
            *wv *= gcol[t];
        }
        // Four dimensions per pass over w: independent accumulator chains, each summed in
        // exactly the order of the one-dimension kernel (bit-identical results).
        let mut p = 0;
        while p + 4 <= d {
            let cols: [&[f64]; 4] = std::array::from_fn(|t| &xt[(p + t) * n..(p + t + 1) * n]);
            let s = weighted_squared_diff4(
                wj,
                std::array::from_fn(|t| &cols[t][j + 1..]),
                std::array::from_fn(|t| cols[t][j]),
            );
            for t in 0..4 {
                grad[p + t] += -2.0 * s[t];
            }
            p += 4;
        }
        for (p, gp) in grad.iter_mut().enumerate().take(d).skip(p) {
            let col = &xt[p * n..(p + 1) * n];
            *gp += -2.0 * weighted_squared_diff(wj, &col[j + 1..], col[j]);
        }
    }
    grad[d] = g_out;
    grad[d + 1] = 0.5 * noise * trace_w;
    grad[d + 2] = alpha.iter().sum();
    Ok((
        LmlGrad {
            value,
            grad,
            jitter: chol.jitter(),
        },
        mean,
        chol,
    ))
}

/// The maximum-likelihood constant mean `c* = 1ᵀK⁻¹y / 1ᵀK⁻¹1` of
/// [`log_marginal_likelihood_profiled`] (the same factorization and sums, so the same value to
/// the bit) without the likelihood's inverse and gradient: one factorization, two solves.
pub fn profiled_mean(kernel: &Kernel, noise: f64, x: &[f64], y: &[f64]) -> Result<f64> {
    Ok(ml_mean(&factor_for_likelihood(kernel, noise, x)?, y))
}

/// The factor of `K + σ_n² I` exactly as the likelihood computes it (the same matrix to the bit).
pub(crate) fn factor_for_likelihood(kernel: &Kernel, noise: f64, x: &[f64]) -> Result<Cholesky> {
    let (k, _) = kernel_matrix_lower(kernel, x, noise, true);
    Cholesky::factor(k.as_ref(), JitterPolicy::default())
}

/// `c*` from the factor of `K` (the sample mean if `1ᵀK⁻¹1` is not a positive number).
pub(crate) fn ml_mean(chol: &Cholesky, y: &[f64]) -> f64 {
    let n = y.len();
    let a = chol.solve_vec(&vec![1.0; n]);
    let num: f64 = a.iter().zip(y).map(|(u, v)| u * v).sum();
    let den: f64 = a.iter().sum();
    if den.is_finite() && den > 0.0 && num.is_finite() {
        num / den
    } else {
        y.iter().sum::<f64>() / n.max(1) as f64
    }
}

/// `Σ_i w_i (x_i − q)²`.
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn weighted_squared_diff(w: &[f64], x: &[f64], q: f64) -> f64 {
    let mut acc = [0.0; 4];
    let n4 = w.len() / 4 * 4;
    for i in (0..n4).step_by(4) {
        for t in 0..4 {
            let u = x[i + t] - q;
            acc[t] += w[i + t] * u * u;
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for i in n4..w.len() {
        let u = x[i] - q;
        s += w[i] * u * u;
    }
    s
}

/// [`weighted_squared_diff`] for four coordinate columns `x[c]` and centres `q[c]` at once: each
/// result is summed in exactly the same order as by the one-column kernel (four lanes, combined
/// as `(a₀ + a₁) + (a₂ + a₃)`, then the tail), so the values are bit-identical, but the four
/// columns give the processor independent chains instead of one.
#[multiversion(targets("x86_64+avx512f+avx2+fma", "x86_64+avx2+fma"))]
fn weighted_squared_diff4(w: &[f64], x: [&[f64]; 4], q: [f64; 4]) -> [f64; 4] {
    let len = w.len();
    let x = x.map(|c| &c[..len]);
    let mut acc = [[0.0; 4]; 4];
    let n4 = len / 4 * 4;
    for i in (0..n4).step_by(4) {
        for ((a, xc), qc) in acc.iter_mut().zip(&x).zip(&q) {
            for t in 0..4 {
                let u = xc[i + t] - qc;
                a[t] += w[i + t] * u * u;
            }
        }
    }
    let mut out = [0.0; 4];
    for (((o, a), xc), qc) in out.iter_mut().zip(&acc).zip(&x).zip(&q) {
        let mut s = (a[0] + a[1]) + (a[2] + a[3]);
        for (wi, xi) in w[n4..].iter().zip(&xc[n4..]) {
            let u = xi - qc;
            s += wi * u * u;
        }
        *o = s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::kernel::KernelKind;
    use crate::gp::model::{ExactGp, GpParams};
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn data(n: usize, d: usize) -> (Vec<f64>, Vec<f64>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        let x: Vec<f64> = (0..n * d).map(|_| rng.random::<f64>()).collect();
        let y = (0..n)
            .map(|i| {
                (5.0 * x[i * d]).sin() + x[i * d + 1] * x[i * d + 1] + 0.05 * rng.random::<f64>()
            })
            .collect();
        (x, y)
    }

    fn eval(theta: &[f64], kind: KernelKind, x: &[f64], y: &[f64]) -> LmlGrad {
        let d = theta.len() - 3;
        let kernel = Kernel::new(
            kind,
            theta[..d].iter().map(|t| t.exp()).collect(),
            theta[d].exp(),
        )
        .unwrap();
        log_marginal_likelihood(&kernel, theta[d + 1].exp(), theta[d + 2], x, y).unwrap()
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let (x, y) = data(40, 3);
        for kind in [
            KernelKind::Matern12,
            KernelKind::Matern32,
            KernelKind::Matern52,
            KernelKind::Rbf,
        ] {
            let theta = vec![
                (0.3f64).ln(),
                (0.6f64).ln(),
                (1.5f64).ln(),
                (0.8f64).ln(),
                (1e-2f64).ln(),
                0.2,
            ];
            let g = eval(&theta, kind, &x, &y).grad;
            for p in 0..theta.len() {
                let h = 1e-5;
                let mut tp = theta.clone();
                let mut tm = theta.clone();
                tp[p] += h;
                tm[p] -= h;
                let fd =
                    (eval(&tp, kind, &x, &y).value - eval(&tm, kind, &x, &y).value) / (2.0 * h);
                assert!(
                    (fd - g[p]).abs() < 1e-6 * (1.0 + fd.abs()),
                    "{kind:?} param {p}: fd {fd} vs analytic {}",
                    g[p]
                );
            }
        }
    }

    #[test]
    fn four_column_kernel_is_bit_identical_to_the_one_column_kernel() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for len in [0, 1, 3, 4, 5, 17, 64, 301] {
            let w: Vec<f64> = (0..len).map(|_| rng.random::<f64>() - 0.5).collect();
            let cols: Vec<Vec<f64>> = (0..4)
                .map(|_| (0..len).map(|_| 3.0 * rng.random::<f64>()).collect())
                .collect();
            let q = [0.1, 1.7, 2.9, 0.4];
            let four = weighted_squared_diff4(&w, std::array::from_fn(|c| cols[c].as_slice()), q);
            for (c, (col, qc)) in cols.iter().zip(q).enumerate() {
                let one = weighted_squared_diff(&w, col, qc);
                assert_eq!(four[c].to_bits(), one.to_bits(), "len {len} column {c}");
            }
        }
    }

    #[test]
    fn value_matches_model_and_closed_form() {
        let (x, y) = data(20, 2);
        let kernel = Kernel::new(KernelKind::Matern52, vec![0.4, 0.7], 1.2).unwrap();
        let l = log_marginal_likelihood(&kernel, 1e-3, 0.1, &x, &y).unwrap();
        let gp = ExactGp::new(
            x.clone(),
            y.clone(),
            GpParams {
                kernel: kernel.clone(),
                mean: 0.1,
                noise: 1e-3,
            },
        )
        .unwrap();
        assert!((l.value - gp.log_marginal_likelihood()).abs() < 1e-10);
        // One point: log N(y; c, σ² + σ_n²).
        let one = log_marginal_likelihood(&kernel, 0.3, 0.1, &[0.5, 0.5], &[1.0]).unwrap();
        let v: f64 = 1.2 + 0.3;
        let expect = -0.5 * (0.9f64 * 0.9) / v - 0.5 * (2.0 * std::f64::consts::PI * v).ln();
        assert!((one.value - expect).abs() < 1e-14);
    }
}
