//! Offline evaluation of stopping rules in experiments (`[stopping]`).
//!
//! Runs are never stopped early. After every BO iteration `t` (and once right after the initial
//! design, `t = 0`) the statistics the configured rules need are computed on the posterior of
//! `D_t`, the data *including* that iteration's evaluation (after-posterior-update semantics), and
//! written to the run's trace as a `stopping` line carrying `t` and the number of observations
//! ([`record`]). The summary then replays every rule on every run at every λ
//! ([`replay_run`]): the stopping time is the first `t` at which the rule's condition holds (with
//! the rule's burn-in and debounce), the run is charged `R_λ(t) = regret(t) + λ·cost(t)` with the
//! regret and BO-phase cost of `D_t` itself, and a rule that never fires is charged the run's end
//! and counted. Each run is replayed with its **own** statistics.
//!
//! Outputs: `summary/stopping_runs.csv` (one row per run × rule × λ) and `summary/stopping.csv`
//! (per problem × policy × rule × λ, with the hindsight oracle and the best fixed iteration as
//! extra rows).

pub mod plan;
pub mod runtime;

use super::config::{Plan, ResolvedPolicy, splitmix64};
use super::format::{fmt_number, fmt_sig3};
use super::trace::{SecondsClock, StatisticSeconds, StoppingStats, Trace};
use anyhow::{Context, Result, anyhow, bail};
use pandora_core::gp::GpModel;
use pandora_core::policy::Phase;
use pandora_core::stopping::median::{LogEipcMed, SrGapMed};
use pandora_core::stopping::pbgi::PbgiStopping;
use pandora_core::stopping::prb::Prb;
use pandora_core::stopping::ucb_lcb::UcbLcb;
use pandora_core::stopping::{
    Candidates, CostInfo, Guard, OptimizerConfig, RuleConfig, RunState, StopOutcome,
    StoppingConfig, SuppliedStatistics, Trace as RegretTrace, evaluate_stop, replay,
};
pub use plan::{StatisticsSpec, StoppingPlan};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

/// Seed of the statistics at observation count `n` of a run with step seed `step_seed`.
pub fn statistics_seed(step_seed: u64) -> u64 {
    splitmix64(step_seed ^ 0x7374_6f70)
}

/// What [`record`] needs: the data `D_t`, its posterior (and that of `D_{t−1}` for SRGap), the
/// problem's cost information and a seed.
pub struct RecordInputs<'a> {
    /// Dimension.
    pub d: usize,
    /// Points of `D_t`, row-major.
    pub x: &'a [f64],
    /// Values of `D_t`.
    pub y: &'a [f64],
    /// Costs of `D_t`.
    pub cost: &'a [f64],
    /// Initial-design size.
    pub n_initial: usize,
    /// The posterior on `D_t`.
    pub model: &'a GpModel,
    /// The posterior on `D_{t−1}` (`None` at `t = 0`).
    pub previous: Option<&'a GpModel>,
    /// The problem's costs as the rules see them.
    pub cost_info: CostInfo<'a>,
    /// Seed of the maximizations and of PRB's paths.
    pub seed: u64,
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Runs `f` and returns its value with the seconds it took on `clock` (wall time where the CPU
/// clock cannot be read).
fn timed<T>(clock: SecondsClock, f: impl FnOnce() -> Result<T>) -> Result<(T, f64)> {
    let sw = crate::cpu_clock::Stopwatch::start();
    let v = f()?;
    let seconds = match clock {
        SecondsClock::Cpu => sw.cpu().unwrap_or_else(|| sw.wall()),
        SecondsClock::Wall => sw.wall(),
    };
    Ok((v, seconds))
}

/// Computes the statistics of `spec` on `D_t` (iteration `t = n − n_initial`).
pub fn record(spec: &StatisticsSpec, inp: &RecordInputs<'_>) -> Result<StoppingStats> {
    let t0 = crate::cpu_clock::Stopwatch::start();
    let grid: Option<Vec<f64>> = spec.grid.map(|m| {
        (0..m)
            .map(|i| i as f64 / (m - 1) as f64)
            .collect::<Vec<f64>>()
    });
    let mut state = RunState::new(inp.d, inp.x, inp.y, inp.cost, inp.n_initial);
    state.model = Some(inp.model);
    state.previous_model = inp.previous;
    state.cost_info = inp.cost_info;
    state.seed = inp.seed;
    state.candidates = grid.as_ref().map(|g| Candidates {
        points: g,
        exclusive: false,
    });
    let t = state.iteration();
    let opt = spec.optimizer();
    let g = Guard::default();
    let err = |what: &str| format!("stopping statistic {what} at iteration {t}");
    let mut out = StoppingStats {
        best: state.incumbent().1,
        cumulative_cost: state.cumulative_cost(),
        ..StoppingStats::empty(t, inp.y.len())
    };
    let clock = if crate::cpu_clock::exact_here() && crate::cpu_clock::thread_seconds().is_some() {
        SecondsClock::Cpu
    } else {
        SecondsClock::Wall
    };
    let mut secs = StatisticSeconds {
        clock,
        ..StatisticSeconds::default()
    };
    if spec.log_eipc {
        let (v, dt) = timed(clock, || {
            PbgiStopping::new(1.0, 1, g, opt)?
                .max_log_eipc(&state)
                .with_context(|| err("max_log_eipc"))
        })?;
        // −∞ is possible only when every candidate of an exclusive set was evaluated; the
        // experiment's search space is continuous.
        out.max_log_eipc = Some(v.0);
        secs.log_eipc = Some(dt);
    }
    if spec.log_eipc_before_update && inp.previous.is_some() {
        let (v, dt) = timed(clock, || {
            PbgiStopping::new(1.0, 1, g, opt)?
                .max_log_eipc_before_update(&state)
                .with_context(|| err("max_log_eipc_before_update"))
        })?;
        out.max_log_eipc_before_update = Some(v);
        secs.log_eipc_before_update = Some(dt);
    }
    if spec.log_eipc_inv {
        let (v, dt) = timed(clock, || match out.max_log_eipc {
            // Known or uniform costs: the two conventions are the same function.
            Some(v) if !inp.cost_info.is_unknown() => Ok(v),
            _ => LogEipcMed::new(0.01, 20, g, opt)?
                .statistic(&state)
                .with_context(|| err("max_log_eipc_inv")),
        })?;
        out.max_log_eipc_inv = Some(v);
        secs.log_eipc_inv = Some(dt);
    }
    if spec.ucb_lcb {
        let (v, dt) = timed(clock, || {
            UcbLcb::new(0.01, 1, g, opt)?
                .statistic(&state)
                .with_context(|| err("ucb_lcb"))
        })?;
        out.ucb_lcb = Some(v);
        secs.ucb_lcb = Some(dt);
    }
    if spec.srgap {
        let (v, dt) = timed(clock, || {
            SrGapMed::new(0.01, 20, g)?
                .statistic(&state)
                .with_context(|| err("srgap"))
        })?;
        out.srgap = finite(v);
        secs.srgap = Some(dt);
    }
    if let Some(p) = &spec.prb {
        let tp = Instant::now();
        let samples = p.samples_at(t);
        let (regrets, dt) = timed(clock, || {
            // PRB maximizes its sample paths on its own grid (all paths at once), or with its
            // own multi-start defaults (100·d Sobol points, 2 restarts) path by path, not on the
            // statistics' grid.
            let mut plain = state;
            plain.candidates = None;
            let rule = Prb::new(
                p.epsilon,
                0.05,
                p.schedule,
                p.num_features,
                g,
                OptimizerConfig::default(),
            )?;
            match p.grid {
                Some(m) => {
                    let pts: Vec<f64> = (0..m).map(|i| i as f64 / (m - 1) as f64).collect();
                    rule.sample_regrets_on_points(&plain, samples, &pts)
                }
                None => rule.sample_regrets(&plain, samples),
            }
            .with_context(|| err("prb"))
        })?;
        out.prb =
            Some(regrets.iter().filter(|&&r| r <= p.epsilon).count() as f64 / regrets.len() as f64);
        out.prb_samples = Some(samples);
        out.seconds_prb = Some(tp.elapsed().as_secs_f64());
        secs.prb = Some(dt);
    }
    out.statistic_seconds = Some(secs);
    for v in [
        out.max_log_eipc,
        out.max_log_eipc_before_update,
        out.max_log_eipc_inv,
        out.ucb_lcb,
        out.prb,
    ]
    .into_iter()
    .flatten()
    {
        if v.is_nan() {
            bail!("{}: NaN", err("computation"));
        }
    }
    out.seconds = t0.wall();
    out.cpu_seconds = crate::cpu_clock::exact_here().then(|| t0.cpu()).flatten();
    Ok(out)
}

/// One run × rule × λ.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// Run seed.
    pub seed: u64,
    /// Rule label.
    pub rule: String,
    /// λ.
    pub lambda: f64,
    /// The run's last iteration `T`.
    pub run_length: usize,
    /// Where the rule stopped (`index`: BO evaluations in the data kept, the run's end if it
    /// never fired) and the regrets there and at the hindsight-optimal iteration.
    pub outcome: StopOutcome,
}

/// A complete run's regret trace and the data to replay rules on it.
pub struct RunData {
    /// Dimension.
    pub d: usize,
    /// All points, row-major.
    pub x: Vec<f64>,
    /// All values.
    pub y: Vec<f64>,
    /// All costs.
    pub cost: Vec<f64>,
    /// Initial-design size.
    pub n_initial: usize,
    /// Regret and cost for `t = 0..=T`.
    pub trace: RegretTrace,
    /// Statistics for `t = 0..=T`.
    pub supplied: Vec<SuppliedStatistics>,
}

/// Extracts the replay data of a complete trace, with regret against `reference` (the optimum or
/// the best value of the instance). Errors if the stopping lines do not cover `t = 0..=T`.
pub fn run_data(t: &Trace, reference: f64, spec: &StatisticsSpec) -> Result<RunData> {
    let d = t.header.dim;
    let n_initial = t
        .steps
        .iter()
        .take_while(|s| s.phase == Phase::InitialDesign)
        .count();
    if n_initial == 0 {
        bail!("the trace has no initial design");
    }
    let last = t.steps.len() - n_initial;
    if t.stopping.len() != last + 1 {
        bail!(
            "the trace has stopping statistics for {} of its {} iterations (0..={last})",
            t.stopping.len(),
            last + 1
        );
    }
    let scale = t.header.regret_scale;
    let mut regret = Vec::with_capacity(last + 1);
    let mut cum = Vec::with_capacity(last + 1);
    let mut supplied = Vec::with_capacity(last + 1);
    for (i, st) in t.stopping.iter().enumerate() {
        let s = &t.steps[n_initial - 1 + i];
        if st.iteration != i || st.n != n_initial + i {
            bail!(
                "stopping line {i} is for iteration {} (n = {})",
                st.iteration,
                st.n
            );
        }
        regret.push(scale * (reference - s.best));
        cum.push(s.cumulative_cost);
        let need = |on: bool, v: Option<f64>, what: &str| -> Result<Option<f64>> {
            match (on, v) {
                (false, _) => Ok(None),
                (true, Some(v)) => Ok(Some(v)),
                (true, None) => bail!("stopping line {i} lacks {what}"),
            }
        };
        supplied.push(SuppliedStatistics {
            max_log_eipc_exp: need(spec.log_eipc, st.max_log_eipc, "max_log_eipc")?,
            max_log_eipc_inv: need(spec.log_eipc_inv, st.max_log_eipc_inv, "max_log_eipc_inv")?,
            ucb_lcb: need(spec.ucb_lcb, st.ucb_lcb, "ucb_lcb")?,
            // Undefined at t = 0 (no previous posterior): NaN never triggers.
            srgap: spec.srgap.then(|| st.srgap.unwrap_or(f64::NAN)),
            prb: need(spec.prb.is_some(), st.prb, "prb")?,
            max_pbgi_index: None,
            // Undefined at t = 0 (no previous posterior): NaN never triggers.
            max_log_eipc_before_update: match (spec.log_eipc_before_update, i) {
                (false, _) => None,
                (true, 0) => Some(st.max_log_eipc_before_update.unwrap_or(f64::NAN)),
                (true, _) => need(
                    true,
                    st.max_log_eipc_before_update,
                    "max_log_eipc_before_update",
                )?,
            },
        });
    }
    Ok(RunData {
        d,
        x: t.steps.iter().flat_map(|s| s.x.iter().copied()).collect(),
        y: t.steps.iter().map(|s| s.y).collect(),
        cost: t.steps.iter().map(|s| s.cost).collect(),
        n_initial,
        trace: RegretTrace::new(regret, cum)?,
        supplied,
    })
}

/// The stopping iteration of `rule` at `lambda` on a run (`None`: never fired).
pub fn stop_of(rule: &StoppingConfig, lambda: f64, data: &RunData) -> Result<Option<usize>> {
    let mut r = rule.build(Some(lambda))?;
    let rep = replay(
        r.as_mut(),
        data.d,
        &data.x,
        &data.y,
        &data.cost,
        data.n_initial,
        &data.supplied,
    )?;
    Ok(rep.stop)
}

/// Every rule × λ of `plan` on one complete run.
pub fn replay_run(
    sp: &StoppingPlan,
    policy: &ResolvedPolicy,
    t: &Trace,
    reference: f64,
) -> Result<Vec<RunRow>> {
    let data = run_data(t, reference, &sp.statistics)?;
    let mut rows = Vec::new();
    for rule in &sp.rules {
        // Rules other than PBGI do not depend on λ: replay them once.
        let fixed = if matches!(rule.config.rule, RuleConfig::Pbgi { .. }) {
            None
        } else {
            Some(stop_of(&rule.config, sp.lambdas[0], &data)?)
        };
        for lambda in sp.lambdas_for(policy.fixed_pbgi_lambda()) {
            let stop = match fixed {
                Some(s) => s,
                None => stop_of(&rule.config, lambda, &data)?,
            };
            let o = evaluate_stop(&data.trace, lambda, stop)?;
            rows.push(RunRow {
                problem: t.header.problem.clone(),
                policy: t.header.policy.clone(),
                seed: t.header.seed,
                rule: rule.label.clone(),
                lambda,
                run_length: data.trace.len() - 1,
                outcome: o,
            });
        }
    }
    Ok(rows)
}

/// Statistics of one problem × policy × rule × λ over runs.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRow {
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// Rule label, or `hindsight` (the per-run oracle) or `best-fixed` (the single iteration
    /// minimizing the mean `R_λ` over the runs, an oracle too).
    pub rule: String,
    /// λ.
    pub lambda: f64,
    /// Runs.
    pub n: usize,
    /// Mean `R_λ` at the stop.
    pub mean_r: f64,
    /// Its standard error (sample standard deviation / √n; 0 for one run).
    pub se_r: f64,
    /// Mean stopping iteration.
    pub mean_stop: f64,
    /// Runs in which the rule never fired.
    pub never_fired: usize,
    /// Mean simple regret at the stop.
    pub mean_regret: f64,
    /// Mean BO-phase cost at the stop.
    pub mean_cost: f64,
    /// Mean gap to the per-run hindsight optimum.
    pub mean_gap: f64,
    /// Mean of `R_λ` minus the first configured rule's `R_λ` on the same run (paired by seed;
    /// 0 for the first rule itself): rules are replayed on the same runs, so this difference
    /// has a much smaller standard error than the difference of the two means.
    pub mean_r_minus_first: f64,
    /// Its standard error (over the runs' differences).
    pub se_r_minus_first: f64,
}

fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let se = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
    } else {
        0.0
    };
    (m, se)
}

/// One run's outcome in a group.
struct Item {
    /// Stopping index.
    stop: usize,
    /// Whether the rule fired.
    fired: bool,
    /// `R_λ` at the stop.
    r: f64,
    /// Simple regret at the stop.
    regret: f64,
    /// BO-phase cost at the stop.
    cost: f64,
    /// Gap to the run's hindsight optimum.
    gap: f64,
    /// `R_λ` minus the first rule's `R_λ` on the same run.
    r_minus_first: f64,
}

fn group_row(key: (&str, &str, &str, f64), items: &[Item]) -> GroupRow {
    let r: Vec<f64> = items.iter().map(|i| i.r).collect();
    let (mean_r, se_r) = mean_se(&r);
    let diff: Vec<f64> = items.iter().map(|i| i.r_minus_first).collect();
    let (mean_r_minus_first, se_r_minus_first) = mean_se(&diff);
    let n = items.len() as f64;
    let avg = |f: fn(&Item) -> f64| items.iter().map(f).sum::<f64>() / n;
    GroupRow {
        problem: key.0.to_string(),
        policy: key.1.to_string(),
        rule: key.2.to_string(),
        lambda: key.3,
        n: items.len(),
        mean_r,
        se_r,
        mean_stop: avg(|i| i.stop as f64),
        never_fired: items.iter().filter(|i| !i.fired).count(),
        mean_regret: avg(|i| i.regret),
        mean_cost: avg(|i| i.cost),
        mean_gap: avg(|i| i.gap),
        mean_r_minus_first,
        se_r_minus_first,
    }
}

/// The mean `R_λ(t)` over a group's runs when every run is stopped at the same iteration `t`
/// (a run shorter than `t` is charged its end).
#[derive(Debug, Clone, PartialEq)]
pub struct FixedCurve {
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// λ.
    pub lambda: f64,
    /// `mean_r[t]` for `t = 0..` the longest run.
    pub mean_r: Vec<f64>,
}

/// Aggregates run rows (in the plan's problem, policy, rule and λ order) and adds the
/// `hindsight` and `best-fixed` oracles per problem × policy × λ. `curves[(problem, policy,
/// seed)]` are the runs' `(regret, cost)` traces for the fixed-iteration oracle. Also returns
/// the fixed-iteration mean curves.
pub fn aggregate(
    plan: &Plan,
    sp: &StoppingPlan,
    rows: &[RunRow],
    curves: &BTreeMap<(String, String, u64), RegretTrace>,
) -> (Vec<GroupRow>, Vec<FixedCurve>) {
    let mut out = Vec::new();
    let mut fixed_curves = Vec::new();
    for prob in &plan.problems {
        for pol in &plan.policies {
            for lambda in sp.lambdas_for(pol.fixed_pbgi_lambda()) {
                let mine: Vec<&RunRow> = rows
                    .iter()
                    .filter(|r| {
                        r.problem == prob.label && r.policy == pol.label && r.lambda == lambda
                    })
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                // The first rule's R per run, for the paired differences (NaN if missing).
                let first_rule = &sp.rules[0].label;
                let first_r: BTreeMap<u64, f64> = mine
                    .iter()
                    .filter(|r| &r.rule == first_rule)
                    .map(|r| (r.seed, r.outcome.cost_adjusted_regret))
                    .collect();
                let minus_first =
                    |seed: u64, r: f64| r - first_r.get(&seed).copied().unwrap_or(f64::NAN);
                for rule in &sp.rules {
                    let items: Vec<Item> = mine
                        .iter()
                        .filter(|r| r.rule == rule.label)
                        .map(|r| Item {
                            stop: r.outcome.index,
                            fired: r.outcome.fired,
                            r: r.outcome.cost_adjusted_regret,
                            regret: r.outcome.simple_regret,
                            cost: r.outcome.cumulative_cost,
                            gap: r.outcome.gap_to_hindsight,
                            r_minus_first: minus_first(r.seed, r.outcome.cost_adjusted_regret),
                        })
                        .collect();
                    if !items.is_empty() {
                        out.push(group_row(
                            (&prob.label, &pol.label, &rule.label, lambda),
                            &items,
                        ));
                    }
                }
                // The oracles, from the runs' traces (one per seed).
                let runs: Vec<(&RunRow, &RegretTrace)> = mine
                    .iter()
                    .filter(|r| &r.rule == first_rule)
                    .filter_map(|r| {
                        curves
                            .get(&(r.problem.clone(), r.policy.clone(), r.seed))
                            .map(|c| (*r, c))
                    })
                    .collect();
                if runs.is_empty() {
                    continue;
                }
                let hind: Vec<Item> = runs
                    .iter()
                    .map(|(r, c)| {
                        let h = r.outcome.hindsight_index;
                        Item {
                            stop: h,
                            fired: true,
                            r: r.outcome.hindsight_regret,
                            regret: c.simple_regret[h],
                            cost: c.cumulative_cost[h],
                            gap: 0.0,
                            r_minus_first: minus_first(r.seed, r.outcome.hindsight_regret),
                        }
                    })
                    .collect();
                out.push(group_row(
                    (&prob.label, &pol.label, "hindsight", lambda),
                    &hind,
                ));
                let longest = runs.iter().map(|(_, c)| c.len()).max().unwrap_or(1);
                let at = |c: &RegretTrace, t: usize| {
                    let i = t.min(c.len() - 1);
                    (
                        i,
                        c.simple_regret[i] + lambda * c.cumulative_cost[i],
                        c.simple_regret[i],
                        c.cumulative_cost[i],
                    )
                };
                let mut best_t = 0;
                let mut best_mean = f64::INFINITY;
                let mut mean_r = Vec::with_capacity(longest);
                for t in 0..longest {
                    let m = runs.iter().map(|(_, c)| at(c, t).1).sum::<f64>() / runs.len() as f64;
                    mean_r.push(m);
                    if m < best_mean {
                        best_mean = m;
                        best_t = t;
                    }
                }
                fixed_curves.push(FixedCurve {
                    problem: prob.label.clone(),
                    policy: pol.label.clone(),
                    lambda,
                    mean_r,
                });
                let fixed: Vec<Item> = runs
                    .iter()
                    .map(|(r, c)| {
                        let (i, rr, reg, cost) = at(c, best_t);
                        Item {
                            stop: i,
                            fired: true,
                            r: rr,
                            regret: reg,
                            cost,
                            gap: rr - r.outcome.hindsight_regret,
                            r_minus_first: minus_first(r.seed, rr),
                        }
                    })
                    .collect();
                out.push(group_row(
                    (&prob.label, &pol.label, "best-fixed", lambda),
                    &fixed,
                ));
            }
        }
    }
    (out, fixed_curves)
}

/// `stopping_runs.csv`.
pub fn runs_csv(rows: &[RunRow]) -> String {
    let mut out = String::from(
        "problem,policy,seed,rule,lambda,stop,fired,run_length,simple_regret,cumulative_cost,\
         cost_adjusted_regret,hindsight_index,hindsight_regret,gap_to_hindsight\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            pandora_study::csv::field(&r.problem),
            pandora_study::csv::field(&r.policy),
            r.seed,
            pandora_study::csv::field(&r.rule),
            r.lambda,
            r.outcome.index,
            r.outcome.fired,
            r.run_length,
            r.outcome.simple_regret,
            r.outcome.cumulative_cost,
            r.outcome.cost_adjusted_regret,
            r.outcome.hindsight_index,
            r.outcome.hindsight_regret,
            r.outcome.gap_to_hindsight
        );
    }
    out
}

/// `stopping.csv`.
pub fn groups_csv(rows: &[GroupRow]) -> String {
    let mut out = String::from(
        "problem,policy,rule,lambda,n,mean_r,se_r,mean_stop,never_fired,never_fired_fraction,\
         mean_regret,mean_cost,mean_gap_to_hindsight,mean_r_minus_first,se_r_minus_first\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            pandora_study::csv::field(&r.problem),
            pandora_study::csv::field(&r.policy),
            pandora_study::csv::field(&r.rule),
            r.lambda,
            r.n,
            r.mean_r,
            r.se_r,
            r.mean_stop,
            r.never_fired,
            r.never_fired as f64 / r.n as f64,
            r.mean_regret,
            r.mean_cost,
            r.mean_gap,
            r.mean_r_minus_first,
            r.se_r_minus_first
        );
    }
    out
}

/// One problem × λ of the stopping tables: rules × policies.
struct StopGrid<'a> {
    problem: &'a str,
    lambda: f64,
    /// Policy labels (columns).
    cols: Vec<&'a str>,
    /// Per rule (the configured rules, then the two oracles), the row of each column.
    cells: Vec<(String, Vec<Option<&'a GroupRow>>)>,
}

fn stop_grids<'a>(plan: &'a Plan, sp: &StoppingPlan, rows: &'a [GroupRow]) -> Vec<StopGrid<'a>> {
    let mut rules: Vec<String> = sp.rules.iter().map(|r| r.label.clone()).collect();
    rules.push("hindsight".into());
    rules.push("best-fixed".into());
    let mut out = Vec::new();
    for prob in &plan.problems {
        for &lambda in &sp.lambdas {
            let cols: Vec<&str> = plan
                .policies
                .iter()
                .filter(|p| {
                    rows.iter().any(|r| {
                        r.problem == prob.label && r.policy == p.label && r.lambda == lambda
                    })
                })
                .map(|p| p.label.as_str())
                .collect();
            if cols.is_empty() {
                continue;
            }
            let cells = rules
                .iter()
                .map(|rule| {
                    let row = cols
                        .iter()
                        .map(|&p| {
                            rows.iter().find(|r| {
                                r.problem == prob.label
                                    && r.policy == p
                                    && r.lambda == lambda
                                    && &r.rule == rule
                            })
                        })
                        .collect();
                    (rule.clone(), row)
                })
                .collect();
            out.push(StopGrid {
                problem: &prob.label,
                lambda,
                cols,
                cells,
            });
        }
    }
    out
}

/// A text table per problem and λ: rules × policies, cells `mean R ± s.e. (mean stop, never
/// fired)`.
pub fn table(plan: &Plan, sp: &StoppingPlan, rows: &[GroupRow]) -> String {
    let mut out = String::new();
    for g in stop_grids(plan, sp, rows) {
        let _ = writeln!(
            out,
            "== {} — λ = {}: mean cost-adjusted regret ± s.e. (mean stop; runs never fired)",
            g.problem, g.lambda
        );
        let mut head = format!("{:<26}", "rule");
        for p in &g.cols {
            head += &format!(" {p:>34}");
        }
        let _ = writeln!(out, "{head}");
        for (rule, row) in &g.cells {
            let mut line = format!("{rule:<26}");
            for cell in row {
                let cell = cell.map_or("-".to_string(), |r| {
                    format!(
                        "{} ± {} ({:.1}; {})",
                        fmt_number(r.mean_r, 2),
                        fmt_number(r.se_r, 2),
                        r.mean_stop,
                        r.never_fired
                    )
                });
                line += &format!(" {cell:>34}");
            }
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    out
}

/// The same tables in markdown (for `summary/summary.md`), with the standard error doubled
/// (mean ± 2 s.e., as the regret tables) and, in each policy's column, the rule with the lowest
/// mean `R` in bold (the two oracles, `hindsight` and `best-fixed`, are not candidates).
pub fn markdown(plan: &Plan, sp: &StoppingPlan, rows: &[GroupRow]) -> String {
    let mut out = String::new();
    for g in stop_grids(plan, sp, rows) {
        let _ = writeln!(
            out,
            "### {}, λ = {}: mean cost-adjusted regret ± 2 s.e. (mean stop; runs never fired of \
             n)\n",
            g.problem, g.lambda
        );
        let cols: Vec<String> = g.cols.iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| rule | {} |", cols.join(" | "));
        let _ = writeln!(out, "|---|{}", "---|".repeat(g.cols.len()));
        let best: Vec<Option<f64>> = (0..g.cols.len())
            .map(|j| {
                g.cells
                    .iter()
                    .filter(|(rule, _)| rule != "hindsight" && rule != "best-fixed")
                    .filter_map(|(_, row)| row[j].map(|r| r.mean_r))
                    .filter(|v| v.is_finite())
                    .reduce(f64::min)
            })
            .collect();
        for (rule, row) in &g.cells {
            let mut line = format!("| {rule} |");
            for (j, cell) in row.iter().enumerate() {
                let text = cell.map_or("–".to_string(), |r| {
                    let t = format!(
                        "{} ± {} ({:.1}; {} of {})",
                        fmt_sig3(r.mean_r),
                        fmt_sig3(2.0 * r.se_r),
                        r.mean_stop,
                        r.never_fired,
                        r.n
                    );
                    let oracle = rule == "hindsight" || rule == "best-fixed";
                    if !oracle && best[j] == Some(r.mean_r) {
                        format!("**{t}**")
                    } else {
                        t
                    }
                });
                line += &format!(" {text} |");
            }
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    out
}

/// The offline evaluation of an experiment's stopping rules.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// One row per run × rule × λ.
    pub rows: Vec<RunRow>,
    /// One row per problem × policy × rule × λ (oracles included).
    pub groups: Vec<GroupRow>,
    /// Fixed-iteration mean curves per problem × policy × λ.
    pub curves: Vec<FixedCurve>,
    /// Runs left out because they were incomplete.
    pub incomplete: usize,
}

/// Replays every complete run of `plan` (with `references[(problem, problem_seed)]` the regret
/// reference).
pub fn evaluate(
    plan: &Plan,
    sp: &StoppingPlan,
    traces: &[Trace],
    references: &BTreeMap<(String, u64), f64>,
) -> Result<Evaluation> {
    let mut rows = Vec::new();
    let mut curves = BTreeMap::new();
    let mut incomplete = 0;
    for prob in &plan.problems {
        for pol in &plan.policies {
            for t in traces
                .iter()
                .filter(|t| t.header.problem == prob.label && t.header.policy == pol.label)
            {
                if t.end.is_none() {
                    incomplete += 1;
                    continue;
                }
                let reference = references
                    .get(&(prob.label.clone(), t.header.problem_seed))
                    .copied()
                    .ok_or_else(|| anyhow!("no regret reference for {}", t.header.problem))?;
                let name = format!(
                    "{} / {} / seed {}",
                    t.header.problem, t.header.policy, t.header.seed
                );
                let data = run_data(t, reference, &sp.statistics).with_context(|| name.clone())?;
                curves.insert(
                    (prob.label.clone(), pol.label.clone(), t.header.seed),
                    data.trace.clone(),
                );
                rows.extend(replay_run(sp, pol, t, reference).with_context(|| name.clone())?);
            }
        }
    }
    let (groups, curves) = aggregate(plan, sp, &rows, &curves);
    Ok(Evaluation {
        rows,
        groups,
        curves,
        incomplete,
    })
}

#[cfg(test)]
mod tests {
    use super::super::config::parse;
    use super::super::trace::{End, Header, Step};
    use super::plan::PrbSpec;
    use super::*;
    use pandora_core::stopping::prb::SampleSchedule;

    const CONFIG: &str = r#"
[experiment]
name = "hand"
seeds = 1
max_evaluations = 4
initial_design = 2

[[problem]]
objective = "ackley"
dim = 1

[[policy]]
acquisition = "log_ei"

[[policy]]
acquisition = "pbgi"
lambda = 0.1

[stopping]
lambdas = [0.1, 0.5]
rules = [
  "pbgi",
  "ucb-lcb",
  "prb",
  { rule = "convergence", window = 2 },
  { rule = "fixed-budget", max_iterations = 3 },
  { rule = "pbgi", debounce = 2, label = "pbgi-debounced" },
  { rule = "pbgi", burn_in = 3 },
  { rule = "pbgi", timing = "before-update", label = "pbgi-before" },
]
"#;

    /// A hand-made run: two initial points (best −2), then four BO steps with values
    /// −1, −1.5, −0.5, −0.6 and costs 1, 2, 1, 1 (optimum 0).
    fn hand_trace(policy: &str) -> Trace {
        let ys = [-3.0, -2.0, -1.0, -1.5, -0.5, -0.6];
        let cs = [1.0, 1.0, 1.0, 2.0, 1.0, 1.0];
        let mut steps = Vec::new();
        let (mut best, mut cum, mut total) = (f64::NEG_INFINITY, 0.0, 0.0);
        for (k, (&y, &c)) in ys.iter().zip(&cs).enumerate() {
            best = f64::max(best, y);
            total += c;
            if k >= 2 {
                cum += c;
            }
            steps.push(Step {
                k,
                phase: if k < 2 {
                    Phase::InitialDesign
                } else {
                    Phase::Model
                },
                x: vec![0.1 * k as f64],
                y,
                cost: c,
                cumulative_cost: cum,
                total_cost: total,
                best,
                regret: Some(-best),
                acquisition_value: None,
                lambda: None,
                predicted_cost: None,
                params: None,
                seconds_propose: 0.0,
                seconds_eval: 0.0,
                cpu_seconds_propose: None,
                cpu_seconds_eval: None,
                bmsei: None,
            });
        }
        let log_eipc = [0.0, -1.0, -2.0, -3.0, -4.0];
        let ucb = [1.0, 0.5, 0.005, 0.2, 0.001];
        let prb = [0.5, 0.9, 0.96, 0.97, 0.99];
        let before = [None, Some(-0.5), Some(-1.0), Some(-2.5), Some(-3.5)];
        let stopping = (0..5)
            .map(|t| StoppingStats {
                best: steps[1 + t].best,
                cumulative_cost: steps[1 + t].cumulative_cost,
                max_log_eipc: Some(log_eipc[t]),
                max_log_eipc_before_update: before[t],
                ucb_lcb: Some(ucb[t]),
                prb: Some(prb[t]),
                prb_samples: Some(64),
                ..StoppingStats::empty(t, 2 + t)
            })
            .collect();
        Trace {
            header: Header {
                version: 1,
                experiment: "hand".into(),
                problem: "ackley-d1-uniform".into(),
                policy: policy.into(),
                acquisition: policy.into(),
                seed: 0,
                problem_seed: 0,
                dim: 1,
                optimum: Some(0.0),
                regret_scale: 1.0,
                budget: None,
                max_evaluations: Some(4),
                cost_setting: "uniform".into(),
                settings: serde_json::Value::Null,
            },
            steps,
            stopping,
            end: Some(End {
                reason: "max_evaluations".into(),
                evaluations: 6,
                cumulative_cost: 5.0,
            }),
            torn: false,
        }
    }

    fn find<'a>(rows: &'a [RunRow], rule: &str, lambda: f64) -> &'a RunRow {
        rows.iter()
            .find(|r| r.rule == rule && r.lambda == lambda)
            .unwrap_or_else(|| panic!("no row {rule} at {lambda}"))
    }

    #[test]
    fn replay_matches_a_hand_computed_trace() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let sp = plan.stopping.clone().unwrap();
        assert!(sp.statistics.log_eipc && sp.statistics.ucb_lcb && sp.statistics.prb.is_some());
        assert!(sp.statistics.log_eipc_before_update);
        assert!(!sp.statistics.srgap && !sp.statistics.log_eipc_inv);
        let labels: Vec<&str> = sp.rules.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "pbgi",
                "ucb-lcb",
                "prb",
                "convergence(window=2)",
                "fixed-budget(max_iterations=3)",
                "pbgi-debounced",
                "pbgi(burn_in=3)",
                "pbgi-before"
            ]
        );
        let rows = replay_run(&sp, &plan.policies[0], &hand_trace("log_ei"), 0.0).unwrap();
        assert_eq!(rows.len(), 8 * 2);
        // Regret of D_t: 2, 1, 1, 0.5, 0.5; cost: 0, 1, 3, 4, 5.
        // λ = 0.1: R = 2, 1.1, 1.3, 0.9, 1.0 (hindsight t = 3, 0.9).
        // λ = 0.5: R = 2, 1.5, 2.5, 2.5, 3.0 (hindsight t = 1, 1.5).
        let expect = |rule: &str, lambda: f64, stop: usize, fired: bool, r: f64, gap: f64| {
            let row = find(&rows, rule, lambda);
            assert_eq!(
                (row.outcome.index, row.outcome.fired),
                (stop, fired),
                "{rule} at {lambda}"
            );
            assert!(
                (row.outcome.cost_adjusted_regret - r).abs() < 1e-12,
                "{row:?}"
            );
            assert!(
                (row.outcome.gap_to_hindsight - gap).abs() < 1e-12,
                "{row:?}"
            );
            assert!(
                (row.outcome.cost_adjusted_regret
                    - row.outcome.simple_regret
                    - lambda * row.outcome.cumulative_cost)
                    .abs()
                    < 1e-12
            );
            assert_eq!(row.run_length, 4);
        };
        // PBGI: max LogEIPC 0, −1, −2, −3, −4 against log 0.1 = −2.30 (t = 3) and
        // log 0.5 = −0.69 (t = 1): the matched rule stops at the hindsight optimum both times.
        expect("pbgi", 0.1, 3, true, 0.9, 0.0);
        expect("pbgi", 0.5, 1, true, 1.5, 0.0);
        // UCB-LCB: 1, 0.5, 0.005, … ≤ 0.01 first at t = 2.
        expect("ucb-lcb", 0.1, 2, true, 1.3, 0.4);
        expect("ucb-lcb", 0.5, 2, true, 2.5, 1.0);
        // PRB: 0.5, 0.9, 0.96 ≥ 0.95 first at t = 2.
        expect("prb", 0.1, 2, true, 1.3, 0.4);
        // Best values −2, −1, −1, −0.5, −0.5: never two BO steps without improvement.
        expect("convergence(window=2)", 0.1, 4, false, 1.0, 0.1);
        expect("convergence(window=2)", 0.5, 4, false, 3.0, 1.5);
        expect("fixed-budget(max_iterations=3)", 0.5, 3, true, 2.5, 1.0);
        // Debounce 2 at λ = 0.5: triggers at t = 1 and 2, stops at 2.
        expect("pbgi-debounced", 0.5, 2, true, 2.5, 1.0);
        expect("pbgi-debounced", 0.1, 4, true, 1.0, 0.1);
        // Burn-in 3 at λ = 0.5: first allowed check t = 3.
        expect("pbgi(burn_in=3)", 0.5, 3, true, 2.5, 1.0);
        // Before the update: none at t = 0 (no previous posterior), then −0.5, −1, −2.5, −3.5:
        // first ≤ log 0.1 at t = 3, first ≤ log 0.5 at t = 2 (one later than after the update).
        expect("pbgi-before", 0.1, 3, true, 0.9, 0.0);
        expect("pbgi-before", 0.5, 2, true, 2.5, 1.0);
        let h = find(&rows, "pbgi", 0.1);
        assert_eq!(
            (h.outcome.hindsight_index, h.outcome.hindsight_regret),
            (3, 0.9)
        );

        // The PBGI(0.1) policy is evaluated at its own λ only.
        let rows = replay_run(&sp, &plan.policies[1], &hand_trace("pbgi(0.1)"), 0.0).unwrap();
        assert_eq!(rows.len(), 8);
        assert!(rows.iter().all(|r| r.lambda == 0.1));
    }

    #[test]
    fn aggregation_and_oracles_match_hand_computed_values() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let sp = plan.stopping.clone().unwrap();
        // Two runs of log_ei: the hand trace (seed 0) and one whose regret is 1 higher
        // everywhere (reference 1 instead of 0, seed 1).
        let a = hand_trace("log_ei");
        let mut b = hand_trace("log_ei");
        b.header.seed = 1;
        b.header.problem_seed = 1;
        let mut refs = BTreeMap::new();
        refs.insert(("ackley-d1-uniform".to_string(), 0), 0.0);
        refs.insert(("ackley-d1-uniform".to_string(), 1), 1.0);
        let ev = evaluate(&plan, &sp, &[a, b], &refs).unwrap();
        let (rows, groups) = (ev.rows.clone(), ev.groups.clone());
        assert_eq!(ev.incomplete, 0);
        // Fixed-iteration curve of log_ei at λ = 0.5: means of (2, 1.5, 2.5, 2.5, 3) and +1.
        let c = ev
            .curves
            .iter()
            .find(|c| c.policy == "log_ei" && c.lambda == 0.5)
            .unwrap();
        assert_eq!(c.mean_r, vec![2.5, 2.0, 3.0, 3.0, 3.5]);
        assert_eq!(rows.len(), 2 * 8 * 2);
        let g = |rule: &str, lambda: f64| {
            groups
                .iter()
                .find(|r| r.policy == "log_ei" && r.rule == rule && r.lambda == lambda)
                .unwrap()
                .clone()
        };
        // UCB-LCB at λ = 0.1: R = 1.3 and 2.3 → mean 1.8, s.e. = sd/√2 = 0.5.
        let u = g("ucb-lcb", 0.1);
        assert_eq!((u.n, u.never_fired, u.mean_stop), (2, 0, 2.0));
        assert!((u.mean_r - 1.8).abs() < 1e-12 && (u.se_r - 0.5).abs() < 1e-12);
        assert!((u.mean_cost - 3.0).abs() < 1e-12 && (u.mean_regret - 1.5).abs() < 1e-12);
        // Paired with the first rule (pbgi: R = 0.9 and 1.9): 0.4 in both runs, so the paired
        // s.e. is 0 where the unpaired one is 0.5.
        assert!((u.mean_r_minus_first - 0.4).abs() < 1e-12 && u.se_r_minus_first < 1e-12);
        let p = g("pbgi", 0.1);
        assert_eq!((p.mean_r_minus_first, p.se_r_minus_first), (0.0, 0.0));
        // Before the update at λ = 0.5 stops at t = 2 (R = 2.5, 3.5) where pbgi stops at t = 1
        // (1.5, 2.5).
        let b = g("pbgi-before", 0.5);
        assert!((b.mean_r_minus_first - 1.0).abs() < 1e-12 && b.se_r_minus_first < 1e-12);
        assert_eq!(g("convergence(window=2)", 0.1).never_fired, 2);
        // Hindsight at λ = 0.1: t = 3 in both runs, R = 0.9 and 1.9.
        let h = g("hindsight", 0.1);
        assert_eq!(h.mean_stop, 3.0);
        assert!((h.mean_r - 1.4).abs() < 1e-12 && h.mean_gap == 0.0);
        // Best fixed iteration at λ = 0.5: mean R over t = 2, 1.5 (+0.5), … → t = 1.
        let f = g("best-fixed", 0.5);
        assert_eq!(f.mean_stop, 1.0);
        assert!((f.mean_r - 2.0).abs() < 1e-12);
        // The hindsight oracle is never worse than any rule, and the CSVs have a row per group.
        for r in &groups {
            let h = g("hindsight", r.lambda);
            if r.policy == "log_ei" {
                assert!(h.mean_r <= r.mean_r + 1e-12, "{r:?}");
            }
        }
        let csv = groups_csv(&groups);
        assert_eq!(csv.lines().count(), 1 + groups.len());
        assert!(
            runs_csv(&rows)
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("ackley-d1-uniform,log_ei,0,pbgi,0.1,3,true,4,")
        );
        assert!(table(&plan, &sp, &groups).contains("pbgi-debounced"));
        // Markdown: mean ± 2 s.e.; in each column the best rule (oracles excluded) in bold.
        let md = markdown(&plan, &sp, &groups);
        let ucb_cell = "1.80 ± 1.00 (2.0; 0 of 2)";
        assert!(md.contains(ucb_cell), "{md}");
        assert!(!md.contains("| hindsight | **") && !md.contains("| best-fixed | **"));
        for block in md.split("### ").skip(1) {
            let best = groups
                .iter()
                .filter(|r| r.policy == "log_ei" && block.contains(&format!("λ = {}:", r.lambda)))
                .filter(|r| r.rule != "hindsight" && r.rule != "best-fixed")
                .map(|r| r.mean_r)
                .fold(f64::INFINITY, f64::min);
            let bold = block.lines().filter(|l| l.contains("| **")).count();
            assert!(bold >= 1, "{block}");
            let bold_line = block.lines().find(|l| l.contains("| **")).unwrap();
            assert!(bold_line.contains(&format!("**{} ±", super::super::format::fmt_sig3(best))));
        }
        // The figure: the fixed-iteration curve and a marker per rule at (mean stop, mean R).
        let fig = super::super::figures::stopping_figure(&plan, &sp, &ev, "ackley-d1-uniform", 0.1);
        assert_eq!(fig.panels.len(), 1, "only log_ei has runs");
        let series = &fig.panels[0].series;
        // λ = 0.1: R = 2, 1.1, 1.3, 0.9, 1.0 and +1.
        for (a, b) in series[0].y.iter().zip([2.5, 1.6, 1.8, 1.4, 1.5]) {
            assert!((a - b).abs() < 1e-12, "{:?}", series[0].y);
        }
        assert_eq!(series[0].y.len(), 5);
        let ucb = series.iter().find(|s| s.name == "ucb-lcb").unwrap();
        assert_eq!(ucb.x, vec![2.0]);
        assert!((ucb.y[0] - 1.8).abs() < 1e-12);
        assert!(series.iter().any(|s| s.name == "hindsight"));
        assert_eq!(series.len(), 1 + 8 + 1);
    }

    #[test]
    fn missing_statistics_and_bad_sections_are_errors() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        let sp = plan.stopping.clone().unwrap();
        let mut t = hand_trace("log_ei");
        t.stopping.pop();
        let e = replay_run(&sp, &plan.policies[0], &t, 0.0).unwrap_err();
        assert!(format!("{e:#}").contains("4 of its 5"), "{e:#}");
        let mut t = hand_trace("log_ei");
        t.stopping[2].ucb_lcb = None;
        let e = replay_run(&sp, &plan.policies[0], &t, 0.0).unwrap_err();
        assert!(format!("{e:#}").contains("lacks ucb_lcb"), "{e:#}");
        let bad = |from: &str, to: &str, needle: &str| {
            let text = CONFIG.replace(from, to);
            let e = parse(&text).and_then(|f| f.resolve(false)).unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{needle}: {e:#}");
        };
        bad(
            "lambdas = [0.1, 0.5]",
            "lambdas = [0.2, 0.5]",
            "not in `lambdas`",
        );
        bad(
            "lambdas = [0.1, 0.5]",
            "lambdas = [0.1, -1.0]",
            "finite and > 0",
        );
        bad("\"ucb-lcb\",", "\"ucb-lcbb\",", "unknown rule 'ucb-lcbb'");
        bad(
            "\"ucb-lcb\",",
            "\"pbgi\",",
            "two rules have the label 'pbgi'",
        );
        bad(
            "\"ucb-lcb\",",
            "{ rule = \"pbgi\", lambda = 0.1, label = \"x\" },",
            "comes from `lambdas`",
        );
        bad(
            "\"prb\",",
            "\"prb\", { rule = \"prb\", epsilon = 0.2 },",
            "must share epsilon",
        );
        let e = parse(
            &CONFIG
                .replace("dim = 1", "dim = 2")
                .replace("rules = [", "prb_grid = 11\nrules = ["),
        )
        .and_then(|f| f.resolve(false))
        .unwrap_err();
        assert!(format!("{e:#}").contains("grid is for 1-D"), "{e:#}");
        // The grid is for 1-D problems.
        let e = parse(
            &CONFIG
                .replace("dim = 1", "dim = 2")
                .replace("rules = [", "grid = 11\nrules = ["),
        )
        .and_then(|f| f.resolve(false))
        .unwrap_err();
        assert!(format!("{e:#}").contains("grid is for 1-D"), "{e:#}");
    }

    #[test]
    fn prb_schedule_grows_to_its_cap() {
        let p = PrbSpec {
            epsilon: 0.1,
            schedule: SampleSchedule::default(),
            num_features: 1024,
            grid: None,
        };
        // 64, 96, 144, 216, 324, 486, 729, 1000.
        let s: Vec<usize> = (0..9).map(|t| p.samples_at(t)).collect();
        assert_eq!(s, [64, 96, 144, 216, 324, 486, 729, 1000, 1000]);
    }
}
