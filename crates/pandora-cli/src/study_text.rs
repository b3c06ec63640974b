//! What the study commands print for people, in words.
//!
//! `pandora run`, `status`, `best`, `ask`, `tell` and `plot` print text by default and JSON with
//! `--json` (the form scripts and the Python package read; docs/studies.md "Output"). The text
//! is written to be read once, at the end of a run or between two commands: how many trials,
//! where the cost went (the initial design against the model-based trials, which is what a
//! cost-aware policy decides), the best value and its parameters, why the study is finished,
//! where the wall-clock time went (the optimizer against the objective), and what to run next.
//!
//! Every function here is pure: it formats what the study commands read from storage.

use pandora_core::policy::Phase;
use pandora_study::{Summary, Trial, TrialState};
use serde_json::Value;

/// Formats a number for people: 4 significant digits for ordinary magnitudes, scientific
/// notation for very small or very large ones.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        format!("{v}")
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.3e}")
    } else {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.decimals$}")
    }
}

/// A trial's parameters as `name = value` pairs (numbers through [`num`]).
pub fn params(p: &Value) -> String {
    match p {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::Number(n) => format!("{k} = {}", n.as_f64().map_or(n.to_string(), num)),
                Value::String(s) => format!("{k} = {s}"),
                other => format!("{k} = {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// How the cost of the evaluated trials divides between the initial design and the trials the
/// policy chose (model-based, or random for the `random` acquisition).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CostSplit {
    /// Evaluated initial-design trials and their cost.
    pub initial: (usize, f64),
    /// Evaluated trials the policy chose and their cost.
    pub chosen: (usize, f64),
}

impl CostSplit {
    /// The split over the trials that have a cost (complete, failed or abandoned with a cost).
    pub fn of(trials: &[Trial]) -> Self {
        let mut s = Self::default();
        for t in trials.iter().filter(|t| t.state != TrialState::Running) {
            let Some(c) = t.cost else { continue };
            let part = match t.decision.phase {
                Phase::InitialDesign => &mut s.initial,
                Phase::Model | Phase::Random => &mut s.chosen,
            };
            part.0 += 1;
            part.1 += c;
        }
        s
    }
}

/// What a study's summary in words needs besides its [`Summary`].
pub struct Context<'a> {
    /// The study's name.
    pub name: &'a str,
    /// `budget.total`.
    pub budget: Option<f64>,
    /// The objective's known optimum (builtin problems), for comparison with the best value.
    pub optimum: Option<f64>,
    /// Every trial of the study.
    pub trials: &'a [Trial],
}

/// The study's state in words (`pandora status`, and the end of `pandora run`).
pub fn summary(cx: &Context<'_>, s: &Summary) -> String {
    let Context {
        name,
        budget,
        optimum,
        trials,
    } = *cx;
    let mut out = format!(
        "study {name}: {} complete, {} running, {} failed, {} abandoned",
        s.counts.complete, s.counts.running, s.counts.failed, s.counts.abandoned
    );
    if s.counts.paused > 0 {
        out.push_str(&format!(", {} paused", s.counts.paused));
    }
    out.push('\n');
    if let Some(r) = &s.stop_reason {
        out.push_str(&format!("finished: {r}\n"));
    }
    match &s.best {
        Some(b) => out.push_str(&format!(
            "best: {} at trial {} ({}){}\n",
            b.objective.map_or("?".into(), num),
            b.number,
            params(&b.params),
            optimum.map_or(String::new(), |o| format!("; the optimum is {}", num(o)))
        )),
        None => out.push_str("best: no complete trial yet\n"),
    }
    out.push_str(&cost_line(budget, s, &CostSplit::of(trials)));
    out.push_str(&time_line(s));
    if let Some(l) = s.lambda {
        out.push_str(&format!("lambda: {l:e}\n"));
    }
    if let Some(st) = &s.stopping {
        let value = if st.value.is_finite() {
            format!("{:.4}", st.value)
        } else {
            "not available yet".into()
        };
        out.push_str(&format!(
            "stopping ({}, lambda = {:e}): {} = {value} vs threshold {:.4} after {} BO evaluations{}\n",
            st.rule,
            st.lambda,
            st.statistic,
            st.threshold,
            st.iteration,
            if st.fired { " (fired)" } else { "" }
        ));
    }
    out
}

/// `cost: ...`: spent against the budget, and the split between the initial design and the
/// policy's own trials.
fn cost_line(budget: Option<f64>, s: &Summary, split: &CostSplit) -> String {
    let mut out = match budget {
        Some(b) => format!(
            "cost: {} of the budget of {} spent ({} left)",
            num(s.budget_spent),
            num(b),
            num((b - s.budget_spent).max(0.0))
        ),
        None => format!("cost: {} in all", num(s.total_cost)),
    };
    let (ni, ci) = split.initial;
    let (nc, cc) = split.chosen;
    if ni + nc > 0 {
        let pct = |c: f64| {
            if s.total_cost > 0.0 {
                format!(" ({:.0} %)", 100.0 * c / s.total_cost)
            } else {
                String::new()
            }
        };
        out.push_str(&format!(
            "; {} on {ni} initial-design trials{}, {} on {nc} trials the policy chose{}",
            num(ci),
            pct(ci),
            num(cc),
            pct(cc)
        ));
    }
    out.push('\n');
    out
}

/// `time: ...`: the optimizer's own wall-clock time against the objective's. Budgets and
/// runtime costs count only the objective (docs/studies.md "Time").
fn time_line(s: &Summary) -> String {
    let t = &s.time;
    if t.optimizer_trials == 0 {
        return format!(
            "time: objective {} s from ask to tell; optimizer time not recorded\n",
            num(t.objective_s)
        );
    }
    format!(
        "time: optimizer {} s over {} asks, objective {} s from ask to tell \
         (budgets count only the objective)\n",
        num(t.optimizer_s),
        t.optimizer_trials,
        num(t.objective_s)
    )
}

/// What to run next, for the study named by `target` (`examples/quickstart.toml` or
/// `--storage URL --study NAME`), whose figure goes to `figure`.
pub fn next_steps(target: &str, figure: &str) -> String {
    let steps = [
        (
            format!("pandora status {target}"),
            "the study's state (--json for scripts)".to_string(),
        ),
        (
            format!("pandora plot {target}"),
            format!("best value against cost, in {figure}"),
        ),
        (
            format!("pandora export {target} --format csv"),
            "every trial".to_string(),
        ),
    ];
    let width = steps.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, (command, what)) in steps.iter().enumerate() {
        let lead = if k == 0 { "next:" } else { "" };
        out.push_str(&format!("{lead:<5} {command:<width$}   {what}\n"));
    }
    out
}

/// One trial in a line: `trial N (state): objective V, cost C, at params`.
pub fn trial(t: &Trial) -> String {
    let mut out = format!("trial {} ({})", t.number, t.state.as_str());
    if let Some(v) = t.objective {
        out.push_str(&format!(": objective {}", num(v)));
    }
    if let (Some(last), Some(to)) = (t.steps.last(), t.step_to) {
        out.push_str(&format!(
            ": step {} of this run's {to}, value {}",
            last.step,
            num(last.value)
        ));
    }
    if let Some(c) = t.cost {
        out.push_str(&format!(", cost {}", num(c)));
    }
    if let Some(e) = &t.error {
        out.push_str(&format!(", error: {e}"));
    }
    out.push_str(&format!(", at {}", params(&t.params)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_numbers() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-2.2345678), "-2.235");
        assert_eq!(num(149.61), "149.6");
        assert_eq!(num(1e-5), "1.000e-5");
        assert_eq!(num(21.0), "21.00");
    }

    #[test]
    fn parameters_are_name_value_pairs() {
        let p = serde_json::json!({"lr": 0.0123456, "opt": "adam"});
        assert_eq!(params(&p), "lr = 0.01235, opt = adam");
    }
}
