//! One driver loop for every policy: ask the policy, charge the step, record the trace.
//!
//! The driver owns the runs; a policy sees them through a [`View`] (the reported values and
//! step costs of its runs, the table's embeddings, positions and prior weights, the budget),
//! never the table's unreported values. A run is created by [`Action::Start`] with index
//! `runs.len()` (so a policy knows the index of the run it starts). The loop ends when the
//! budget is spent (the step that crosses it is charged and recorded), when the policy stops,
//! or after [`MAX_ACTIONS`] (an error: a policy that never stops on an exhausted table).

use super::Table;
use crate::error::ProblemError;

/// Guard against a policy that loops without progress.
pub const MAX_ACTIONS: usize = 1_000_000;

/// What a policy does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start a new run of configuration `k` (its step 1); it gets index `runs.len()`.
    Start(usize),
    /// Run the next step of run `r`.
    Continue(usize),
    /// Stop the study.
    Stop,
}

/// A run: its configuration and the values and step costs reported so far.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunState {
    /// The configuration (row of the table).
    pub config: usize,
    /// Values reported after steps `1..=values.len()`.
    pub values: Vec<f64>,
    /// The cost of each step run.
    pub costs: Vec<f64>,
}

/// What a policy may see.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    table: &'a Table,
    /// The runs so far.
    pub runs: &'a [RunState],
    /// Cost spent so far.
    pub spent: f64,
    /// The budget.
    pub budget: f64,
}

impl View<'_> {
    /// Number of configurations.
    pub fn configs(&self) -> usize {
        self.table.configs()
    }
    /// Number of steps of a complete run.
    pub fn steps(&self) -> usize {
        self.table.steps()
    }
    /// Configuration embeddings.
    pub fn x(&self) -> &[Vec<f64>] {
        self.table.x()
    }
    /// Step positions.
    pub fn positions(&self) -> &[f64] {
        self.table.positions()
    }
    /// Prior relative step costs.
    pub fn weights(&self) -> &[f64] {
        self.table.weights()
    }
    /// Whether run `r` is trained to the end.
    pub fn complete(&self, r: usize) -> bool {
        self.runs[r].values.len() == self.table.steps()
    }
}

/// A freeze-thaw policy.
pub trait Policy {
    /// The next action given everything observed.
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError>;
}

/// One step of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    /// The run.
    pub run: usize,
    /// Its configuration.
    pub config: usize,
    /// The step run (1-based).
    pub step: usize,
    /// Its cost.
    pub cost: f64,
    /// Cost spent after it.
    pub cumulative_cost: f64,
    /// The value reported.
    pub value: f64,
    /// Regret of the incumbent after it (module doc of [`super`]).
    pub regret: f64,
}

/// A played instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Every step, in order.
    pub rows: Vec<TraceRow>,
    /// Regret before any step (`max z − min z`).
    pub initial_regret: f64,
    /// The policy stopped (rather than the budget or the table running out).
    pub stopped: bool,
}

impl Trace {
    /// Regret of the incumbent once `cost` has been spent (the last step not exceeding it).
    pub fn regret_at(&self, cost: f64) -> f64 {
        let n = self.rows.partition_point(|r| r.cumulative_cost <= cost);
        if n == 0 {
            self.initial_regret
        } else {
            self.rows[n - 1].regret
        }
    }
}

/// Plays `policy` on `table` until `budget` is spent, it stops, or nothing is left to run.
pub fn play(table: &Table, policy: &mut dyn Policy, budget: f64) -> Result<Trace, ProblemError> {
    let (best, worst) = table.final_range();
    let mut runs: Vec<RunState> = Vec::new();
    let mut spent = 0.0;
    let mut rows = Vec::new();
    let mut incumbent: Option<(f64, usize)> = None;
    let mut stopped = false;
    for _ in 0..MAX_ACTIONS {
        if spent >= budget {
            break;
        }
        let view = View {
            table,
            runs: &runs,
            spent,
            budget,
        };
        let r = match policy.next(&view)? {
            Action::Stop => {
                stopped = true;
                break;
            }
            Action::Start(k) if k < table.configs() => {
                runs.push(RunState {
                    config: k,
                    ..RunState::default()
                });
                runs.len() - 1
            }
            Action::Continue(r) if r < runs.len() && runs[r].values.len() < table.steps() => r,
            other => {
                return Err(ProblemError(format!(
                    "action: {other:?} is not possible ({} runs, {} configurations)",
                    runs.len(),
                    table.configs()
                )));
            }
        };
        let run = &mut runs[r];
        let (k, t) = (run.config, run.values.len());
        let (value, cost) = (table.value(k, t), table.cost(k, t));
        run.values.push(value);
        run.costs.push(cost);
        spent += cost;
        if t + 1 == table.steps() && incumbent.is_none_or(|(v, _)| value > v) {
            incumbent = Some((value, k));
        }
        rows.push(TraceRow {
            run: r,
            config: k,
            step: t + 1,
            cost,
            cumulative_cost: spent,
            value,
            regret: incumbent.map_or(best - worst, |(_, j)| best - table.final_objective(j)),
        });
        if rows.len() == MAX_ACTIONS {
            return Err(ProblemError(format!(
                "policy: {MAX_ACTIONS} steps without spending the budget"
            )));
        }
    }
    Ok(Trace {
        rows,
        initial_regret: best - worst,
        stopped,
    })
}
