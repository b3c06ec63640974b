//! Compares `pandora_core::math` against mpmath reference values (`data/normal_reference.json`,
//! produced by `data/gen_normal_reference.py` at 50 significant digits).
//!
//! Error metric: `|computed − exact| / max(|exact|, floor)`. With `floor = f64::MIN_POSITIVE`
//! this is the plain relative error wherever the exact value is a normal `f64`; in the subnormal
//! range (where a relative bound is impossible by representation) it becomes an absolute bound
//! of `tol·2.2e-308`. For `log_h` the floor is `1`: near the root of `log h` (z ≈ 0.87) the
//! absolute error of `log h` *is* the relative error of `h`, which no f64 evaluation can beat.

use pandora_core::math;

const DATA: &str = include_str!("data/normal_reference.json");

fn table(name: &str) -> Vec<(f64, f64)> {
    let v: serde_json::Value = serde_json::from_str(DATA).expect("valid reference JSON");
    v[name]
        .as_array()
        .unwrap_or_else(|| panic!("missing table {name}"))
        .iter()
        .map(|pair| {
            // Strings parsed by Rust's correctly rounding parser (exact inputs, nearest outputs).
            let x: f64 = pair[0].as_str().unwrap().parse().unwrap();
            let y: f64 = pair[1].as_str().unwrap().parse().unwrap();
            (x, y)
        })
        .collect()
}

/// Checks `f` on table `name` restricted to `x ∈ [lo, hi]`; returns the max error found.
fn check(name: &str, f: fn(f64) -> f64, lo: f64, hi: f64, floor: f64, tol: f64) -> f64 {
    let mut worst = (0.0f64, f64::NAN, 0.0, 0.0);
    let mut n = 0;
    for (x, exact) in table(name) {
        if !(lo..=hi).contains(&x) {
            continue;
        }
        n += 1;
        let got = f(x);
        assert!(!got.is_nan(), "{name}({x:e}) is NaN");
        let err = if got == exact {
            0.0
        } else {
            (got - exact).abs() / exact.abs().max(floor)
        };
        if err > worst.0 || err.is_nan() {
            worst = (err, x, got, exact);
        }
    }
    eprintln!(
        "{name:>13}: {n:4} points in [{lo:e}, {hi:e}], max error {:.3e} at x = {:e} (got {:e}, exact {:e})",
        worst.0, worst.1, worst.2, worst.3
    );
    assert!(n > 0, "no reference points for {name}");
    assert!(
        worst.0 <= tol,
        "{name}: error {:e} > {tol:e} at x = {:e} (got {:e}, exact {:e})",
        worst.0,
        worst.1,
        worst.2,
        worst.3
    );
    worst.0
}

const TINY: f64 = f64::MIN_POSITIVE;

#[test]
fn log_norm_cdf_vs_mpmath() {
    check("log_norm_cdf", math::log_norm_cdf, -1e6, 40.0, TINY, 1e-12);
    check("log_norm_cdf", math::log_norm_cdf, -1e6, 40.0, TINY, 1e-13);
}

#[test]
fn norm_cdf_vs_mpmath() {
    check("norm_cdf", math::norm_cdf, -40.0, 40.0, TINY, 1e-13);
}

#[test]
fn norm_sf_vs_mpmath() {
    // Φ(−z) table read backwards.
    check("norm_cdf", |z| math::norm_sf(-z), -40.0, 40.0, TINY, 1e-13);
}

#[test]
fn norm_pdf_vs_mpmath() {
    check("norm_pdf", math::norm_pdf, -40.0, 40.0, TINY, 1e-13);
}

#[test]
fn erfcx_vs_mpmath() {
    check("erfcx", math::erfcx, -26.0, 1e300, TINY, 1e-13);
}

#[test]
fn log_h_vs_mpmath() {
    check("log_h", math::log_h, -1e6, 40.0, 1.0, 1e-13);
    // Pure relative error away from the root of log h.
    check("log_h", math::log_h, -1e6, 0.5, TINY, 1e-13);
    check("log_h", math::log_h, 1.5, 40.0, TINY, 1e-13);
}

#[test]
fn h_vs_mpmath() {
    // For −10 ≤ z < −1, h = φ·(1 − xR) cancels by a factor ≈ z²: bound 5e-14.
    check("h", math::h, -37.0, 40.0, TINY, 5e-14);
    check("h", math::h, -1.0, 40.0, TINY, 1e-15);
}

#[test]
fn dlog_h_vs_mpmath() {
    // For −10 ≤ z < −1, R/(1 − xR) cancels by a factor ≈ z²: ~2e-14 observed, bound 5e-14.
    check("dlog_h", math::dlog_h, -1e6, 30.0, TINY, 5e-14);
    check("dlog_h", math::dlog_h, -1.0, 30.0, TINY, 1e-15);
}

#[test]
fn log1mexp_vs_mpmath() {
    check("log1mexp", math::log1mexp, -745.0, -1e-300, TINY, 1e-13);
}

#[test]
fn log1pexp_vs_mpmath() {
    check("log1pexp", math::log1pexp, -745.0, 700.0, TINY, 1e-13);
}
