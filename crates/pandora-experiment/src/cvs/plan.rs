//! `pandora cvs plan`: the CVS grid as a [`Grid`] of the experiment planner
//! ([`crate::cluster`]), which does the estimate, the report and the sbatch script.
//!
//! **Groups and work.** A group is a (setting, policy) pair, a setting being an objective × cost
//! level × variance. A run's shard weight is the parent module's `run_units` over
//! `T = ⌈budget / c̄⌉` decisions (it must follow from the configuration alone); its estimate
//! counts `T_q = ⌈budget / c_q⌉` decisions instead, `c_q` the mean cost of the sets the group's
//! policy chose where its rate was measured (a cost-aware policy at cheap costs chooses cheap
//! sets and makes many more than `T`; TS-PSQ, which prefers the full set, fewer), and its
//! seconds are `a · run_units(T_q)` with one rate `a` per group (no separate per-evaluation rate:
//! an evaluation of these objectives is microseconds).
//!
//! **Rates.** From the complete run records of the grid in `OUT/runs/` when a group has some:
//! `a = Σ seconds / Σ work of the decisions made` and `c_q` the mean cost of those decisions
//! (CPU seconds where recorded, else wall seconds), so that a plan made while an array runs (or
//! after one task) follows what the policies actually do. Otherwise by a calibration, one per
//! (objective, cost level, policy) ([`Grid::calibration_key`]), of its first cell: the first
//! seed, on the configuration's bank and optimizer, with a budget of `steps · c_max` (the most
//! expensive set's cost: the policy can choose any set) and at most `steps` decisions, and the
//! reference optimum replaced by 0 (it only shifts the regret), timed in CPU seconds on a pool
//! of one thread; `a` = seconds / the work of the decisions it made. The cells of a key differ
//! only in the variance, which the work model does not see (measured at the smoke sizes on every
//! cell of BOCVS Figure 2: within an (objective, policy) the variance moved `a` by at most 2.1×,
//! most by 1.2–1.6×). The cost level is calibrated on its own because it decides which sets a
//! policy chooses, hence both the number of decisions and the work of one: with a single
//! calibration per (objective, policy) at the most expensive level, and the earlier budget
//! `steps · c̄`, TS-PSQ on plant at cheap costs could not afford the full set, was timed on
//! partial sets whose decisions cost about 400× more (21 CPU s against 0.05 s) and planned at
//! `⌈200 / c̄⌉ = 1058` decisions where it makes about `200 / c_full = 200`. Extrapolating from a
//! handful of decisions at `n₀ + k ≤ 10` observations to a run's last ones leans on the `n²`
//! shape and on the first `steps` decisions choosing sets as the whole run does (not so for the
//! ETC policies, which explore the sets and then commit to one; unknown beyond 100 decisions for
//! UCB-CVS at cheap costs, which chose only the cheapest sets for its first 100 on plant): take
//! it as good to a factor of a few where checked (docs/results.md, BOCVS Figure 2).
//!
//! **Set-up.** Every shard computes the reference optimum of each (objective, variance, seed) its
//! runs need, with the optimum search (far more starts than an acquisition gets), before its
//! runs. It is timed once per objective (its first variance and seed still to do) and counted for
//! every key and shard that needs it.
//!
//! **Degenerate cases.** A calibration whose run makes no decision (a budget below every set's
//! cost cannot happen: `steps · c_max` pays for any set) fails with a message and leaves the
//! group out of the totals. A rate without a positive decision cost (no decision recorded)
//! leaves the run at `T` decisions.

use super::{
    Plan, RunRecord, RunSpec, default_out, load, max_cost, objective, objective_setup, optimum_key,
    problem_of, reference_optimum, run_steps, run_units,
};
use crate::cluster::{Grid, Group, PlanArgs, PlannedRun, plan_grid};
use crate::cpu_clock::{Stopwatch, exact_here, on_one_thread};
use crate::estimate::{Rate, Rates};
use crate::reporter::Reporter;
use anyhow::{Context, Result, bail};
use pandora_core::cvs::{RunConfig, build_policy, run};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// The CVS grid of a resolved plan.
struct CvsGrid<'a> {
    plan: &'a Plan,
    /// (objective, cost level, variance) in the grid's order.
    settings: Vec<(String, String, String)>,
    /// Policy names in the grid's order.
    policies: Vec<String>,
    /// (objective, cost level) pairs in the grid's order: the calibration keys.
    levels: Vec<(String, String)>,
    /// The reference optima's keys, in the grid's order.
    keys: Vec<(String, String, u64)>,
    /// Each group's [`CvsPolicy::planned_decisions`](pandora_core::cvs::CvsPolicy::planned_decisions),
    /// once asked for: it depends on the group only, and asking builds the policy and the
    /// problem's bank.
    scheduled: Mutex<BTreeMap<Group, Option<usize>>>,
}

impl<'a> CvsGrid<'a> {
    fn new(plan: &'a Plan) -> Self {
        let mut g = Self {
            plan,
            settings: Vec::new(),
            policies: Vec::new(),
            levels: Vec::new(),
            keys: Vec::new(),
            scheduled: Mutex::new(BTreeMap::new()),
        };
        for r in &plan.runs {
            let s = setting(r);
            if !g.settings.contains(&s) {
                g.settings.push(s);
            }
            if !g.policies.contains(&r.policy) {
                g.policies.push(r.policy.clone());
            }
            let level = (r.objective.clone(), r.cost_level.clone());
            if !g.levels.contains(&level) {
                g.levels.push(level);
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
/// wall times; `cost` the cost paid over `decisions` decisions (their mean is the rate's
/// `step_cost`).
fn rate(
    seconds: f64,
    units: f64,
    (decisions, cost): (usize, f64),
    (timings, wall): (usize, usize),
) -> Rate {
    Rate {
        per_unit: if units > 0.0 { seconds / units } else { 0.0 },
        per_evaluation: 0.0,
        steps: decisions,
        timings,
        wall,
        step_cost: (decisions > 0 && cost > 0.0).then(|| cost / decisions as f64),
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
        // Seconds, work, decisions, their cost, records, records timed by wall time.
        let mut sums: BTreeMap<Group, (f64, f64, usize, f64, usize, usize)> = BTreeMap::new();
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
            // The work of the decisions the run made (the estimate counts them from the mean
            // cost of the sets chosen, `at_rate`).
            s.0 += secs;
            s.1 += run_units(self.plan, r, rec.steps.len())?;
            s.2 += rec.steps.len();
            s.3 += rec.steps.iter().map(|st| st.cost).sum::<f64>();
            s.4 += 1;
            s.5 += wall;
        }
        Ok(Rates {
            by_pair: sums
                .into_iter()
                .map(|(g, (secs, units, n, c, t, w))| (g, rate(secs, units, (n, c), (t, w))))
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
        let cost: f64 = trace.steps.iter().map(|s| s.cost).sum();
        let exact = exact_here();
        let (seconds, wall) = seconds_of(exact.then(|| start.cpu()).flatten(), start.wall());
        if decisions == 0 {
            bail!("the calibration run (budget {budget}) made no decision");
        }
        Ok(rate(
            seconds,
            run_units(self.plan, r, decisions)?,
            (decisions, cost),
            (1, wall),
        ))
    }

    /// Cells with the same objective, cost level and policy share a calibration: they differ
    /// in the variance only, which the work model does not see. The cost level is not shared:
    /// it decides which sets a policy chooses, hence both the number of decisions and the work
    /// of one (TS-PSQ on a partial set of plant integrates over the bank: ~400× a full-set
    /// decision).
    fn calibration_key(&self, g: Group) -> Group {
        let (objective, level, _) = &self.settings[g.0];
        let l = self
            .levels
            .iter()
            .position(|(o, c)| o == objective && c == level);
        (l.unwrap_or(0), g.1)
    }

    /// The run's decisions: what the policy's schedule fixes ([`CvsPolicy::planned_decisions`]:
    /// ETC's exploration plays, UCB-CVS's decay phase, then the full set), else counted from the
    /// mean cost of the sets its group chose in the records or calibration its rate was measured
    /// on, `⌈budget / c_chosen⌉`, instead of `⌈budget / c̄⌉` (a cost-aware policy at cheap costs
    /// chooses cheap sets and makes many more; a policy that prefers the full set, fewer).
    ///
    /// [`CvsPolicy::planned_decisions`]: pandora_core::cvs::CvsPolicy::planned_decisions
    fn at_rate(&self, run: PlannedRun, rate: &Rate) -> PlannedRun {
        let Ok(r) = self.first(run.group) else {
            return run;
        };
        let mut memo = self
            .scheduled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let scheduled = *memo.entry(run.group).or_insert_with(|| {
            build_policy(&r.policy, r.budget, self.plan.lambda)
                .ok()
                .zip(problem_of(self.plan, r).ok())
                .and_then(|(p, problem)| p.planned_decisions(&problem, r.budget))
        });
        drop(memo);
        let measured = rate
            .step_cost
            .filter(|c| c.is_finite() && *c > 0.0)
            .map(|c| (r.budget / c).ceil().max(1.0) as usize);
        let Some(decisions) = scheduled.or(measured) else {
            return run;
        };
        match run_units(self.plan, r, decisions) {
            Ok(units) => PlannedRun {
                units,
                evaluations: self.plan.n_init + decisions,
                ..run
            },
            Err(_) => run,
        }
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
    /// (setting, policy) groups, calibrated by (objective, cost level, policy): 6 calibrations.
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
    fn cells_share_a_calibration_per_objective_cost_level_and_policy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, CONFIG).unwrap();
        let plan = load(path.to_str().unwrap(), false).unwrap();
        let grid = CvsGrid::new(&plan);
        let groups: BTreeSet<Group> = plan.runs.iter().map(|r| grid.group(r)).collect();
        assert_eq!(groups.len(), 10);
        let keys: BTreeSet<Group> = groups.iter().map(|&g| grid.calibration_key(g)).collect();
        assert_eq!(keys.len(), 6);
        // Cells share a key exactly when they share objective, cost level and policy.
        for &a in &groups {
            for &b in &groups {
                let (ra, rb) = (grid.first(a).unwrap(), grid.first(b).unwrap());
                let same = ra.objective == rb.objective
                    && ra.cost_level == rb.cost_level
                    && ra.policy == rb.policy;
                assert_eq!(grid.calibration_key(a) == grid.calibration_key(b), same);
            }
        }
    }

    /// A run of a policy without a schedule counts `⌈budget / c_q⌉` decisions for the mean cost
    /// `c_q` of the sets its rate saw chosen; without one, the planned `⌈budget / c̄⌉`. A policy
    /// with a schedule (UCB-CVS) counts what its schedule says, whatever the rate.
    #[test]
    fn the_decisions_follow_the_cost_of_the_sets_chosen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, CONFIG).unwrap();
        let plan = load(path.to_str().unwrap(), false).unwrap();
        let grid = CvsGrid::new(&plan);
        let runs = grid.runs(dir.path()).unwrap();
        // A policy without a schedule (random): the measured rule.
        let run = runs
            .iter()
            .find(|r| grid.first(r.group).unwrap().policy == "random")
            .unwrap()
            .clone();
        let spec = grid.first(run.group).unwrap();
        assert_eq!(run.evaluations, plan.n_init + run_steps(spec).unwrap());
        let chosen = |c: Option<f64>| {
            let rate = Rate {
                step_cost: c,
                ..rate(1.0, 1.0, (1, 1.0), (1, 0))
            };
            grid.at_rate(run.clone(), &rate)
        };
        // Every decision on the full set (cost 1): `budget` decisions.
        let full = chosen(Some(1.0));
        let decisions = spec.budget.ceil() as usize;
        assert_eq!(full.evaluations, plan.n_init + decisions);
        assert_eq!(full.units, run_units(&plan, spec, decisions).unwrap());
        assert_eq!(full.weight, run.weight);
        // The cheapest sets (0.01): a hundred times as many.
        let cheap = chosen(Some(0.01));
        assert_eq!(
            cheap.evaluations,
            plan.n_init + (spec.budget / 0.01).ceil() as usize
        );
        assert!(cheap.units > full.units);
        // No decision cost measured: as planned.
        assert_eq!(chosen(None).evaluations, run.evaluations);
        assert_eq!(chosen(Some(0.0)).evaluations, run.evaluations);
        // UCB-CVS on hartmann3 at cheap costs (budget 50): its schedule's count, not the rate's.
        let ucb = runs
            .iter()
            .find(|r| {
                let s = grid.first(r.group).unwrap();
                s.policy == "ucb-cvs" && s.cost_level == "cheap"
            })
            .unwrap()
            .clone();
        let s = grid.first(ucb.group).unwrap();
        let expected = build_policy("ucb-cvs", s.budget, plan.lambda)
            .unwrap()
            .planned_decisions(&problem_of(&plan, s).unwrap(), s.budget)
            .unwrap();
        for c in [None, Some(0.01), Some(1.0)] {
            let rate = Rate {
                step_cost: c,
                ..rate(1.0, 1.0, (1, 1.0), (1, 0))
            };
            let at = grid.at_rate(ucb.clone(), &rate);
            assert_eq!(at.evaluations, plan.n_init + expected, "{c:?}");
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
