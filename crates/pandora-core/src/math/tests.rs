//! Unit tests for `math`: identities, derivatives, monotonicity, branch continuity and NaN-freedom.
//! Accuracy against mpmath lives in `tests/normal_reference.rs`.

use super::*;

fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

/// `n` points log-spaced from `10^a` to `10^b`.
fn logspace(a: f64, b: f64, n: usize) -> impl Iterator<Item = f64> {
    (0..n).map(move |i| 10f64.powf(a + (b - a) * i as f64 / (n - 1) as f64))
}

/// `n` points evenly spaced in `[a, b]`.
fn linspace(a: f64, b: f64, n: usize) -> impl Iterator<Item = f64> {
    (0..n).map(move |i| a + (b - a) * i as f64 / (n - 1) as f64)
}

/// Step `k` ulps from `x` (positive `k` towards +∞); `x` finite and nonzero.
fn ulps(x: f64, k: i64) -> f64 {
    let b = x.to_bits() as i64;
    f64::from_bits(if x > 0.0 { b + k } else { b - k } as u64)
}

#[test]
fn quoted_reference_values() {
    assert!(rel(log_h(-5.0), -16.744_301_162_660_99) < 1e-15);
    assert!(rel(log_h(-40.0), -808.298_568_356_62) < 1e-15);
    assert!(rel(h(0.0), 0.398_942_280_401_432_7) < 1e-16);
    assert_eq!(norm_cdf(0.0), 0.5);
    assert_eq!(log1mexp(0.0), f64::NEG_INFINITY);
    assert_eq!(log1mexp(f64::NEG_INFINITY), 0.0);
    assert!(log1mexp(1.0).is_nan(), "outside the domain, documented NaN");
}

#[test]
fn cdf_symmetry() {
    for z in linspace(-8.0, 8.0, 1601) {
        let s = norm_cdf(z) + norm_cdf(-z);
        assert!(
            (s - 1.0).abs() <= 2.0 * f64::EPSILON,
            "Φ({z}) + Φ(−{z}) = {s}"
        );
        assert_eq!(norm_sf(z), norm_cdf(-z));
        assert_eq!(log_norm_sf(z), log_norm_cdf(-z));
    }
    // Beyond |z| ≈ 8.3, Φ(z) rounds to 1 and the identity holds exactly in f64.
    for z in logspace(0.95, 2.0, 50) {
        assert_eq!(norm_cdf(z) + norm_cdf(-z), 1.0);
    }
}

#[test]
fn log_cdf_matches_cdf_where_representable() {
    for z in linspace(-37.0, 37.0, 741) {
        let a = log_norm_cdf(z);
        let b = norm_cdf(z).ln();
        // ln of a value with ~1 ulp error: absolute error ~1e-16, relative to |a| ≥ 1e-300.
        assert!(
            (a - b).abs() <= 4e-16 * a.abs().max(1.0),
            "z={z}: {a} vs {b}"
        );
    }
    // Far right tail: log Φ(z) ≈ −Φ(−z).
    for z in linspace(9.0, 37.0, 57) {
        assert!(rel(log_norm_cdf(z), -norm_cdf(-z)) < 1e-15, "z={z}");
    }
}

#[test]
fn h_derivative_is_cdf() {
    for z in linspace(-8.0, 30.0, 381) {
        let d = 1e-5;
        let fd = (h(z + d) - h(z - d)) / (2.0 * d);
        let exact = norm_cdf(z);
        assert!(rel(fd, exact) < 1e-7, "z={z}: h' ≈ {fd}, Φ = {exact}");
    }
}

#[test]
fn dlog_h_matches_finite_differences() {
    let zs = logspace(-3.0, 4.0, 400)
        .map(|x| -x)
        .chain(linspace(-12.0, 30.0, 421));
    for z in zs {
        // Relative step; log h is smooth on the scale max(1, 1/|z|) … its curvature is ≈ −1.
        let d = 1e-5 * z.abs().max(1.0);
        let fd = (log_h(z + d) - log_h(z - d)) / (2.0 * d);
        let got = dlog_h(z);
        assert!(got > 0.0 && got.is_finite());
        assert!(rel(fd, got) < 1e-6, "z={z}: fd {fd} vs dlog_h {got}");
    }
}

#[test]
fn dlog_h_consistent_with_definition() {
    // Φ/h from the public pieces, where neither cancels badly (z ≥ −3).
    for z in linspace(-3.0, 30.0, 331) {
        assert!(rel(dlog_h(z), norm_cdf(z) / h(z)) < 1e-14, "z={z}");
    }
    // Asymptotics: dlog_h(z) = −z − 2/z + O(z⁻³) as z → −∞, → 1/z as z → +∞.
    for x in logspace(4.5, 300.0, 60) {
        assert!(rel(dlog_h(-x), x + 2.0 / x) < 1e-15, "x={x}");
    }
    for x in logspace(1.0, 300.0, 60) {
        assert!(rel(dlog_h(x), 1.0 / x) < 1e-15, "x={x}");
    }
}

#[test]
fn log_h_is_monotone() {
    let mut zs: Vec<f64> = logspace(-4.0, 8.0, 6000).map(|x| -x).collect();
    zs.extend(linspace(-12.0, 12.0, 24001));
    zs.extend(logspace(-4.0, 300.0, 3000));
    zs.sort_by(f64::total_cmp);
    let mut prev = f64::NEG_INFINITY;
    let mut prev_z = f64::NEG_INFINITY;
    for z in zs {
        let v = log_h(z);
        assert!(
            v >= prev,
            "log_h not monotone: log_h({prev_z}) = {prev} > log_h({z}) = {v}"
        );
        prev = v;
        prev_z = z;
    }
}

#[test]
fn log_h_asymptotics() {
    // log h(z) = −z²/2 − ½ln(2π) − 2 ln|z| + ln(1 − 3/z² + …) as z → −∞.
    for x in logspace(4.0, 150.0, 50) {
        let asym = -0.5 * x * x - 0.918_938_533_204_672_8 - 2.0 * x.ln() - 3.0 / (x * x);
        assert!(rel(log_h(-x), asym) < 1e-15, "x={x}");
    }
    for x in logspace(2.0, 308.0, 50) {
        assert!(rel(log_h(x), x.ln()) < 1e-15, "x={x}");
    }
}

/// Each function on both sides of each of its branch boundaries: the jump must be no larger
/// than the function's own variation over the few ulps in between (bounded by `slope`, an
/// upper bound of |d ln f/dz| there) plus `tol`.
#[test]
fn continuity_at_branch_boundaries() {
    type F = fn(f64) -> f64;
    let cases: &[(&str, F, f64, f64)] = &[
        ("log_h", log_h, -1.0, 0.0),
        ("log_h", log_h, -10.0, 0.0),
        ("log_h", log_h, -15.0, 0.0),
        ("log_h", log_h, -30.0, 0.0),
        ("log_h", log_h, -60.0, 0.0),
        ("log_h", log_h, -1e150, 0.0),
        ("h", h, 0.0, 2.0),
        ("h", h, -10.0, 11.0),
        ("h", h, -15.0, 16.0),
        ("h", h, -30.0, 31.0),
        ("h", h, -f64::sqrt(1400.0), 40.0),
        ("dlog_h", dlog_h, 0.0, 2.0),
        ("log_h", log_h, -1e-300, 1.0),
        ("dlog_h", dlog_h, -10.0, 1.0),
        ("dlog_h", dlog_h, -15.0, 1.0),
        ("dlog_h", dlog_h, -30.0, 1.0),
        ("dlog_h", dlog_h, -60.0, 1.0),
        ("norm_cdf", norm_cdf, 0.0, 1.0),
        ("norm_cdf", norm_cdf, -f64::sqrt(1400.0), 40.0),
        ("norm_pdf", norm_pdf, f64::sqrt(1400.0), 40.0),
        ("log_norm_cdf", log_norm_cdf, 0.0, 1.0),
        ("erfcx", erfcx, -0.125, 3.0),
        ("erfcx", erfcx, 0.125, 3.0),
        ("erfcx", erfcx, 12.0, 1.0),
        ("erfcx", erfcx, 23.2, 1.0),
        ("erfcx", erfcx, 150.0, 1.0),
        ("erfcx", erfcx, 6.9e7, 1.0),
        ("log1mexp", log1mexp, -core::f64::consts::LN_2, 3.0),
        ("log1pexp", log1pexp, -37.0, 1.0),
        ("log1pexp", log1pexp, 18.0, 1.0),
        ("log1pexp", log1pexp, 33.3, 1.0),
    ];
    for &(name, f, b, slope) in cases {
        let (lo, hi) = if b == 0.0 {
            (-1e-300, 1e-300)
        } else {
            (ulps(b, -4), ulps(b, 4))
        };
        let (a, c) = (f(lo), f(hi));
        let tol = 1e-14 + slope * (hi - lo).abs();
        assert!(
            rel(a, c) <= tol,
            "{name} jumps at {b}: f({lo:e}) = {a:e}, f({hi:e}) = {c:e}"
        );
    }
}

#[test]
fn no_nan_for_finite_input() {
    let mut xs = vec![
        0.0,
        f64::from_bits(1), // smallest subnormal
        1e-310,
        f64::MIN_POSITIVE,
        1e-300,
        1e-150,
        1e-20,
        1e-8,
        0.125,
        0.5,
        core::f64::consts::LN_2,
        1.0,
        5.0,
        10.0,
        26.7,
        37.0,
        38.5,
        40.0,
        1e3,
        6.7e7,
        1e8,
        1e150,
        1.34e154,
        1.9e154,
        1e200,
        1e300,
        f64::MAX,
    ];
    xs.extend(logspace(-320.0, 308.0, 2000));
    let xs: Vec<f64> = xs.iter().flat_map(|&x| [x, -x]).collect();
    type F = fn(f64) -> f64;
    let fs: &[(&str, F)] = &[
        ("norm_pdf", norm_pdf),
        ("log_norm_pdf", log_norm_pdf),
        ("norm_cdf", norm_cdf),
        ("norm_sf", norm_sf),
        ("log_norm_cdf", log_norm_cdf),
        ("log_norm_sf", log_norm_sf),
        ("mills_ratio", mills_ratio),
        ("erfcx", erfcx),
        ("h", h),
        ("log_h", log_h),
        ("dlog_h", dlog_h),
        ("log1pexp", log1pexp),
    ];
    for &x in &xs {
        for &(name, f) in fs {
            assert!(!f(x).is_nan(), "{name}({x:e}) is NaN");
        }
        if x <= 0.0 {
            assert!(!log1mexp(x).is_nan(), "log1mexp({x:e}) is NaN");
        }
        // Range sanity.
        let p = norm_cdf(x);
        assert!((0.0..=1.0).contains(&p));
        assert!(log_norm_cdf(x) <= 0.0);
        assert!(h(x) >= 0.0);
        assert!(dlog_h(x) > 0.0, "dlog_h({x:e}) = {}", dlog_h(x));
        assert!(erfcx(x) >= 0.0);
    }
    // log_h is finite until z²/2 overflows.
    for x in logspace(-300.0, 154.0, 500) {
        assert!(log_h(-x).is_finite() && log_h(x).is_finite(), "x={x:e}");
        assert!(log_norm_cdf(-x).is_finite(), "x={x:e}");
    }
}

#[test]
fn norm_ppf_inverts_norm_cdf_and_matches_reference_quantiles() {
    // High-precision quantiles (Wichura's AS 241 test values / mpmath).
    for (p, z) in [
        (0.975, 1.959_963_984_540_054),
        (0.5, 0.0),
        (0.25, -0.674_489_750_196_081_7),
        (1e-10, -6.361_340_902_404_056),
        (0.999, 3.090_232_306_167_813_5),
    ] {
        let got = norm_ppf(p);
        assert!(
            (got - z).abs() <= 1e-12 * (1.0 + z.abs()),
            "{p}: {got} vs {z}"
        );
    }
    for p in linspace(1e-6, 1.0 - 1e-6, 2001).chain(logspace(-300.0, -1.0, 300)) {
        let z = norm_ppf(p);
        assert!(
            rel(norm_cdf(z), p) < 1e-12,
            "{p}: Φ(Φ⁻¹(p)) = {}",
            norm_cdf(z)
        );
    }
    assert_eq!(norm_ppf(0.0), f64::NEG_INFINITY);
    assert_eq!(norm_ppf(1.0), f64::INFINITY);
    assert!(norm_ppf(f64::NAN).is_nan());
}
