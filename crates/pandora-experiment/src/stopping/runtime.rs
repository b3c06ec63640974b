//! What the stopping rules cost to compute: the stopping paper's runtime comparison (App. C.1,
//! Figure 10).
//!
//! **Definition.** The paper measures "the CPU time (in seconds) of the computation of the
//! stopping rule, excluding the acquisition function computation and optimization", per BO
//! iteration. Every `stopping` line of a trace carries the seconds of each statistic it
//! computed ([`StatisticSeconds`]: CPU time of the computing thread where that clock sees all of
//! the work — a run on a rayon pool of one thread, as the experiment grid runs them — wall time
//! otherwise). A rule's cost is its statistic's: the PBGI/LogEIPC rule and LogEIPC-med share
//! `log_eipc` (LogEIPC-med's `log_eipc_inv` is the same value unless costs are unknown),
//! SRGap-med is `srgap` plus `previous_posterior` (the posterior of `D_{t−1}`, rebuilt from its
//! stored hyperparameters), UCB-LCB is `ucb_lcb`, PRB is `prb`. Convergence, GSS and the fixed
//! budgets read only the best value and cost nothing.
//!
//! **Summaries.** Per problem × policy × statistic over the complete runs: the mean seconds per
//! iteration with 2 standard errors across runs (each run's own mean is one observation, since
//! the iterations of one run are not independent), the median and the maximum over all
//! iterations (`summary/stopping_runtime.csv`); and the mean over runs at every iteration `t`
//! (`summary/stopping_runtime_by_iteration.csv`, the paper's curves). Traces written before the
//! seconds were recorded contribute nothing.

use super::super::config::Plan;
use super::super::format::fmt_sig3;
use super::super::summary::quantile;
use super::super::trace::{SecondsClock, Trace};
use super::mean_se;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The runtime of one statistic for one problem × policy.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeRow {
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// Statistic (a field name of [`StatisticSeconds`]).
    pub statistic: &'static str,
    /// `cpu`, `wall`, or `mixed` when the runs used both clocks.
    pub clock: &'static str,
    /// Runs with at least one timed iteration.
    pub runs: usize,
    /// Timed iterations, all runs.
    pub iterations: usize,
    /// Mean over runs of each run's mean seconds per iteration.
    pub mean: f64,
    /// Two standard errors of `mean` across runs.
    pub se2: f64,
    /// Median seconds of one iteration, all runs.
    pub median: f64,
    /// Largest seconds of one iteration.
    pub max: f64,
}

/// The mean seconds of one statistic at every iteration, over the runs timed there.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeCurve {
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// Statistic.
    pub statistic: &'static str,
    /// `(iteration, runs, mean seconds)` for every iteration with at least one timed run.
    pub points: Vec<(usize, usize, f64)>,
}

/// The samples of one problem × policy × statistic.
#[derive(Default)]
struct Samples {
    /// Seconds by run.
    by_run: Vec<Vec<f64>>,
    /// Seconds by iteration.
    by_iteration: BTreeMap<usize, Vec<f64>>,
    cpu: bool,
    wall: bool,
}

/// The runtime rows and curves of the complete runs in `traces`, in the plan's problem, policy
/// and statistic order.
pub fn runtime(plan: &Plan, traces: &[Trace]) -> (Vec<RuntimeRow>, Vec<RuntimeCurve>) {
    let mut rows = Vec::new();
    let mut curves = Vec::new();
    for prob in &plan.problems {
        for pol in &plan.policies {
            let mut by_stat: BTreeMap<(usize, &'static str), Samples> = BTreeMap::new();
            let runs = traces.iter().filter(|t| {
                t.end.is_some() && t.header.problem == prob.label && t.header.policy == pol.label
            });
            for t in runs {
                let mut mine: BTreeMap<(usize, &'static str), Vec<f64>> = BTreeMap::new();
                for line in &t.stopping {
                    let Some(secs) = &line.statistic_seconds else {
                        continue;
                    };
                    for (k, (name, v)) in secs.entries().into_iter().enumerate() {
                        let Some(v) = v else { continue };
                        let s = by_stat.entry((k, name)).or_default();
                        match secs.clock {
                            SecondsClock::Cpu => s.cpu = true,
                            SecondsClock::Wall => s.wall = true,
                        }
                        s.by_iteration.entry(line.iteration).or_default().push(v);
                        mine.entry((k, name)).or_default().push(v);
                    }
                }
                for (key, v) in mine {
                    by_stat.entry(key).or_default().by_run.push(v);
                }
            }
            for ((_, statistic), s) in by_stat {
                let run_means: Vec<f64> = s
                    .by_run
                    .iter()
                    .map(|v| v.iter().sum::<f64>() / v.len() as f64)
                    .collect();
                let mut all: Vec<f64> = s.by_run.iter().flatten().copied().collect();
                all.sort_by(f64::total_cmp);
                let (mean, se) = mean_se(&run_means);
                rows.push(RuntimeRow {
                    problem: prob.label.clone(),
                    policy: pol.label.clone(),
                    statistic,
                    clock: match (s.cpu, s.wall) {
                        (true, false) => "cpu",
                        (false, true) => "wall",
                        _ => "mixed",
                    },
                    runs: run_means.len(),
                    iterations: all.len(),
                    mean,
                    se2: 2.0 * se,
                    median: quantile(&all, 0.5),
                    max: all.last().copied().unwrap_or(f64::NAN),
                });
                curves.push(RuntimeCurve {
                    problem: prob.label.clone(),
                    policy: pol.label.clone(),
                    statistic,
                    points: s
                        .by_iteration
                        .iter()
                        .map(|(&t, v)| (t, v.len(), v.iter().sum::<f64>() / v.len() as f64))
                        .collect(),
                });
            }
        }
    }
    (rows, curves)
}

/// `summary/stopping_runtime.csv`.
pub fn runtime_csv(rows: &[RuntimeRow]) -> String {
    let mut s = String::from(
        "problem,policy,statistic,clock,runs,iterations,mean_seconds,se2,median_seconds,max_seconds\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{}",
            pandora_study::csv::field(&r.problem),
            pandora_study::csv::field(&r.policy),
            r.statistic,
            r.clock,
            r.runs,
            r.iterations,
            r.mean,
            r.se2,
            r.median,
            r.max
        );
    }
    s
}

/// `summary/stopping_runtime_by_iteration.csv`.
pub fn runtime_by_iteration_csv(curves: &[RuntimeCurve]) -> String {
    let mut s = String::from("problem,policy,statistic,iteration,runs,mean_seconds\n");
    for c in curves {
        for &(t, n, m) in &c.points {
            let _ = writeln!(
                s,
                "{},{},{},{t},{n},{m}",
                pandora_study::csv::field(&c.problem),
                pandora_study::csv::field(&c.policy),
                c.statistic
            );
        }
    }
    s
}

/// The runtime table of `summary.md`: mean ± 2 s.e. seconds per iteration, one row per problem
/// × policy, one column per statistic.
pub fn markdown(rows: &[RuntimeRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut stats: Vec<&'static str> = Vec::new();
    for r in rows {
        if !stats.contains(&r.statistic) {
            stats.push(r.statistic);
        }
    }
    let mut s = String::from(
        "\n## Stopping statistics: seconds per iteration (mean ± 2 s.e. across runs)\n\n| problem | policy |",
    );
    for st in &stats {
        let _ = write!(s, " {st} |");
    }
    s.push_str("\n|---|---|");
    s.push_str(&"---|".repeat(stats.len()));
    s.push('\n');
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.problem.as_str(), r.policy.as_str())) {
            keys.push((r.problem.as_str(), r.policy.as_str()));
        }
    }
    for (problem, policy) in keys {
        let _ = write!(s, "| {problem} | {policy} |");
        for st in &stats {
            match rows
                .iter()
                .find(|r| r.problem == problem && r.policy == policy && r.statistic == *st)
            {
                Some(r) => {
                    let _ = write!(s, " {} ± {} |", fmt_sig3(r.mean), fmt_sig3(r.se2));
                }
                None => s.push_str(" |"),
            }
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::super::config::parse;
    use super::super::super::trace::{End, Header, StatisticSeconds, StoppingStats};
    use super::*;

    const CONFIG: &str = r#"
[experiment]
name = "timing"
seeds = 2
max_evaluations = 4
initial_design = 2

[[problem]]
objective = "ackley"
dim = 1

[[policy]]
acquisition = "log_ei"

[stopping]
lambdas = [0.1]
rules = ["pbgi", "srgap-med"]
"#;

    fn line(t: usize, secs: Option<StatisticSeconds>) -> StoppingStats {
        StoppingStats {
            cumulative_cost: t as f64,
            max_log_eipc: Some(-1.0),
            statistic_seconds: secs,
            ..StoppingStats::empty(t, 2 + t)
        }
    }

    fn secs(clock: SecondsClock, log_eipc: f64, srgap: Option<f64>) -> Option<StatisticSeconds> {
        Some(StatisticSeconds {
            clock,
            log_eipc: Some(log_eipc),
            srgap,
            previous_posterior: srgap.map(|_| 0.5),
            ..StatisticSeconds::default()
        })
    }

    fn trace(plan: &Plan, seed: u64, lines: Vec<StoppingStats>, finished: bool) -> Trace {
        Trace {
            header: Header {
                version: 1,
                experiment: plan.name.clone(),
                problem: plan.problems[0].label.clone(),
                policy: plan.policies[0].label.clone(),
                acquisition: "log_ei".into(),
                seed,
                problem_seed: seed,
                dim: 1,
                optimum: Some(0.0),
                regret_scale: 1.0,
                budget: None,
                max_evaluations: Some(4),
                cost_setting: "uniform".into(),
                settings: serde_json::Value::Null,
            },
            steps: Vec::new(),
            stopping: lines,
            end: finished.then(|| End {
                reason: "max_evaluations".into(),
                evaluations: 4,
                cumulative_cost: 2.0,
            }),
            torn: false,
        }
    }

    #[test]
    fn runtime_averages_runs_then_iterations_and_skips_what_was_not_timed() {
        let plan = parse(CONFIG).unwrap().resolve(false).unwrap();
        use SecondsClock::Cpu;
        // Run 0: log_eipc 1, 3 (mean 2); srgap at t = 1 only: 4. Run 1: log_eipc 6 (and an
        // untimed line, as in an old trace), srgap 8. An unfinished run is left out.
        let traces = vec![
            trace(
                &plan,
                0,
                vec![
                    line(0, secs(Cpu, 1.0, None)),
                    line(1, secs(Cpu, 3.0, Some(4.0))),
                ],
                true,
            ),
            trace(
                &plan,
                1,
                vec![line(0, None), line(1, secs(Cpu, 6.0, Some(8.0)))],
                true,
            ),
            trace(&plan, 1, vec![line(0, secs(Cpu, 100.0, None))], false),
        ];
        let (rows, curves) = runtime(&plan, &traces);
        let names: Vec<&str> = rows.iter().map(|r| r.statistic).collect();
        assert_eq!(names, ["log_eipc", "srgap", "previous_posterior"]);
        let le = &rows[0];
        // Run means 2 and 6: mean 4, s.e. = sqrt(8 / 1 / 2) = 2.
        assert_eq!((le.runs, le.iterations), (2, 3));
        assert!((le.mean - 4.0).abs() < 1e-12 && (le.se2 - 4.0).abs() < 1e-12);
        assert_eq!((le.median, le.max, le.clock), (3.0, 6.0, "cpu"));
        let sr = &rows[1];
        assert_eq!((sr.runs, sr.mean, sr.median), (2, 6.0, 6.0));
        // Curves: log_eipc at t = 0 only run 0 was timed; at t = 1 both.
        assert_eq!(curves[0].points, vec![(0, 1, 1.0), (1, 2, 4.5)]);
        assert_eq!(curves[1].points, vec![(1, 2, 6.0)]);
        let csv = runtime_csv(&rows);
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .starts_with("ackley-d1-uniform,log_ei,log_eipc,cpu,2,3,4,4,3,6"),
            "{csv}"
        );
        let md = markdown(&rows);
        assert!(
            md.contains("| ackley-d1-uniform | log_ei | 4.00 ± 4.00 | 6.00 ± 4.00 | 0.500 ± 0 |"),
            "{md}"
        );
        // Mixed clocks are named.
        let mixed = vec![
            trace(&plan, 0, vec![line(0, secs(Cpu, 1.0, None))], true),
            trace(
                &plan,
                1,
                vec![line(0, secs(SecondsClock::Wall, 1.0, None))],
                true,
            ),
        ];
        assert_eq!(runtime(&plan, &mixed).0[0].clock, "mixed");
    }
}
