//! Closed-form synthetic objectives on `[0,1]^d`, maximized, with known optima.
//!
//! Every function maps `u ∈ [0,1]^d` to its native box `x = lo + (hi − lo)·u` and is written so
//! that larger is better. Ackley, Levy and Rosenbrock are the PBGI paper's scalings
//! (BoTorch's definitions negated, Levy divided by 100 and Rosenbrock by 1e5, so that every
//! optimum is 0); Dropwave, Alpine1 and Shekel5 follow the budgeted multi-step EI paper (Astudillo
//! et al. 2021, appendix D, and the reference-code notes A8.1); Hartmann-3/6 and Branin are the
//! usual minimization benchmarks negated. The optima of Shekel5 and Hartmann-3/6 are stored to
//! about 1e-12 (found by BFGS from the published points, which they agree with to the published
//! digits).

use std::f64::consts::{E, PI};

/// A closed-form objective on `[0,1]^d` (maximization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// PBGI-paper Ackley, `f(u) = −Ackley(2u − 1)` with a = 20, b = 0.2, c = 2π; optimum 0 at
    /// `u = ½`. Also the budgeted-MSEI Ackley (same map `2u − 1`).
    Ackley,
    /// PBGI-paper Levy, `f(u) = −Levy(20u − 10)/100`; optimum 0 at `u = 0.55`.
    Levy,
    /// PBGI-paper Rosenbrock, `f(u) = −Rosenbrock(15u − 5)/1e5` (`d ≥ 2`); optimum 0 at `u = 0.4`.
    Rosenbrock,
    /// Dropwave (`d = 2`): `x = 10.24u − 5.12`, `f = (1 + cos(12‖x‖)) / (2 + ½‖x‖²)`, max 1 at `x = 0`.
    Dropwave,
    /// Alpine1 (any `d`, the paper uses 3): `x = 20u − 10`, `f = −Σ|x_i sin x_i + 0.1 x_i|`, max 0
    /// at `x = 0` (and at every `x` whose coordinates are 0 or roots of `sin x = −0.1`).
    Alpine1,
    /// Shekel5 (`d = 4`): `x = 10u`, `f = Σ_j 1/(‖x − C_j‖² + β_j)`, max ≈ 10.1532 near `(4,4,4,4)`.
    Shekel5,
    /// Hartmann-3 (`d = 3`, native box `[0,1]^3`): `f = Σ_i α_i exp(−Σ_j A_ij (x_j − P_ij)²)`, max ≈ 3.86278.
    Hartmann3,
    /// Hartmann-6 (`d = 6`, native box `[0,1]^6`), same form, max ≈ 3.32237.
    Hartmann6,
    /// Branin negated (`d = 2`): `x₁ = 15u₁ − 5`, `x₂ = 15u₂`, `f = −Branin(x)`, max `−5/(4π)`
    /// ≈ −0.397887 at three points.
    Branin,
}

const SHEKEL_C: [[f64; 4]; 5] = [
    [4.0, 4.0, 4.0, 4.0],
    [1.0, 1.0, 1.0, 1.0],
    [8.0, 8.0, 8.0, 8.0],
    [6.0, 6.0, 6.0, 6.0],
    [3.0, 7.0, 3.0, 7.0],
];
const SHEKEL_BETA: [f64; 5] = [0.1, 0.2, 0.2, 0.4, 0.4];
/// Shekel5 maximizer in native units (BFGS from the published `(4.00004, 4.00013, 4.00004, 4.00013)`).
const SHEKEL_ARGMAX: [f64; 4] = [
    4.000037152819676,
    4.00013327659156,
    4.000037152819676,
    4.00013327659156,
];
const HARTMANN_ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
const HARTMANN3_A: [[f64; 3]; 4] = [
    [3.0, 10.0, 30.0],
    [0.1, 10.0, 35.0],
    [3.0, 10.0, 30.0],
    [0.1, 10.0, 35.0],
];
const HARTMANN3_P: [[f64; 3]; 4] = [
    [0.3689, 0.1170, 0.2673],
    [0.4699, 0.4387, 0.7470],
    [0.1091, 0.8732, 0.5547],
    [0.0381, 0.5743, 0.8828],
];
/// Hartmann-3 maximizer (BFGS from the published `(0.114614, 0.555649, 0.852547)`).
const HARTMANN3_ARGMAX: [f64; 3] = [0.11458887792268346, 0.5556488863733628, 0.8525469769022044];
const HARTMANN6_A: [[f64; 6]; 4] = [
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
];
const HARTMANN6_P: [[f64; 6]; 4] = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
];
/// Hartmann-6 maximizer (BFGS from the published
/// `(0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)`).
const HARTMANN6_ARGMAX: [f64; 6] = [
    0.20168950923409584,
    0.15001068876417922,
    0.4768739724329622,
    0.275332428312954,
    0.3116516115751367,
    0.6573005293804641,
];

impl Function {
    /// Every function, in the order of [`Function::NAMES`].
    pub const ALL: [Function; 9] = [
        Self::Ackley,
        Self::Levy,
        Self::Rosenbrock,
        Self::Dropwave,
        Self::Alpine1,
        Self::Shekel5,
        Self::Hartmann3,
        Self::Hartmann6,
        Self::Branin,
    ];

    /// Names accepted by [`Function::parse`].
    pub const NAMES: [&'static str; 9] = [
        "ackley",
        "levy",
        "rosenbrock",
        "dropwave",
        "alpine1",
        "shekel5",
        "hartmann3",
        "hartmann6",
        "branin",
    ];

    /// Parses a name of [`Function::NAMES`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Self::ALL[i])
    }

    /// The function's name.
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|f| *f == self).unwrap_or(0)]
    }

    /// The dimension the function is defined for, if fixed (`None`: any `d ≥ 1`, Rosenbrock `d ≥ 2`).
    pub fn fixed_dim(self) -> Option<usize> {
        match self {
            Self::Dropwave | Self::Branin => Some(2),
            Self::Shekel5 => Some(4),
            Self::Hartmann3 => Some(3),
            Self::Hartmann6 => Some(6),
            Self::Ackley | Self::Levy | Self::Rosenbrock | Self::Alpine1 => None,
        }
    }

    /// Whether the function accepts dimension `d`.
    pub fn accepts_dim(self, d: usize) -> bool {
        match (self, self.fixed_dim()) {
            (_, Some(k)) => d == k,
            (Self::Rosenbrock, None) => d >= 2,
            _ => d >= 1,
        }
    }

    /// Native box coordinate `i`: `x_i = lo + (hi − lo)·u_i`.
    pub fn native_box(self, i: usize) -> (f64, f64) {
        match self {
            Self::Ackley => (-1.0, 1.0),
            Self::Levy => (-10.0, 10.0),
            Self::Rosenbrock => (-5.0, 10.0),
            Self::Dropwave => (-5.12, 5.12),
            Self::Alpine1 => (-10.0, 10.0),
            Self::Shekel5 => (0.0, 10.0),
            Self::Hartmann3 | Self::Hartmann6 => (0.0, 1.0),
            Self::Branin => {
                if i == 0 {
                    (-5.0, 10.0)
                } else {
                    (0.0, 15.0)
                }
            }
        }
    }

    /// The cost period scale `P` of the budgeted-MSEI cosine cost family, in native units, for the
    /// four functions of that paper (Dropwave 5.12, Alpine1 10, Ackley 1, Shekel5 4).
    pub fn cosine_period(self) -> Option<f64> {
        match self {
            Self::Dropwave => Some(5.12),
            Self::Alpine1 => Some(10.0),
            Self::Ackley => Some(1.0),
            Self::Shekel5 => Some(4.0),
            _ => None,
        }
    }

    /// The maximum value.
    pub fn optimum(self) -> f64 {
        match self {
            Self::Ackley | Self::Levy | Self::Rosenbrock | Self::Alpine1 => 0.0,
            Self::Dropwave => 1.0,
            Self::Branin => -5.0 / (4.0 * PI),
            Self::Shekel5 | Self::Hartmann3 | Self::Hartmann6 => self.eval(&self.argmax(0)),
        }
    }

    /// A maximizer in `[0,1]^d` (`d` is ignored for fixed-dimension functions). Branin has three;
    /// this is `(π, 2.275)` in native units. Alpine1 has many; this is `x = 0`.
    pub fn argmax(self, d: usize) -> Vec<f64> {
        match self {
            Self::Ackley => vec![0.5; d],
            Self::Levy => vec![0.55; d],
            Self::Rosenbrock => vec![0.4; d],
            Self::Dropwave => vec![0.5; 2],
            Self::Alpine1 => vec![0.5; d],
            Self::Shekel5 => SHEKEL_ARGMAX.iter().map(|v| v / 10.0).collect(),
            Self::Hartmann3 => HARTMANN3_ARGMAX.to_vec(),
            Self::Hartmann6 => HARTMANN6_ARGMAX.to_vec(),
            Self::Branin => vec![(PI + 5.0) / 15.0, 2.275 / 15.0],
        }
    }

    /// Maps `u ∈ [0,1]^d` to native units.
    pub fn to_native(self, u: &[f64]) -> Vec<f64> {
        u.iter()
            .enumerate()
            .map(|(i, v)| {
                let (lo, hi) = self.native_box(i);
                lo + (hi - lo) * v
            })
            .collect()
    }

    /// Evaluates at `u ∈ [0,1]^d`. The caller checks the dimension ([`Function::accepts_dim`]).
    pub fn eval(self, u: &[f64]) -> f64 {
        match self {
            Self::Ackley => ackley(u),
            Self::Levy => levy(u),
            Self::Rosenbrock => rosenbrock(u),
            Self::Dropwave => {
                let r2: f64 = self.to_native(u).iter().map(|v| v * v).sum();
                (1.0 + (12.0 * r2.sqrt()).cos()) / (2.0 + 0.5 * r2)
            }
            Self::Alpine1 => -self
                .to_native(u)
                .iter()
                .map(|v| (v * v.sin() + 0.1 * v).abs())
                .sum::<f64>(),
            Self::Shekel5 => {
                let x = self.to_native(u);
                SHEKEL_C
                    .iter()
                    .zip(SHEKEL_BETA)
                    .map(|(c, b)| {
                        let r2: f64 = x.iter().zip(c).map(|(a, c)| (a - c).powi(2)).sum();
                        1.0 / (r2 + b)
                    })
                    .sum()
            }
            Self::Hartmann3 => hartmann(&self.to_native(u), &HARTMANN3_A, &HARTMANN3_P),
            Self::Hartmann6 => hartmann(&self.to_native(u), &HARTMANN6_A, &HARTMANN6_P),
            Self::Branin => branin(&self.to_native(u)),
        }
    }
}

/// PBGI-paper Ackley at `u ∈ [0,1]^d`: `−Ackley(2u − 1)`.
fn ackley(u: &[f64]) -> f64 {
    let d = u.len() as f64;
    let z: Vec<f64> = u.iter().map(|v| 2.0 * v - 1.0).collect();
    let s1 = z.iter().map(|v| v * v).sum::<f64>() / d;
    let s2 = z.iter().map(|v| (2.0 * PI * v).cos()).sum::<f64>() / d;
    -(-20.0 * (-0.2 * s1.sqrt()).exp() - s2.exp() + 20.0 + E)
}

/// PBGI-paper Levy at `u ∈ [0,1]^d`: `−Levy(20u − 10)/100`.
fn levy(u: &[f64]) -> f64 {
    let w: Vec<f64> = u
        .iter()
        .map(|v| 1.0 + (20.0 * v - 10.0 - 1.0) / 4.0)
        .collect();
    let n = w.len();
    let mut s = (PI * w[0]).sin().powi(2);
    for wi in &w[..n - 1] {
        s += (wi - 1.0).powi(2) * (1.0 + 10.0 * (PI * wi + 1.0).sin().powi(2));
    }
    let wd = w[n - 1];
    s += (wd - 1.0).powi(2) * (1.0 + (2.0 * PI * wd).sin().powi(2));
    -s / 100.0
}

/// PBGI-paper Rosenbrock at `u ∈ [0,1]^d` (`d ≥ 2`): `−Rosenbrock(15u − 5)/1e5`.
fn rosenbrock(u: &[f64]) -> f64 {
    let z: Vec<f64> = u.iter().map(|v| 15.0 * v - 5.0).collect();
    let s: f64 = z
        .windows(2)
        .map(|p| 100.0 * (p[1] - p[0] * p[0]).powi(2) + (p[0] - 1.0).powi(2))
        .sum();
    -s / 1e5
}

/// Branin negated, at native `x = (x₁, x₂)`.
fn branin(x: &[f64]) -> f64 {
    let (x1, x2) = (x[0], x[1]);
    let b = 5.1 / (4.0 * PI * PI);
    let c = 5.0 / PI;
    let t = 1.0 / (8.0 * PI);
    -((x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - t) * x1.cos() + 10.0)
}

fn hartmann<const D: usize>(x: &[f64], a: &[[f64; D]; 4], p: &[[f64; D]; 4]) -> f64 {
    (0..4)
        .map(|i| {
            let e: f64 = (0..D).map(|j| a[i][j] * (x[j] - p[i][j]).powi(2)).sum();
            HARTMANN_ALPHA[i] * (-e).exp()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn dim_of(f: Function) -> usize {
        f.fixed_dim().unwrap_or(3)
    }

    #[test]
    fn pbgi_scalings_have_optimum_zero_at_the_stated_points() {
        for f in [Function::Ackley, Function::Levy, Function::Rosenbrock] {
            for d in [2, 5] {
                let x = f.argmax(d);
                assert!(f.eval(&x).abs() < 1e-12, "{f:?}");
                assert_eq!(f.optimum(), 0.0);
                // Nearby points are worse.
                let mut y = x.clone();
                y[0] += 0.01;
                assert!(f.eval(&y) < f.eval(&x), "{f:?}");
            }
        }
        assert_eq!(crate::linear_mean_cost(&[0.0, 1.0]), 11.0);
    }

    #[test]
    fn optima_match_the_literature() {
        // Published optimum values (Surjanovic & Bingham's library; Dixon & Szegő 1978).
        let lit = [
            (Function::Dropwave, 1.0, 1e-15),
            (Function::Alpine1, 0.0, 1e-15),
            (Function::Ackley, 0.0, 1e-12),
            (Function::Shekel5, 10.1532, 1e-4),
            (Function::Hartmann3, 3.86278, 1e-5),
            (Function::Hartmann6, 3.32237, 1e-5),
            (Function::Branin, -0.397887, 1e-6),
        ];
        for (f, v, tol) in lit {
            let x = f.argmax(dim_of(f));
            assert!((f.eval(&x) - v).abs() < tol, "{} {}", f.name(), f.eval(&x));
            assert!((f.optimum() - v).abs() < tol, "{}", f.name());
            assert!((f.eval(&x) - f.optimum()).abs() < 1e-12);
        }
        // Published argmax locations.
        let close =
            |a: &[f64], b: &[f64], tol: f64| a.iter().zip(b).all(|(u, v)| (u - v).abs() < tol);
        assert!(close(
            &Function::Hartmann3.argmax(3),
            &[0.114614, 0.555649, 0.852547],
            1e-4
        ));
        assert!(close(
            &Function::Hartmann6.argmax(6),
            &[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573],
            1e-5
        ));
        assert!(close(
            &Function::Shekel5.to_native(&Function::Shekel5.argmax(4)),
            &[4.00004, 4.00013, 4.00004, 4.00013],
            1e-5
        ));
        // Branin's three minimizers all give the same value.
        for (x1, x2) in [(-PI, 12.275), (PI, 2.275), (9.42478, 2.475)] {
            let u = [(x1 + 5.0) / 15.0, x2 / 15.0];
            assert!((Function::Branin.eval(&u) + 0.397887).abs() < 1e-6);
        }
    }

    #[test]
    fn stored_argmax_is_a_stationary_point_and_random_points_are_worse() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for f in Function::ALL {
            let d = dim_of(f);
            let x = f.argmax(d);
            let best = f.eval(&x);
            // Central-difference gradient vanishes at smooth maxima (Alpine1 and Ackley are kinked).
            if !matches!(f, Function::Alpine1 | Function::Ackley) {
                for i in 0..d {
                    let h = 1e-6;
                    let mut a = x.clone();
                    let mut b = x.clone();
                    a[i] += h;
                    b[i] -= h;
                    let g = (f.eval(&a) - f.eval(&b)) / (2.0 * h);
                    assert!(g.abs() < 1e-5, "{} grad {i} = {g}", f.name());
                }
            }
            for _ in 0..20_000 {
                let u: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
                let v = f.eval(&u);
                assert!(v.is_finite());
                assert!(v <= best + 1e-12, "{} at {u:?}: {v} > {best}", f.name());
            }
            assert_eq!(Function::parse(f.name()), Some(f));
        }
    }

    #[test]
    fn native_maps_and_dims() {
        assert_eq!(Function::Dropwave.to_native(&[0.0, 1.0]), vec![-5.12, 5.12]);
        assert_eq!(Function::Branin.to_native(&[0.0, 1.0]), vec![-5.0, 15.0]);
        assert!(!Function::Shekel5.accepts_dim(3));
        assert!(!Function::Rosenbrock.accepts_dim(1));
        assert!(Function::Alpine1.accepts_dim(7));
        // Alpine1 at a non-zero root of sin x = −0.1 in every coordinate is also optimal.
        let r = PI + (0.1f64).asin();
        let u = (r + 10.0) / 20.0;
        assert!(Function::Alpine1.eval(&[u, u, 0.5]).abs() < 1e-12);
        // Dropwave formula at a hand-computed point: x = (1, 0) → (1 + cos 12)/2.5.
        let u = [(1.0 + 5.12) / 10.24, 0.5];
        assert!((Function::Dropwave.eval(&u) - (1.0 + 12f64.cos()) / 2.5).abs() < 1e-14);
    }
}
