//! The standard normal distribution in `f64`, accurate far into both tails.
//!
//! Notation used throughout: `φ(z) = exp(−z²/2)/√(2π)` is the density, `Φ(z)` the distribution
//! function, `R(x) = Φ(−x)/φ(x)` Mills' ratio and `h(z) = φ(z) + zΦ(z)` the expected-improvement
//! helper.
//!
//! Building blocks, chosen so that no step cancels catastrophically:
//! - `z²/2` is split exactly into `hi + lo` with one fused multiply-add, so `exp(−z²/2)` and
//!   `log φ(z)` carry no error from rounding `z²` (which would otherwise cost up to ~700 ulp).
//! - The lower tail is `Φ(−x) = ½·erfcx(x/√2)·exp(−x²/2)` for `x ≥ 0`; `erfcx` varies slowly, so
//!   rounding `x/√2` is harmless, and the Gaussian factor is computed exactly as above.
//! - For `z < 0`, `h(z) = φ(z)·g(x)` with `x = −z` and `g(x) = 1 − x·R(x)`; for `x > 10` the
//!   cancelling difference is replaced by Laplace's continued fraction (see [`h`]).
//!
//! Everything is branchy but loop-free for `|z| ≤ 10`; no function allocates or panics, and no
//! finite input produces `NaN` (except [`log1mexp`](super::log1mexp) outside its domain).

use core::f64::consts::FRAC_1_SQRT_2;

/// `1/√(2π)`.
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
/// `ln √(2π) = ½·ln(2π)`.
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;
/// `√(π/2)`.
const SQRT_FRAC_PI_2: f64 = 1.253_314_137_315_500_3;
/// Beyond this `|z|`, `exp(−z²/2)·m` underflows to zero for every `m ≤ 1`.
const GAUSS_UNDERFLOW: f64 = 40.0;
/// Below `z = −H_CF_SWITCH`, `h(z)/φ(z)` comes from the continued fraction.
const H_CF_SWITCH: f64 = 10.0;

/// Exact split `z²/2 = hi + lo` (`hi` the rounded product, `lo` its rounding error).
///
/// `hi` is `+∞` (and `lo` meaningless) once `z²/2` overflows, i.e. `|z| ≳ 1.9e154`.
#[inline(always)]
fn half_square(z: f64) -> (f64, f64) {
    let hz = 0.5 * z;
    let hi = z * hz;
    let lo = z.mul_add(hz, -hi);
    (hi, lo)
}

/// `m·exp(−z²/2)` for `0 ≤ m ≤ 1`, with a single rounding into the subnormal range.
#[inline(always)]
fn gauss_times(z: f64, m: f64) -> f64 {
    let az = z.abs();
    if az >= GAUSS_UNDERFLOW {
        return 0.0;
    }
    let (hi, lo) = half_square(az);
    // exp(−hi−lo) = exp(−hi)·(1 − lo + O(lo²)), |lo| ≤ 2⁻⁵³·hi.
    let m = m * (1.0 - lo);
    if hi < 700.0 {
        libm::exp(-hi) * m
    } else {
        // exp(−hi) would already be subnormal: square a normal half instead so that the only
        // rounding into the subnormal range is the final multiply.
        let e = libm::exp(-0.5 * hi);
        e * (e * m)
    }
}

/// Upper tail `Q(x) = Φ(−x) = 1 − Φ(x)` for `x ≥ 0`.
#[inline(always)]
fn upper_tail(x: f64) -> f64 {
    gauss_times(x, 0.5 * erfcx(x * FRAC_1_SQRT_2))
}

/// Truncated Laplace continued fraction `t(x) = x + 2/(x + 3/(x + 4/(x + …)))` for `x ≥ 10`.
///
/// With `c = 1/t`, Mills' ratio is `R(x) = 1/(x + 1/(x + 2/(x + …))) = 1/(x + c)`, hence
/// `1 − x·R(x) = c·R(x) = 1/(x·t + 1)` and `Φ(−x)/h(−x) = R/(c·R) = t`. The depth is chosen per
/// range so that the truncation error is below 1e-16 (measured with mpmath over x ∈ [10, 200];
/// beyond that it only shrinks).
#[inline]
fn laplace_cf(x: f64) -> f64 {
    let depth: u32 = if x < 15.0 {
        14
    } else if x < 30.0 {
        10
    } else if x < 60.0 {
        8
    } else {
        6
    };
    let mut t = x;
    let mut k = depth;
    while k >= 2 {
        t = x + f64::from(k) / t;
        k -= 1;
    }
    t
}

/// The standard normal density `φ(z) = exp(−z²/2)/√(2π)`.
///
/// `z²/2` is formed exactly (fused multiply-add split), so the relative error is a few ulp for
/// every `z` whose result is normal; the result underflows to `0` for `|z| ≳ 38.6`.
#[inline]
pub fn norm_pdf(z: f64) -> f64 {
    gauss_times(z, FRAC_1_SQRT_2PI)
}

/// `log φ(z) = −z²/2 − ½·log(2π)`.
///
/// Exact split of `z²/2`; returns `−∞` once `z²/2` overflows (`|z| ≳ 1.9e154`).
#[inline]
pub fn log_norm_pdf(z: f64) -> f64 {
    let (hi, lo) = half_square(z);
    if hi.is_infinite() {
        return f64::NEG_INFINITY;
    }
    (-LN_SQRT_2PI - lo) - hi
}

/// The standard normal distribution function `Φ(z) = ½·erfc(−z/√2)`.
///
/// Computed as `Φ(z) = ½·erfcx(|z|/√2)·exp(−z²/2)` for `z < 0` (full relative accuracy in the
/// lower tail down to underflow at `z ≈ −38.5`) and `Φ(z) = 1 − Φ(−z)` for `z ≥ 0`.
#[inline]
pub fn norm_cdf(z: f64) -> f64 {
    if z < 0.0 {
        upper_tail(-z)
    } else {
        1.0 - upper_tail(z)
    }
}

/// The standard normal quantile `Φ⁻¹(p)`: Acklam's rational approximation refined by one Halley
/// step on `Φ` (relative error near machine precision). `p ≤ 0` gives `−∞`, `p ≥ 1` gives `+∞`.
pub fn norm_ppf(p: f64) -> f64 {
    if p.is_nan() {
        return f64::NAN;
    }
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let plow = 0.024_25;
    let x = if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    // One Halley step; the residual is taken on the side of the distribution where it is small.
    let pdf = norm_pdf(x);
    if pdf <= 0.0 {
        return x;
    }
    let e = if x < 0.0 {
        norm_cdf(x) - p
    } else {
        (1.0 - p) - norm_sf(x)
    };
    let u = e / pdf;
    x - u / (1.0 + 0.5 * x * u)
}

/// The standard normal survival function `1 − Φ(z) = Φ(−z)`, accurate in the upper tail.
#[inline]
pub fn norm_sf(z: f64) -> f64 {
    norm_cdf(-z)
}

/// `log Φ(z)`, accurate for every finite `z`.
///
/// ```text
/// log Φ(z) = −z²/2 + log(½·erfcx(−z/√2))   for z < 0   (z²/2 split exactly; −∞ once it overflows)
/// log Φ(z) = log1p(−Φ(−z))                 for z ≥ 0   (≈ −Φ(−z) for large z)
/// ```
///
/// For large positive `z` the result is the tiny negative number `≈ −Φ(−z)`, relatively
/// accurate while that is a normal `f64` (`z ≲ 37.5`), and `0` beyond `z ≈ 38.5`.
#[inline]
pub fn log_norm_cdf(z: f64) -> f64 {
    if z < 0.0 {
        let x = -z;
        let (hi, lo) = half_square(x);
        if hi.is_infinite() {
            return f64::NEG_INFINITY;
        }
        (libm::log(0.5 * erfcx(x * FRAC_1_SQRT_2)) - lo) - hi
    } else {
        libm::log1p(-upper_tail(z))
    }
}

/// `log(1 − Φ(z)) = log Φ(−z)`, the log survival function (see [`log_norm_cdf`]).
#[inline]
pub fn log_norm_sf(z: f64) -> f64 {
    log_norm_cdf(-z)
}

/// Mills' ratio `R(x) = Φ(−x)/φ(x) = √(π/2)·erfcx(x/√2)`.
///
/// `R(x) ≈ 1/x` for large `x`; it overflows to `+∞` for `x ≲ −37.7`.
#[inline]
pub fn mills_ratio(x: f64) -> f64 {
    SQRT_FRAC_PI_2 * erfcx(x * FRAC_1_SQRT_2)
}

/// The scaled complementary error function `erfcx(x) = exp(x²)·erfc(x)`.
///
/// - `x > −0.125`: `puruspe::erfcx` (Maclaurin series, piecewise Chebyshev, asymptotic series;
///   `erfcx(x) ≈ 1/(x√π)` for large `x`, valid up to `f64::MAX`).
/// - `x ≤ −0.125`: `erfcx(x) = 2·exp(x²) − erfcx(−x)`, with `x²` split exactly so the result
///   keeps full relative accuracy; `+∞` once `2·exp(x²)` overflows (`x < −26.628…`).
#[inline]
pub fn erfcx(x: f64) -> f64 {
    if x > -0.125 {
        // (puruspe's own negative branch, taken at x ≤ −0.125, rounds x² and uses std's exp.)
        return puruspe::erfcx(x);
    }
    if x < -26.7 {
        return f64::INFINITY;
    }
    let hi = x * x;
    let lo = x.mul_add(x, -hi);
    // exp(hi + lo) = exp(hi)·(1 + lo + O(lo²)); the subtraction cannot cancel since
    // 2·exp(x²) > 2 while erfcx(−x) < 0.88 here.
    2.0 * (libm::exp(hi) * (1.0 + lo)) - puruspe::erfcx(-x)
}

/// `g(x) = 1 − x·R(x)` (`= h(−x)/φ(x)`), used for `0 ≤ x ≤ 10` and for `h(z) = z + φ(z)·g(z)`.
#[inline(always)]
fn h_ratio_direct(x: f64) -> f64 {
    // Cancellation costs a factor ≈ x²+1 ≤ 101 on the (≈1 ulp) error of R(x).
    1.0 - x * mills_ratio(x)
}

/// The expected-improvement helper `h(z) = φ(z) + z·Φ(z)` (for a Gaussian `N(μ, σ²)` and
/// incumbent `best`, `EI = σ·h((μ − best)/σ)`). Note `h′(z) = Φ(z)` and `h(z) > 0`.
///
/// ```text
/// z ≥ 0:   h(z) = z + φ(z)·g(z)               (from Φ(z) = 1 − φ(z)·R(z))
/// z < 0:   h(z) = φ(z)·g(x),  x = −z,
///           g(x) = 1 − x·R(x)                      for x ≤ 10
///           g(x) = 1/(x·t(x) + 1)                  for x > 10
/// ```
///
/// where `R` is Mills' ratio and `t(x) = x + 2/(x + 3/(x + 4/(x + …)))` (Laplace's continued
/// fraction, so `g(x) ≈ 1/x² − 3/x⁴ + …`). Underflows to `0` for `z ≲ −38`; `h(z) ≈ z` for large
/// positive `z`.
#[inline]
pub fn h(z: f64) -> f64 {
    if z >= 0.0 {
        z + norm_pdf(z) * h_ratio_direct(z)
    } else {
        let x = -z;
        if x >= GAUSS_UNDERFLOW {
            return 0.0;
        }
        let g = if x <= H_CF_SWITCH {
            h_ratio_direct(x)
        } else {
            1.0 / x.mul_add(laplace_cf(x), 1.0)
        };
        gauss_times(x, FRAC_1_SQRT_2PI * g)
    }
}

/// `log h(z) = log(φ(z) + z·Φ(z))`, finite and accurate for every finite `z` (it is `−∞` only
/// once `z²/2` overflows, `z ≲ −1.9e154`). This is log expected improvement for `μ=0, σ=1`.
///
/// ```text
/// z ≥ 0:           log h(z) = log(z + φ(z)·(1 − z·R(z)))
/// −10 ≤ z < 0:     log h(z) = log φ(z) + log(1 − x·R(x)),       x = −z
/// z < −10:         log h(z) = log φ(z) − log(x·t(x) + 1)          (x < 1e150)
///                            = log φ(z) − log x − log t(x)        (x ≥ 1e150)
/// ```
///
/// with `t(x)` Laplace's continued fraction as in [`h`]. As `z → −∞`,
/// `log h(z) = −z²/2 − ½·log(2π) − 2·log|z| + O(z⁻²)`; as `z → +∞`, `log h(z) → log z`.
#[inline]
pub fn log_h(z: f64) -> f64 {
    if z >= 0.0 {
        libm::log(z + norm_pdf(z) * h_ratio_direct(z))
    } else {
        let x = -z;
        let log_g = if x <= H_CF_SWITCH {
            libm::log(h_ratio_direct(x))
        } else if x < 1e150 {
            -libm::log(x.mul_add(laplace_cf(x), 1.0))
        } else {
            -(libm::log(x) + libm::log(laplace_cf(x)))
        };
        log_norm_pdf(z) + log_g
    }
}

/// `d/dz log h(z) = Φ(z)/h(z)` (since `h′ = Φ`), the gradient factor of log expected
/// improvement. Positive, finite for every finite `z`.
///
/// ```text
/// z ≥ 0:           (1 − φ·R(z))/(z + φ·(1 − z·R(z)))   (→ 1/z as z → +∞)
/// −10 ≤ z < 0:     R(x)/(1 − x·R(x)),                   x = −z
/// z < −10:         t(x) = x + 2/(x + 3/(x + …))  (= −z − 2/z + O(z⁻³))
/// ```
#[inline]
pub fn dlog_h(z: f64) -> f64 {
    if z >= 0.0 {
        let p = norm_pdf(z);
        let r = mills_ratio(z);
        (1.0 - p * r) / (z + p * (1.0 - z * r))
    } else {
        let x = -z;
        if x <= H_CF_SWITCH {
            let r = mills_ratio(x);
            r / (1.0 - x * r)
        } else {
            laplace_cf(x)
        }
    }
}
