//! Summaries: regret against cumulative BO cost on a common grid, per problem and policy.
//!
//! Each complete run gives a curve through `(0, regret after the initial design)` and
//! `(cumulative cost, regret)` after every BO step; it is read on the grid
//! `0, h/(m−1), …, h` (`h` = the problem's budget, or the largest final cumulative cost when it
//! has none; `m` = `grid_points`, default `floor(h) + 1`) by linear interpolation (the papers'
//! convention) or as a step function, holding the last value beyond the curve's end. At every
//! grid point the runs of a policy give the median, quartiles (linear-interpolated quantiles,
//! NumPy's default), the mean and twice its standard error (sample standard deviation / √n).
//!
//! Regret is `regret_scale · (reference − best)`, where the reference is the larger of the
//! problem's optimum (when known) and the best value observed across every run (complete or not)
//! of that problem instance (same problem and instance seed): a searched optimum can miss the
//! maximum (see [`references`]). A problem's `regret_reference` replaces both for every instance
//! (see [`problem_references`]).
//!
//! [`super::report::write_summary`] writes the CSVs, the figures and `summary.md` (markdown
//! tables, see [`markdown`]).

use super::config::{Interpolation, Plan, ResolvedProblem};
use super::format::{fmt_number, fmt_sig3};
use super::trace::{self, Trace};
use anyhow::{Context, Result};
use pandora_core::policy::Phase;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Statistics of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Sample size.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// First quartile.
    pub q25: f64,
    /// Third quartile.
    pub q75: f64,
    /// Mean.
    pub mean: f64,
    /// Twice the standard error of the mean (0 for one value).
    pub se2: f64,
}

/// The `p`-quantile of sorted values by linear interpolation between order statistics.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Statistics of a non-empty sample.
pub fn stats(values: &[f64]) -> Stats {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let se2 = if n > 1 {
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        2.0 * (var / n as f64).sqrt()
    } else {
        0.0
    };
    Stats {
        n,
        median: quantile(&v, 0.5),
        q25: quantile(&v, 0.25),
        q75: quantile(&v, 0.75),
        mean,
        se2,
    }
}

/// A run's regret curve: points `(cumulative cost, regret)` with non-decreasing costs.
pub fn curve(t: &Trace, reference: f64) -> Vec<(f64, f64)> {
    let scale = t.header.regret_scale;
    let mut pts = Vec::new();
    let mut initial_best = None;
    for s in &t.steps {
        if s.phase == Phase::InitialDesign {
            initial_best = Some(s.best);
        } else {
            if pts.is_empty() {
                pts.push((0.0, scale * (reference - initial_best.unwrap_or(f64::NAN))));
            }
            pts.push((s.cumulative_cost, scale * (reference - s.best)));
        }
    }
    if pts.is_empty()
        && let Some(b) = initial_best
    {
        pts.push((0.0, scale * (reference - b)));
    }
    pts
}

/// The curve's value at cost `c`.
pub fn at(curve: &[(f64, f64)], c: f64, interpolation: Interpolation) -> f64 {
    // The last point at or before c.
    let i = curve.partition_point(|p| p.0 <= c);
    if i == 0 {
        return curve[0].1;
    }
    let (c0, r0) = curve[i - 1];
    if i == curve.len() || interpolation == Interpolation::Step {
        return r0;
    }
    let (c1, r1) = curve[i];
    r0 + (r1 - r0) * (c - c0) / (c1 - c0)
}

/// The summary of one policy on one problem.
#[derive(Debug, Clone)]
pub struct PolicySummary {
    /// Policy label.
    pub policy: String,
    /// Statistics at every grid point.
    pub stats: Vec<Stats>,
    /// Mean number of evaluations per run.
    pub mean_evaluations: f64,
    /// Mean seconds per model step (fit + acquisition), NaN without model steps.
    pub mean_seconds_per_step: f64,
}

/// What a problem's regret is measured against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reference {
    /// The optimum (or the best value observed when a run exceeded it; see [`references`]).
    Optimum,
    /// The best value observed in any run of the instance (the optimum is unknown).
    BestObserved,
    /// The problem's `regret_reference` from the configuration.
    Given(f64),
}

/// The summary of one problem.
#[derive(Debug, Clone)]
pub struct ProblemSummary {
    /// Problem label.
    pub problem: String,
    /// The cost grid.
    pub grid: Vec<f64>,
    /// What regret is measured against.
    pub reference: Reference,
    /// Instances (of `instances`) whose known optimum (or given reference) some run exceeded:
    /// the optimum search missed the maximum, and regret there is against the best value
    /// observed (with a given reference, regret is negative there).
    pub optimum_missed: usize,
    /// Instance seeds with traces.
    pub instances: usize,
    /// Per policy, in the configuration's order (policies without complete runs are left out).
    pub policies: Vec<PolicySummary>,
    /// Traces found without an end line (not summarized).
    pub incomplete: usize,
}

/// Reads every trace in `dir`: the `NAME.jsonl` files and the unfinished `NAME.jsonl.part` of
/// runs without a `NAME.jsonl`.
pub fn read_traces(dir: &Path) -> Result<Vec<Trace>> {
    let mut out = Vec::new();
    let paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {dir:?}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let mut names: Vec<_> = paths
        .iter()
        .filter(|p| match p.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => true,
            Some("part") => {
                p.file_stem()
                    .is_some_and(|s| s.to_string_lossy().ends_with(".jsonl"))
                    && !p.with_extension("").exists()
            }
            _ => false,
        })
        .cloned()
        .collect();
    names.sort();
    for p in names {
        out.push(trace::read(&p)?);
    }
    Ok(out)
}

/// The regret reference of every instance seed of a problem's traces: the larger of the optimum
/// (when known) and the best value observed in any run (complete or not) of that instance.
///
/// An optimum found by search (a GP prior sample's, `gp_sample`) can fall short of the true
/// maximum: in 8-D with lengthscale 0.1 the multi-start search misses it for some seeds, and a
/// policy then observes a value above it. Regret against the searched optimum would be negative
/// there; against the best value known it stays ≥ 0. For problems whose optimum is exact nothing
/// changes, since no run can observe more.
pub fn references(mine: &[&Trace]) -> BTreeMap<u64, f64> {
    let mut reference: BTreeMap<u64, f64> = BTreeMap::new();
    for t in mine {
        let r = reference
            .entry(t.header.problem_seed)
            .or_insert(f64::NEG_INFINITY);
        if let Some(o) = t.header.optimum {
            *r = r.max(o);
        }
        if let Some(s) = t.steps.last() {
            *r = r.max(s.best);
        }
    }
    reference
}

/// The regret reference of every instance seed of `prob`'s traces `mine`: its configured
/// `regret_reference` when it has one, else [`references`].
pub fn problem_references(prob: &ResolvedProblem, mine: &[&Trace]) -> BTreeMap<u64, f64> {
    match prob.config.regret_reference {
        Some(r) => mine.iter().map(|t| (t.header.problem_seed, r)).collect(),
        None => references(mine),
    }
}

/// The instance seeds of a problem's traces whose known optimum (or `given` reference) some run
/// has exceeded (the optimum search missed the maximum; see [`references`]).
pub fn optimum_exceeded(mine: &[&Trace], given: Option<f64>) -> Vec<u64> {
    let mut seeds: Vec<u64> = mine
        .iter()
        .filter(|t| {
            given
                .or(t.header.optimum)
                .zip(t.steps.last())
                .is_some_and(|(o, s)| s.best > o)
        })
        .map(|t| t.header.problem_seed)
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds
}

/// Summarizes the traces of `plan`.
pub fn summarize(plan: &Plan, traces: &[Trace]) -> Vec<ProblemSummary> {
    let mut out = Vec::new();
    for prob in &plan.problems {
        let mine: Vec<&Trace> = traces
            .iter()
            .filter(|t| t.header.problem == prob.label)
            .collect();
        let reference = problem_references(prob, &mine);
        let given = prob.config.regret_reference;
        let kind = match given {
            Some(r) => Reference::Given(r),
            None if mine.iter().any(|t| t.header.optimum.is_none()) => Reference::BestObserved,
            None => Reference::Optimum,
        };
        let optimum_missed = optimum_exceeded(&mine, given).len();
        let complete: Vec<&Trace> = mine
            .iter()
            .copied()
            .filter(|t| t.end.is_some() && !t.steps.is_empty())
            .collect();
        let incomplete = mine.len() - complete.len();
        let horizon = prob.budget.unwrap_or_else(|| {
            complete
                .iter()
                .map(|t| t.end.as_ref().map_or(0.0, |e| e.cumulative_cost))
                .fold(0.0, f64::max)
        });
        let m = plan
            .grid_points
            .unwrap_or(horizon.floor() as usize + 1)
            .max(2);
        let grid: Vec<f64> = (0..m)
            .map(|i| horizon * i as f64 / (m - 1) as f64)
            .collect();
        let mut policies = Vec::new();
        for pol in &plan.policies {
            let runs: Vec<&Trace> = complete
                .iter()
                .copied()
                .filter(|t| t.header.policy == pol.label)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let curves: Vec<Vec<(f64, f64)>> = runs
                .iter()
                .map(|t| curve(t, reference[&t.header.problem_seed]))
                .collect();
            let stats_at = grid
                .iter()
                .map(|&c| {
                    let v: Vec<f64> = curves
                        .iter()
                        .map(|cv| at(cv, c, plan.interpolation))
                        .collect();
                    stats(&v)
                })
                .collect();
            let evals = runs.iter().map(|t| t.steps.len() as f64).sum::<f64>() / runs.len() as f64;
            let (secs, count) = runs
                .iter()
                .flat_map(|t| t.steps.iter())
                .filter(|s| s.phase == Phase::Model)
                .fold((0.0, 0usize), |(a, n), s| (a + s.seconds_propose, n + 1));
            policies.push(PolicySummary {
                policy: pol.label.clone(),
                stats: stats_at,
                mean_evaluations: evals,
                mean_seconds_per_step: if count > 0 {
                    secs / count as f64
                } else {
                    f64::NAN
                },
            });
        }
        out.push(ProblemSummary {
            problem: prob.label.clone(),
            grid,
            reference: kind,
            optimum_missed,
            instances: reference.len(),
            policies,
            incomplete,
        });
    }
    out
}

/// The long-format CSV of one problem: `policy,cost,n,median,q25,q75,mean,se2`.
pub fn problem_csv(s: &ProblemSummary) -> String {
    let mut out = String::from("policy,cost,n,median,q25,q75,mean,se2\n");
    for p in &s.policies {
        for (c, st) in s.grid.iter().zip(&p.stats) {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{}",
                pandora_study::csv::field(&p.policy),
                c,
                st.n,
                st.median,
                st.q25,
                st.q75,
                st.mean,
                st.se2
            );
        }
    }
    out
}

/// The final-cost CSV over all problems.
pub fn final_csv(all: &[ProblemSummary]) -> String {
    let mut out = String::from(
        "problem,policy,cost,n,median,q25,q75,mean,se2,mean_evaluations,\
         mean_seconds_per_step\n",
    );
    for s in all {
        let c = s.grid.last().copied().unwrap_or(0.0);
        for p in &s.policies {
            let st = p.stats.last().expect("a non-empty grid");
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{}",
                pandora_study::csv::field(&s.problem),
                pandora_study::csv::field(&p.policy),
                c,
                st.n,
                st.median,
                st.q25,
                st.q75,
                st.mean,
                st.se2,
                p.mean_evaluations,
                p.mean_seconds_per_step
            );
        }
    }
    out
}

fn reference_phrase(r: Reference) -> String {
    match r {
        Reference::Optimum => String::new(),
        Reference::BestObserved => " (against the best value seen in any run)".into(),
        Reference::Given(r) => format!(" (against the configured reference {r})"),
    }
}

/// Markdown tables of the final regret: per problem, one row per policy with the median
/// [q25, q75], the mean ± 2 s.e., the mean number of evaluations and the mean seconds per BO
/// step (written to `summary/summary.md`).
pub fn markdown(all: &[ProblemSummary]) -> String {
    let mut out = String::new();
    for s in all {
        if s.policies.is_empty() {
            continue;
        }
        let horizon = s.grid.last().copied().unwrap_or(0.0);
        let _ = writeln!(
            out,
            "### {}: regret{} at cumulative cost {}\n",
            s.problem,
            reference_phrase(s.reference),
            fmt_sig3(horizon)
        );
        out.push_str(
            "| policy | runs | median [q25, q75] | mean ± 2 s.e. | evaluations (mean) | s per BO step |\n\
             |---|---|---|---|---|---|\n",
        );
        for p in &s.policies {
            let st = p.stats.last().expect("a non-empty grid");
            let _ = writeln!(
                out,
                "| {} | {} | {} [{}, {}] | {} ± {} | {:.1} | {} |",
                p.policy.replace('|', "\\|"),
                st.n,
                fmt_sig3(st.median),
                fmt_sig3(st.q25),
                fmt_sig3(st.q75),
                fmt_sig3(st.mean),
                fmt_sig3(st.se2),
                p.mean_evaluations,
                if p.mean_seconds_per_step.is_nan() {
                    "–".to_string()
                } else {
                    fmt_sig3(p.mean_seconds_per_step)
                }
            );
        }
        out.push('\n');
    }
    out
}

/// A text table: per policy, median [q25, q75] at 25 %, 50 % and 100 % of the horizon, and the
/// final mean ± 2 s.e.
pub fn table(all: &[ProblemSummary]) -> String {
    let mut out = String::new();
    for s in all {
        let m = s.grid.len();
        let cols = [(m - 1) / 4, (m - 1) / 2, m - 1];
        let _ = writeln!(
            out,
            "== {} — regret{}: median [q25, q75] at cumulative cost; mean ± 2 s.e. at the end",
            s.problem,
            reference_phrase(s.reference)
        );
        if let (Reference::Given(_), true) = (s.reference, s.optimum_missed > 0) {
            let _ = writeln!(
                out,
                "   ({} of {} instances: a run observed more than the reference; regret there is \
                 negative)",
                s.optimum_missed, s.instances
            );
        } else if s.optimum_missed > 0 {
            let _ = writeln!(
                out,
                "   ({} of {} instances: a run observed more than the searched optimum; regret \
                 there is against the best value observed)",
                s.optimum_missed, s.instances
            );
        }
        let mut header = format!("{:<22} {:>4}", "policy", "n");
        for &c in &cols {
            header += &format!(" {:>34}", format!("c = {}", fmt_number(s.grid[c], 3)));
        }
        header += &format!(" {:>26} {:>10}", "mean ± 2se", "s/step");
        let _ = writeln!(out, "{header}");
        for p in &s.policies {
            let mut row = format!("{:<22} {:>4}", p.policy, p.stats[m - 1].n);
            for &c in &cols {
                let st = &p.stats[c];
                row += &format!(
                    " {:>34}",
                    format!(
                        "{} [{}, {}]",
                        fmt_number(st.median, 3),
                        fmt_number(st.q25, 3),
                        fmt_number(st.q75, 3)
                    )
                );
            }
            let st = &p.stats[m - 1];
            row += &format!(
                " {:>26} {:>10}",
                format!("{} ± {}", fmt_number(st.mean, 3), fmt_number(st.se2, 3)),
                if p.mean_seconds_per_step.is_nan() {
                    "-".into()
                } else {
                    format!("{:.4}", p.mean_seconds_per_step)
                }
            );
            let _ = writeln!(out, "{row}");
        }
        if s.incomplete > 0 {
            let _ = writeln!(out, "({} incomplete run(s) not summarized)", s.incomplete);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_labels_are_neutralized_like_the_study_export() {
        let s = ProblemSummary {
            problem: "=HYPERLINK(\"http://x\")".into(),
            grid: vec![1.0],
            reference: Reference::Optimum,
            optimum_missed: 0,
            instances: 1,
            policies: vec![PolicySummary {
                policy: "@cmd".into(),
                stats: vec![stats(&[1.0])],
                mean_evaluations: 1.0,
                mean_seconds_per_step: 0.0,
            }],
            incomplete: 0,
        };
        let final_rows = final_csv(std::slice::from_ref(&s));
        let row = final_rows.lines().nth(1).unwrap();
        assert!(
            row.starts_with("\"'=HYPERLINK(\"\"http://x\"\")\",'@cmd,1,"),
            "{row}"
        );
        assert!(
            problem_csv(&s)
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("'@cmd,1,")
        );
    }

    #[test]
    fn statistics_match_hand_computed_values() {
        // Sorted: 1, 2, 4, 8. Median 3; q25 = 1 + 0.75·1 = 1.75; q75 = 4 + 0.25·4 = 5.
        let s = stats(&[4.0, 1.0, 8.0, 2.0]);
        assert_eq!((s.median, s.q25, s.q75, s.mean), (3.0, 1.75, 5.0, 3.75));
        // Sample variance: (7.5625 + 3.0625 + 0.0625 + 18.0625)/3 = 9.5833…; se = √(9.5833/4).
        let se = (28.75f64 / 3.0 / 4.0).sqrt();
        assert!((s.se2 - 2.0 * se).abs() < 1e-12);
        let one = stats(&[5.0]);
        assert_eq!((one.median, one.q25, one.se2), (5.0, 5.0, 0.0));
    }

    #[test]
    fn markdown_numbers_have_three_significant_digits() {
        let cases = [
            (0.04512, "0.0451"),
            (3.584, "3.58"),
            (12.5, "12.5"),
            (1234.4, "1234"),
            (1e-4, "1.00e-4"),
            (2.5e5, "2.50e5"),
            (-0.5, "-0.500"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (0.99999999, "1.00"),
            (0.0009996, "0.00100"),
            (0.00099, "9.90e-4"),
            (99999.0, "1.00e5"),
        ];
        for (v, s) in cases {
            assert_eq!(fmt_sig3(v), s, "{v}");
        }
    }

    #[test]
    fn curves_interpolate_linearly_or_as_steps() {
        let c = [(0.0, 4.0), (2.0, 2.0), (2.0, 1.0), (6.0, 0.0)];
        assert_eq!(at(&c, 0.0, Interpolation::Linear), 4.0);
        assert_eq!(at(&c, 1.0, Interpolation::Linear), 3.0);
        assert_eq!(at(&c, 1.0, Interpolation::Step), 4.0);
        // A zero-cost step: the later point wins at its cost.
        assert_eq!(at(&c, 2.0, Interpolation::Linear), 1.0);
        assert_eq!(at(&c, 4.0, Interpolation::Linear), 0.5);
        assert_eq!(at(&c, 4.0, Interpolation::Step), 1.0);
        // Held beyond the end.
        assert_eq!(at(&c, 10.0, Interpolation::Linear), 0.0);
    }

    #[test]
    fn regret_is_against_the_optimum_or_the_best_value_of_the_instance() {
        use super::super::config::parse;
        use super::super::trace::{End, Header, Step};
        let plan = parse(
            "[experiment]\nname = \"u\"\nseeds = 2\nbudget = 2\n\
             [[problem]]\nobjective = \"ackley\"\ndim = 1\n\
             [[policy]]\nacquisition = \"random\"\n[[policy]]\nacquisition = \"log_ei\"\n",
        )
        .unwrap()
        .resolve(false)
        .unwrap();
        let trace = |policy: &str, problem_seed: u64, optimum: Option<f64>, bests: &[f64]| {
            let steps = bests
                .iter()
                .enumerate()
                .map(|(k, &b)| Step {
                    k,
                    phase: if k == 0 {
                        Phase::InitialDesign
                    } else {
                        Phase::Random
                    },
                    x: vec![0.5],
                    y: b,
                    cost: 1.0,
                    cumulative_cost: k as f64,
                    total_cost: k as f64 + 1.0,
                    best: b,
                    regret: None,
                    acquisition_value: None,
                    lambda: None,
                    predicted_cost: None,
                    params: None,
                    seconds_propose: 0.0,
                    seconds_eval: 0.0,
                    cpu_seconds_propose: None,
                    cpu_seconds_eval: None,
                    bmsei: None,
                })
                .collect();
            Trace {
                header: Header {
                    version: 1,
                    experiment: "u".into(),
                    problem: "ackley-d1-uniform".into(),
                    policy: policy.into(),
                    acquisition: policy.into(),
                    seed: problem_seed,
                    problem_seed,
                    dim: 1,
                    optimum,
                    regret_scale: 10.0,
                    budget: Some(2.0),
                    max_evaluations: None,
                    cost_setting: "uniform".into(),
                    settings: serde_json::Value::Null,
                },
                steps,
                stopping: Vec::new(),
                end: Some(End {
                    reason: "budget".into(),
                    evaluations: bests.len(),
                    cumulative_cost: (bests.len() - 1) as f64,
                }),
                torn: false,
            }
        };
        // Instance 0: the best value seen by any policy is −1; instance 1 only reaches −5.
        let traces = vec![
            trace("random", 0, None, &[-4.0, -3.0, -3.0]),
            trace("log_ei", 0, None, &[-4.0, -2.0, -1.0]),
            trace("random", 1, None, &[-6.0, -5.0, -5.0]),
        ];
        let s = summarize(&plan, &traces);
        assert_eq!(s[0].reference, Reference::BestObserved);
        let random = &s[0].policies[0];
        let log_ei = &s[0].policies[1];
        // Final regrets ×10: random 10·(−1 − (−3)) = 20 and 10·(−5 − (−5)) = 0; log_ei 0.
        assert_eq!(random.stats[2].n, 2);
        assert_eq!(random.stats[2].mean, 10.0);
        // At cost 0: 10·(−1 − (−4)) = 30 and 10·(−5 − (−6)) = 10; q75 = 10 + 0.75·20.
        assert_eq!(random.stats[0].q75, 25.0);
        assert_eq!(log_ei.stats[2].mean, 0.0);
        assert_eq!(log_ei.stats[0].mean, 30.0);
        assert!(table(&s).contains("against the best value seen in any run"));
        assert_eq!(s[0].optimum_missed, 0);

        // Known (searched) optima: instance 0's, −2, was missed (log_ei observed −1), so its
        // reference is −1; instance 1's, −4.5, stands.
        let traces = vec![
            trace("random", 0, Some(-2.0), &[-4.0, -3.0, -3.0]),
            trace("log_ei", 0, Some(-2.0), &[-4.0, -2.0, -1.0]),
            trace("random", 1, Some(-4.5), &[-6.0, -5.0, -5.0]),
        ];
        let s = summarize(&plan, &traces);
        assert_eq!(s[0].reference, Reference::Optimum);
        assert_eq!((s[0].optimum_missed, s[0].instances), (1, 2));
        // Final regrets ×10: random 10·(−1 − (−3)) = 20 and 10·(−4.5 − (−5)) = 5; log_ei 0.
        assert_eq!(s[0].policies[0].stats[2].mean, 12.5);
        assert_eq!(s[0].policies[1].stats[2].mean, 0.0);
        assert!(table(&s).contains("1 of 2 instances: a run observed more than the searched"));
        // Markdown: random's final regrets are 20 and 5 (median 12.5, mean 12.5, sd 10.6, so
        // 2 s.e. = 15); no BO steps, so no seconds per step.
        let md = markdown(&s);
        assert!(
            md.contains("### ackley-d1-uniform: regret at cumulative cost 2.00"),
            "{md}"
        );
        assert!(md.contains("| random | 2 | 12.5 [8.75, "), "{md}");
        assert!(md.contains("] | 12.5 ± 15.0 | 3.0 | – |"), "{md}");

        // A configured reference replaces both, for every instance: −2 (exceeded on instance 0).
        let mut plan = plan;
        plan.problems[0].config.regret_reference = Some(-2.0);
        let s = summarize(&plan, &traces);
        assert_eq!(s[0].reference, Reference::Given(-2.0));
        assert_eq!((s[0].optimum_missed, s[0].instances), (1, 2));
        // Final regrets ×10: random 10·(−2 − (−3)) = 10 and 10·(−2 − (−5)) = 30; log_ei −10.
        assert_eq!(s[0].policies[0].stats[2].mean, 20.0);
        assert_eq!(s[0].policies[1].stats[2].mean, -10.0);
        let text = table(&s);
        assert!(
            text.contains("against the configured reference -2"),
            "{text}"
        );
        assert!(text.contains("1 of 2 instances: a run observed more than the reference"));
    }
}
