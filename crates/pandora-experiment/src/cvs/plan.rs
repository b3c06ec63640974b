//! `pandora cvs plan`: the CVS grid as a [`Grid`] of the experiment planner
//! ([`crate::cluster`]), which does the estimate, the report and the sbatch script.
//!
//! **Groups and work.** A group is a (setting, policy) pair, a setting being an objective × cost
//! level × variance. A run's work is its shard weight (the parent module's `run_units` over
//! `T = ⌈budget / c̄⌉` decisions), and its seconds are `a · work` with one rate `a` per group (no
//! separate per-evaluation rate: an evaluation of these objectives is microseconds).
//!
//! **Rates.** From the complete run records of the grid in `OUT/runs/` when a group has some:
//! `a = Σ seconds / Σ estimated work` of its records (CPU seconds where recorded, else wall
//! seconds), so that a plan made while an array runs
//! (or after one task) accounts for the decisions the policies actually make (cost-aware policies
//! choose cheap sets and so make more than `T`, which the work model does not see). Otherwise
//! by a calibration, one per (objective, policy) ([`Grid::calibration_key`]), of its cell with
//! the most expensive cost level: the first seed, on the configuration's bank and optimizer, with
//! a budget of `steps · c_max` (the most expensive set's cost: the policy can choose any set) and
//! at most `steps` decisions, and the reference optimum replaced by 0 (it only shifts the
//! regret), timed in CPU seconds on a pool of one thread; `a` = seconds / the
//! work of the decisions it made. The cells of an (objective, policy) differ in the cost level,
//! which changes the number of decisions (the work counts them) but not the work of one, and in
//! the variance, which the work model does not see. Measured at the smoke sizes on every cell
//! of BOCVS Figure 2: within an (objective, policy) the variance moved `a` by at most 2.1× (most
//! by 1.2–1.6×), the cost level by up to 3× and, for `ts-psq` and `ucb-psq`, whose calibration
//! at moderate costs then made a single decision (with the earlier budget of `steps · c̄`), by up
//! to 110× (that single decision is cheap). With that earlier budget a policy that prefers the
//! full set could not afford it at cheap costs and was timed on partial sets whose decisions cost
//! about 400× more (TS-PSQ on plant: 21 CPU s against 0.05 s), hence `steps · c_max`. Extrapolating from a handful of decisions at `n₀ + k ≤ 10` observations to a run's last
//! ones leans on the `n²` shape: as for experiments, take it as good to a factor of about two, and
//! as a lower bound for the cost-aware policies at cheap costs.
//!
//! **Set-up.** Every shard computes the reference optimum of each (objective, variance, seed) its
//! runs need, with the optimum search (far more starts than an acquisition gets), before its
//! runs. It is timed once per objective (its first variance and seed still to do) and counted for
//! every key and shard that needs it.
//!
//! **Degenerate cases.** A calibration whose run makes no decision (a budget below every set's
//! cost cannot happen: `steps · c̄ ≥ c̄` pays for the cheapest set) fails with a message and
//! leaves the group out of the totals.

use super::{
    Plan, RunRecord, RunSpec, default_out, load, max_cost, mean_cost, objective, objective_setup,
    optimum_key, problem_of, reference_optimum, run_steps, run_units,
};
use crate::cluster::{Grid, Group, PlanArgs, PlannedRun, plan_grid};
use crate::cpu_clock::{Stopwatch, exact_here, on_one_thread};
use crate::estimate::{Rate, Rates};
use crate::reporter::Reporter;
use anyhow::{Context, Result, bail};
use pandora_core::cvs::{RunConfig, build_policy, run};
use std::collections::BTreeMap;
use std::path::Path;

/// The CVS grid of a resolved plan.
struct CvsGrid<'a> {
    plan: &'a Plan,
    /// (objective, cost level, variance) in the grid's order.
    settings: Vec<(String, String, String)>,
    /// Policy names in the grid's order.
    policies: Vec<String>,
    /// Objectives in the grid's order.
    objectives: Vec<String>,
    /// The reference optima's keys, in the grid's order.
    keys: Vec<(String, String, u64)>,
}

impl<'a> CvsGrid<'a> {
    fn new(plan: &'a Plan) -> Self {
        let mut g = Self {
            plan,
            settings: Vec::new(),
            policies: Vec::new(),
            objectives: Vec::new(),
            keys: Vec::new(),
        };
        for r in &plan.runs {
            let s = setting(r);
            if !g.settings.contains(&s) {
                g.settings.push(s);
            }
            if !g.policies.contains(&r.policy) {
                g.policies.push(r.policy.clone());
            }
            if !g.objectives.contains(&r.objective) {
                g.objectives.push(r.objective.clone());
            }
            let k = optimum_key(r);
            if !g.keys.contains(&k) {
                g.keys.push(k);
            }
        }
        g
    }

    fn group(&self, r: &RunSpec) -> Group {
        let s = setting(r);
        let si = self.settings.iter().position(|x| *x == s);
        let pi = self.policies.iter().position(|p| *p == r.policy);
        (si.unwrap_or(0), pi.unwrap_or(0))
    }

    /// The first run of `group`.
    fn first(&self, group: Group) -> Result<&'a RunSpec> {
        match self.plan.runs.iter().find(|r| self.group(r) == group) {
            Some(r) => Ok(r),
            None => bail!("internal: no run in group {group:?}"),
        }
    }

    /// The run of the grid that record `rec` is (its bank size filled in as `pandora cvs` does).
    fn run_of(&self, rec: &RunRecord) -> Option<&'a RunSpec> {
        self.plan.runs.iter().find(|r| {
            RunSpec {
                bank_size: rec.spec.bank_size.or(r.bank_size),
                ..rec.spec.clone()
            } == **r
        })
    }
}

/// The setting of run `r`.
fn setting(r: &RunSpec) -> (String, String, String) {
    (
        r.objective.clone(),
        r.cost_level.clone(),
        r.variance.to_string(),
    )
}

/// Seconds over work, 0 without work; `timings` seconds values were added up, `wall` of them
/// wall times.
fn rate(seconds: f64, units: f64, decisions: usize, (timings, wall): (usize, usize)) -> Rate {
    Rate {
        per_unit: if units > 0.0 { seconds / units } else { 0.0 },
        per_evaluation: 0.0,
        steps: decisions,
        timings,
        wall,
        step_cost: None,
    }
}

/// The seconds of a run's CPU time `cpu` when measured, else its wall time, and whether it is
/// the wall time.
fn seconds_of(cpu: Option<f64>, wall: f64) -> (f64, usize) {
    cpu.map_or((wall, 1), |c| (c, 0))
}

impl Grid for CvsGrid<'_> {
    fn command(&self) -> &'static str {
        "cvs"
    }

    fn outputs(&self) -> &'static str {
        "run records"
    }

    fn name(&self) -> String {
        self.plan.name.clone()
    }

    fn headline(&self, runs: usize, done: usize) -> String {
        format!(
            "cvs experiment '{}': {runs} run(s) ({} setting(s) × {} policy(ies) × seeds), {done} \
             complete already",
            self.plan.name,
            self.settings.len(),
            self.policies.len()
        )
    }

    fn group_label(&self, g: Group) -> (String, String) {
        let (o, c, v) = &self.settings[g.0];
        (format!("{o} {c} var={v}"), self.policies[g.1].clone())
    }

    fn runs(&self, out: &Path) -> Result<Vec<PlannedRun>> {
        let runs_dir = out.join("runs");
        self.plan
            .runs
            .iter()
            .map(|r| {
                let steps = run_steps(r)?;
                let units = run_units(self.plan, r, steps)?;
                let key = optimum_key(r);
                Ok(PlannedRun {
                    name: r.file_name(),
                    group: self.group(r),
                    weight: units,
                    units,
                    evaluations: self.plan.n_init + steps,
                    done: runs_dir.join(r.file_name()).exists(),
                    setup: self.keys.iter().position(|k| *k == key),
                })
            })
            .collect()
    }

    fn measured(&self, out: &Path) -> Result<Rates> {
        let dir = out.join("runs");
        // Seconds, work, decisions, records, records timed by wall time.
        let mut sums: BTreeMap<Group, (f64, f64, usize, usize, usize)> = BTreeMap::new();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Rates::default());
        };
        for entry in entries {
            let path = entry.with_context(|| format!("reading {dir:?}"))?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let rec: RunRecord = serde_json::from_slice(&std::fs::read(&path)?)
                .with_context(|| format!("parsing {path:?}"))?;
            let Some(r) = self.run_of(&rec) else {
                continue;
            };
            let s = sums.entry(self.group(r)).or_default();
            let (secs, wall) = seconds_of(rec.cpu_seconds, rec.wall_seconds);
            s.0 += secs;
            s.1 += run_units(self.plan, r, run_steps(r)?)?;
            s.2 += rec.steps.len();
            s.3 += 1;
            s.4 += wall;
        }
        Ok(Rates {
            by_pair: sums
                .into_iter()
                .map(|(g, (secs, units, n, t, w))| (g, rate(secs, units, n, (t, w))))
                .collect(),
        })
    }

    fn calibrate(&self, group: Group, steps: usize) -> Result<Rate> {
        let r = self.first(group)?;
        // A budget for `steps` decisions at the most expensive set, so the policy can choose
        // any set (with `steps · c̄` it could not afford the full set at cheap costs and was
        // timed on partial sets it would rarely choose), and a cap of `steps` decisions.
        let budget = steps as f64 * max_cost(r)?;
        let problem = problem_of(self.plan, r)?;
        let f = objective(&r.objective, r.seed)?;
        let (d, _, lengthscale, _) = objective_setup(&r.objective)?;
        let mut cfg = RunConfig::new(d, lengthscale, budget)?;
        cfg.n_init = self.plan.n_init;
        cfg.optimizer = self.plan.optimizer.clone();
        cfg.optimum = Some(0.0);
        cfg.max_decisions = Some(steps);
        let mut policy = build_policy(&r.policy, budget, self.plan.lambda)?;
        let start = Stopwatch::start();
        let trace = run(&problem, f.as_ref(), policy.as_mut(), &cfg, r.seed)?;
        let decisions = trace.steps.len();
        let exact = exact_here(self.plan.n_init + decisions);
        let (seconds, wall) = seconds_of(exact.then(|| start.cpu()).flatten(), start.wall());
        if decisions == 0 {
            bail!("the calibration run (budget {budget}) made no decision");
        }
        Ok(rate(
            seconds,
            run_units(self.plan, r, decisions)?,
            decisions,
            (1, wall),
        ))
    }

    /// Cells with the same objective and policy share a calibration: they differ in the cost
    /// level (which changes the number of decisions, not their work, and the budget of the
    /// calibration run is scaled to make `steps` decisions) and in the variance (which the work
    /// model does not see).
    fn calibration_key(&self, g: Group) -> Group {
        let objective = &self.settings[g.0].0;
        let o = self.objectives.iter().position(|x| x == objective);
        (o.unwrap_or(0), g.1)
    }

    /// The most expensive cost level first: its calibration makes about `steps` decisions,
    /// where at cheap costs the cost-aware policies choose cheap sets and make many more (76
    /// instead of 4 at the smoke size), which made planning BOCVS Figure 2 take minutes per
    /// calibration.
    fn calibration_rank(&self, g: Group) -> f64 {
        self.first(g).and_then(mean_cost).map_or(0.0, |c| -c)
    }

    fn setups(
        &self,
        todo: &[PlannedRun],
        reporter: &dyn Reporter,
    ) -> Result<(Vec<f64>, Option<String>)> {
        let mut seconds = vec![0.0; self.keys.len()];
        let mut timed: BTreeMap<&str, f64> = BTreeMap::new();
        let needed: std::collections::BTreeSet<usize> =
            todo.iter().filter_map(|r| r.setup).collect();
        for k in needed {
            let objective = self.keys[k].0.as_str();
            if !timed.contains_key(objective) {
                let r = self
                    .plan
                    .runs
                    .iter()
                    .find(|r| optimum_key(r) == self.keys[k])
                    .context("internal: a run for every optimum key")?;
                reporter.note(&format!("timing the reference optimum of {objective}"));
                // On one thread, so that its CPU clock sees the whole search.
                let seconds = on_one_thread(|| {
                    let start = Stopwatch::start();
                    reference_optimum(self.plan, r)
                        .with_context(|| format!("the reference optimum of {objective}"))?;
                    Ok::<f64, anyhow::Error>(start.cpu().unwrap_or_else(|| start.wall()))
                })??;
                timed.insert(objective, seconds);
            }
            seconds[k] = timed[objective];
        }
        let note = (!timed.is_empty()).then(|| {
            let each: Vec<String> = timed.iter().map(|(o, s)| format!("{o} {s:.1} s")).collect();
            format!(
                "reference optima (one per objective × variance × seed and shard: {})",
                each.join(", ")
            )
        });
        Ok((seconds, note))
    }
}

/// `pandora cvs plan`: the plan of the CVS grid configured in `args.config` (see
/// [`plan_grid`]); returns the report.
pub fn plan(args: &PlanArgs, reporter: &dyn Reporter) -> Result<String> {
    let plan = load(&args.config, args.smoke)?;
    let out = default_out(&plan, args.out.as_ref());
    plan_grid(&CvsGrid::new(&plan), args, &out, reporter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// 2 cost levels × 2 variances of hartmann3 and one setting of gp_sample, 2 policies: 10
    /// (setting, policy) groups, calibrated by (objective, policy): 4 calibrations.
    const CONFIG: &str = r#"
[experiment]
name = "keys"
seeds = 2
[policies]
names = ["ucb-cvs", "random"]
[[problem]]
objective = "hartmann3"
costs = ["cheap", "moderate"]
variances = [0.02, 0.04]
[[problem]]
objective = "gp_sample"
costs = ["expensive"]
variances = [0.04]
"#;

    #[test]
    fn cells_share_a_calibration_per_objective_and_policy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, CONFIG).unwrap();
        let plan = load(path.to_str().unwrap(), false).unwrap();
        let grid = CvsGrid::new(&plan);
        let groups: BTreeSet<Group> = plan.runs.iter().map(|r| grid.group(r)).collect();
        assert_eq!(groups.len(), 10);
        let keys: BTreeSet<Group> = groups.iter().map(|&g| grid.calibration_key(g)).collect();
        assert_eq!(keys.len(), 4);
        // Cells share a key exactly when they share objective and policy.
        for &a in &groups {
            for &b in &groups {
                let (ra, rb) = (grid.first(a).unwrap(), grid.first(b).unwrap());
                let same = ra.objective == rb.objective && ra.policy == rb.policy;
                assert_eq!(grid.calibration_key(a) == grid.calibration_key(b), same);
            }
        }
    }

    /// Measurement, not a check: every cell of the configuration in `PANDORA_CELLS` (all cost
    /// levels and variances) calibrated on its own at the smoke sizes (bank 32, 16 raw samples, 2
    /// restarts), printing the CPU seconds per unit of work, to compare the cells that share an
    /// objective and policy. `PANDORA_CELLS=experiments/cvs_fig2.toml cargo test -p
    /// pandora-experiment --lib per_cell -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn per_cell_rates() {
        let Ok(path) = std::env::var("PANDORA_CELLS") else {
            return;
        };
        let mut plan = load(&path, false).unwrap();
        plan.bank_size = 32;
        for r in &mut plan.runs {
            r.bank_size = Some(32);
        }
        plan.optimizer.raw_partial = 16;
        plan.optimizer.raw_full = 16;
        plan.optimizer.restarts_partial = 2;
        plan.optimizer.restarts_full = 2;
        let grid = CvsGrid::new(&plan);
        let groups: BTreeSet<Group> = plan.runs.iter().map(|r| grid.group(r)).collect();
        for g in groups {
            let rate = on_one_thread(|| grid.calibrate(g, 4)).unwrap().unwrap();
            let (a, b) = grid.group_label(g);
            println!("cell\t{a}\t{b}\t{:.4e}\t{}", rate.per_unit, rate.steps);
        }
    }
}
