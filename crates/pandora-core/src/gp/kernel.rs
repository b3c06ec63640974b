//! Stationary covariance kernels: Matérn ν = 1/2, 3/2, 5/2 and the squared exponential (RBF),
//! with ARD lengthscales and an outputscale.
//!
//! Every kernel is written as `k(x, z) = σ² κ(r²)` with the scaled squared distance
//! `r² = Σ_k (x_k − z_k)² / ℓ_k²`. Gradients with respect to inputs and log-hyperparameters follow
//! from `κ'(r²) = dκ/d(r²)`:
//!
//! - `∂k/∂x_k = σ² κ'(r²) · 2 (x_k − z_k) / ℓ_k²`
//! - `∂k/∂log ℓ_p = σ² κ'(r²) · (−2 (x_p − z_p)² / ℓ_p²)`
//! - `∂k/∂log σ² = k`
//!
//! Matérn-1/2 is not differentiable at `r = 0`; there its input gradient is taken as 0 (the
//! symmetric subgradient) and its lengthscale gradient has the limit 0.

use crate::error::{Error, Result};
use crate::math::exp_fast;
use multiversion::multiversion;

/// The shape of a stationary kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// Matérn ν = 1/2: `κ = exp(−r)` (the exponential kernel).
    Matern12,
    /// Matérn ν = 3/2: `κ = (1 + √3 r) exp(−√3 r)`.
    Matern32,
    /// Matérn ν = 5/2: `κ = (1 + √5 r + 5r²/3) exp(−√5 r)`.
    Matern52,
    /// Squared exponential: `κ = exp(−r²/2)`.
    Rbf,
}

impl KernelKind {
    /// Parses `matern12`, `matern32`, `matern52` or `rbf`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "matern12" => Ok(Self::Matern12),
            "matern32" => Ok(Self::Matern32),
            "matern52" => Ok(Self::Matern52),
            "rbf" => Ok(Self::Rbf),
            other => Err(Error::invalid(
                "kernel.type",
                format!("unknown kernel '{other}' (expected matern12, matern32, matern52 or rbf)"),
            )),
        }
    }

    /// The canonical name accepted by [`KernelKind::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Self::Matern12 => "matern12",
            Self::Matern32 => "matern32",
            Self::Matern52 => "matern52",
            Self::Rbf => "rbf",
        }
    }

    /// Smoothness ν of the Matérn family (`None` for the RBF kernel, ν = ∞).
    pub fn nu(self) -> Option<f64> {
        match self {
            Self::Matern12 => Some(0.5),
            Self::Matern32 => Some(1.5),
            Self::Matern52 => Some(2.5),
            Self::Rbf => None,
        }
    }

    /// Returns `(κ(r²), κ'(r²))` for the unit-outputscale kernel at scaled squared distance `r2 ≥ 0`.
    #[inline(always)]
    pub fn eval_r2(self, r2: f64) -> (f64, f64) {
        let r2 = r2.max(0.0);
        match self {
            Self::Matern12 => {
                let r = r2.sqrt();
                let e = (-r).exp();
                let d = if r > 0.0 { -0.5 * e / r } else { 0.0 };
                (e, d)
            }
            Self::Matern32 => {
                const S3: f64 = 1.732_050_807_568_877_2;
                let sr = S3 * r2.sqrt();
                let e = (-sr).exp();
                ((1.0 + sr) * e, -1.5 * e)
            }
            Self::Matern52 => {
                const S5: f64 = 2.236_067_977_499_79;
                let sr = S5 * r2.sqrt();
                let e = (-sr).exp();
                (
                    (1.0 + sr + (5.0 / 3.0) * r2) * e,
                    -(5.0 / 6.0) * (1.0 + sr) * e,
                )
            }
            Self::Rbf => {
                let e = (-0.5 * r2).exp();
                (e, -0.5 * e)
            }
        }
    }

    /// Returns `κ(r²)` only.
    #[inline(always)]
    pub fn value_r2(self, r2: f64) -> f64 {
        let r2 = r2.max(0.0);
        match self {
            Self::Matern12 => (-r2.sqrt()).exp(),
            Self::Matern32 => {
                let sr = 1.732_050_807_568_877_2 * r2.sqrt();
                (1.0 + sr) * (-sr).exp()
            }
            Self::Matern52 => {
                let sr = 2.236_067_977_499_79 * r2.sqrt();
                (1.0 + sr + (5.0 / 3.0) * r2) * (-sr).exp()
            }
            Self::Rbf => (-0.5 * r2).exp(),
        }
    }
}

/// Evaluates `σ² κ(r²_i)` into `k_out` and, if `g_out` is non-empty, `σ² κ'(r²_i)` into `g_out`,
/// for every entry of `r2`. Vectorized (with a branch-free `exp`, see [`exp_fast`]) and compiled
/// for AVX-512 and AVX2 with runtime dispatch; agrees with [`KernelKind::eval_r2`] to a few ulp.
#[multiversion(targets("x86_64+avx512f+avx512dq+avx2+fma", "x86_64+avx2+fma"))]
pub fn eval_r2_slice(kind: KernelKind, s2: f64, r2: &[f64], k_out: &mut [f64], g_out: &mut [f64]) {
    let n = r2.len();
    let k_out = &mut k_out[..n];
    let grad = !g_out.is_empty();
    match kind {
        KernelKind::Matern12 => {
            if grad {
                let g_out = &mut g_out[..n];
                for i in 0..n {
                    let r = r2[i].max(0.0).sqrt();
                    let e = s2 * exp_fast(-r);
                    k_out[i] = e;
                    g_out[i] = if r > 0.0 { -0.5 * e / r } else { 0.0 };
                }
            } else {
                for i in 0..n {
                    k_out[i] = s2 * exp_fast(-r2[i].max(0.0).sqrt());
                }
            }
        }
        KernelKind::Matern32 => {
            const S3: f64 = 1.732_050_807_568_877_2;
            if grad {
                let g_out = &mut g_out[..n];
                for i in 0..n {
                    let sr = S3 * r2[i].max(0.0).sqrt();
                    let e = s2 * exp_fast(-sr);
                    k_out[i] = (1.0 + sr) * e;
                    g_out[i] = -1.5 * e;
                }
            } else {
                for i in 0..n {
                    let sr = S3 * r2[i].max(0.0).sqrt();
                    k_out[i] = (1.0 + sr) * (s2 * exp_fast(-sr));
                }
            }
        }
        KernelKind::Matern52 => {
            const S5: f64 = 2.236_067_977_499_79;
            if grad {
                let g_out = &mut g_out[..n];
                for i in 0..n {
                    let q = r2[i].max(0.0);
                    let sr = S5 * q.sqrt();
                    let e = s2 * exp_fast(-sr);
                    k_out[i] = (1.0 + sr + (5.0 / 3.0) * q) * e;
                    g_out[i] = -(5.0 / 6.0) * (1.0 + sr) * e;
                }
            } else {
                for i in 0..n {
                    let q = r2[i].max(0.0);
                    let sr = S5 * q.sqrt();
                    k_out[i] = (1.0 + sr + (5.0 / 3.0) * q) * (s2 * exp_fast(-sr));
                }
            }
        }
        KernelKind::Rbf => {
            if grad {
                let g_out = &mut g_out[..n];
                for i in 0..n {
                    let e = s2 * exp_fast(-0.5 * r2[i].max(0.0));
                    k_out[i] = e;
                    g_out[i] = -0.5 * e;
                }
            } else {
                for i in 0..n {
                    k_out[i] = s2 * exp_fast(-0.5 * r2[i].max(0.0));
                }
            }
        }
    }
}

/// A stationary kernel `k(x, z) = σ² κ(r²)` with ARD lengthscales `ℓ` and outputscale `σ²`.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    /// Kernel shape.
    pub kind: KernelKind,
    /// One positive lengthscale per input dimension.
    pub lengthscales: Vec<f64>,
    /// Positive outputscale (prior variance) `σ²`.
    pub outputscale: f64,
}

impl Kernel {
    /// Creates a kernel, validating that all lengthscales and the outputscale are finite and positive.
    pub fn new(kind: KernelKind, lengthscales: Vec<f64>, outputscale: f64) -> Result<Self> {
        if lengthscales.is_empty() {
            return Err(Error::invalid("kernel.lengthscales", "must not be empty"));
        }
        if let Some(l) = lengthscales.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
            return Err(Error::invalid(
                "kernel.lengthscales",
                format!("every lengthscale must be finite and > 0, got {l}"),
            ));
        }
        if !(outputscale.is_finite() && outputscale > 0.0) {
            return Err(Error::invalid(
                "kernel.outputscale",
                format!("must be finite and > 0, got {outputscale}"),
            ));
        }
        Ok(Self {
            kind,
            lengthscales,
            outputscale,
        })
    }

    /// Input dimension `d` (the number of lengthscales).
    pub fn dim(&self) -> usize {
        self.lengthscales.len()
    }

    /// Number of log-hyperparameters: `d` log-lengthscales followed by the log-outputscale.
    pub fn num_hyper(&self) -> usize {
        self.dim() + 1
    }

    /// Scaled squared distance `r² = Σ (x_k − z_k)²/ℓ_k²`.
    #[inline]
    pub fn r2(&self, x: &[f64], z: &[f64]) -> f64 {
        let mut s = 0.0;
        for ((a, b), l) in x.iter().zip(z).zip(&self.lengthscales) {
            let t = (a - b) / l;
            s += t * t;
        }
        s
    }

    /// `k(x, z)`.
    #[inline]
    pub fn eval(&self, x: &[f64], z: &[f64]) -> f64 {
        self.outputscale * self.kind.value_r2(self.r2(x, z))
    }

    /// `k(x, z)` and its gradient with respect to `x` (written into `grad`).
    pub fn eval_grad_x(&self, x: &[f64], z: &[f64], grad: &mut [f64]) -> f64 {
        let (k, dk) = self.kind.eval_r2(self.r2(x, z));
        let s = self.outputscale;
        for (((g, a), b), l) in grad.iter_mut().zip(x).zip(z).zip(&self.lengthscales) {
            *g = s * dk * 2.0 * (a - b) / (l * l);
        }
        s * k
    }

    /// `k(x, z)` and its gradient with respect to the log-hyperparameters
    /// `(log ℓ_1, …, log ℓ_d, log σ²)`, written into `grad` (length `d + 1`).
    pub fn eval_grad_hyper(&self, x: &[f64], z: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.dim();
        let (k, dk) = self.kind.eval_r2(self.r2(x, z));
        let s = self.outputscale;
        for p in 0..d {
            let t = (x[p] - z[p]) / self.lengthscales[p];
            grad[p] = s * dk * (-2.0 * t * t);
        }
        grad[d] = s * k;
        s * k
    }

    /// The log-hyperparameters `(log ℓ_1, …, log ℓ_d, log σ²)`.
    pub fn log_hyper(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.lengthscales.iter().map(|l| l.ln()).collect();
        v.push(self.outputscale.ln());
        v
    }

    /// Sets the hyperparameters from `(log ℓ_1, …, log ℓ_d, log σ²)`.
    pub fn set_log_hyper(&mut self, theta: &[f64]) {
        let d = self.dim();
        for (l, t) in self.lengthscales.iter_mut().zip(&theta[..d]) {
            *l = t.exp();
        }
        self.outputscale = theta[d].exp();
    }

    /// Scales the rows of a row-major `m × d` point matrix by `1/ℓ` (into a new buffer).
    pub fn scale_points(&self, xs: &[f64]) -> Vec<f64> {
        let d = self.dim();
        let inv: Vec<f64> = self.lengthscales.iter().map(|l| 1.0 / l).collect();
        let mut out = xs.to_vec();
        for row in out.chunks_exact_mut(d) {
            for (v, s) in row.iter_mut().zip(&inv) {
                *v *= s;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [KernelKind; 4] = [
        KernelKind::Matern12,
        KernelKind::Matern32,
        KernelKind::Matern52,
        KernelKind::Rbf,
    ];

    fn kernel(kind: KernelKind) -> Kernel {
        Kernel::new(kind, vec![0.3, 0.7, 1.9], 1.7).unwrap()
    }

    #[test]
    fn closed_forms_at_known_distances() {
        // r = 1 exactly: x − z = ℓ along one axis.
        let k = Kernel::new(KernelKind::Matern52, vec![0.5], 2.0).unwrap();
        let v = k.eval(&[0.5], &[0.0]);
        let s5 = 5f64.sqrt();
        assert!((v - 2.0 * (1.0 + s5 + 5.0 / 3.0) * (-s5).exp()).abs() < 1e-15);
        let k = Kernel::new(KernelKind::Matern32, vec![0.5], 2.0).unwrap();
        let s3 = 3f64.sqrt();
        assert!((k.eval(&[0.5], &[0.0]) - 2.0 * (1.0 + s3) * (-s3).exp()).abs() < 1e-15);
        let k = Kernel::new(KernelKind::Matern12, vec![0.5], 2.0).unwrap();
        assert!((k.eval(&[0.5], &[0.0]) - 2.0 * (-1f64).exp()).abs() < 1e-15);
        let k = Kernel::new(KernelKind::Rbf, vec![0.5], 2.0).unwrap();
        assert!((k.eval(&[0.5], &[0.0]) - 2.0 * (-0.5f64).exp()).abs() < 1e-15);
        for kind in KINDS {
            let k = kernel(kind);
            assert_eq!(k.eval(&[0.1, 0.2, 0.3], &[0.1, 0.2, 0.3]), 1.7);
        }
    }

    #[test]
    fn input_gradient_matches_finite_differences() {
        let x = [0.31, -0.42, 0.77];
        let z = [0.12, 0.05, 0.66];
        for kind in KINDS {
            let k = kernel(kind);
            let mut g = [0.0; 3];
            k.eval_grad_x(&x, &z, &mut g);
            for i in 0..3 {
                let h = 1e-6;
                let mut xp = x;
                let mut xm = x;
                xp[i] += h;
                xm[i] -= h;
                let fd = (k.eval(&xp, &z) - k.eval(&xm, &z)) / (2.0 * h);
                assert!(
                    (fd - g[i]).abs() < 1e-8 * (1.0 + fd.abs()),
                    "{kind:?} dim {i}: fd {fd} vs {}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn hyper_gradient_matches_finite_differences() {
        let x = [0.31, -0.42, 0.77];
        let z = [0.12, 0.05, 0.66];
        for kind in KINDS {
            let k = kernel(kind);
            let mut g = [0.0; 4];
            k.eval_grad_hyper(&x, &z, &mut g);
            let theta = k.log_hyper();
            for p in 0..4 {
                let h = 1e-6;
                let mut kp = k.clone();
                let mut km = k.clone();
                let mut tp = theta.clone();
                let mut tm = theta.clone();
                tp[p] += h;
                tm[p] -= h;
                kp.set_log_hyper(&tp);
                km.set_log_hyper(&tm);
                let fd = (kp.eval(&x, &z) - km.eval(&x, &z)) / (2.0 * h);
                assert!(
                    (fd - g[p]).abs() < 1e-8 * (1.0 + fd.abs()),
                    "{kind:?} hyper {p}: fd {fd} vs {}",
                    g[p]
                );
            }
        }
    }

    #[test]
    fn gradients_vanish_at_zero_distance() {
        for kind in KINDS {
            let k = kernel(kind);
            let mut g = [1.0; 3];
            k.eval_grad_x(&[0.2, 0.2, 0.2], &[0.2, 0.2, 0.2], &mut g);
            assert_eq!(g, [0.0; 3]);
        }
    }

    #[test]
    fn slice_evaluation_matches_scalar() {
        let r2: Vec<f64> = (0..257).map(|i| (i as f64 * 0.037).powi(2)).collect();
        for kind in KINDS {
            let mut k = vec![0.0; r2.len()];
            let mut g = vec![0.0; r2.len()];
            eval_r2_slice(kind, 1.7, &r2, &mut k, &mut g);
            let mut k2 = vec![0.0; r2.len()];
            eval_r2_slice(kind, 1.7, &r2, &mut k2, &mut []);
            for i in 0..r2.len() {
                let (kv, dk) = kind.eval_r2(r2[i]);
                // exp_fast is within 4 ulp of libm; allow a few more for the products.
                assert!((k[i] - 1.7 * kv).abs() <= 1e-14 * 1.7 * kv, "{kind:?} {i}");
                assert!(
                    (g[i] - 1.7 * dk).abs() <= 1e-14 * 1.7 * dk.abs(),
                    "{kind:?} {i}"
                );
                assert_eq!(k[i], k2[i]);
            }
        }
    }

    #[test]
    fn rejects_bad_hyperparameters() {
        assert!(Kernel::new(KernelKind::Rbf, vec![0.0], 1.0).is_err());
        assert!(Kernel::new(KernelKind::Rbf, vec![f64::NAN], 1.0).is_err());
        assert!(Kernel::new(KernelKind::Rbf, vec![1.0], -1.0).is_err());
        assert!(Kernel::new(KernelKind::Rbf, vec![], 1.0).is_err());
        assert!(KernelKind::parse("matern72").is_err());
        for kind in KINDS {
            assert_eq!(KernelKind::parse(kind.name()).unwrap(), kind);
        }
    }
}
