//! Studies with cost-varying variable subsets (BOCVS): the user declares control sets (which
//! parameters they can set, and what a trial costs when they set exactly those) and the
//! distributions of the parameters left to chance. `ask` returns a control set and the values of
//! its parameters; `tell` takes the objective together with the realized values of the random
//! parameters (see `docs/cvs.md`, "Studies").
//!
//! Nothing is kept as mutable state: every `ask` fits the GP to the realized points of the
//! complete trials, rebuilds the policy by replaying the stored decisions in order
//! (`replay`: UCB-CVS's ε-schedule position, ETC's play counters, Gittins-D's λ) and
//! decides. Running trials are conditioned on at their posterior mean with their random parameters
//! at the distributions' means, and their control sets' costs are committed against the budget.

pub mod section;

use crate::config::{StudyConfig, counts_toward_budget};
use crate::error::{Error, Result};
use crate::space::{Param, SearchSpace};
use crate::trial::{Decided, NewTrial, Trial, TrialState, finish};
use pandora_core::cvs::policy::{Decision, Phase, mix_seed};
use pandora_core::cvs::{CvsProblem, CvsRun, CvsVerdict, SetOptimizer, build_policy};
use pandora_core::gp::fit::{FitOptions, NoiseSpec, fit};
use pandora_core::gp::{ExactGp, GpParams, Kernel};
use pandora_core::policy::Phase as CorePhase;
use pandora_core::run::Finished;
use pandora_core::run::record::{CvsRecord, DecisionRecord, HyperRecord, RecordKind, StudyState};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
pub use section::{ControlSetConfig, CvsSection, RandomConfig};
use serde_json::json;

/// What a CVS trial's decision records, in the terms `tell` needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CvsTrialInfo {
    /// Index of the control set.
    pub set: usize,
    /// Names of the controlled parameters.
    pub controlled: Vec<String>,
    /// Names of the random parameters, whose realized values `tell` needs.
    pub random: Vec<String>,
    /// The control set's cost.
    pub cost: f64,
}

impl CvsTrialInfo {
    /// Reads a trial's CVS record (`None` for other trials).
    pub fn of(trial: &Trial) -> Option<Self> {
        let c = trial.decision.cvs()?;
        Some(Self {
            set: c.control_set,
            controlled: c.controlled.clone(),
            random: c.random.clone(),
            cost: c.cost,
        })
    }
}

/// The realized point of a CVS trial: its controlled parameters plus the reported values of its
/// random ones, checked (every random parameter exactly once, inside its bounds) and encoded.
pub fn realize(
    space: &SearchSpace,
    trial: &Trial,
    random: &serde_json::Map<String, serde_json::Value>,
) -> Result<(serde_json::Value, Vec<f64>)> {
    let info = CvsTrialInfo::of(trial).ok_or_else(|| {
        Error::invalid(
            format!("trial {}", trial.number),
            "is not a trial of a [cvs] study",
        )
    })?;
    for k in random.keys() {
        if !info.random.contains(k) {
            return Err(Error::invalid(
                format!("random.{k}"),
                if info.controlled.contains(k) {
                    format!("'{k}' is controlled in trial {}, not random", trial.number)
                } else {
                    format!(
                        "trial {} has no random parameter '{k}' (random: {})",
                        trial.number,
                        info.random.join(", ")
                    )
                },
            ));
        }
    }
    let missing: Vec<&str> = info
        .random
        .iter()
        .filter(|n| !random.contains_key(*n))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(Error::invalid(
            "random",
            format!(
                "trial {} leaves {} random: report the realized value of each (pandora tell ... --random NAME=VALUE)",
                trial.number,
                missing.join(", ")
            ),
        ));
    }
    let mut params = serde_json::Map::new();
    for n in &info.controlled {
        let v = trial.params.get(n).cloned().ok_or_else(|| {
            Error::invalid(format!("trial {}", trial.number), format!("has no '{n}'"))
        })?;
        params.insert(n.clone(), v);
    }
    for n in &info.random {
        let v = &random[n];
        let t = v.as_f64().filter(|t| t.is_finite()).ok_or_else(|| {
            Error::invalid(
                format!("random.{n}"),
                format!("must be a finite number, got {v}"),
            )
        })?;
        if let Some(Param::Float { low, high, .. }) = space.params.iter().find(|p| p.name() == n)
            && !(*low..=*high).contains(&t)
        {
            return Err(Error::invalid(
                format!("random.{n}"),
                format!("{t} is outside the parameter's bounds [{low}, {high}]"),
            ));
        }
        params.insert(n.clone(), json!(t));
    }
    let params = serde_json::Value::Object(params);
    let x = space.encode(&params)?;
    Ok((params, x))
}

/// Draws the random parameters of a CVS trial from their distributions (for simulated studies
/// on builtin problems), seeded by `seed`; returns them by name in user units.
pub fn draw_random(
    section: &CvsSection,
    space: &SearchSpace,
    trial: &Trial,
    seed: u64,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let info = CvsTrialInfo::of(trial).ok_or_else(|| {
        Error::invalid(
            format!("trial {}", trial.number),
            "is not a trial of a [cvs] study",
        )
    })?;
    let problem = section.problem_with_bank(space, 0, 1)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(seed, 0x5eed ^ trial.number));
    let rest = problem.draw_random(info.set, &mut rng);
    let mut out = serde_json::Map::new();
    for &v in problem.random_vars(info.set) {
        let u = rest[v];
        let Param::Float {
            name, low, high, ..
        } = &space.params[v]
        else {
            unreachable!("validated: linear floats only")
        };
        out.insert(name.clone(), json!(low + u * (high - low)));
    }
    Ok(out)
}

/// The GP of a CVS study: MAP hyperparameters (Matérn-5/2 ARD, the papers' priors, noise learned
/// above 1e-4) fitted to the standardized objective, then expressed on the raw scale so that
/// posterior values (and λ of the Gittins policy) are in objective units. Returns the GP and the
/// standardized-scale hyperparameters (the next fit's warm start).
fn fit_gp(x: &[f64], y: &[f64], d: usize, warm: Option<&GpParams>) -> Result<(ExactGp, GpParams)> {
    let n = y.len() as f64;
    let m = y.iter().sum::<f64>() / n;
    let var = y.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
    let s = if var > 0.0 { var.sqrt() } else { 1.0 };
    let ys: Vec<f64> = y.iter().map(|v| (v - m) / s).collect();
    let opts = FitOptions {
        noise: NoiseSpec::Learned { floor: 1e-4 },
        ..FitOptions::default()
    };
    // Warm starts are stored on the standardized scale.
    let r = fit(x, &ys, d, &opts, warm)?;
    let p = r.params;
    let raw = GpParams {
        kernel: Kernel {
            outputscale: p.kernel.outputscale * s * s,
            ..p.kernel.clone()
        },
        mean: m + s * p.mean,
        noise: p.noise * s * s,
    };
    Ok((ExactGp::new(x.to_vec(), y.to_vec(), raw)?, p))
}

/// What a CVS study has spent and committed: the recorded costs of the trials that count toward
/// the budget, and those plus the control-set costs of the running ones.
fn spent_and_committed(config: &StudyConfig, trials: &[Trial]) -> (f64, f64) {
    let counted = trials.iter().filter(|t| counts_toward_budget(config, t));
    let spent: f64 = counted.clone().filter_map(|t| t.cost).sum();
    let running: f64 = counted
        .filter(|t| t.state == TrialState::Running)
        .filter_map(|t| CvsTrialInfo::of(t).map(|i| i.cost))
        .sum();
    (spent, spent + running)
}

/// One `ask` of a CVS study, under the storage lock: the next trial and the new study state, or
/// why the study is finished. The decision is [`CvsRun`]'s, on a run rebuilt from the trials.
pub(crate) fn decide(
    config: &StudyConfig,
    section: &CvsSection,
    space: &SearchSpace,
    trials: &[Trial],
    mut state: StudyState,
) -> Result<Decided> {
    let seed = config.policy.seed;
    let problem = section.problem(space, seed)?;
    if let Some(m) = config.budget.max_trials
        && trials.len() as u64 >= m
    {
        return Ok(finish(Finished::MaxTrials(m), state));
    }
    let (spent, committed) = spent_and_committed(config, trials);
    let out_of_budget = Finished::Budget {
        spent,
        total: config.budget.total.unwrap_or(f64::INFINITY),
    };
    let remaining = config.budget.total.map_or(f64::INFINITY, |b| b - committed);
    let t_cut = section.t_cut.unwrap_or_else(|| {
        config
            .budget
            .total
            .map_or(100.0, |b| (b / problem.max_cost()).max(1.0))
    });
    let mut policy = build_policy(&section.policy, t_cut, section.lambda)?;
    let mut run = CvsRun::new(&problem, policy.as_mut());
    let (x, y) = replay(config, &problem, trials, &mut run);
    let affordable = run.affordable(remaining);
    let k = trials.len() as u64;
    let (verdict, phase, params) =
        if trials.len() < section.initial_design || y.len() < section.initial_design {
            (
                run.design(&affordable, k, seed)?,
                CorePhase::InitialDesign,
                None,
            )
        } else if !affordable.iter().any(|&a| a) {
            (CvsVerdict::OutOfBudget, CorePhase::Model, None)
        } else {
            let warm = state.params.as_ref().and_then(HyperRecord::params);
            let (gp, standardized) = fit_gp(&x, &y, space.dim(), warm.as_ref())?;
            state.params = Some(HyperRecord::from(&standardized));
            let params = HyperRecord::from(gp.params());
            let gp = condition_on_pending(gp, trials)?;
            let seed_k = mix_seed(seed, 1000 + k);
            let verdict = run.step(&gp, &affordable, seed_k, &SetOptimizer::default())?;
            (verdict, CorePhase::Model, Some(params))
        };
    let CvsVerdict::Propose(decision) = verdict else {
        return Ok(finish(out_of_budget, state));
    };
    let trial = new_trial(section, space, &problem, trials, &decision, phase, params);
    // A trial is handed out: an earlier finish no longer applies.
    state.finished = None;
    Ok(Decided::Trial(trial, state.to_json()))
}

/// Feeds the complete trials to `run` in the order they were handed out (model decisions
/// replayed, the rest observed) and returns their realized points and internal objectives.
fn replay(
    config: &StudyConfig,
    problem: &CvsProblem,
    trials: &[Trial],
    run: &mut CvsRun<'_>,
) -> (Vec<f64>, Vec<f64>) {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for t in trials {
        let (TrialState::Complete, Some(obj)) = (t.state, t.objective) else {
            continue;
        };
        let y_t = config.study.direction.to_internal(obj);
        match stored_decision(t, problem.num_sets()) {
            Some(dec) if t.decision.phase == CorePhase::Model => run.replay(&dec, y_t),
            _ => run.observe_design(y_t),
        }
        x.extend_from_slice(&t.x);
        y.push(y_t);
    }
    (x, y)
}

/// The GP conditioned on the running trials (at the distributions' means) at its posterior mean.
fn condition_on_pending(gp: ExactGp, trials: &[Trial]) -> Result<ExactGp> {
    let pending: Vec<f64> = trials
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .flat_map(|t| t.x.clone())
        .collect();
    if pending.is_empty() {
        return Ok(gp);
    }
    let (mu, _) = gp.predict(&pending)?;
    Ok(gp.condition_on(&pending, &mu)?)
}

/// The trial a decision hands out: its controlled parameters (random ones at their means until
/// the realized values are told) and its record.
fn new_trial(
    section: &CvsSection,
    space: &SearchSpace,
    problem: &CvsProblem,
    trials: &[Trial],
    decision: &Decision,
    phase: CorePhase,
    params_record: Option<HyperRecord>,
) -> NewTrial {
    let set = &problem.sets()[decision.set];
    let names: Vec<String> = space.names().map(str::to_string).collect();
    let means: Vec<f64> = problem
        .dists()
        .iter()
        .map(|p| p.as_ref().map_or(0.5, |p| p.mean()))
        .collect();
    let x_new = space.snap(&problem.assemble(decision.set, &decision.x_ctrl, &means));
    let all = space.decode(&x_new);
    let controlled: Vec<String> = set.vars.iter().map(|&v| names[v].clone()).collect();
    let random: Vec<String> = problem
        .random_vars(decision.set)
        .iter()
        .map(|&v| names[v].clone())
        .collect();
    let params: serde_json::Map<_, _> = controlled
        .iter()
        .map(|n| (n.clone(), all[n].clone()))
        .collect();
    let finite = |v: f64| v.is_finite().then_some(v);
    let cvs = CvsRecord {
        control_set: decision.set,
        name: section.control_sets[decision.set].name.clone(),
        controlled,
        random,
        cost: set.cost,
        x_ctrl: set.vars.iter().map(|&v| x_new[v]).collect(),
        score: finite(decision.scores[decision.set]),
        scores: decision.scores.iter().map(|&s| finite(s)).collect(),
        epsilon: decision.epsilon,
        etc_phase: decision.phase.map(Phase::label),
        lambda: decision.lambda,
    };
    let record = DecisionRecord {
        phase,
        acquisition: section.policy.clone(),
        acquisition_value: finite(decision.scores[decision.set]),
        lambda: decision.lambda,
        params: params_record,
        predicted_cost: Some(set.cost),
        pending: trials
            .iter()
            .filter(|t| t.state == TrialState::Running)
            .count(),
        kind: RecordKind::Cvs { cvs },
        seconds: None,
    };
    NewTrial {
        params: serde_json::Value::Object(params),
        x: x_new,
        decision: record,
        step_to: None,
    }
}

/// The decision of a stored model-phase trial, as [`pandora_core::cvs::CvsPolicy::replay`] needs
/// it.
fn stored_decision(t: &Trial, m: usize) -> Option<Decision> {
    let c = t.decision.cvs()?;
    let set = c.control_set;
    if set >= m {
        return None;
    }
    let mut scores = vec![f64::NAN; m];
    scores[set] = c.score.unwrap_or(f64::NAN);
    Some(Decision {
        set,
        x_ctrl: c.x_ctrl.clone(),
        scores,
        epsilon: c.epsilon,
        phase: c.etc_phase.as_deref().and_then(Phase::parse),
        lambda: c.lambda,
    })
}

#[cfg(test)]
mod tests {
    use crate::{Ask, Outcome, Study, StudyConfig, storage};
    use serde_json::json;

    const CONFIG: &str = r#"
[study]
name = "t"
storage = "sqlite::memory:"
[objective]
kind = "external"
[[space]]
type = "float"
name = "a"
low = 0.0
high = 2.0
[[space]]
type = "float"
name = "b"
low = -1.0
high = 1.0
[budget]
total = 3.0
[cvs]
initial_design = 2
bank_size = 16
control_sets = [{ params = ["a"], cost = 1.0 }, { params = ["a", "b"], cost = 2.0 }]
[cvs.random]
b = { dist = "discrete", values = [-0.5, 0.5] }
"#;

    #[test]
    fn library_tells_need_the_realized_values() {
        let cfg = StudyConfig::from_toml(CONFIG).unwrap();
        let mut s = Study::open(cfg, storage::open("sqlite::memory:").unwrap()).unwrap();
        let Ask::Trial(t) = s.ask("w").unwrap() else {
            panic!("a trial")
        };
        assert_eq!(s.trial_cost(&t), Some(1.0));
        let plain = Outcome::Complete {
            objective: 1.0,
            cost: 1.0,
        };
        let e = s.tell(t.number, &plain).unwrap_err().to_string();
        assert!(e.contains("leaves b random"), "{e}");
        let mut r = serde_json::Map::new();
        r.insert("b".into(), json!(0.5));
        let told = s.tell_realized(t.number, 1.0, None, &r).unwrap().trial;
        assert_eq!(told.params["b"], json!(0.5));
        assert_eq!(told.x[1], 0.75);
        assert_eq!(told.cost, Some(1.0));
        assert!(
            s.tell_realized(t.number, 1.0, None, &r).is_err(),
            "told twice"
        );
    }
}
