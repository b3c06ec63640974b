//! Run traces: one JSON-lines file per run, appended (and flushed) after every evaluation.
//!
//! Line 1 is a [`Header`], then one [`Step`] per evaluation (initial design included), and a
//! final [`End`] once the run has finished. A file without an `End` line is a partial run: it is
//! continued from its steps (a torn last line, from an interruption during a write, is dropped).
//!
//! A run in progress writes `NAME.jsonl.part` and renames it to `NAME.jsonl` (same directory, so
//! atomically) right after appending its end line: a `NAME.jsonl` is always complete, whatever
//! moment a task was killed at, and a `.part` file is an unfinished run to continue. (Traces of
//! older versions could be partial under their final name; they are continued likewise.)
//!
//! Experiments with a `[stopping]` section also write one [`StoppingStats`] line per BO
//! iteration `t = 0, 1, …, T`: the stopping rules' statistics on the posterior of `D_t` (the
//! initial design plus the first `t` BO evaluations). The line of iteration `t` follows the step
//! that completed `D_t` and precedes the next step; its `n` (observations in `D_t`) is checked
//! against the steps read before it, so a line can never be attached to the wrong data.

use anyhow::{Context, Result, bail};
use pandora_core::acquisition::bmsei::BmseiCarry;
use pandora_core::policy::Phase;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The first line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Trace format version.
    pub version: u32,
    /// Experiment name.
    pub experiment: String,
    /// Problem label.
    pub problem: String,
    /// Policy label.
    pub policy: String,
    /// Acquisition name.
    pub acquisition: String,
    /// The run's seed.
    pub seed: u64,
    /// Seed of the problem instance.
    pub problem_seed: u64,
    /// Dimension.
    pub dim: usize,
    /// The problem's optimum when known (regret is `regret_scale · (optimum − best)`).
    pub optimum: Option<f64>,
    /// Regret factor.
    pub regret_scale: f64,
    /// BO-phase budget (cost units).
    pub budget: Option<f64>,
    /// Maximum BO-phase evaluations.
    pub max_evaluations: Option<usize>,
    /// `uniform`, `known` or `unknown`.
    pub cost_setting: String,
    /// The resolved settings of the run; a resumed trace must match them.
    pub settings: serde_json::Value,
}

/// One evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Index of the evaluation (0-based, initial design included).
    pub k: usize,
    /// How the point was chosen (`initial`, `random` or `model` in the trace).
    pub phase: Phase,
    /// The point on the unit cube.
    pub x: Vec<f64>,
    /// Objective value (maximized).
    pub y: f64,
    /// Cost of this evaluation.
    pub cost: f64,
    /// Cumulative BO-phase cost (what the budget counts; 0 during the initial design).
    pub cumulative_cost: f64,
    /// Cumulative cost of all evaluations, initial design included.
    pub total_cost: f64,
    /// Best value so far.
    pub best: f64,
    /// Simple regret `regret_scale · (optimum − best)`, when the optimum is known.
    pub regret: Option<f64>,
    /// The acquisition value at `x` (model phase).
    pub acquisition_value: Option<f64>,
    /// λ used (PBGI, PBGI-D).
    pub lambda: Option<f64>,
    /// Predicted cost of the point under the cost setting (cost-aware model steps).
    pub predicted_cost: Option<f64>,
    /// Objective-model hyperparameters (the warm start of the next fit).
    pub params: Option<serde_json::Value>,
    /// Seconds spent proposing the point (model fit + acquisition maximization).
    pub seconds_propose: f64,
    /// Seconds spent evaluating the objective and cost.
    pub seconds_eval: f64,
    /// CPU seconds of `seconds_propose`, when the run's thread did all of the step's work (see
    /// [`crate::cpu_clock::exact_here`]: a `--jobs 1` run, or a plan's calibration); absent
    /// otherwise and in traces of earlier versions (which left it out from 256 observations on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_propose: Option<f64>,
    /// CPU seconds of `seconds_eval`, under the same condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_eval: Option<f64>,
    /// B-MS-EI's carry to the next step (suggested budget, refill lower bound, the restarts'
    /// trees), so that a resumed run continues exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmsei: Option<BmseiCarry>,
}

/// The last line of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    /// Why the run stopped: `budget` or `max_evaluations`.
    pub reason: String,
    /// Number of evaluations (initial design included).
    pub evaluations: usize,
    /// Final cumulative BO-phase cost.
    pub cumulative_cost: f64,
}

/// The stopping rules' statistics at one BO iteration, on the posterior of `D_t` (the data
/// including that iteration's evaluation: after-posterior-update semantics). Statistics the
/// experiment's rules do not need are absent; a statistic that is not defined at this iteration
/// (SRGap at `t = 0`, which needs the posterior of `D_{t−1}`) is `null`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoppingStats {
    /// BO evaluations in `D_t` (`t`; the initial design is not counted).
    pub iteration: usize,
    /// Observations in `D_t` (initial design included); equals the number of steps before this
    /// line.
    pub n: usize,
    /// Best value of `D_t`.
    pub best: f64,
    /// BO-phase cumulative cost of `D_t`.
    pub cumulative_cost: f64,
    /// `max_x [LogEI(x; y*) − log E[c(x)]]` (the PBGI/LogEIPC rule's statistic, `E[c] = exp(m +
    /// v/2)` for unknown costs; cost as the problem's cost setting, whatever the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_eipc: Option<f64>,
    /// The same maximum on the posterior of `D_{t−1}` (before the update with the latest
    /// evaluation) with the incumbent of `D_t`, over the points not in `D_t` (the PBGI rule with
    /// `timing = "before-update"`; `null` at `t = 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_eipc_before_update: Option<f64>,
    /// `max_x [LogEI(x; y*) + log E[1/c(x)]]` (LogEIPC-med's statistic; equals `max_log_eipc`
    /// unless costs are unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_log_eipc_inv: Option<f64>,
    /// UCB-LCB regret bound `max_x UCB − max_observed LCB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucb_lcb: Option<f64>,
    /// SRGap (`null` at `t = 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srgap: Option<f64>,
    /// PRB: the fraction of posterior sample paths whose simple regret at the incumbent is at
    /// most ε.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prb: Option<f64>,
    /// Posterior sample paths PRB drew at this iteration (the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prb_samples: Option<usize>,
    /// Hyperparameters of the objective posterior on `D_t` (rebuilds it for SRGap at `t + 1`).
    pub params: Option<serde_json::Value>,
    /// Seconds spent computing the statistics (model rebuild included).
    pub seconds: f64,
    /// CPU seconds of `seconds`, under the condition of [`Step::cpu_seconds_propose`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Of which PRB (wall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_prb: Option<f64>,
    /// The time of each statistic (absent in traces written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic_seconds: Option<StatisticSeconds>,
}

impl StoppingStats {
    /// A line of iteration `iteration` on `n` observations with best value and cost 0 and no
    /// statistic: the base the stopping step fills in (and of test fixtures).
    pub(crate) fn empty(iteration: usize, n: usize) -> Self {
        Self {
            iteration,
            n,
            best: 0.0,
            cumulative_cost: 0.0,
            max_log_eipc: None,
            max_log_eipc_before_update: None,
            max_log_eipc_inv: None,
            ucb_lcb: None,
            srgap: None,
            prb: None,
            prb_samples: None,
            params: None,
            seconds: 0.0,
            cpu_seconds: None,
            seconds_prb: None,
            statistic_seconds: None,
        }
    }
}

/// Which clock a [`StatisticSeconds`] was read on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecondsClock {
    /// CPU seconds of the computing thread, which saw the whole computation
    /// ([`crate::cpu_clock::exact_here`]).
    Cpu,
    /// Wall seconds (where the thread clock would not see all of the computation).
    #[default]
    Wall,
}

/// The seconds each stopping statistic of one line took (the stopping paper's App. C.1
/// measures this: the rules' own computation, not the BO step's fit and maximization). A
/// statistic the experiment does not record is absent. `previous_posterior` is the rebuild of
/// `D_{t−1}`'s posterior from its stored hyperparameters (one Cholesky factorization), which
/// only SRGap and the before-update LogEIPC need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatisticSeconds {
    /// The clock of every entry.
    pub clock: SecondsClock,
    /// `max_log_eipc` (the PBGI/LogEIPC rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_eipc: Option<f64>,
    /// `max_log_eipc_before_update`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_eipc_before_update: Option<f64>,
    /// `max_log_eipc_inv` (LogEIPC-med; near 0 unless costs are unknown, where it is the
    /// `max_log_eipc` value reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_eipc_inv: Option<f64>,
    /// `ucb_lcb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucb_lcb: Option<f64>,
    /// `srgap` (without `previous_posterior`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srgap: Option<f64>,
    /// `prb` (its sample paths and their maximization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prb: Option<f64>,
    /// Rebuilding the posterior of `D_{t−1}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_posterior: Option<f64>,
}

impl StatisticSeconds {
    /// The entries by name (the names of the trace fields), absent ones included as `None`.
    pub fn entries(&self) -> [(&'static str, Option<f64>); 7] {
        [
            ("log_eipc", self.log_eipc),
            ("log_eipc_before_update", self.log_eipc_before_update),
            ("log_eipc_inv", self.log_eipc_inv),
            ("ucb_lcb", self.ucb_lcb),
            ("srgap", self.srgap),
            ("prb", self.prb),
            ("previous_posterior", self.previous_posterior),
        ]
    }
}

/// A line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// See [`Header`].
    Header(Box<Header>),
    /// See [`Step`].
    Step(Box<Step>),
    /// See [`StoppingStats`].
    Stopping(Box<StoppingStats>),
    /// See [`End`].
    End(End),
}

/// A parsed trace file.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The header.
    pub header: Header,
    /// The evaluations.
    pub steps: Vec<Step>,
    /// The stopping statistics, iteration `0, 1, …` (empty without a `[stopping]` section).
    pub stopping: Vec<StoppingStats>,
    /// Present if the run finished.
    pub end: Option<End>,
    /// Whether a torn last line was dropped.
    pub torn: bool,
}

/// Serializes a line (one JSON object, no newline).
pub fn to_line(line: &Line) -> String {
    serde_json::to_string(line).expect("trace lines serialize")
}

/// Reads a trace. A last line that does not parse (an interrupted write) is dropped; any other
/// malformed line is an error.
pub fn read(path: &Path) -> Result<Trace> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path:?}"))?;
    let lines: Vec<&str> = text.lines().collect();
    let complete_last = text.ends_with('\n');
    let mut header = None;
    let mut steps = Vec::new();
    let mut stopping: Vec<StoppingStats> = Vec::new();
    let mut end = None;
    let mut torn = false;
    for (i, l) in lines.iter().enumerate() {
        let last = i + 1 == lines.len();
        let parsed: Line = match serde_json::from_str(l) {
            Ok(p) => p,
            Err(_) if last && (!complete_last || l.trim().is_empty()) => {
                torn = true;
                break;
            }
            Err(e) => bail!("{path:?} line {}: {e}", i + 1),
        };
        if end.is_some() {
            bail!("{path:?} line {}: content after the end line", i + 1);
        }
        match parsed {
            Line::Header(h) if i == 0 => header = Some(*h),
            Line::Header(_) => bail!("{path:?} line {}: a second header", i + 1),
            _ if header.is_none() => bail!("{path:?}: the first line is not a header"),
            Line::Step(s) => {
                if s.k != steps.len() {
                    bail!("{path:?} line {}: step {} out of order", i + 1, s.k);
                }
                steps.push(*s);
            }
            Line::Stopping(s) => {
                if s.iteration != stopping.len() {
                    bail!(
                        "{path:?} line {}: stopping statistics of iteration {} out of order",
                        i + 1,
                        s.iteration
                    );
                }
                if s.n != steps.len() {
                    bail!(
                        "{path:?} line {}: stopping statistics for {} observations after {} steps",
                        i + 1,
                        s.n,
                        steps.len()
                    );
                }
                stopping.push(*s);
            }
            Line::End(e) => end = Some(e),
        }
    }
    let Some(header) = header else {
        bail!("{path:?} has no header");
    };
    Ok(Trace {
        header,
        steps,
        stopping,
        end,
        torn,
    })
}

/// The step and stopping lines of a trace in file order: the statistics of `D_t` follow the step
/// that completed `D_t` (a line with `n` observations comes right after step `n − 1`).
pub fn body_lines(steps: &[Step], stopping: &[StoppingStats]) -> Vec<Line> {
    let mut out = Vec::with_capacity(steps.len() + stopping.len());
    let mut st = stopping.iter().peekable();
    for (k, s) in steps.iter().enumerate() {
        while let Some(x) = st.next_if(|x| x.n == k) {
            out.push(Line::Stopping(Box::new(x.clone())));
        }
        out.push(Line::Step(Box::new(s.clone())));
    }
    out.extend(st.map(|x| Line::Stopping(Box::new(x.clone()))));
    out
}

/// `path` with `suffix` appended to its file name (`a.jsonl` → `a.jsonl.part`).
pub fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Writes `lines` to `path` atomically (a temporary file `PATH.tmp` in the same directory,
/// renamed over it).
pub fn write_atomic(path: &Path, lines: &[Line]) -> Result<()> {
    let tmp = with_suffix(path, ".tmp");
    {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("creating {tmp:?}"))?;
        for l in lines {
            writeln!(f, "{}", to_line(l))?;
        }
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {tmp:?} to {path:?}"))?;
    Ok(())
}

/// An open trace that steps are appended to.
pub struct Appender {
    file: std::fs::File,
}

impl Appender {
    /// Opens `path` for appending.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("opening {path:?}"))?;
        Ok(Self { file })
    }

    /// Flushes the file to disk and renames it to `to` (in the same directory: atomic).
    pub fn finish(self, from: &Path, to: &Path) -> Result<()> {
        self.file.sync_all()?;
        std::fs::rename(from, to).with_context(|| format!("renaming {from:?} to {to:?}"))?;
        Ok(())
    }

    /// Appends one line and flushes it to the OS.
    pub fn push(&mut self, line: &Line) -> Result<()> {
        let mut s = to_line(line);
        s.push('\n');
        self.file.write_all(s.as_bytes())?;
        self.file.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            version: 1,
            experiment: "e".into(),
            problem: "p".into(),
            policy: "q".into(),
            acquisition: "random".into(),
            seed: 0,
            problem_seed: 0,
            dim: 1,
            optimum: Some(0.0),
            regret_scale: 1.0,
            budget: Some(1.0),
            max_evaluations: None,
            cost_setting: "uniform".into(),
            settings: serde_json::json!({}),
        }
    }

    fn step(k: usize) -> Step {
        Step {
            k,
            phase: Phase::InitialDesign,
            x: vec![0.1 + 1e-17 * k as f64, 1.0 / 3.0],
            y: -0.3,
            cost: 1.0,
            cumulative_cost: 0.0,
            total_cost: 1.0,
            best: -0.3,
            regret: Some(0.3),
            acquisition_value: None,
            lambda: None,
            predicted_cost: None,
            params: None,
            seconds_propose: 0.0,
            seconds_eval: 0.0,
            cpu_seconds_propose: None,
            cpu_seconds_eval: None,
            bmsei: None,
        }
    }

    #[test]
    fn round_trips_exactly_and_drops_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let lines = vec![
            Line::Header(Box::new(header())),
            Line::Step(Box::new(step(0))),
            Line::Step(Box::new(step(1))),
        ];
        write_atomic(&path, &lines).unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.header, header());
        assert_eq!(t.steps, vec![step(0), step(1)]);
        assert!(t.end.is_none() && !t.torn);
        // A torn write.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"kind\":\"step\",\"k\":2,\"pha");
        std::fs::write(&path, &text).unwrap();
        let t = read(&path).unwrap();
        assert!(t.torn);
        assert_eq!(t.steps.len(), 2);
        // Stopping statistics must sit right after the step that completed their data.
        let stats = |iteration: usize, n: usize| StoppingStats {
            best: -0.3,
            max_log_eipc: Some(-1.0),
            ..StoppingStats::empty(iteration, n)
        };
        let body = body_lines(&[step(0), step(1)], &[stats(0, 1), stats(1, 2)]);
        let kinds: Vec<&str> = body
            .iter()
            .map(|l| match l {
                Line::Step(_) => "step",
                Line::Stopping(_) => "stopping",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["step", "stopping", "step", "stopping"]);
        let mut lines = vec![Line::Header(Box::new(header()))];
        lines.extend(body);
        write_atomic(&path, &lines).unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.stopping.len(), 2);
        assert_eq!(body_lines(&t.steps, &t.stopping), lines[1..].to_vec());
        for (bad, needle) in [
            (vec![stats(0, 2)], "for 2 observations after 1 steps"),
            (vec![stats(1, 1)], "iteration 1 out of order"),
        ] {
            let mut l = vec![
                Line::Header(Box::new(header())),
                Line::Step(Box::new(step(0))),
            ];
            l.extend(bad.into_iter().map(|s| Line::Stopping(Box::new(s))));
            write_atomic(&path, &l).unwrap();
            let e = read(&path).unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{e:#}");
        }
        write_atomic(&path, &lines[..4]).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"kind\":\"step\",\"k\":2,\"pha");
        // A malformed line in the middle is an error.
        let bad = text.replacen("\"k\":1", "\"k\":5", 1);
        std::fs::write(&path, bad).unwrap();
        assert!(read(&path).is_err());
    }

    /// The CPU times round-trip when present, are left out of the line when absent, and a line of
    /// an earlier version (no such fields) still reads, as absent.
    #[test]
    fn cpu_times_are_optional_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut timed = step(1);
        timed.seconds_propose = 2.5;
        timed.cpu_seconds_propose = Some(0.75);
        timed.cpu_seconds_eval = Some(1e-6);
        let lines = vec![
            Line::Header(Box::new(header())),
            Line::Step(Box::new(step(0))),
            Line::Step(Box::new(timed.clone())),
        ];
        write_atomic(&path, &lines).unwrap();
        let t = read(&path).unwrap();
        assert_eq!(t.steps, vec![step(0), timed]);
        let text = std::fs::read_to_string(&path).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert!(!rows[1].contains("cpu_seconds"), "{}", rows[1]);
        assert!(
            rows[2].contains("\"cpu_seconds_propose\":0.75"),
            "{}",
            rows[2]
        );
        // A step line as earlier versions wrote it.
        let old = r#"{"kind":"step","k":0,"phase":"initial","x":[0.5],"y":1.0,"cost":1.0,"cumulative_cost":0.0,"total_cost":1.0,"best":1.0,"regret":null,"acquisition_value":null,"lambda":null,"predicted_cost":null,"params":null,"seconds_propose":0.25,"seconds_eval":0.0}"#;
        let Line::Step(s) = serde_json::from_str::<Line>(old).unwrap() else {
            panic!("not a step");
        };
        assert_eq!((s.seconds_propose, s.cpu_seconds_propose), (0.25, None));
        assert_eq!(s.cpu_seconds_eval, None);
        let old_stats = r#"{"kind":"stopping","iteration":0,"n":1,"best":1.0,"cumulative_cost":0.0,"params":null,"seconds":0.5}"#;
        let Line::Stopping(st) = serde_json::from_str::<Line>(old_stats).unwrap() else {
            panic!("not a stopping line");
        };
        assert_eq!((st.seconds, st.cpu_seconds), (0.5, None));
    }
}
