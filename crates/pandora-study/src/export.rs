//! A study's trials as a file: CSV (one row per trial, parameters flattened into `param.NAME`
//! columns) or JSON (every field of every trial), as `pandora export` writes them and
//! `pandora serve` returns them.
//!
//! Every CSV cell goes through [`crate::csv::field`]: quoted where needed and neutralized where a
//! spreadsheet would run it as a formula (categorical values, worker names and error messages are
//! text that others chose).

use crate::study::Study;
use crate::trial::{Trial, iso8601_utc};

/// The trials as a pretty-printed JSON array of [`Trial::export_json`] objects.
pub fn json(trials: &[Trial]) -> crate::Result<String> {
    let rows: Vec<serde_json::Value> = trials.iter().map(Trial::export_json).collect();
    Ok(serde_json::to_string_pretty(&rows)?)
}

/// The trials of `study` as CSV, header first, one line per trial, each line ending in `\n`.
pub fn csv(study: &Study, trials: &[Trial]) -> String {
    let names: Vec<String> = study.space().names().map(str::to_string).collect();
    let mut header: Vec<String> = [
        "number",
        "state",
        "objective",
        "cost",
        "worker",
        "created_at",
        "created_at_iso",
        "finished_at",
        "finished_at_iso",
        "phase",
        "acquisition_value",
        "lambda",
        "error",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    // Studies with cost-varying variable subsets: the control set of every trial and the
    // parameters it left random.
    let cvs = study.config().cvs.is_some();
    if cvs {
        header.extend(["control_set".to_string(), "random".to_string()]);
    }
    header.extend(names.iter().map(|n| format!("param.{n}")));
    let mut out = line(&header);
    for t in trials {
        out.push_str(&line(&row(t, cvs, &names)));
    }
    out
}

/// One CSV line of cells.
fn line(cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| crate::csv::field(c)).collect();
    format!("{}\n", cells.join(","))
}

/// The cells of one trial.
fn row(t: &Trial, cvs: bool, names: &[String]) -> Vec<String> {
    let num = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
    let iso = |v: Option<f64>| v.and_then(iso8601_utc).unwrap_or_default();
    let mut row = vec![
        t.number.to_string(),
        t.state.as_str().to_string(),
        num(t.objective),
        num(t.cost),
        t.worker.clone().unwrap_or_default(),
        format!("{}", t.created_at),
        iso(Some(t.created_at)),
        num(t.finished_at),
        iso(t.finished_at),
        t.decision.phase.name().to_string(),
        num(t.decision.acquisition_value),
        num(t.decision.lambda),
        t.error.clone().unwrap_or_default(),
    ];
    if cvs {
        let c = t.decision.cvs();
        row.push(c.map_or(String::new(), |c| c.control_set.to_string()));
        row.push(c.map_or(String::new(), |c| c.random.join(" ")));
    }
    for n in names {
        row.push(match &t.params[n] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        });
    }
    row
}
