//! Policies that choose a control set and the values of its controlled variables.
//!
//! | policy | rule |
//! |---|---|
//! | [`UcbCvs`] | Algorithm 1 of the paper with an [`EpsSchedule`] |
//! | [`Etc`] | explore-then-commit UCB-CVS: a number of plays per cost group, then argmax |
//! | [`UcbPsq`] | `argmax_i max E[u]` (cost-agnostic; `per_cost`: the naive per-unit-cost variant) |
//! | [`TsPsq`] | Thompson sampling with an RFF posterior path (and its naive per-cost variant) |
//! | [`EiPsq`] | expected improvement of the expected value over posterior paths (and per cost) |
//! | [`GittinsCvs`] | Gittins index of each control set (beyond the paper) |
//! | [`RandomChoice`] | a uniformly random affordable set and uniformly random values |

use super::expected::{Expected, ExpectedImprovementPsq, GittinsIndex, Path, Ucb};
use super::problem::{CvsProblem, SetOptimizer, fits};
use crate::acquisition::PbgiDecay;
use crate::error::{Error, Result};
use crate::gp::{ExactGp, PosteriorPath};
use crate::optim::multistart::Objective;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// What a policy sees when it decides.
pub struct Context<'a> {
    /// The problem.
    pub problem: &'a CvsProblem,
    /// The GP conditioned on every observation so far.
    pub gp: &'a ExactGp,
    /// Which sets the remaining budget can pay for (`affordable[i]`); at least one is true.
    pub affordable: &'a [bool],
    /// Number of completed (budgeted) observations so far, `t − 1` in the paper's notation.
    pub iteration: usize,
    /// Largest observation so far (initial design included).
    pub best_y: f64,
    /// Seed for this decision's randomness (optimizer starts, sample paths).
    pub seed: u64,
    /// How each set's acquisition is maximized.
    pub optimizer: &'a SetOptimizer,
}

/// The explore/commit state of an ETC decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Exploring cost group `g` (index into the non-maximal cost groups, by increasing cost).
    Explore(usize),
    /// Committed: argmax over all affordable sets.
    Commit,
}

impl Phase {
    /// The phase as records write it: `"explore G"` or `"commit"`.
    pub fn label(self) -> String {
        match self {
            Phase::Explore(g) => format!("explore {g}"),
            Phase::Commit => "commit".to_string(),
        }
    }

    /// Reads [`Phase::label`] back (`None` for anything else).
    pub fn parse(s: &str) -> Option<Self> {
        if s == "commit" {
            return Some(Phase::Commit);
        }
        s.strip_prefix("explore ")?.parse().ok().map(Phase::Explore)
    }
}

/// A decision: the control set and the controlled values, with diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Index of the chosen control set.
    pub set: usize,
    /// Values of its controlled variables (in the order of `ControlSet::vars`).
    pub x_ctrl: Vec<f64>,
    /// The per-set score the policy compared (NaN for sets it did not evaluate).
    pub scores: Vec<f64>,
    /// The ε of this decision (UCB-CVS only).
    pub epsilon: Option<f64>,
    /// The ETC phase (ETC only).
    pub phase: Option<Phase>,
    /// λ used (Gittins only).
    pub lambda: Option<f64>,
}

impl Decision {
    fn new(set: usize, x_ctrl: Vec<f64>, scores: Vec<f64>) -> Self {
        Self {
            set,
            x_ctrl,
            scores,
            epsilon: None,
            phase: None,
            lambda: None,
        }
    }
}

/// A BOCVS policy.
pub trait CvsPolicy: Send {
    /// A short name (`ucb-cvs`, `etc-ada`, ...).
    fn name(&self) -> String;
    /// Chooses a set among the affordable ones and its controlled values.
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision>;
    /// Called once the decision was paid for and observed (advances schedules and counters).
    fn observed(&mut self, _decision: &Decision, _y: f64) {}
    /// Rebuilds the state after a decision that was made earlier, possibly by another process,
    /// and has been paid for and observed with value `y`; `best_y_before` is the largest
    /// observation before it. A fresh policy that replays every decision of a run in order is in
    /// the state the original policy reached (warm starts of the optimizer aside), which is how
    /// studies resume a policy from their stored trials. The decision needs `set`, `phase`,
    /// `lambda` and the chosen set's score `scores[set]`. The default calls
    /// [`CvsPolicy::observed`].
    fn replay(&mut self, decision: &Decision, best_y_before: f64, y: f64) {
        let _ = best_y_before;
        self.observed(decision, y);
    }
    /// The number of decisions a fresh run of this policy makes on `problem` with `budget`,
    /// where its schedule fixes which sets it plays (for planning a grid: `pandora cvs plan`),
    /// or `None` where that depends on the data (the default). See [`Etc`] and [`UcbCvs`].
    fn planned_decisions(&self, _problem: &CvsProblem, _budget: f64) -> Option<usize> {
        None
    }
}

/// Decisions of a run that has `remaining` budget and plays, while it can, the dearest set it
/// can afford (a pure argmax of an expected UCB does: a full query dominates every other set,
/// and among the partial ones a larger set usually has the larger maximum), then the next
/// cheaper ones, as a run that restricts its choices to the affordable sets does at the end of
/// its budget.
fn dearest_first(problem: &CvsProblem, plan: &mut Spending) -> usize {
    let mut n = 0;
    for g in problem.cost_groups().iter().rev() {
        n += plan.play(g.cost, usize::MAX);
    }
    n
}

/// A budget spent play by play as a run spends it (`spent` accumulated, a set affordable when
/// it [`fits`] `budget − spent`), so that planned decisions round as the run's do.
struct Spending {
    budget: f64,
    spent: f64,
}

impl Spending {
    /// Plays sets of cost `cost` while affordable, at most `max` times; returns how many.
    fn play(&mut self, cost: f64, max: usize) -> usize {
        let mut k = 0;
        while k < max && cost > 0.0 && fits(cost, self.budget - self.spent) {
            self.spent += cost;
            k += 1;
        }
        k
    }
}

/// Derives an independent seed from `seed` and a stream number `k` (SplitMix64 finalizer); used
/// for every per-decision seed of the CVS policies and of CVS studies.
pub fn mix_seed(seed: u64, k: u64) -> u64 {
    let mut z = seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Last maximizer of each set, used as a warm start next time.
#[derive(Debug, Clone, Default)]
struct WarmStarts(Vec<Option<Vec<f64>>>);

impl WarmStarts {
    fn get(&self, i: usize) -> Vec<Vec<f64>> {
        self.0.get(i).cloned().flatten().into_iter().collect()
    }
    fn set(&mut self, i: usize, x: &[f64]) {
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(x.to_vec());
    }
}

/// Maximizes `make(i)` for every set in `sets`, the sets in parallel (rayon); returns
/// `(x_i, v_i)` per listed set. Each set's optimization has its own seed and warm start, so the
/// result does not depend on the number of threads.
fn maximize_sets<'o>(
    ctx: &Context<'_>,
    sets: &[usize],
    warm: &mut WarmStarts,
    salt: u64,
    make: impl Fn(usize) -> Box<dyn Objective + 'o> + Sync,
) -> Result<Vec<(Vec<f64>, f64)>> {
    let starts: Vec<Vec<Vec<f64>>> = sets.iter().map(|&i| warm.get(i)).collect();
    let out: Vec<(Vec<f64>, f64)> = sets
        .par_iter()
        .zip(&starts)
        .map(|(&i, start)| {
            let obj = make(i);
            ctx.optimizer.maximize(
                ctx.problem,
                i,
                obj.as_ref(),
                start,
                mix_seed(ctx.seed, salt.wrapping_mul(1000).wrapping_add(i as u64)),
            )
        })
        .collect::<Result<_>>()?;
    for (&i, (x, _)) in sets.iter().zip(&out) {
        warm.set(i, x);
    }
    Ok(out)
}

fn affordable_sets(ctx: &Context<'_>) -> Result<Vec<usize>> {
    let v: Vec<usize> = (0..ctx.problem.num_sets())
        .filter(|&i| ctx.affordable.get(i).copied().unwrap_or(false))
        .collect();
    if v.is_empty() {
        return Err(Error::invalid("affordable", "no control set is affordable"));
    }
    Ok(v)
}

/// For a pure argmax of an expected UCB, path value or EI, a full query dominates every other
/// set exactly (the maximum of a function is at least any average of it), so only the first full
/// set among the candidates needs to be evaluated.
fn full_shortcut(problem: &CvsProblem, cands: &[usize]) -> Vec<usize> {
    match cands.iter().find(|&&i| problem.is_full(i)) {
        Some(&i) => vec![i],
        None => cands.to_vec(),
    }
}

/// Index (into `values`) of the largest value, lowest index among ties.
fn argmax(values: &[f64]) -> usize {
    let mut b = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[b] || values[b].is_nan() {
            b = i;
        }
    }
    b
}

/// UCB-CVS's choice (Algorithm 1, steps 3–6) among candidate sets with expected-UCB maxima
/// `values` and costs `costs`: `S1 = {i : v_i + ε ≥ max_j v_j}`, `S2` = the cheapest sets of `S1`,
/// and the set of `S2` with the largest `v_i` (lowest position among ties). Returns a position in
/// the slices.
pub fn ucb_cvs_choose(values: &[f64], costs: &[f64], epsilon: f64) -> usize {
    let g = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let s1: Vec<usize> = (0..values.len())
        .filter(|&i| values[i] + epsilon >= g)
        .collect();
    if s1.is_empty() {
        return argmax(values);
    }
    let cmin = s1.iter().map(|&i| costs[i]).fold(f64::INFINITY, f64::min);
    let mut best: Option<usize> = None;
    for &i in &s1 {
        if costs[i] == cmin && best.is_none_or(|b| values[i] > values[b]) {
            best = Some(i);
        }
    }
    best.unwrap_or_else(|| argmax(values))
}

/// The ε-schedule of UCB-CVS, as a function of the number `t` of completed observations.
#[derive(Debug, Clone, PartialEq)]
pub enum EpsSchedule {
    /// `ε_t = ε` for every `t` (`Constant(0.0)` is UCB-PSQ with cheapest-set tie-breaking).
    Constant(f64),
    /// Linear decay `ε_t = ε_0 · max(1 − t/T, 0)`.
    Linear {
        /// `ε_0`.
        eps0: f64,
        /// `T` (iterations until ε reaches 0).
        t_cut: f64,
    },
    /// Cost-adaptive linear decay: `ε_t = ε_0 · max(1 − t/T, 0)` with
    /// `T = Σ_{i : c_i < c_max} w_i · c_max / c_i` (the BOCVS code's adaptive schedule), where
    /// `w_i = 1`, or with `variance_weighted`, `w_i = Σ_{ℓ random in i} Var[X_ℓ] / (1/12)`.
    CostAdaptive {
        /// `ε_0`.
        eps0: f64,
        /// Weight each term by the set's random-variable variances relative to a uniform's.
        variance_weighted: bool,
    },
}

impl EpsSchedule {
    /// The decay horizon `T` of a linear or cost-adaptive schedule on `problem`
    /// (`+∞` for a constant schedule).
    pub fn t_cut(&self, problem: &CvsProblem) -> f64 {
        match self {
            Self::Constant(_) => f64::INFINITY,
            Self::Linear { t_cut, .. } => *t_cut,
            Self::CostAdaptive {
                variance_weighted, ..
            } => {
                let cmax = problem.max_cost();
                problem
                    .sets()
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.cost < cmax)
                    .map(|(i, s)| {
                        let w = if *variance_weighted {
                            problem
                                .random_vars(i)
                                .iter()
                                .map(|&v| problem.dists()[v].as_ref().map_or(0.0, |d| d.variance()))
                                .sum::<f64>()
                                * 12.0
                        } else {
                            1.0
                        };
                        w * cmax / s.cost
                    })
                    .sum()
            }
        }
    }

    /// `ε_t` after `t` completed observations.
    pub fn epsilon(&self, t: usize, problem: &CvsProblem) -> f64 {
        match self {
            Self::Constant(e) => *e,
            Self::Linear { eps0, .. } | Self::CostAdaptive { eps0, .. } => {
                let tc = self.t_cut(problem);
                if tc <= 0.0 {
                    0.0
                } else {
                    eps0 * (1.0 - t as f64 / tc).max(0.0)
                }
            }
        }
    }
}

/// UCB-CVS (Algorithm 1) with `u = μ + β·σ`.
#[derive(Debug, Clone)]
pub struct UcbCvs {
    /// Multiplier of σ (default 2, as in the paper's experiments).
    pub beta: f64,
    /// The ε-schedule.
    pub schedule: EpsSchedule,
    t: usize,
    warm: WarmStarts,
}

impl UcbCvs {
    /// UCB-CVS with the given β and schedule.
    pub fn new(beta: f64, schedule: EpsSchedule) -> Self {
        Self {
            beta,
            schedule,
            t: 0,
            warm: WarmStarts::default(),
        }
    }
}

fn ucb_values(
    ctx: &Context<'_>,
    sets: &[usize],
    beta: f64,
    warm: &mut WarmStarts,
) -> Result<Vec<(Vec<f64>, f64)>> {
    maximize_sets(ctx, sets, warm, 1, |i| {
        Box::new(Expected {
            problem: ctx.problem,
            set: i,
            integrand: Ucb {
                model: ctx.gp,
                beta,
            },
        })
    })
}

fn scores_vec(m: usize, sets: &[usize], vals: &[(Vec<f64>, f64)]) -> Vec<f64> {
    let mut s = vec![f64::NAN; m];
    for (&i, (_, v)) in sets.iter().zip(vals) {
        s[i] = *v;
    }
    s
}

impl CvsPolicy for UcbCvs {
    fn name(&self) -> String {
        "ucb-cvs".into()
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let sets = affordable_sets(ctx)?;
        let eps = self.schedule.epsilon(self.t, ctx.problem);
        let vals = ucb_values(ctx, &sets, self.beta, &mut self.warm)?;
        let v: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
        let c: Vec<f64> = sets.iter().map(|&i| ctx.problem.sets()[i].cost).collect();
        let k = ucb_cvs_choose(&v, &c, eps);
        let mut d = Decision::new(
            sets[k],
            vals[k].0.clone(),
            scores_vec(ctx.problem.num_sets(), &sets, &vals),
        );
        d.epsilon = Some(eps);
        Ok(d)
    }
    fn observed(&mut self, _d: &Decision, _y: f64) {
        self.t += 1;
    }
    /// With a decaying schedule: `⌈T⌉` decisions while `ε > 0` on the cheapest set (as far as
    /// the budget goes; UCB-CVS picks the cheapest set within `ε` of the best, and early on `ε`
    /// admits all of them: on plant at cheap costs 100 of its first 100 decisions), then the
    /// dearest affordable set (with `ε = 0` the argmax, a full query when affordable). An upper
    /// bound on the decay phase's length in decisions: as `ε` shrinks the policy moves to dearer
    /// sets earlier. `Constant(0)` plays the argmax from the start; other constants: `None`.
    fn planned_decisions(&self, problem: &CvsProblem, budget: f64) -> Option<usize> {
        let cmin = problem.cost_groups().first()?.cost;
        let decay = match self.schedule {
            EpsSchedule::Constant(0.0) => 0.0,
            EpsSchedule::Constant(_) => return None,
            _ => self.schedule.t_cut(problem).max(0.0),
        };
        // A decay longer than any budget could pay for is no schedule to plan by.
        if !(decay.is_finite() && decay < 1e9 && cmin > 0.0 && budget.is_finite()) {
            return None;
        }
        let mut plan = Spending { budget, spent: 0.0 };
        let k = plan.play(cmin, decay.ceil() as usize);
        Some(k + dearest_first(problem, &mut plan))
    }
}

/// Plays per cost group of ETC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EtcPlays {
    /// The same number of plays for every non-maximal cost group (ETC-50, ETC-100).
    Fixed(usize),
    /// `⌊budget_units / c⌋` plays for a group of cost `c` (ETC-Ada: 4 units).
    Adaptive(f64),
}

impl EtcPlays {
    /// Target plays of a group with cost `cost`.
    pub fn target(&self, cost: f64) -> usize {
        match self {
            Self::Fixed(n) => *n,
            // A relative nudge so that 4/0.1 = 39.999… still counts as 40.
            Self::Adaptive(units) => ((units / cost) * (1.0 + 1e-12)).floor().max(0.0) as usize,
        }
    }
}

/// Explore-then-commit UCB-CVS (the paper's §4.2): cost groups are the sets sharing a cost, by
/// increasing cost, except the most expensive group. The cheapest group with plays left (and an
/// affordable set) is explored by `argmax_{i in group} max E[u]`; once every group is done, the
/// argmax over all affordable sets is played.
#[derive(Debug, Clone)]
pub struct Etc {
    /// Multiplier of σ.
    pub beta: f64,
    /// Plays per group.
    pub plays: EtcPlays,
    counts: Vec<usize>,
    warm: WarmStarts,
}

impl Etc {
    /// ETC with the given β and plays per group.
    pub fn new(beta: f64, plays: EtcPlays) -> Self {
        Self {
            beta,
            plays,
            counts: Vec::new(),
            warm: WarmStarts::default(),
        }
    }

    /// Plays counted so far per explored group.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// The phase of the next decision and its candidate sets, given the plays so far.
    pub fn phase(&self, problem: &CvsProblem, affordable: &[bool]) -> (Phase, Vec<usize>) {
        let groups = problem.cost_groups();
        let cmax = problem.max_cost();
        for (g, grp) in groups.iter().enumerate().filter(|(_, g)| g.cost < cmax) {
            let done = self.counts.get(g).copied().unwrap_or(0);
            let cands: Vec<usize> = grp
                .sets
                .iter()
                .copied()
                .filter(|&i| affordable.get(i).copied().unwrap_or(false))
                .collect();
            if done < self.plays.target(grp.cost) && !cands.is_empty() {
                return (Phase::Explore(g), cands);
            }
        }
        let all = (0..problem.num_sets())
            .filter(|&i| affordable.get(i).copied().unwrap_or(false))
            .collect();
        (Phase::Commit, all)
    }
}

impl CvsPolicy for Etc {
    fn name(&self) -> String {
        match self.plays {
            EtcPlays::Fixed(n) => format!("etc-{n}"),
            EtcPlays::Adaptive(_) => "etc-ada".into(),
        }
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let (phase, cands) = self.phase(ctx.problem, ctx.affordable);
        if cands.is_empty() {
            return Err(Error::invalid("affordable", "no control set is affordable"));
        }
        let sets = if phase == Phase::Commit {
            full_shortcut(ctx.problem, &cands)
        } else {
            cands
        };
        let vals = ucb_values(ctx, &sets, self.beta, &mut self.warm)?;
        let v: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
        let k = argmax(&v);
        let mut d = Decision::new(
            sets[k],
            vals[k].0.clone(),
            scores_vec(ctx.problem.num_sets(), &sets, &vals),
        );
        d.phase = Some(phase);
        Ok(d)
    }
    fn observed(&mut self, d: &Decision, _y: f64) {
        if let Some(Phase::Explore(g)) = d.phase {
            if self.counts.len() <= g {
                self.counts.resize(g + 1, 0);
            }
            self.counts[g] += 1;
        }
    }
    /// The exploration plays of each cheaper cost group by increasing cost (as far as the
    /// budget goes), then the full set while affordable (the commit phase's argmax), then the
    /// dearest affordable sets: exact when the commit phase plays the full set, which a pure
    /// argmax of an expected UCB does whenever it can afford it.
    fn planned_decisions(&self, problem: &CvsProblem, budget: f64) -> Option<usize> {
        if !(budget.is_finite() && budget < 1e9 * problem.max_cost()) {
            return None;
        }
        let cmax = problem.max_cost();
        let mut plan = Spending { budget, spent: 0.0 };
        let mut n = 0;
        for g in problem.cost_groups().iter().filter(|g| g.cost < cmax) {
            n += plan.play(g.cost, self.plays.target(g.cost));
        }
        Some(n + dearest_first(problem, &mut plan))
    }
}

/// The naive per-unit-cost choice: `argmax_i max(s_i − r, 0)/c_i`, where `r` is a reference
/// level (the best expected posterior mean among the candidates' maximizers), so that only a
/// non-negative optimistic gain is divided by a cost; if every gain is 0, `argmax_i s_i`.
/// Returns a position in the slices.
pub fn per_cost_choose(scores: &[f64], reference: f64, costs: &[f64]) -> usize {
    let gains: Vec<f64> = scores
        .iter()
        .zip(costs)
        .map(|(s, c)| (s - reference).max(0.0) / c)
        .collect();
    if gains.iter().all(|&g| g <= 0.0 || g.is_nan()) {
        argmax(scores)
    } else {
        argmax(&gains)
    }
}

/// `max_i E_bank μ(x̂_i)` over the candidates' maximizers (the reference of the naive rules).
fn mean_reference(ctx: &Context<'_>, sets: &[usize], vals: &[(Vec<f64>, f64)]) -> Result<f64> {
    let mut r = f64::NEG_INFINITY;
    for (&i, (x, _)) in sets.iter().zip(vals) {
        let e = Expected {
            problem: ctx.problem,
            set: i,
            integrand: Ucb {
                model: ctx.gp,
                beta: 0.0,
            },
        };
        r = r.max(e.eval_many(x)?[0]);
    }
    Ok(r)
}

/// UCB-PSQ: `argmax_i max E[u]` (cost-agnostic). With `per_cost`, the naive per-unit-cost variant
/// ([`per_cost_choose`]).
#[derive(Debug, Clone)]
pub struct UcbPsq {
    /// Multiplier of σ.
    pub beta: f64,
    /// Divide the (shifted, non-negative) score by the cost.
    pub per_cost: bool,
    warm: WarmStarts,
}

impl UcbPsq {
    /// UCB-PSQ with the given β.
    pub fn new(beta: f64, per_cost: bool) -> Self {
        Self {
            beta,
            per_cost,
            warm: WarmStarts::default(),
        }
    }
}

fn choose_psq(
    ctx: &Context<'_>,
    sets: &[usize],
    vals: &[(Vec<f64>, f64)],
    per_cost: bool,
) -> Result<Decision> {
    let v: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
    let k = if per_cost {
        let r = mean_reference(ctx, sets, vals)?;
        let c: Vec<f64> = sets.iter().map(|&i| ctx.problem.sets()[i].cost).collect();
        per_cost_choose(&v, r, &c)
    } else {
        argmax(&v)
    };
    Ok(Decision::new(
        sets[k],
        vals[k].0.clone(),
        scores_vec(ctx.problem.num_sets(), sets, vals),
    ))
}

impl CvsPolicy for UcbPsq {
    fn name(&self) -> String {
        if self.per_cost {
            "ucb-naive"
        } else {
            "ucb-psq"
        }
        .into()
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let all = affordable_sets(ctx)?;
        let sets = if self.per_cost {
            all
        } else {
            full_shortcut(ctx.problem, &all)
        };
        let vals = ucb_values(ctx, &sets, self.beta, &mut self.warm)?;
        choose_psq(ctx, &sets, &vals, self.per_cost)
    }
}

/// TS-PSQ: one posterior path per decision (random Fourier features for the prior part,
/// Matheron's rule for the data), `argmax_i max E_bank f̃`. With `per_cost`, the naive variant.
#[derive(Debug, Clone)]
pub struct TsPsq {
    /// Number of random Fourier features (default 1024).
    pub num_features: usize,
    /// Divide the (shifted, non-negative) score by the cost.
    pub per_cost: bool,
    warm: WarmStarts,
}

impl TsPsq {
    /// TS-PSQ with `num_features` features.
    pub fn new(num_features: usize, per_cost: bool) -> Self {
        Self {
            num_features,
            per_cost,
            warm: WarmStarts::default(),
        }
    }
}

impl CvsPolicy for TsPsq {
    fn name(&self) -> String {
        if self.per_cost { "ts-naive" } else { "ts-psq" }.into()
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let all = affordable_sets(ctx)?;
        let sets = if self.per_cost {
            all
        } else {
            full_shortcut(ctx.problem, &all)
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(ctx.seed, 77));
        let path = PosteriorPath::sample(ctx.gp, self.num_features, &mut rng)?;
        let vals = maximize_sets(ctx, &sets, &mut self.warm, 2, |i| {
            Box::new(Expected {
                problem: ctx.problem,
                set: i,
                integrand: Path(&path),
            })
        })?;
        choose_psq(ctx, &sets, &vals, self.per_cost)
    }
}

/// EI-PSQ: `S` posterior paths `f̃_r` with incumbents `b_r = max_j f̃_r(x_j)`;
/// `EI_i = max_{x^I} (1/S) Σ_r max(E_bank f̃_r([x^I, X]) − b_r, 0)`; `argmax_i EI_i`, or with
/// `per_cost` (EI is non-negative) `argmax_i EI_i / c_i`.
#[derive(Debug, Clone)]
pub struct EiPsq {
    /// Number of posterior paths (default 32).
    pub samples: usize,
    /// Random Fourier features per path (default 1024).
    pub num_features: usize,
    /// Divide EI by the cost.
    pub per_cost: bool,
    warm: WarmStarts,
}

impl EiPsq {
    /// EI-PSQ with `samples` paths of `num_features` features.
    pub fn new(samples: usize, num_features: usize, per_cost: bool) -> Self {
        Self {
            samples,
            num_features,
            per_cost,
            warm: WarmStarts::default(),
        }
    }
}

impl CvsPolicy for EiPsq {
    fn name(&self) -> String {
        if self.per_cost { "ei-naive" } else { "ei-psq" }.into()
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let all = affordable_sets(ctx)?;
        let sets = if self.per_cost {
            all
        } else {
            full_shortcut(ctx.problem, &all)
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(ctx.seed, 78));
        let paths =
            PosteriorPath::sample_batch(ctx.gp, self.num_features, self.samples.max(1), &mut rng)?;
        let d = ctx.problem.dim();
        let best: Vec<f64> = paths
            .iter()
            .map(|p| {
                ctx.gp
                    .train_x()
                    .chunks_exact(d)
                    .map(|x| p.value(x))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect();
        let vals = maximize_sets(ctx, &sets, &mut self.warm, 3, |i| {
            Box::new(ExpectedImprovementPsq {
                problem: ctx.problem,
                set: i,
                paths: &paths,
                best: &best,
            })
        })?;
        let v: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
        let k = if self.per_cost {
            let r: Vec<f64> = sets
                .iter()
                .zip(&v)
                .map(|(&i, e)| e / ctx.problem.sets()[i].cost)
                .collect();
            if r.iter().all(|&x| x <= 0.0) {
                argmax(&v)
            } else {
                argmax(&r)
            }
        } else {
            argmax(&v)
        };
        Ok(Decision::new(
            sets[k],
            vals[k].0.clone(),
            scores_vec(ctx.problem.num_sets(), &sets, &vals),
        ))
    }
}

/// How λ of the Gittins policy evolves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LambdaRule {
    /// A fixed λ.
    Fixed(f64),
    /// PBGI-D style decay: start at `lambda0`, divide by `divisor` after a round whose best index
    /// is below the best observation.
    Decay {
        /// Initial λ.
        lambda0: f64,
        /// Divisor (> 1).
        divisor: f64,
    },
}

/// Gittins-index policy for control sets (beyond the paper). For each affordable set `i`, the
/// index at `x^I` is the `g` with `E_X E_post[(f([x^I, X]) − g)^+] = λ·c_i` (see
/// [`super::expected::mixture_index`]); it is maximized over `x^I` and the set with the largest
/// maximal index is played.
#[derive(Debug, Clone)]
pub struct GittinsCvs {
    rule: LambdaRule,
    decay: Option<PbgiDecay>,
    last_best_index: f64,
    best_y: f64,
    warm: WarmStarts,
}

impl GittinsCvs {
    /// A Gittins policy with the given λ rule. Errors on a non-positive λ or a divisor `≤ 1`.
    pub fn new(rule: LambdaRule) -> Result<Self> {
        let decay = match rule {
            LambdaRule::Fixed(l) => {
                if !(l.is_finite() && l > 0.0) {
                    return Err(Error::invalid("lambda", "must be finite and > 0"));
                }
                None
            }
            LambdaRule::Decay { lambda0, divisor } => Some(PbgiDecay::new(lambda0, divisor)?),
        };
        Ok(Self {
            rule,
            decay,
            last_best_index: f64::NAN,
            best_y: f64::NEG_INFINITY,
            warm: WarmStarts::default(),
        })
    }
}

impl CvsPolicy for GittinsCvs {
    fn name(&self) -> String {
        match self.rule {
            LambdaRule::Fixed(_) => "gittins".into(),
            LambdaRule::Decay { .. } => "gittins-d".into(),
        }
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let lambda = match (&mut self.decay, self.rule) {
            (Some(dc), _) => dc.begin_iteration(),
            (None, LambdaRule::Fixed(l)) => l,
            (None, _) => unreachable!("decay state exists for LambdaRule::Decay"),
        };
        let sets = affordable_sets(ctx)?;
        let vals = maximize_sets(ctx, &sets, &mut self.warm, 4, |i| {
            Box::new(GittinsIndex {
                problem: ctx.problem,
                set: i,
                model: ctx.gp,
                log_lambda_c: (lambda * ctx.problem.sets()[i].cost).ln(),
            })
        })?;
        let v: Vec<f64> = vals.iter().map(|(_, v)| *v).collect();
        let k = argmax(&v);
        self.last_best_index = v[k];
        self.best_y = ctx.best_y;
        let mut d = Decision::new(
            sets[k],
            vals[k].0.clone(),
            scores_vec(ctx.problem.num_sets(), &sets, &vals),
        );
        d.lambda = Some(lambda);
        Ok(d)
    }
    fn observed(&mut self, _d: &Decision, y: f64) {
        // PBGI-D rule: the best observation includes this one; compare with this round's index.
        let best = self.best_y.max(y);
        if let Some(dc) = &mut self.decay {
            dc.end_iteration(self.last_best_index, best);
        }
    }
    fn replay(&mut self, d: &Decision, best_y_before: f64, y: f64) {
        // The round as `select` would have begun it: a pending decay is applied first.
        if let Some(dc) = &mut self.decay {
            dc.begin_iteration();
        }
        self.last_best_index = d.scores.get(d.set).copied().unwrap_or(f64::NAN);
        self.best_y = best_y_before;
        self.observed(d, y);
    }
}

/// A uniformly random affordable set with uniformly random controlled values (a baseline).
#[derive(Debug, Clone, Default)]
pub struct RandomChoice;

impl CvsPolicy for RandomChoice {
    fn name(&self) -> String {
        "random".into()
    }
    fn select(&mut self, ctx: &Context<'_>) -> Result<Decision> {
        let sets = affordable_sets(ctx)?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(ctx.seed, 79));
        let i = sets[rng.random_range(0..sets.len())];
        let x: Vec<f64> = (0..ctx.problem.sets()[i].vars.len())
            .map(|_| rng.random::<f64>())
            .collect();
        Ok(Decision::new(i, x, vec![f64::NAN; ctx.problem.num_sets()]))
    }
}

/// Names accepted by [`build_policy`].
pub const POLICY_NAMES: [&str; 14] = [
    "ucb-cvs",
    "ucb-cvs-linear",
    "etc-50",
    "etc-100",
    "etc-ada",
    "ucb-psq",
    "ts-psq",
    "ei-psq",
    "ucb-naive",
    "ts-naive",
    "ei-naive",
    "gittins",
    "gittins-d",
    "random",
];

/// Builds a policy with its defaults by name (see [`POLICY_NAMES`]): β = 2; `ucb-cvs` uses the
/// cost-adaptive schedule with ε₀ = 2, `ucb-cvs-linear` a linear decay from ε₀ = 2 over
/// `linear_t_cut` observations; TS uses 1024 features, EI 32 paths of 1024 features; `gittins`
/// uses λ = `lambda`, `gittins-d` starts there and halves it when the stopping rule fires.
pub fn build_policy(name: &str, linear_t_cut: f64, lambda: f64) -> Result<Box<dyn CvsPolicy>> {
    const BETA: f64 = 2.0;
    const F: usize = crate::gp::paths::DEFAULT_NUM_FEATURES;
    Ok(match name {
        "ucb-cvs" => Box::new(UcbCvs::new(
            BETA,
            EpsSchedule::CostAdaptive {
                eps0: 2.0,
                variance_weighted: false,
            },
        )),
        "ucb-cvs-linear" => Box::new(UcbCvs::new(
            BETA,
            EpsSchedule::Linear {
                eps0: 2.0,
                t_cut: linear_t_cut,
            },
        )),
        "etc-50" => Box::new(Etc::new(BETA, EtcPlays::Fixed(50))),
        "etc-100" => Box::new(Etc::new(BETA, EtcPlays::Fixed(100))),
        "etc-ada" => Box::new(Etc::new(BETA, EtcPlays::Adaptive(4.0))),
        "ucb-psq" => Box::new(UcbPsq::new(BETA, false)),
        "ucb-naive" => Box::new(UcbPsq::new(BETA, true)),
        "ts-psq" => Box::new(TsPsq::new(F, false)),
        "ts-naive" => Box::new(TsPsq::new(F, true)),
        "ei-psq" => Box::new(EiPsq::new(32, F, false)),
        "ei-naive" => Box::new(EiPsq::new(32, F, true)),
        "gittins" => Box::new(GittinsCvs::new(LambdaRule::Fixed(lambda))?),
        "gittins-d" => Box::new(GittinsCvs::new(LambdaRule::Decay {
            lambda0: lambda,
            divisor: 2.0,
        })?),
        "random" => Box::new(RandomChoice),
        other => {
            return Err(Error::invalid(
                "policy",
                format!(
                    "unknown policy '{other}' (expected one of {})",
                    POLICY_NAMES.join(", ")
                ),
            ));
        }
    })
}
