//! Objectives and settings of the BOCVS experiments (Tay et al., NeurIPS 2023): the plant-growth
//! SVGP surrogate (5-D), the airfoil self-noise GP surrogate (5-D) and GP samples drawn with random
//! Fourier features, with the paper's control sets, cost lists and truncated-normal
//! distributions. Hartmann-3 comes with the synthetic problems and is not wired here yet.
//!
//! The data files are embedded (`crates/pandora-problems/data/`, copied from the project's shared
//! data; origins and licences in `docs/cvs.md`).

use pandora_core::Error;
use pandora_core::cvs::{
    ControlSet, CvsFunction, CvsProblem, Distribution, bocvs_truncated_normal_scale,
};
use pandora_core::gp::{ExactGp, GpParams, Kernel, KernelKind, PriorPath};
use serde::Deserialize;

type Result<T> = std::result::Result<T, Error>;

/// The plant-growth model file (whitened SVGP, 464 inducing points, check points).
pub const PLANT_JSON: &str = include_str!("../data/plant_growth_svgp.json");
/// Hyperparameters and control sets of the airfoil GP surrogate.
pub const AIRFOIL_JSON: &str = include_str!("../data/airfoil_self_noise_gp.json");
/// The normalized airfoil self-noise data (1503 rows, 5 inputs, standardized output).
pub const AIRFOIL_CSV: &str = include_str!("../data/airfoil_self_noise_normalized.csv");

/// The cost lists of the paper (one cost per control set, in the order of the set lists below).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostLevel {
    /// `[0.01, 0.01, 0.01, 0.1, 0.1, 0.1, 1]`.
    Cheap,
    /// `[0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 1]`.
    Moderate,
    /// `[0.6, 0.6, 0.6, 0.8, 0.8, 0.8, 1]`.
    Expensive,
}

impl CostLevel {
    /// The seven costs.
    pub fn costs(self) -> [f64; 7] {
        match self {
            Self::Cheap => [0.01, 0.01, 0.01, 0.1, 0.1, 0.1, 1.0],
            Self::Moderate => [0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 1.0],
            Self::Expensive => [0.6, 0.6, 0.6, 0.8, 0.8, 0.8, 1.0],
        }
    }
}

/// The control sets of the 3-D problems (GP sample, Hartmann): every non-empty subset of
/// `{0, 1, 2}`, singletons, then pairs, then the full set.
pub fn control_sets_3d() -> Vec<Vec<usize>> {
    vec![
        vec![0],
        vec![1],
        vec![2],
        vec![0, 1],
        vec![0, 2],
        vec![1, 2],
        vec![0, 1, 2],
    ]
}

/// The control sets of the plant-growth problem (the last one is the full query).
pub fn plant_control_sets() -> Vec<Vec<usize>> {
    vec![
        vec![0, 1],
        vec![2, 3],
        vec![3, 4],
        vec![0, 1, 2],
        vec![1, 2, 3],
        vec![2, 3, 4],
        vec![0, 1, 2, 3, 4],
    ]
}

/// The control sets of the airfoil problem (seven pairs, no full query), read from the data file.
pub fn airfoil_control_sets() -> Result<Vec<Vec<usize>>> {
    Ok(parse_airfoil()?.control_sets_zero_based)
}

/// A BOCVS problem on `[0,1]^d` with the given control sets and costs, every variable a normal with
/// location 0.5 truncated to `[0, 1]` whose truncated variance is `variance` (0.02, 0.04 or 0.08
/// in the paper; scale by the paper code's rule, [`bocvs_truncated_normal_scale`]), and a bank of `bank_size` draws seeded by `bank_seed`.
pub fn bocvs_problem(
    d: usize,
    sets: Vec<Vec<usize>>,
    costs: &[f64],
    variance: f64,
    bank_size: usize,
    bank_seed: u64,
) -> Result<CvsProblem> {
    if sets.len() != costs.len() {
        return Err(Error::dim("costs", sets.len(), costs.len()));
    }
    let scale = bocvs_truncated_normal_scale(0.5, 0.0, 1.0, variance)?;
    let dist = Distribution::truncated_normal(0.5, scale, 0.0, 1.0)?;
    let sets = sets
        .into_iter()
        .zip(costs)
        .map(|(v, &c)| ControlSet::new(v, c))
        .collect();
    CvsProblem::new(d, sets, vec![Some(dist); d], bank_size, bank_seed)
}

fn bad(what: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid(what, e.to_string())
}

#[derive(Deserialize)]
struct PlantInput {
    lower: Vec<f64>,
    upper: Vec<f64>,
}

#[derive(Deserialize)]
struct PlantKernel {
    variance: f64,
    lengthscales: Vec<f64>,
}

#[derive(Deserialize)]
struct PlantCheck {
    u: Vec<f64>,
    f: f64,
}

#[derive(Deserialize)]
struct PlantFile {
    input: PlantInput,
    kernel: PlantKernel,
    alpha_derived: Vec<f64>,
    #[serde(rename = "inducing_points_Z")]
    inducing_points_z: Vec<Vec<f64>>,
    check_points: Vec<PlantCheck>,
}

/// The plant-growth objective: the standardized predictive mean of the whitened SVGP fitted to
/// the Temasek Life Sciences plant data,
/// `f(u) = Σ_i α_i · v · exp(−½ Σ_k ((x_k − Z_ik)/ℓ_k)²)`, `x = lower + u·(upper − lower)`,
/// with `α = L⁻ᵀ q_mu` as given in the data file. Maximum ≈ 2.19412.
#[derive(Debug, Clone)]
pub struct PlantGrowth {
    z: Vec<f64>,
    alpha: Vec<f64>,
    variance: f64,
    inv_l2: Vec<f64>,
    lower: Vec<f64>,
    width: Vec<f64>,
    checks: Vec<(Vec<f64>, f64)>,
}

impl PlantGrowth {
    /// Parses the model file (the format of `data/plant_growth_svgp.json`).
    pub fn from_json(text: &str) -> Result<Self> {
        let f: PlantFile = serde_json::from_str(text).map_err(|e| bad("plant json", e))?;
        let d = 5;
        if f.input.lower.len() != d || f.input.upper.len() != d || f.kernel.lengthscales.len() != d
        {
            return Err(Error::invalid("plant json", "expected 5 inputs"));
        }
        if f.inducing_points_z.len() != f.alpha_derived.len()
            || f.inducing_points_z.iter().any(|r| r.len() != d)
        {
            return Err(Error::invalid(
                "plant json",
                "inducing points and alpha disagree",
            ));
        }
        Ok(Self {
            z: f.inducing_points_z.concat(),
            alpha: f.alpha_derived,
            variance: f.kernel.variance,
            inv_l2: f
                .kernel
                .lengthscales
                .iter()
                .map(|l| 1.0 / (l * l))
                .collect(),
            width: f
                .input
                .lower
                .iter()
                .zip(&f.input.upper)
                .map(|(a, b)| b - a)
                .collect(),
            lower: f.input.lower,
            checks: f.check_points.into_iter().map(|c| (c.u, c.f)).collect(),
        })
    }

    /// The embedded model.
    pub fn builtin() -> Result<Self> {
        Self::from_json(PLANT_JSON)
    }

    /// The file's check points `(u, f(u))`.
    pub fn check_points(&self) -> &[(Vec<f64>, f64)] {
        &self.checks
    }

    fn eval(&self, u: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let d = 5;
        if u.len() != d {
            return f64::NAN;
        }
        let x: Vec<f64> = (0..d)
            .map(|k| self.lower[k] + u[k] * self.width[k])
            .collect();
        let mut f = 0.0;
        let mut g = [0.0; 5];
        for (zi, a) in self.z.chunks_exact(d).zip(&self.alpha) {
            let mut r2 = 0.0;
            for k in 0..d {
                let t = x[k] - zi[k];
                r2 += t * t * self.inv_l2[k];
            }
            let k = a * self.variance * (-0.5 * r2).exp();
            f += k;
            for j in 0..d {
                g[j] -= k * (x[j] - zi[j]) * self.inv_l2[j];
            }
        }
        if let Some(out) = grad {
            for j in 0..d {
                out[j] = g[j] * self.width[j];
            }
        }
        f
    }
}

impl CvsFunction for PlantGrowth {
    fn dim(&self) -> usize {
        5
    }
    fn value(&self, x: &[f64]) -> f64 {
        self.eval(x, None)
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.eval(x, Some(grad))
    }
}

#[derive(Deserialize)]
struct AirfoilFile {
    kernel: String,
    lengthscales: Vec<f64>,
    outputscale: f64,
    noise_variance: f64,
    mean_constant: f64,
    control_sets_zero_based: Vec<Vec<usize>>,
}

fn parse_airfoil() -> Result<AirfoilFile> {
    serde_json::from_str(AIRFOIL_JSON).map_err(|e| bad("airfoil json", e))
}

/// The airfoil self-noise objective: the posterior mean of a Matérn-5/2 ARD GP (fixed
/// hyperparameters from the data file) conditioned on all 1503 normalized rows,
/// `f(x) = c + Σ_i α_i k(x, x_i)`, maximized.
#[derive(Debug, Clone)]
pub struct AirfoilGp {
    kernel: Kernel,
    mean: f64,
    x: Vec<f64>,
    alpha: Vec<f64>,
}

impl AirfoilGp {
    /// Builds the surrogate from the hyperparameter file and the CSV (header, five inputs, output).
    pub fn from_data(json: &str, csv: &str) -> Result<Self> {
        let f: AirfoilFile = serde_json::from_str(json).map_err(|e| bad("airfoil json", e))?;
        let kind = match f.kernel.as_str() {
            "matern52_ard" => KernelKind::Matern52,
            other => {
                return Err(Error::invalid(
                    "airfoil kernel",
                    format!("unsupported '{other}'"),
                ));
            }
        };
        let kernel = Kernel::new(kind, f.lengthscales, f.outputscale)?;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for (ln, line) in csv.lines().enumerate().skip(1) {
            if line.trim().is_empty() {
                continue;
            }
            let v: std::result::Result<Vec<f64>, _> =
                line.split(',').map(|t| t.trim().parse::<f64>()).collect();
            let v = v.map_err(|e| bad(&format!("airfoil csv line {}", ln + 1), e))?;
            if v.len() != 6 {
                return Err(Error::invalid(
                    format!("airfoil csv line {}", ln + 1),
                    "expected 6 columns",
                ));
            }
            x.extend_from_slice(&v[..5]);
            y.push(v[5]);
        }
        let gp = ExactGp::new(
            x,
            y,
            GpParams {
                kernel,
                mean: f.mean_constant,
                noise: f.noise_variance,
            },
        )?;
        Ok(Self {
            kernel: gp.params().kernel.clone(),
            mean: f.mean_constant,
            x: gp.train_x().to_vec(),
            alpha: gp.alpha().to_vec(),
        })
    }

    /// The embedded surrogate (factorizes a 1503 × 1503 kernel matrix once).
    pub fn builtin() -> Result<Self> {
        Self::from_data(AIRFOIL_JSON, AIRFOIL_CSV)
    }

    /// Number of data rows.
    pub fn n(&self) -> usize {
        self.alpha.len()
    }
}

impl CvsFunction for AirfoilGp {
    fn dim(&self) -> usize {
        5
    }
    fn value(&self, x: &[f64]) -> f64 {
        if x.len() != 5 {
            return f64::NAN;
        }
        self.mean
            + self
                .x
                .chunks_exact(5)
                .zip(&self.alpha)
                .map(|(xi, a)| a * self.kernel.eval(x, xi))
                .sum::<f64>()
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        if x.len() != 5 || grad.len() != 5 {
            grad.fill(f64::NAN);
            return f64::NAN;
        }
        grad.fill(0.0);
        let mut g = [0.0; 5];
        let mut f = self.mean;
        for (xi, a) in self.x.chunks_exact(5).zip(&self.alpha) {
            f += a * self.kernel.eval_grad_x(x, xi, &mut g);
            for (o, v) in grad.iter_mut().zip(&g) {
                *o += a * v;
            }
        }
        f
    }
}

/// A sample from a zero-mean GP prior drawn with random Fourier features (the GP-sample objective;
/// the reference code instead interpolates a joint sample at 1000 anchor points).
#[derive(Debug, Clone)]
pub struct GpSample {
    path: PriorPath,
}

impl GpSample {
    /// Draws a sample for `kernel` with `num_features` features from a generator seeded by `seed`.
    pub fn new(kernel: &Kernel, num_features: usize, seed: u64) -> Result<Self> {
        use rand::SeedableRng;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        Ok(Self {
            path: PriorPath::sample(kernel, num_features, &mut rng)?,
        })
    }

    /// The paper's 3-D setting: SE kernel with lengthscale 0.1 and outputscale 1.
    pub fn paper_3d(num_features: usize, seed: u64) -> Result<Self> {
        Self::new(
            &Kernel::new(KernelKind::Rbf, vec![0.1; 3], 1.0)?,
            num_features,
            seed,
        )
    }
}

impl CvsFunction for GpSample {
    fn dim(&self) -> usize {
        self.path.dim()
    }
    fn value(&self, x: &[f64]) -> f64 {
        self.path.value(x)
    }
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.path.value_grad(x, grad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plant_check_points() {
        let p = PlantGrowth::builtin().unwrap();
        assert_eq!(p.check_points().len(), 20);
        for (u, f) in p.check_points() {
            let v = p.value(u);
            assert!((v - f).abs() < 1e-8, "{u:?}: {v} vs {f}");
        }
    }

    #[test]
    fn plant_gradient_matches_differences() {
        let p = PlantGrowth::builtin().unwrap();
        let u = [0.94, 0.97, 0.66, 0.23, 0.74];
        let mut g = [0.0; 5];
        p.value_grad(&u, &mut g);
        for k in 0..5 {
            let h = 1e-6;
            let mut a = u;
            let mut b = u;
            a[k] += h;
            b[k] -= h;
            let fd = (p.value(&a) - p.value(&b)) / (2.0 * h);
            assert!(
                (fd - g[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                "{k}: {fd} {}",
                g[k]
            );
        }
    }

    #[test]
    fn airfoil_mean_matches_gp_posterior_and_gradient() {
        let a = AirfoilGp::builtin().unwrap();
        assert_eq!(a.n(), 1503);
        assert_eq!(airfoil_control_sets().unwrap().len(), 7);
        let x = [0.3, 0.2, 0.5, 0.7, 0.4];
        let mut g = [0.0; 5];
        let v = a.value_grad(&x, &mut g);
        assert!((v - a.value(&x)).abs() < 1e-12);
        assert!(v.is_finite() && v.abs() < 5.0);
        for k in 0..5 {
            let h = 1e-6;
            let mut p = x;
            let mut m = x;
            p[k] += h;
            m[k] -= h;
            let fd = (a.value(&p) - a.value(&m)) / (2.0 * h);
            assert!(
                (fd - g[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                "{k}: {fd} {}",
                g[k]
            );
        }
    }

    #[test]
    fn problems_build() {
        let p =
            bocvs_problem(3, control_sets_3d(), &CostLevel::Cheap.costs(), 0.02, 64, 1).unwrap();
        assert_eq!(p.cost_groups().len(), 3);
        assert!(p.is_full(6));
        let s = GpSample::paper_3d(256, 3).unwrap();
        assert!(s.value(&[0.1, 0.2, 0.3]).is_finite());
        assert!(bocvs_problem(3, control_sets_3d(), &[1.0], 0.02, 64, 1).is_err());
    }

    /// Measurement, not a check: time per decision on the plant problem at paper size (bank 1024)
    /// and the optimum the default optimizer finds. Run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn plant_paper_size_measurement() {
        use pandora_core::cvs::{RunConfig, SetOptimizer, build_policy, run};
        let f = PlantGrowth::builtin().unwrap();
        let p = bocvs_problem(
            5,
            plant_control_sets(),
            &CostLevel::Cheap.costs(),
            0.02,
            1024,
            0,
        )
        .unwrap();
        let t = std::time::Instant::now();
        let (best, per) = p.optimum(&f, &SetOptimizer::default(), 1).unwrap();
        eprintln!(
            "optimum {:.5} (set {}) in {:.1}s; per set {:?}",
            best.value,
            best.set,
            t.elapsed().as_secs_f64(),
            per.iter()
                .map(|o| (o.value * 1e4).round() / 1e4)
                .collect::<Vec<_>>()
        );
        let mut cfg = RunConfig::new(5, 0.2, 0.3).unwrap();
        cfg.optimum = Some(best.value);
        let names = std::env::var("CVS_POLICIES")
            .unwrap_or_else(|_| "ucb-cvs,etc-ada,ucb-psq,gittins".into());
        for name in names.split(',') {
            let mut pol = build_policy(name, 100.0, 0.01).unwrap();
            let t = std::time::Instant::now();
            let tr = run(&p, &f, pol.as_mut(), &cfg, 0).unwrap();
            eprintln!(
                "{name}: {} decisions, {:.3}s per decision, final regret {:.4}",
                tr.steps.len(),
                t.elapsed().as_secs_f64() / tr.steps.len() as f64,
                tr.final_regret()
            );
        }
    }
}
