//! Tests of the bounded L-BFGS-B solver in `pandora_core::optim::lbfgsb`.

#![allow(clippy::needless_range_loop)]

use pandora_core::Error;
use pandora_core::optim::lbfgsb::{
    LbfgsbOptions, LbfgsbWorkspace, Termination, minimize, minimize_with_workspace,
};

fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
    let n = x.len();
    g.fill(0.0);
    let mut f = 0.0;
    for i in 0..n - 1 {
        let a = x[i + 1] - x[i] * x[i];
        let b = 1.0 - x[i];
        f += 100.0 * a * a + b * b;
        g[i] += -400.0 * x[i] * a - 2.0 * b;
        g[i + 1] += 200.0 * a;
    }
    f
}

fn unbounded(n: usize) -> (Vec<f64>, Vec<f64>) {
    (vec![f64::NEG_INFINITY; n], vec![f64::INFINITY; n])
}

/// Projected-gradient KKT check for a box: free coordinates have zero gradient, coordinates at the
/// lower bound have gradient >= 0, at the upper bound <= 0.
fn assert_kkt(x: &[f64], g: &[f64], l: &[f64], u: &[f64], tol: f64) {
    for i in 0..x.len() {
        assert!(
            x[i] >= l[i] && x[i] <= u[i],
            "x[{i}] = {} outside box",
            x[i]
        );
        let at_l = (x[i] - l[i]).abs() <= 1e-12;
        let at_u = (x[i] - u[i]).abs() <= 1e-12;
        if at_l && at_u {
            continue;
        } else if at_l {
            assert!(g[i] >= -tol, "g[{i}] = {} at lower bound", g[i]);
        } else if at_u {
            assert!(g[i] <= tol, "g[{i}] = {} at upper bound", g[i]);
        } else {
            assert!(g[i].abs() <= tol, "g[{i}] = {} at free variable", g[i]);
        }
    }
}

#[test]
fn rosenbrock_2d_unbounded() {
    let (l, u) = unbounded(2);
    let mut x = vec![-1.2, 1.0];
    let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
    assert!(r.f < 1e-8, "f = {} after {:?}", r.f, r);
    assert!(
        (x[0] - 1.0).abs() < 1e-3 && (x[1] - 1.0).abs() < 1e-3,
        "{x:?}"
    );
    // SciPy 1.17 needs 36 iterations / 44 evaluations from this start.
    assert!(r.iterations < 80, "{r:?}");
}

#[test]
fn rosenbrock_10d_unbounded() {
    let (l, u) = unbounded(10);
    let mut x: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
    assert!(r.f < 1e-8, "{r:?}");
    for xi in &x {
        assert!((xi - 1.0).abs() < 1e-3, "{x:?}");
    }
    // SciPy 1.17: 71 iterations / 88 evaluations.
    assert!(r.iterations < 150, "{r:?}");
}

#[test]
fn rosenbrock_tight_tolerances_reach_machine_precision() {
    let (l, u) = unbounded(2);
    let mut x = vec![-1.2, 1.0];
    let opts = LbfgsbOptions {
        factr: 10.0,
        pgtol: 1e-10,
        ..Default::default()
    };
    let r = minimize(rosenbrock, &mut x, &l, &u, &opts).unwrap();
    assert!(r.f < 1e-16, "{r:?}");
}

#[test]
fn rosenbrock_8d_bounded_matches_scipy() {
    let n = 8;
    let l = vec![-2.0; n];
    let u = vec![0.5; n];
    let reference = 5.6150192037; // SciPy L-BFGS-B on this box.
    for start in [0.0, -1.0, 0.5, -2.0] {
        let mut x = vec![start; n];
        let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
        assert!(
            (r.f - reference).abs() < 1e-7,
            "start {start}: f = {} ({r:?})",
            r.f
        );
        assert!((x[0] - 0.5).abs() < 1e-9, "{x:?}");
        let mut g = vec![0.0; n];
        rosenbrock(&x, &mut g);
        assert_kkt(&x, &g, &l, &u, 1e-3);
    }
}

#[test]
fn rosenbrock_2d_optimum_on_bound() {
    // With x0 <= 0.5 the optimum is (0.5, 0.25), f = 0.25, x0 at its upper bound.
    let l = vec![-2.0, -2.0];
    let u = vec![0.5, 2.0];
    let mut x = vec![-1.2, 1.0];
    let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
    assert!((r.f - 0.25).abs() < 1e-9, "{r:?}");
    assert_eq!(x[0], 0.5);
    assert!((x[1] - 0.25).abs() < 1e-5, "{x:?}");
}

/// `f(x) = ½ (x − c)ᵀ A (x − c)` with a dense SPD `A`.
struct Quadratic {
    a: Vec<f64>,
    c: Vec<f64>,
}

impl Quadratic {
    fn new(n: usize) -> Self {
        // A = B Bᵀ + n I with a fixed pseudo-random B.
        let mut state = 0x1234_5678_9abc_def0_u64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let b: Vec<f64> = (0..n * n).map(|_| rnd()).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let mut s = 0.0;
                for k in 0..n {
                    s += b[i * n + k] * b[j * n + k];
                }
                a[i * n + j] = s + if i == j { 0.5 } else { 0.0 };
            }
        }
        let c: Vec<f64> = (0..n)
            .map(|i| match i % 3 {
                0 => -2.0 + 0.1 * i as f64,
                1 => 2.5 - 0.1 * i as f64,
                _ => 0.1 * i as f64 - 0.4,
            })
            .collect();
        Quadratic { a, c }
    }

    fn eval(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let n = x.len();
        let mut f = 0.0;
        for i in 0..n {
            let mut s = 0.0;
            for j in 0..n {
                s += self.a[i * n + j] * (x[j] - self.c[j]);
            }
            g[i] = s;
            f += 0.5 * (x[i] - self.c[i]) * s;
        }
        f
    }
}

/// Exact minimizer of a strictly convex box QP by enumerating active sets (3ⁿ of them).
fn brute_force_box_qp(q: &Quadratic, l: &[f64], u: &[f64]) -> Vec<f64> {
    let n = l.len();
    let total = 3usize.pow(n as u32);
    'outer: for code in 0..total {
        let mut set = vec![0u8; n];
        let mut c = code;
        for s in set.iter_mut() {
            *s = (c % 3) as u8;
            c /= 3;
        }
        let mut x = vec![0.0; n];
        let free: Vec<usize> = (0..n).filter(|&i| set[i] == 0).collect();
        for i in 0..n {
            x[i] = match set[i] {
                1 => l[i],
                2 => u[i],
                _ => 0.0,
            };
        }
        // Solve A_FF x_F = A_F· c − A_FB x_B by Gaussian elimination.
        let m = free.len();
        let mut mat = vec![0.0; m * m];
        let mut rhs = vec![0.0; m];
        for (r, &i) in free.iter().enumerate() {
            let mut t = 0.0;
            for j in 0..n {
                t += q.a[i * n + j] * q.c[j];
                if set[j] != 0 {
                    t -= q.a[i * n + j] * x[j];
                }
            }
            rhs[r] = t;
            for (s, &j) in free.iter().enumerate() {
                mat[r * m + s] = q.a[i * n + j];
            }
        }
        for col in 0..m {
            let p = (col..m)
                .max_by(|&a, &b| mat[a * m + col].abs().total_cmp(&mat[b * m + col].abs()))
                .unwrap();
            for j in 0..m {
                mat.swap(col * m + j, p * m + j);
            }
            rhs.swap(col, p);
            for r in col + 1..m {
                let f = mat[r * m + col] / mat[col * m + col];
                for j in col..m {
                    mat[r * m + j] -= f * mat[col * m + j];
                }
                rhs[r] -= f * rhs[col];
            }
        }
        for r in (0..m).rev() {
            let mut t = rhs[r];
            for j in r + 1..m {
                t -= mat[r * m + j] * rhs[j];
            }
            rhs[r] = t / mat[r * m + r];
        }
        for (r, &i) in free.iter().enumerate() {
            if rhs[r] < l[i] || rhs[r] > u[i] {
                continue 'outer;
            }
            x[i] = rhs[r];
        }
        let mut g = vec![0.0; n];
        q.eval(&x, &mut g);
        for i in 0..n {
            if (set[i] == 1 && g[i] < -1e-12) || (set[i] == 2 && g[i] > 1e-12) {
                continue 'outer;
            }
        }
        return x;
    }
    panic!("no KKT point found");
}

#[test]
fn convex_quadratic_with_active_bounds_matches_analytic_solution() {
    let n = 7;
    let q = Quadratic::new(n);
    let l = vec![-1.0; n];
    let u = vec![1.0; n];
    let exact = brute_force_box_qp(&q, &l, &u);
    let n_lower = (0..n).filter(|&i| exact[i] == l[i]).count();
    let n_upper = (0..n).filter(|&i| exact[i] == u[i]).count();
    assert!(
        n_lower >= 1 && n_upper >= 1,
        "test problem should have both kinds: {exact:?}"
    );
    let opts = LbfgsbOptions {
        pgtol: 1e-10,
        factr: 10.0,
        ..Default::default()
    };
    let mut x = vec![0.0; n];
    let r = minimize(|x, g| q.eval(x, g), &mut x, &l, &u, &opts).unwrap();
    let mut g = vec![0.0; n];
    q.eval(&x, &mut g);
    assert_kkt(&x, &g, &l, &u, 1e-8);
    for i in 0..n {
        assert!(
            (x[i] - exact[i]).abs() < 1e-7,
            "x = {x:?}, exact = {exact:?}, {r:?}"
        );
        if exact[i] == l[i] || exact[i] == u[i] {
            assert_eq!(x[i], exact[i], "active bound not hit exactly");
        }
    }
}

#[test]
fn optimum_in_a_corner() {
    let l = vec![0.0, 0.0, -1.0];
    let u = vec![1.0, 1.0, 2.0];
    // Quadratic pulling towards (3, −3, 5): the answer is the corner (1, 0, 2).
    let mut x = vec![0.3, 0.6, 0.0];
    let r = minimize(
        |x, g| {
            g[0] = 2.0 * (x[0] - 3.0);
            g[1] = 2.0 * (x[1] + 3.0);
            g[2] = 2.0 * (x[2] - 5.0);
            (x[0] - 3.0).powi(2) + (x[1] + 3.0).powi(2) + (x[2] - 5.0).powi(2)
        },
        &mut x,
        &l,
        &u,
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(x, vec![1.0, 0.0, 2.0]);
    assert_eq!(r.status, Termination::ConvergedGradient);
    // A linear function (no curvature at all) also ends in the corner.
    let mut x = vec![0.5, 0.5, 0.5];
    let r = minimize(
        |x, g| {
            g.copy_from_slice(&[1.0, -2.0, 0.5]);
            x[0] - 2.0 * x[1] + 0.5 * x[2]
        },
        &mut x,
        &l,
        &u,
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(x, vec![0.0, 1.0, -1.0], "{r:?}");
}

#[test]
fn one_dimensional() {
    let quad = |x: &[f64], g: &mut [f64]| {
        g[0] = 2.0 * (x[0] - 2.0);
        (x[0] - 2.0).powi(2)
    };
    let mut x = vec![0.0];
    let r = minimize(quad, &mut x, &[-1.0], &[1.0], &LbfgsbOptions::default()).unwrap();
    assert_eq!(x[0], 1.0);
    assert!((r.f - 1.0).abs() < 1e-15);
    let mut x = vec![-7.0];
    minimize(
        quad,
        &mut x,
        &[f64::NEG_INFINITY],
        &[f64::INFINITY],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert!((x[0] - 2.0).abs() < 1e-6, "{x:?}");
    // One-sided bound.
    let mut x = vec![10.0];
    minimize(
        quad,
        &mut x,
        &[3.0],
        &[f64::INFINITY],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(x[0], 3.0);
}

#[test]
fn fixed_variables_stay_fixed() {
    let n = 5;
    let mut l = vec![-2.0; n];
    let mut u = vec![2.0; n];
    l[1] = 0.3;
    u[1] = 0.3;
    l[3] = -1.0;
    u[3] = -1.0;
    let mut x = vec![0.0; n];
    let tight = LbfgsbOptions {
        factr: 10.0,
        pgtol: 1e-9,
        ..Default::default()
    };
    let r = minimize(rosenbrock, &mut x, &l, &u, &tight).unwrap();
    assert_eq!(x[1], 0.3);
    assert_eq!(x[3], -1.0);
    let mut g = vec![0.0; n];
    rosenbrock(&x, &mut g);
    assert_kkt(&x, &g, &l, &u, 1e-6);
    assert!(r.f.is_finite());
    // All variables fixed: converged immediately at the projected start.
    let mut x = vec![5.0, 5.0];
    let r = minimize(
        rosenbrock,
        &mut x,
        &[1.0, 2.0],
        &[1.0, 2.0],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(x, vec![1.0, 2.0]);
    assert_eq!(r.status, Termination::ConvergedGradient);
}

#[test]
fn start_outside_box_is_projected() {
    let l = vec![-2.0; 4];
    let u = vec![0.5; 4];
    let mut x = vec![10.0, -10.0, f64::INFINITY, f64::NEG_INFINITY];
    let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
    assert!(x.iter().all(|&v| (-2.0..=0.5).contains(&v)));
    let mut x2 = vec![0.5, -2.0, 0.5, -2.0];
    let r2 = minimize(rosenbrock, &mut x2, &l, &u, &LbfgsbOptions::default()).unwrap();
    assert_eq!(r.f.to_bits(), r2.f.to_bits());
    assert_eq!(x, x2);
}

/// `(x0 − 10)² − ln(1.5 − x0) + (x1 − 1)²`: NaN for x0 > 1.5, +∞ at 1.5. The pull towards
/// x0 = 10 makes quasi-Newton steps overshoot into the NaN region.
fn barrier(x: &[f64], g: &mut [f64]) -> f64 {
    let t = 1.5 - x[0];
    g[0] = 2.0 * (x[0] - 10.0) + 1.0 / t;
    g[1] = 2.0 * (x[1] - 1.0);
    (x[0] - 10.0).powi(2) - t.ln() + (x[1] - 1.0).powi(2)
}

#[test]
fn nan_region_is_backed_out_of() {
    // Stationarity: 2t² + 17t − 1 = 0 with t = 1.5 − x0.
    let t = (-17.0 + (17.0f64 * 17.0 + 8.0).sqrt()) / 4.0;
    let x0_star = 1.5 - t;
    let expected = (x0_star - 10.0).powi(2) - t.ln();
    for (lo, hi) in [
        (f64::NEG_INFINITY, f64::INFINITY),
        (-3.0, 3.0), // the box contains the NaN region
    ] {
        let mut nan_seen = 0;
        let mut x = vec![0.0, 0.0];
        let r = minimize(
            |x, g| {
                let v = barrier(x, g);
                if !v.is_finite() {
                    nan_seen += 1;
                }
                v
            },
            &mut x,
            &[lo, lo],
            &[hi, hi],
            &LbfgsbOptions::default(),
        )
        .unwrap();
        assert!(r.f.is_finite(), "{r:?}");
        assert!((r.f - expected).abs() < 1e-8, "{r:?} {x:?}");
        assert!(
            (x[0] - x0_star).abs() < 1e-4 && (x[1] - 1.0).abs() < 1e-4,
            "{x:?}"
        );
        assert!(
            nan_seen > 0,
            "the test should hit the NaN region (box {lo}..{hi})"
        );
    }
}

#[test]
fn nan_everywhere_but_start_returns_start() {
    let mut calls = 0;
    let mut x = vec![0.2, 0.2];
    let r = minimize(
        |x, g| {
            calls += 1;
            g.copy_from_slice(&[1.0, 1.0]);
            if calls == 1 { x[0] + x[1] } else { f64::NAN }
        },
        &mut x,
        &[0.0, 0.0],
        &[1.0, 1.0],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(x, vec![0.2, 0.2]);
    assert!((r.f - 0.4).abs() < 1e-15);
    assert_eq!(r.status, Termination::LineSearchFailed);
}

#[test]
fn non_finite_start_is_reported() {
    let mut x = vec![0.0];
    let r = minimize(
        |_, g| {
            g[0] = 0.0;
            f64::NAN
        },
        &mut x,
        &[-1.0],
        &[1.0],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert_eq!(r.status, Termination::NonFinite);
}

#[test]
fn invalid_input_is_an_error() {
    let o = LbfgsbOptions::default();
    let mut x = vec![0.0, 0.0];
    let e = minimize(rosenbrock, &mut x, &[0.0, 1.0], &[1.0, 0.0], &o).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    let e = minimize(rosenbrock, &mut x, &[0.0], &[1.0, 1.0], &o).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { .. }), "{e:?}");
    let e = minimize(rosenbrock, &mut x, &[0.0, 0.0], &[1.0], &o).unwrap_err();
    assert!(matches!(e, Error::DimensionMismatch { .. }), "{e:?}");
    let e = minimize(rosenbrock, &mut x, &[f64::NAN, 0.0], &[1.0, 1.0], &o).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    let mut xn = vec![f64::NAN, 0.0];
    let e = minimize(rosenbrock, &mut xn, &[0.0, 0.0], &[1.0, 1.0], &o).unwrap_err();
    assert!(matches!(e, Error::InvalidInput { .. }), "{e:?}");
    let bad = LbfgsbOptions {
        memory: 0,
        ..Default::default()
    };
    assert!(minimize(rosenbrock, &mut x, &[0.0, 0.0], &[1.0, 1.0], &bad).is_err());
    let mut ws = LbfgsbWorkspace::new(3, 10);
    assert!(
        minimize_with_workspace(rosenbrock, &mut x, &[0.0, 0.0], &[1.0, 1.0], &o, &mut ws).is_err()
    );
}

#[test]
fn workspace_reuse_is_deterministic() {
    let l = vec![-2.0; 8];
    let u = vec![0.5; 8];
    let o = LbfgsbOptions::default();
    let mut ws = LbfgsbWorkspace::new(8, o.memory);
    let mut first = None;
    for _ in 0..3 {
        let mut x = vec![0.0; 8];
        let r = minimize_with_workspace(rosenbrock, &mut x, &l, &u, &o, &mut ws).unwrap();
        let key = (r.f.to_bits(), r.iterations, x.clone());
        match &first {
            None => first = Some(key),
            Some(k) => assert_eq!(k, &key),
        }
    }
}

#[test]
fn budgets_are_respected() {
    let (l, u) = unbounded(10);
    let mut x: Vec<f64> = vec![-1.2; 10];
    let o = LbfgsbOptions {
        max_iter: 5,
        ..Default::default()
    };
    let r = minimize(rosenbrock, &mut x, &l, &u, &o).unwrap();
    assert_eq!(r.status, Termination::MaxIter);
    assert_eq!(r.iterations, 5);
    let mut x: Vec<f64> = vec![-1.2; 10];
    let o = LbfgsbOptions {
        max_evals: 7,
        ..Default::default()
    };
    let mut calls = 0;
    let r = minimize(
        |x, g| {
            calls += 1;
            rosenbrock(x, g)
        },
        &mut x,
        &l,
        &u,
        &o,
    )
    .unwrap();
    assert_eq!(r.status, Termination::MaxEvals);
    assert!(calls <= 7 && r.evaluations == calls);
    let mut g = vec![0.0; 10];
    assert_eq!(rosenbrock(&x, &mut g).to_bits(), r.f.to_bits());
}

#[test]
fn iteration_counts_track_scipy() {
    // (start, lower, upper, SciPy 1.17 iterations, SciPy evaluations, SciPy f).
    let inf = f64::INFINITY;
    let cases = [
        (
            vec![0.0; 8],
            vec![-2.0; 8],
            vec![0.5; 8],
            15,
            18,
            5.615019203752928,
        ),
        (
            vec![-1.0; 8],
            vec![-2.0; 8],
            vec![0.5; 8],
            19,
            21,
            5.615019203743928,
        ),
        (
            vec![-1.2, 1.0],
            vec![-inf; 2],
            vec![inf; 2],
            36,
            44,
            2.81e-12,
        ),
        (
            [-1.2, 1.0].repeat(5),
            vec![-inf; 10],
            vec![inf; 10],
            71,
            88,
            1.04e-11,
        ),
        (
            vec![-1.2, 1.0],
            vec![-2.0, -2.0],
            vec![0.5, 2.0],
            20,
            30,
            0.25,
        ),
    ];
    for (x0, l, u, it, ev, f) in cases {
        let mut x = x0.clone();
        let r = minimize(rosenbrock, &mut x, &l, &u, &LbfgsbOptions::default()).unwrap();
        assert!(
            r.iterations.abs_diff(it) <= 3,
            "{x0:?}: {r:?} vs scipy {it}"
        );
        assert!(
            r.evaluations.abs_diff(ev) <= 5,
            "{x0:?}: {r:?} vs scipy {ev}"
        );
        assert!((r.f - f).abs() <= 1e-10 * f.abs().max(1e-2), "{r:?} vs {f}");
    }
}

#[test]
fn sixty_four_dims_with_many_active_bounds() {
    // Σ wᵢ (xᵢ − cᵢ)² + 0.1 Σ xᵢ xᵢ₊₁ on [0,1]^64, with cᵢ spread over [−1, 2].
    let n = 64;
    let c: Vec<f64> = (0..n)
        .map(|i| -1.0 + 3.0 * ((i * 37) % n) as f64 / n as f64)
        .collect();
    let w: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
    let f = |x: &[f64], g: &mut [f64]| {
        let mut v = 0.0;
        for i in 0..n {
            v += w[i] * (x[i] - c[i]).powi(2);
            g[i] = 2.0 * w[i] * (x[i] - c[i]);
        }
        for i in 0..n - 1 {
            v += 0.1 * x[i] * x[i + 1];
            g[i] += 0.1 * x[i + 1];
            g[i + 1] += 0.1 * x[i];
        }
        v
    };
    let l = vec![0.0; n];
    let u = vec![1.0; n];
    let opts = LbfgsbOptions {
        pgtol: 1e-9,
        factr: 10.0,
        ..Default::default()
    };
    for memory in [1, 3, 10, 20] {
        let mut x = vec![0.5; n];
        let r = minimize(
            f,
            &mut x,
            &l,
            &u,
            &LbfgsbOptions {
                memory,
                ..opts.clone()
            },
        )
        .unwrap();
        let mut g = vec![0.0; n];
        f(&x, &mut g);
        assert_kkt(&x, &g, &l, &u, 1e-6);
        let active = (0..n).filter(|&i| x[i] == 0.0 || x[i] == 1.0).count();
        assert!(active > 20, "only {active} active bounds");
        assert!(r.iterations < 100, "memory {memory}: {r:?}");
    }
}

#[test]
fn small_memory_still_solves_rosenbrock() {
    let (l, u) = unbounded(6);
    for memory in [1, 2, 5] {
        let mut x = vec![-1.2, 1.0, -1.2, 1.0, -1.2, 1.0];
        let o = LbfgsbOptions {
            memory,
            max_iter: 2000,
            max_evals: 5000,
            factr: 10.0,
            ..Default::default()
        };
        let r = minimize(rosenbrock, &mut x, &l, &u, &o).unwrap();
        assert!(r.f < 1e-7, "memory {memory}: {r:?}");
    }
}

#[test]
fn nan_gradient_with_finite_value_is_rejected() {
    // Finite values everywhere but a NaN gradient for x0 > 1: the solver must not step there.
    let mut x = vec![-1.0, 0.0];
    let r = minimize(
        |x, g| {
            g[0] = if x[0] > 1.0 {
                f64::NAN
            } else {
                2.0 * (x[0] - 3.0)
            };
            g[1] = 2.0 * x[1];
            (x[0] - 3.0).powi(2) + x[1] * x[1]
        },
        &mut x,
        &[f64::NEG_INFINITY; 2],
        &[f64::INFINITY; 2],
        &LbfgsbOptions::default(),
    )
    .unwrap();
    assert!(x[0] <= 1.0, "{x:?}");
    assert!(r.f.is_finite() && r.f < 16.0, "{r:?}");
}

/// The 64-D bounded quadratic of the profiling cases: `Σ wᵢ (xᵢ − cᵢ)² + 0.1 Σ xᵢ xᵢ₊₁`.
fn quadratic64(x: &[f64], g: &mut [f64]) -> f64 {
    let n = x.len();
    let mut v = 0.0;
    for i in 0..n {
        let c = -1.0 + 3.0 * ((i * 37) % n) as f64 / n as f64;
        let w = 1.0 + (i % 5) as f64;
        v += w * (x[i] - c) * (x[i] - c);
        g[i] = 2.0 * w * (x[i] - c);
    }
    for i in 0..n - 1 {
        v += 0.1 * x[i] * x[i + 1];
        g[i] += 0.1 * x[i + 1];
        g[i + 1] += 0.1 * x[i];
    }
    v
}

/// An 8-D coupled problem whose minimizer has six of eight variables on a bound:
/// `Σ wᵢ (xᵢ − cᵢ)² + Σ (xᵢ₊₁ − xᵢ²)²` on `[0, 1]⁸`.
fn many_active8(x: &[f64], g: &mut [f64]) -> f64 {
    const C: [f64; 8] = [-1.0, 2.0, 0.3, -0.5, 1.5, 0.6, -2.0, 3.0];
    let n = x.len();
    let mut v = 0.0;
    for i in 0..n {
        let w = 1.0 + 0.5 * i as f64;
        v += w * (x[i] - C[i]) * (x[i] - C[i]);
        g[i] = 2.0 * w * (x[i] - C[i]);
    }
    for i in 0..n - 1 {
        let a = x[i + 1] - x[i] * x[i];
        v += a * a;
        g[i] -= 4.0 * x[i] * a;
        g[i + 1] += 2.0 * a;
    }
    v
}

/// The three solves used to profile the solver (`valgrind --tool=callgrind`): pins their
/// iteration and evaluation counts so that speed work cannot silently change the iterates.
#[test]
fn profiling_cases_are_stable() {
    let opts = LbfgsbOptions::default();
    // (a) bounded Rosenbrock-8 on [−2, 0.5]⁸ from 0.
    let mut x = vec![0.0; 8];
    let r = minimize(rosenbrock, &mut x, &[-2.0; 8], &[0.5; 8], &opts).unwrap();
    assert_eq!((r.iterations, r.evaluations), (15, 18), "{r:?}");
    assert!((r.f - 5.615019203752928).abs() < 1e-12, "{r:?}");
    // (b) 64-D bounded quadratic on [0, 1]⁶⁴ from 0.5.
    let mut x = vec![0.5; 64];
    let r = minimize(quadratic64, &mut x, &[0.0; 64], &[1.0; 64], &opts).unwrap();
    assert_eq!((r.iterations, r.evaluations), (10, 11), "{r:?}");
    assert!((r.f - 41.282626303381015).abs() < 1e-12, "{r:?}");
    // (c) 8-D with most variables on bounds, from 0.5.
    let mut x = vec![0.5; 8];
    let r = minimize(many_active8, &mut x, &[0.0; 8], &[1.0; 8], &opts).unwrap();
    assert_eq!((r.iterations, r.evaluations), (8, 9), "{r:?}");
    assert!((r.f - 41.489173114360476).abs() < 1e-12, "{r:?}");
    let active = x.iter().filter(|&&v| v == 0.0 || v == 1.0).count();
    assert_eq!(active, 4, "{x:?}");
}

/// Prints a bitwise fingerprint of many solves (compare before/after a refactor with `diff`).
#[test]
#[ignore]
fn fingerprint() {
    let mut out = String::new();
    let mut add = |name: &str, r: &pandora_core::optim::lbfgsb::LbfgsbResult, x: &[f64]| {
        let xs: Vec<String> = x.iter().map(|v| format!("{:016x}", v.to_bits())).collect();
        out += &format!(
            "{name} it={} ev={} st={:?} f={:e} fb={:016x} x={}\n",
            r.iterations,
            r.evaluations,
            r.status,
            r.f,
            r.f.to_bits(),
            xs.join(",")
        );
    };
    for memory in [1, 2, 3, 5, 10, 20] {
        let opts = LbfgsbOptions {
            memory,
            ..Default::default()
        };
        for start in [0.0, -1.0, 0.5, -2.0, -0.3] {
            let mut x = vec![start; 8];
            let r = minimize(rosenbrock, &mut x, &[-2.0; 8], &[0.5; 8], &opts).unwrap();
            add(&format!("ros8 m{memory} s{start}"), &r, &x);
        }
        for n in [2, 5, 10] {
            let mut x = [-1.2, 1.0].repeat(n);
            let (l, u) = unbounded(2 * n);
            let r = minimize(rosenbrock, &mut x, &l, &u, &opts).unwrap();
            add(&format!("rosu{n} m{memory}"), &r, &x);
            let mut x = [-1.2, 1.0].repeat(n);
            let l: Vec<f64> = (0..2 * n)
                .map(|i| if i % 3 == 0 { -0.5 } else { f64::NEG_INFINITY })
                .collect();
            let u: Vec<f64> = (0..2 * n)
                .map(|i| if i % 2 == 0 { 0.7 } else { f64::INFINITY })
                .collect();
            let r = minimize(rosenbrock, &mut x, &l, &u, &opts).unwrap();
            add(&format!("rosh{n} m{memory}"), &r, &x);
        }
        for start in [0.5, 0.0, 1.0] {
            let mut x = vec![start; 64];
            let r = minimize(quadratic64, &mut x, &[0.0; 64], &[1.0; 64], &opts).unwrap();
            add(&format!("q64 m{memory} s{start}"), &r, &x);
            let mut x = vec![start; 8];
            let r = minimize(many_active8, &mut x, &[0.0; 8], &[1.0; 8], &opts).unwrap();
            add(&format!("ma8 m{memory} s{start}"), &r, &x);
        }
    }
    println!("{out}");
}

/// One profiling case chosen by `LBFGSB_CASE` (`a`: Rosenbrock-8 on `[−2, 0.5]⁸`, `b`: 64-D
/// quadratic, `c`: 8-D with many active bounds), for
/// `valgrind --tool=callgrind --toggle-collect='*minimize_with_workspace*' <test binary>
/// profile_case --ignored`.
#[test]
#[ignore]
fn profile_case() {
    let case = std::env::var("LBFGSB_CASE").unwrap_or_else(|_| "a".into());
    let opts = LbfgsbOptions::default();
    let r = match case.as_str() {
        "a" => {
            let mut ws = LbfgsbWorkspace::new(8, opts.memory);
            let mut x = vec![0.0; 8];
            minimize_with_workspace(rosenbrock, &mut x, &[-2.0; 8], &[0.5; 8], &opts, &mut ws)
        }
        "b" => {
            let mut ws = LbfgsbWorkspace::new(64, opts.memory);
            let mut x = vec![0.5; 64];
            minimize_with_workspace(quadratic64, &mut x, &[0.0; 64], &[1.0; 64], &opts, &mut ws)
        }
        _ => {
            let mut ws = LbfgsbWorkspace::new(8, opts.memory);
            let mut x = vec![0.5; 8];
            minimize_with_workspace(many_active8, &mut x, &[0.0; 8], &[1.0; 8], &opts, &mut ws)
        }
    };
    std::hint::black_box(r.unwrap());
}
