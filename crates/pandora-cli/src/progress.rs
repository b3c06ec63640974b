//! Progress of `pandora run`: a progress bar on a terminal, one line per trial otherwise.
//!
//! Everything goes to stderr (stdout carries the final summary, in words or JSON). On a terminal, an
//! `indicatif` bar shows the trials done (of `max_trials` when set; otherwise the budget spent as
//! the bar), the best value, the budget spent and remaining, and PBGI-D's current λ; failed trials
//! are printed above the bar. When stderr is not a terminal (CI logs, files), each trial prints
//! one plain line instead, so logs never contain control sequences. `--quiet` prints nothing.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pandora_study::{Summary, Trial, TrialState};
use std::io::IsTerminal;
use std::time::Duration;

/// Where progress goes.
enum Mode {
    Quiet,
    Lines,
    Bar(ProgressBar),
}

/// The progress reporter of one `pandora run` (shared by its worker threads).
pub struct Progress {
    mode: Mode,
    max_trials: Option<u64>,
    budget: Option<f64>,
}

/// Resolution of the bar when it shows the budget fraction.
const BUDGET_TICKS: u64 = 1000;

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.6}"))
}

impl Progress {
    /// A reporter for a study with these limits; a bar only if stderr is a terminal.
    pub fn new(quiet: bool, max_trials: Option<u64>, budget: Option<f64>) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let mode = if quiet {
            Mode::Quiet
        } else if !terminal {
            Mode::Lines
        } else {
            let bar = match (max_trials, budget) {
                (Some(m), _) => {
                    ProgressBar::with_draw_target(Some(m), ProgressDrawTarget::stderr())
                }
                (None, Some(_)) => {
                    ProgressBar::with_draw_target(Some(BUDGET_TICKS), ProgressDrawTarget::stderr())
                }
                (None, None) => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            let template = if max_trials.is_some() || budget.is_some() {
                "{spinner} [{elapsed_precise}] {wide_bar} {msg}"
            } else {
                "{spinner} [{elapsed_precise}] {msg}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(250));
            Mode::Bar(bar)
        };
        Self {
            mode,
            max_trials,
            budget,
        }
    }

    /// Prints a message (above the bar on a terminal; nothing with `--quiet`).
    pub fn note(&self, msg: &str) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Lines => eprintln!("{msg}"),
            Mode::Bar(bar) => bar.println(msg),
        }
    }

    /// Prints a warning on stderr, even when quiet (above the bar if there is one).
    pub fn warn(&self, msg: &str) {
        match &self.mode {
            Mode::Quiet | Mode::Lines => eprintln!("warning: {msg}"),
            Mode::Bar(bar) => bar.println(format!("warning: {msg}")),
        }
    }

    /// The bar's message for summary `s`.
    fn message(&self, s: &Summary) -> String {
        let done = s.counts.done() as u64;
        let trials = match self.max_trials {
            Some(m) => format!("trials {done}/{m}"),
            None => format!("trials {done}"),
        };
        let budget = match self.budget {
            Some(b) => format!(
                "spent {:.2}/{b:.2} (left {:.2})",
                s.budget_spent,
                (b - s.budget_spent).max(0.0)
            ),
            None => format!("spent {:.2}", s.budget_spent),
        };
        let failed = if s.counts.failed > 0 {
            format!(" ({} failed)", s.counts.failed)
        } else {
            String::new()
        };
        format!(
            "{trials}{failed} | best {} | {budget}{}",
            fmt_opt(s.best.as_ref().and_then(|b| b.objective)),
            s.lambda.map_or(String::new(), |l| format!(" | λ {l:.3e}")),
        )
    }

    /// Shows the study's state before the first trial of this run (a resumed study starts with
    /// its earlier trials counted).
    pub fn start(&self, s: &Summary) {
        if let Mode::Bar(bar) = &self.mode {
            bar.set_position(self.position(s));
            bar.set_message(self.message(s));
        }
    }

    fn position(&self, s: &Summary) -> u64 {
        let done = s.counts.done() as u64;
        match (self.max_trials, self.budget) {
            (Some(m), _) => done.min(m),
            (None, Some(b)) => ((s.budget_spent / b).clamp(0.0, 1.0) * BUDGET_TICKS as f64) as u64,
            (None, None) => done,
        }
    }

    /// Reports trial `told` (just recorded by `worker`) with the study's summary after it.
    pub fn trial(&self, worker: &str, told: &Trial, s: &Summary) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Lines => {
                let budget = match self.budget {
                    Some(b) => format!("{:.2}/{b:.2}", s.budget_spent),
                    None => format!("{:.2}", s.budget_spent),
                };
                let status = match (&told.error, told.state, told.steps.last()) {
                    (_, TrialState::Paused, Some(last)) => format!(
                        "paused at step {} value {}",
                        last.step,
                        fmt_opt(Some(last.value))
                    ),
                    (Some(e), _, _) => format!("failed ({e})"),
                    (None, _, _) => format!("value {}", fmt_opt(told.objective)),
                };
                eprintln!(
                    "[{worker}] trial {:>4} {:<7} {status}  cost {}  best {}  spent {budget}{}",
                    told.number,
                    told.decision.phase.name(),
                    fmt_opt(told.cost),
                    fmt_opt(s.best.as_ref().and_then(|b| b.objective)),
                    s.lambda.map_or(String::new(), |l| format!("  λ {l:.3e}")),
                );
            }
            Mode::Bar(bar) => {
                if let Some(e) = &told.error
                    && told.state != TrialState::Paused
                {
                    bar.println(format!("trial {} failed: {e}", told.number));
                }
                bar.set_position(self.position(s));
                bar.set_message(self.message(s));
            }
        }
    }

    /// Removes the bar (the final summary follows on stdout).
    pub fn finish(&self) {
        if let Mode::Bar(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}

impl pandora_study::optimize::Observer for Progress {
    fn told(&self, worker: &str, trial: &Trial, summary: &Summary) {
        self.trial(worker, trial, summary);
    }
    fn warn(&self, message: &str) {
        Progress::warn(self, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pandora_study::TrialCounts;

    /// A summary with `[running, complete, failed, abandoned]` trials and `spent` cost.
    fn summary([running, complete, failed, abandoned]: [usize; 4], spent: f64) -> Summary {
        Summary {
            counts: TrialCounts {
                running,
                complete,
                failed,
                abandoned,
                paused: 0,
            },
            total_cost: spent,
            budget_spent: spent,
            best: None,
            lambda: Some(0.025),
            stopping: None,
            stop_reason: None,
            finished: None,
            time: Default::default(),
        }
    }

    #[test]
    fn messages_show_trials_best_budget_and_lambda() {
        let p = Progress {
            mode: Mode::Quiet,
            max_trials: Some(50),
            budget: Some(100.0),
        };
        let s = summary([1, 10, 2, 0], 30.0);
        assert_eq!(
            p.message(&s),
            "trials 12/50 (2 failed) | best - | spent 30.00/100.00 (left 70.00) | λ 2.500e-2"
        );
        assert_eq!(p.position(&s), 12);
        let p = Progress {
            mode: Mode::Quiet,
            max_trials: None,
            budget: Some(100.0),
        };
        assert_eq!(p.position(&s), 300);
        assert_eq!(p.position(&summary([0, 5, 0, 0], 250.0)), BUDGET_TICKS);
    }
}
