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
use super::trace::Trace;
use super::{figures, stopping};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// Reads `dir/experiment.json` and `dir/traces/`, writes `dir/summary/PROBLEM.csv`,
/// `dir/summary/final.csv` and the figures (`PROBLEM.png|svg`, `all.png|svg`, see
/// [`super::figures`]), with a `[stopping]` section also `dir/summary/stopping_runs.csv`,
/// `dir/summary/stopping.csv` (see [`super::stopping`]) and the stopping figures, and returns
/// the printed table.
pub fn write_summary(dir: &Path) -> Result<String> {
    let plan_path = dir.join("experiment.json");
    let text = std::fs::read_to_string(&plan_path).with_context(|| {
        format!("reading {plan_path:?} (is this an experiment output directory?)")
    })?;
    let plan: Plan = serde_json::from_str(&text).with_context(|| format!("in {plan_path:?}"))?;
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
