//! Log-space helpers for `log(1 ± exp(x))`.

use core::f64::consts::LN_2;

/// `log(1 − exp(x))` for `x < 0`, computed without cancellation.
///
/// Formula (Mächler 2012, "Accurately computing log(1 − exp(−|a|))"):
///
/// ```text
/// log1mexp(x) = log(−expm1(x))      if −ln 2 < x < 0
///             = log1p(−exp(x))      if x ≤ −ln 2
/// ```
///
/// Special values: `log1mexp(0) = −∞`, `log1mexp(−∞) = 0`.
///
/// **Domain note:** for `x > 0` the quantity `1 − exp(x)` is negative and its logarithm is
/// undefined, so the function returns `NaN` there (this is the only finite input that yields
/// `NaN`). A `NaN` input propagates.
#[inline]
pub fn log1mexp(x: f64) -> f64 {
    if x > -LN_2 {
        if x < 0.0 {
            libm::log(-libm::expm1(x))
        } else if x == 0.0 {
            f64::NEG_INFINITY
        } else {
            // x > 0 is outside the domain (also reached by NaN, which fails the comparisons).
            f64::NAN
        }
    } else {
        // Includes x = −∞: exp(−∞) = 0 and log1p(−0) = −0.
        libm::log1p(-libm::exp(x))
    }
}

/// `log(1 + exp(x))` (the softplus), stable for every `x`.
///
/// Formula (Mächler 2012):
///
/// ```text
/// log1pexp(x) = exp(x)              if x ≤ −37
///             = log1p(exp(x))       if −37 < x ≤ 18
///             = x + exp(−x)         if 18 < x ≤ 33.3
///             = x                   if x > 33.3
/// ```
///
/// The thresholds are where the dropped terms fall below half an ulp of the result.
#[inline]
pub fn log1pexp(x: f64) -> f64 {
    if x <= -37.0 {
        libm::exp(x)
    } else if x <= 18.0 {
        libm::log1p(libm::exp(x))
    } else if x <= 33.3 {
        x + libm::exp(-x)
    } else {
        x
    }
}
