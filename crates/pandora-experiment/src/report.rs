//! The report of an experiment directory: every summary file and the printed table.
//!
//! [`write_summary`] reads the plan and the traces, has [`summary`](super::summary) put the runs on a common cost
//! grid, has [`figures`] draw them and, with a `[stopping]` section, has [`stopping`] replay the
//! rules offline, and writes what they return. It is the one module that calls the others; they
//! never call it.

use super::config::{Plan, file_component};
use super::summary::{
    final_csv, markdown, problem_csv, problem_references, read_traces, summarize, table,
};
use super::trace::{Trace, read};
use super::{figures, stopping};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// The runs of a plan whose trace in `traces` is not complete, by trace name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completeness {
    /// Runs of the plan.
    pub runs: usize,
    /// Runs without any trace (never started, or their shard has not run).
    pub missing: Vec<String>,
    /// Runs with a trace but no end line (`NAME.jsonl.part`, or a partial `NAME.jsonl` written by
    /// an older version): interrupted, or still running.
    pub unfinished: Vec<String>,
}

impl Completeness {
    /// Whether every run is complete.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.unfinished.is_empty()
    }

    /// A report naming the runs (at most `limit` names per kind).
    pub fn describe(&self, limit: usize) -> String {
        let mut out = format!(
            "{} of {} run(s) are not complete",
            self.missing.len() + self.unfinished.len(),
            self.runs
        );
        for (what, names) in [("missing", &self.missing), ("unfinished", &self.unfinished)] {
            if names.is_empty() {
                continue;
            }
            out += &format!("\n  {what} ({}):", names.len());
            for n in names.iter().take(limit) {
                out += &format!("\n    {n}");
            }
            if names.len() > limit {
                out += &format!("\n    … and {} more", names.len() - limit);
            }
        }
        out
    }
}

/// Which runs of `plan` have no complete trace in `traces`.
pub fn completeness(plan: &Plan, traces: &Path) -> Completeness {
    let mut c = Completeness {
        runs: 0,
        ..Completeness::default()
    };
    for r in plan.runs() {
        c.runs += 1;
        let name = plan.trace_name(&r);
        let path = traces.join(&name);
        let part = super::run::part_path(&path);
        if path.exists() {
            if !read(&path).is_ok_and(|t| t.end.is_some()) {
                c.unfinished.push(name);
            }
        } else if part.exists() {
            c.unfinished.push(name);
        } else {
            c.missing.push(name);
        }
    }
    c
}

/// Reads the plan an experiment directory was run with (`dir/experiment.json`).
pub fn read_plan(dir: &Path) -> Result<Plan> {
    let plan_path = dir.join("experiment.json");
    let text = std::fs::read_to_string(&plan_path).with_context(|| {
        format!("reading {plan_path:?} (is this an experiment output directory?)")
    })?;
    serde_json::from_str(&text).with_context(|| format!("in {plan_path:?}"))
}

/// `pandora experiment summarize DIR`: refuses (an error naming the runs) when a run of the
/// plan has no complete trace, unless `partial`, which summarizes the complete runs and returns
/// the same report as a warning. Returns the printed table and the warning.
pub fn summarize_dir(dir: &Path, partial: bool) -> Result<(String, Option<String>)> {
    let plan = read_plan(dir)?;
    let c = completeness(&plan, &dir.join("traces"));
    let warning = (!c.is_complete()).then(|| c.describe(20));
    if let Some(w) = &warning
        && !partial
    {
        bail!(
            "{w}\nno summary written: finish them (rerun the missing shards, or `pandora \
             experiment CONFIG --out {dir:?}`, which resumes), or summarize the complete runs \
             anyway with `summarize --partial`"
        );
    }
    Ok((write_summary(dir)?, warning))
}

/// Reads `dir/experiment.json` and `dir/traces/`, writes `dir/summary/PROBLEM.csv`,
/// `dir/summary/final.csv` and the figures (`PROBLEM.png|svg`, `all.png|svg`, see
/// [`super::figures`]), with a `[stopping]` section also `dir/summary/stopping_runs.csv`,
/// `dir/summary/stopping.csv` (see [`super::stopping`]), the stopping figures and, where the
/// traces timed the statistics, `dir/summary/stopping_runtime.csv`,
/// `dir/summary/stopping_runtime_by_iteration.csv` and `stopping_runtime_PROBLEM.png|svg` (see
/// [`super::stopping::runtime`]), and returns the printed table.
pub fn write_summary(dir: &Path) -> Result<String> {
    let plan = read_plan(dir)?;
    let traces = read_traces(&dir.join("traces"))?;
    if traces.is_empty() {
        bail!("no traces in {:?}", dir.join("traces"));
    }
    let all = summarize(&plan, &traces);
    let sdir = dir.join("summary");
    std::fs::create_dir_all(&sdir)?;
    for s in &all {
        if s.policies.is_empty() {
            continue;
        }
        let path = sdir.join(format!("{}.csv", file_component(&s.problem)));
        std::fs::write(&path, problem_csv(s)).with_context(|| format!("writing {path:?}"))?;
    }
    std::fs::write(sdir.join("final.csv"), final_csv(&all))?;
    figures::write_figures(&sdir, &all)?;
    let mut text = table(&all);
    let mut md = markdown(&all);
    if let Some(sp) = &plan.stopping {
        let mut refs = BTreeMap::new();
        for prob in &plan.problems {
            let mine: Vec<&Trace> = traces
                .iter()
                .filter(|t| t.header.problem == prob.label)
                .collect();
            for (seed, r) in problem_references(prob, &mine) {
                refs.insert((prob.label.clone(), seed), r);
            }
        }
        let ev = stopping::evaluate(&plan, sp, &traces, &refs)?;
        std::fs::write(sdir.join("stopping_runs.csv"), stopping::runs_csv(&ev.rows))?;
        std::fs::write(sdir.join("stopping.csv"), stopping::groups_csv(&ev.groups))?;
        figures::write_stopping_figures(&sdir, &plan, sp, &ev)?;
        text += &stopping::table(&plan, sp, &ev.groups);
        md += &stopping::markdown(&plan, sp, &ev.groups);
        let (runtime_rows, runtime_curves) = stopping::runtime::runtime(&plan, &traces);
        if !runtime_rows.is_empty() {
            std::fs::write(
                sdir.join("stopping_runtime.csv"),
                stopping::runtime::runtime_csv(&runtime_rows),
            )?;
            std::fs::write(
                sdir.join("stopping_runtime_by_iteration.csv"),
                stopping::runtime::runtime_by_iteration_csv(&runtime_curves),
            )?;
            figures::write_stopping_runtime_figures(&sdir, &plan, &runtime_curves)?;
            md += &stopping::runtime::markdown(&runtime_rows);
        }
        if ev.incomplete > 0 {
            text += &format!(
                "({} incomplete run(s) left out of the stopping evaluation)\n",
                ev.incomplete
            );
        }
    }
    std::fs::write(sdir.join("summary.md"), md)?;
    Ok(text)
}
