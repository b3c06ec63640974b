//! Standard normal distribution and log-space helpers, accurate far in the tails.
//!
//! All functions take and return `f64`, never allocate or panic, and return no `NaN` for
//! finite input (the single documented exception is [`log1mexp`] for `x > 0`, outside its
//! domain). Transcendental functions come from `libm`, so results are bit-identical across
//! platforms.
//!
//! | function | formula |
//! |---|---|
//! | [`norm_pdf`], [`log_norm_pdf`] | `φ(z) = exp(−z²/2)/√(2π)` |
//! | [`norm_cdf`], [`log_norm_cdf`] | `Φ(z) = ½·erfc(−z/√2)` |
//! | [`norm_sf`], [`log_norm_sf`] | `1 − Φ(z) = Φ(−z)` |
//! | [`mills_ratio`] | `R(x) = Φ(−x)/φ(x)` |
//! | [`erfcx`] | `exp(x²)·erfc(x)` |
//! | [`h`], [`log_h`], [`dlog_h`] | `h(z) = φ(z) + z·Φ(z)`, `log h`, `Φ/h` |
//! | [`log1mexp`], [`log1pexp`] | `log(1 − eˣ)`, `log(1 + eˣ)` |
//! | [`exp_fast`] | `eˣ`, branch-free and vectorizable (≤ 4 ulp), for kernel matrices |
//!
//! # Accuracy
//!
//! Measured against 50-digit mpmath values (`tests/normal_reference.rs`, ~2300 points), as max
//! relative error where the exact value is a normal `f64`: `log_norm_cdf` on `[−1e6, 40]`,
//! `norm_cdf`, `norm_pdf`, `erfcx` on `[−26, 1e300]`, `log_h` on `[−1e6, 40]`, `log1mexp`,
//! `log1pexp` all ≤ 6e-16. `h` and `dlog_h` are ≤ 6e-16 for `z ≥ −1` and ≤ 2.1e-14 on
//! `[−10, −1)`, where `1 − x·R(x)` loses a factor ≈ z² to cancellation. `log_h` does not feel
//! it: the same error is absolute in `log h` and `|log h| ≈ z²/2` there. Beyond `z = −10` a
//! continued fraction restores ≈1e-16.

mod fastexp;
mod logexp;
mod normal;

pub use fastexp::exp_fast;
pub use logexp::{log1mexp, log1pexp};
pub use normal::{
    dlog_h, erfcx, h, log_h, log_norm_cdf, log_norm_pdf, log_norm_sf, mills_ratio, norm_cdf,
    norm_pdf, norm_ppf, norm_sf,
};

#[cfg(test)]
mod tests;
