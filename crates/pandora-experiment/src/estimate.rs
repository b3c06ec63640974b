//! Estimated work of experiment runs: the weights that balance shards, and (once calibrated in
//! seconds) the CPU-hours and the longest run of `pandora experiment plan`.
//!
//! **Definition.** A run of problem `p` (dimension `d`, initial design `n₀`) and policy `q` makes
//! `T` BO steps; step `k` fits the GP to `n = n₀ + k` observations and maximizes the acquisition.
//! Its work, in abstract units, is
//!
//! ```text
//! w(n) = 10⁴ + m_q · s · ((R + 50 Q) (n² + 20 n d + 500 d) + 30 n³),
//! ```
//!
//! where `R` and `Q` are the raw samples and L-BFGS-B restarts of the acquisition maximization
//! (defaults `200 d` and `10 d`: each raw sample costs a posterior mean and variance, `n²` for the
//! triangular solve, `20 n d` for the kernel column with its exponentials and `500 d` for what
//! does not grow with `n`; each restart is about 50 iterations of the same), `30 n³` stands for
//! the hyperparameter fit (tens of likelihood evaluations, each a Cholesky factorization), `m_q` is 0 for `random` (no model), the
//! number of points of the scenario tree for the look-ahead acquisitions (`ms_ei`, `b_ms_ei`:
//! 4 for `[1, 1, 1]`, 53 for `[4, 4, 2]`) and 1 otherwise, `s` is 2 with a `[stopping]` section
//! (the statistics maximize as much again), and 10⁴ is the bookkeeping and evaluation of a step.
//! A run's work is `Σ_{k<T} w(n₀ + k)`.
//!
//! **Steps.** `T` is `max_evaluations` when the run is capped by evaluations only; with a budget
//! `B` it is `⌈B / c̄⌉`, capped by `max_evaluations` (or the 100 000-step safety cap), where `c̄`
//! is the mean cost of the problem's instance for the first seed at 64 fixed pseudo-random points
//! of the unit cube (1 for uniform costs). Cost-aware policies favour cheap points and so make
//! more steps than this: the shard weights use `c̄` (they must follow from the configuration
//! alone, as every array task computes them), but the seconds of `plan` use the mean cost `c_q`
//! of the points the policy chose in the traces or calibration steps its rate was measured on
//! ([`run_work_at`]). Every seed is assumed to cost like the first.
//!
//! **Accuracy.** The model is for *relative* sizes: it orders a 500-step cheap run above a
//! 50-step one and a `d = 32` run above a `d = 8` one, which is what the shard balance needs.
//! Seconds come from calibration ([`Rates`]): the seconds per unit of model work and per
//! evaluation measured on traces (existing ones, or a few steps run for the purpose), one rate
//! per (problem, policy). They are CPU seconds (`cpu_seconds_propose`, `cpu_seconds_eval` and the
//! stopping lines' `cpu_seconds`) where the trace has them, else wall seconds, which a loaded
//! machine inflates; [`Rate::clock`] says which were used. Extrapolating from calibration steps at small `n` to a run's last steps
//! relies on the shape above; treat the result as within a factor of about two, and the sbatch
//! time limit carries a margin for that. The constants were set on `ackley` at `d = 4`, where
//! step times grew 2.5-fold from `n = 10` to `n = 49` (the model says 3.3; a pure `n²` term
//! would say 24). The first model step of every trace is left out of the rates: its
//! hyperparameter fit starts cold and costs several warm-started ones.
//!
//! **Degenerate cases.** A run with no BO step (`T = 0`) still weighs `10⁴` per initial point, so
//! every run has positive weight. Non-finite or non-positive mean costs fall back to 1.

use super::config::{Plan, RunSpec, build_problem, splitmix64};
use super::run::EVALUATION_CAP;
use super::trace::Trace;
use anyhow::Result;
use pandora_core::policy::Phase;
use pandora_core::run::spec::PolicySpec;
use std::collections::BTreeMap;

/// Work units of one step's bookkeeping and evaluation.
const STEP_UNITS: f64 = 1e4;

/// Points at which a problem's mean cost is estimated.
const COST_POINTS: usize = 64;

/// The work estimate of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunWork {
    /// Initial-design evaluations.
    pub initial: usize,
    /// Estimated BO steps `T`.
    pub bo_steps: usize,
    /// Model work (units; the `m_q · s · (…)` part summed over the BO steps).
    pub model: f64,
    /// Total work (units), model work plus `STEP_UNITS` per evaluation.
    pub total: f64,
}

/// The mean cost `c̄` of every problem of `plan` (1 for uniform costs; see the module doc).
pub fn mean_costs(plan: &Plan) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(plan.problems.len());
    for p in &plan.problems {
        if p.config.cost == "uniform" {
            out.push(1.0);
            continue;
        }
        let problem = build_problem(&p.config, plan.seeds[0])?;
        let d = problem.dim();
        let mut state = 0x636f_7374_u64;
        let mut total = 0.0;
        let mut x = vec![0.0; d];
        for _ in 0..COST_POINTS {
            for v in x.iter_mut() {
                state = splitmix64(state);
                *v = (state >> 11) as f64 / (1u64 << 53) as f64;
            }
            total += problem.cost(&x);
        }
        let mean = total / COST_POINTS as f64;
        out.push(if mean.is_finite() && mean > 0.0 {
            mean
        } else {
            1.0
        });
    }
    Ok(out)
}

/// The multiplier `m_q · s` of run `r`'s model work.
fn model_factor(plan: &Plan, r: &RunSpec) -> f64 {
    let pol = &plan.policies[r.policy].config;
    let m = match pol.spec {
        PolicySpec::Random {} => 0.0,
        PolicySpec::MsEi { tree, .. } | PolicySpec::BMsEi { tree, .. } => {
            tree.unwrap_or_default().num_points() as f64
        }
        _ => 1.0,
    };
    if plan.stopping.is_some() { 2.0 * m } else { m }
}

/// The model work `(R + 50 Q)(n² + 20 n d + 500 d) + 30 n³` of one step at `n` observations in
/// dimension `d`.
fn step_units(n: f64, d: f64, raw: f64, restarts: f64) -> f64 {
    (raw + 50.0 * restarts) * (n * n + 20.0 * n * d + 500.0 * d) + 30.0 * n * n * n
}

/// The estimated work of run `r` with the steps the rate `rate` of its (problem, policy) pair
/// says it makes: with a budget, `T = ⌈B / c_q⌉` for the mean cost `c_q` of the points the
/// policy chose in the traces or calibration the rate was measured on, instead of the mean cost
/// `c̄` of the problem; [`run_work`] without a measured cost (no budget, no model step measured,
/// or a non-positive cost).
pub fn run_work_at(plan: &Plan, r: &RunSpec, mean_cost: f64, rate: &Rate) -> RunWork {
    match (plan.problems[r.problem].budget, rate.step_cost) {
        (Some(_), Some(c)) if c.is_finite() && c > 0.0 => run_work(plan, r, c),
        _ => run_work(plan, r, mean_cost),
    }
}

/// The estimated work of run `r` (`mean_cost` from [`mean_costs`]).
pub fn run_work(plan: &Plan, r: &RunSpec, mean_cost: f64) -> RunWork {
    let p = &plan.problems[r.problem];
    let cap = p
        .max_evaluations
        .unwrap_or(EVALUATION_CAP)
        .min(EVALUATION_CAP);
    let bo_steps = match p.budget {
        Some(b) => ((b / mean_cost).ceil().max(1.0) as usize).min(cap),
        None => cap,
    };
    let d = p.config.dim as f64;
    let raw = p.raw_samples.map_or(200.0 * d, |v| v as f64);
    let restarts = p.num_restarts.map_or(10.0 * d, |v| v as f64);
    let factor = model_factor(plan, r);
    let model: f64 = (0..bo_steps)
        .map(|k| factor * step_units((p.initial_design + k) as f64, d, raw, restarts))
        .sum();
    RunWork {
        initial: p.initial_design,
        bo_steps,
        model,
        total: model + STEP_UNITS * (p.initial_design + bo_steps) as f64,
    }
}

/// The shard weights of every run of `plan` (in [`Plan::runs`] order): [`RunWork::total`].
pub fn weights(plan: &Plan, runs: &[RunSpec]) -> Result<Vec<f64>> {
    let costs = mean_costs(plan)?;
    Ok(runs
        .iter()
        .map(|r| run_work(plan, r, costs[r.problem]).total)
        .collect())
}

/// Which clock the seconds of a [`Rate`] were read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// CPU time for every timing.
    Cpu,
    /// Wall time for every timing (none had a CPU time).
    Wall,
    /// CPU time where recorded, wall time for the rest.
    Mixed,
}

/// Seconds per unit of model work and per evaluation, measured on traces.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rate {
    /// Seconds per unit of model work (proposal time of model steps, stopping statistics
    /// included, over their `step_units` · factor).
    pub per_unit: f64,
    /// Mean seconds per evaluation of the objective and cost.
    pub per_evaluation: f64,
    /// Model steps measured.
    pub steps: usize,
    /// Timings (seconds values) the rate was computed from.
    pub timings: usize,
    /// Of which wall times (no CPU time recorded).
    pub wall: usize,
    /// The mean cost of the points the policy chose (its model steps), where measured: a
    /// cost-aware policy favours cheap points and so makes more steps than `⌈B / c̄⌉`
    /// ([`run_work_at`]).
    pub step_cost: Option<f64>,
}

/// What [`Rates::from_traces`] adds up per pair.
#[derive(Default)]
struct Sums {
    /// Seconds of the counted model steps and of the stopping statistics.
    seconds: f64,
    /// Their model work.
    units: f64,
    /// Model steps counted.
    steps: usize,
    /// Seconds of every evaluation.
    eval_seconds: f64,
    /// Evaluations.
    evaluations: usize,
    /// Timings added up.
    timings: usize,
    /// Of which wall times.
    wall: usize,
    /// Cost of every model step, and their number.
    step_cost: f64,
    step_costs: usize,
}

impl Sums {
    /// The CPU seconds `cpu` when recorded, else the wall seconds `wall` (counted as such).
    fn time(&mut self, cpu: Option<f64>, wall: f64) -> f64 {
        self.timings += 1;
        cpu.unwrap_or_else(|| {
            self.wall += 1;
            wall
        })
    }
}

/// Calibrated rates per (problem, policy) index pair.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// The rates.
    pub by_pair: BTreeMap<(usize, usize), Rate>,
}

impl Rates {
    /// Measures the rates of the traces `traces` (complete or not) of `plan`'s runs; traces of
    /// other problems or policies are ignored.
    pub fn from_traces(plan: &Plan, traces: &[Trace]) -> Self {
        let mut acc: BTreeMap<(usize, usize), Sums> = BTreeMap::new();
        for t in traces {
            let Some(pi) = plan
                .problems
                .iter()
                .position(|p| p.label == t.header.problem)
            else {
                continue;
            };
            let Some(qi) = plan
                .policies
                .iter()
                .position(|q| q.label == t.header.policy)
            else {
                continue;
            };
            let r = RunSpec {
                problem: pi,
                policy: qi,
                seed: t.header.seed,
            };
            let p = &plan.problems[pi];
            let d = p.config.dim as f64;
            let raw = p.raw_samples.map_or(200.0 * d, |v| v as f64);
            let restarts = p.num_restarts.map_or(10.0 * d, |v| v as f64);
            let factor = model_factor(plan, &r);
            let a = acc.entry((pi, qi)).or_default();
            let model_steps = t.steps.iter().filter(|s| s.phase == Phase::Model).count();
            let mut first = model_steps > 1;
            for s in &t.steps {
                a.eval_seconds += a.time(s.cpu_seconds_eval, s.seconds_eval);
                a.evaluations += 1;
                if s.phase == Phase::Model && s.cost.is_finite() && s.cost > 0.0 {
                    a.step_cost += s.cost;
                    a.step_costs += 1;
                }
                if s.phase == Phase::Model {
                    if std::mem::take(&mut first) {
                        continue;
                    }
                    a.seconds += a.time(s.cpu_seconds_propose, s.seconds_propose);
                    a.units += factor * step_units(s.k as f64, d, raw, restarts);
                    a.steps += 1;
                }
            }
            for st in &t.stopping {
                a.seconds += a.time(st.cpu_seconds, st.seconds);
            }
        }
        let by_pair = acc
            .into_iter()
            .map(|(k, a)| {
                let rate = Rate {
                    per_unit: if a.units > 0.0 {
                        a.seconds / a.units
                    } else {
                        0.0
                    },
                    per_evaluation: if a.evaluations > 0 {
                        a.eval_seconds / a.evaluations as f64
                    } else {
                        0.0
                    },
                    steps: a.steps,
                    timings: a.timings,
                    wall: a.wall,
                    step_cost: (a.step_costs > 0).then(|| a.step_cost / a.step_costs as f64),
                };
                (k, rate)
            })
            .collect();
        Self { by_pair }
    }
}

impl Rate {
    /// The clock its seconds were read on.
    pub fn clock(&self) -> Clock {
        match self.wall {
            0 => Clock::Cpu,
            w if w >= self.timings => Clock::Wall,
            _ => Clock::Mixed,
        }
    }

    /// Estimated seconds of `units` of model work and `evaluations` evaluations.
    pub fn seconds(&self, units: f64, evaluations: usize) -> f64 {
        self.per_unit * units + self.per_evaluation * evaluations as f64
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::parse;
    use super::*;

    const CONFIG: &str = r#"
[experiment]
name = "w"
seeds = 2
raw_samples = 10
num_restarts = 2

[[problem]]
objective = "ackley"
dim = 2
max_evaluations = 3
initial_design = 4

[[problem]]
objective = "levy"
dim = 2
cost = "linear_mean"
budget = 12

[[policy]]
acquisition = "random"

[[policy]]
acquisition = "b_ms_ei"
tree = [4, 4, 2]
"#;

    #[test]
    fn work_follows_the_documented_model() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let runs = plan.runs();
        let costs = mean_costs(&plan).unwrap();
        assert_eq!(costs[0], 1.0);
        // linear_mean: 1 + 20·mean(x), about 11 on average.
        assert!((costs[1] - 11.0).abs() < 2.0, "{}", costs[1]);
        // ackley × random: 4 + 3 evaluations, no model work.
        let w = run_work(&plan, &runs[0], costs[0]);
        assert_eq!((w.initial, w.bo_steps, w.model), (4, 3, 0.0));
        assert_eq!(w.total, 7e4);
        // ackley × B-MS-EI [4, 4, 2] (53 points): n = 4, 5, 6 with R = 10, Q = 2, d = 2.
        let w = run_work(&plan, &runs[2], costs[0]);
        let by_hand: f64 = [4.0f64, 5.0, 6.0]
            .iter()
            .map(|n| 53.0 * (110.0 * (n * n + 40.0 * n + 1000.0) + 30.0 * n * n * n))
            .sum();
        assert_eq!(w.model, by_hand);
        // levy: budget 12 at a mean cost near 11 is 2 steps.
        let w = run_work(&plan, &runs[4], costs[1]);
        assert_eq!(w.bo_steps, (12.0 / costs[1]).ceil() as usize);
        let all = weights(&plan, &runs).unwrap();
        assert!(all.iter().all(|&v| v > 0.0));
        assert!(
            all[2] > all[0],
            "a look-ahead run weighs more than a random one"
        );
    }

    /// A trace of run (`problem`, `policy`) of `plan`: 4 initial steps, then 3 model steps whose
    /// proposals took `wall` seconds (and `cpu` CPU seconds when given), evaluations a tenth
    /// of that.
    fn trace(plan: &Plan, problem: usize, policy: usize, wall: f64, cpu: Option<f64>) -> Trace {
        use super::super::trace::{Header, Step};
        let steps = (0..7)
            .map(|k| Step {
                k,
                phase: if k < 4 {
                    Phase::InitialDesign
                } else {
                    Phase::Model
                },
                x: vec![0.5, 0.5],
                y: 0.0,
                cost: 1.0,
                cumulative_cost: 0.0,
                total_cost: 0.0,
                best: 0.0,
                regret: None,
                acquisition_value: None,
                lambda: None,
                predicted_cost: None,
                params: None,
                seconds_propose: if k < 4 { 0.0 } else { wall },
                seconds_eval: wall / 10.0,
                cpu_seconds_propose: cpu.map(|c| if k < 4 { 0.0 } else { c }),
                cpu_seconds_eval: cpu.map(|c| c / 10.0),
                bmsei: None,
            })
            .collect();
        Trace {
            header: Header {
                version: 1,
                experiment: plan.name.clone(),
                problem: plan.problems[problem].label.clone(),
                policy: plan.policies[policy].label.clone(),
                acquisition: "b_ms_ei".into(),
                seed: 0,
                problem_seed: 0,
                dim: 2,
                optimum: None,
                regret_scale: 1.0,
                budget: None,
                max_evaluations: Some(3),
                cost_setting: "uniform".into(),
                settings: serde_json::json!({}),
            },
            steps,
            stopping: Vec::new(),
            end: None,
            torn: false,
        }
    }

    /// Rates read CPU seconds where traces record them (here a tenth of the wall seconds, as on
    /// a machine loaded tenfold) and wall seconds otherwise, and say which.
    #[test]
    fn rates_follow_cpu_time_where_recorded() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let pair = (0, 1);
        let cpu = Rates::from_traces(&plan, &[trace(&plan, 0, 1, 2.0, Some(0.2))]).by_pair[&pair];
        let wall = Rates::from_traces(&plan, &[trace(&plan, 0, 1, 2.0, None)]).by_pair[&pair];
        assert_eq!(cpu.clock(), Clock::Cpu);
        assert_eq!(wall.clock(), Clock::Wall);
        assert_eq!((cpu.timings, cpu.wall, wall.wall), (9, 0, 9));
        // 2 model steps counted (the first is left out), 7 evaluations.
        assert_eq!(cpu.steps, 2);
        assert!((wall.per_unit / cpu.per_unit - 10.0).abs() < 1e-9);
        assert!((cpu.per_evaluation - 0.02).abs() < 1e-12);
        // The estimate of a run follows the CPU rate.
        let runs = plan.runs();
        let w = run_work(&plan, &runs[2], 1.0);
        let by_cpu = cpu.seconds(w.model, w.initial + w.bo_steps);
        let by_wall = wall.seconds(w.model, w.initial + w.bo_steps);
        assert!((by_wall / by_cpu - 10.0).abs() < 1e-9, "{by_cpu} {by_wall}");
        // One trace of each: both clocks, counted.
        let both = Rates::from_traces(
            &plan,
            &[
                trace(&plan, 0, 1, 2.0, Some(0.2)),
                trace(&plan, 0, 1, 2.0, None),
            ],
        )
        .by_pair[&pair];
        assert_eq!(
            (both.clock(), both.timings, both.wall),
            (Clock::Mixed, 18, 9)
        );
    }

    /// A policy that chose points of mean cost 1.5 on a problem whose mean cost is about 11
    /// makes `⌈B / 1.5⌉` steps in the estimate, not `⌈B / c̄⌉`; without a budget, or without a
    /// measured cost, the estimate is unchanged.
    #[test]
    fn the_steps_follow_the_cost_of_the_points_a_policy_chose() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let runs = plan.runs();
        let costs = mean_costs(&plan).unwrap();
        let mut t = trace(&plan, 1, 1, 2.0, Some(0.2));
        for s in t.steps.iter_mut() {
            s.cost = if s.phase == Phase::Model { 1.5 } else { 11.0 };
        }
        let rate = Rates::from_traces(&plan, &[t]).by_pair[&(1, 1)];
        assert_eq!(rate.step_cost, Some(1.5));
        // runs[6]: levy (budget 12) × B-MS-EI, seed 0.
        let at = run_work_at(&plan, &runs[6], costs[1], &rate);
        assert_eq!(at.bo_steps, 8);
        let plain = run_work(&plan, &runs[6], costs[1]);
        assert_eq!(plain.bo_steps, (12.0 / costs[1]).ceil() as usize);
        assert!(at.model > plain.model);
        // ackley (no budget): the evaluation cap decides.
        let w = run_work_at(&plan, &runs[2], costs[0], &rate);
        assert_eq!(w, run_work(&plan, &runs[2], costs[0]));
        let unmeasured = Rate {
            step_cost: None,
            ..rate
        };
        assert_eq!(run_work_at(&plan, &runs[6], costs[1], &unmeasured), plain);
    }
}
