//! Baselines without a model: random search, Hyperband (successive halving), ASHA and the
//! median stopping rule, on a table of `K` configurations and `T` steps.
//!
//! # Random search
//! Configurations in a random order (seeded), each run trained to the end; stops when every
//! configuration has been trained.
//!
//! # Successive halving and Hyperband (Li et al. 2017)
//! Resources are steps, from `r_min = 1` to `R = T`, reduction factor `η ≥ 2`. With
//! `s_max = ⌊log_η R⌋`, bracket `s = s_max, …, 0` samples `n = ⌈(s_max+1)/(s+1) · η^s⌉`
//! configurations (without replacement, at most `K`) and runs successive halving on them: rung
//! `i = 0..=s` trains every survivor to `r_i = max(1, round(R η^{i−s}))` steps (`r_s = R`),
//! then keeps the best `⌊n_i/η⌋` by their value at `r_i` (ties: the earlier member), with
//! `n_i = ⌊n η^{−i}⌋`; at least one survives. A later bracket starts new runs (a
//! configuration met before is trained again from scratch, as Hyperband does); after bracket 0
//! the loop starts again at `s_max` with a new sample, until the budget is spent. Members are
//! run in order, each to the rung's target before the next.
//!
//! # ASHA (Li et al. 2020), one worker
//! Rungs at `r_k = min(R, η^k)` steps, `k = 0..=K` with `r_K = R`. At each decision, from the
//! highest rung below the top down, a run in the top `⌊n_k/η⌋` of rung `k` (the runs that
//! reached `r_k`, by their value at `r_k`) and not yet promoted is promoted: trained to
//! `r_{k+1}`. Without a promotion, a new configuration (random order) is started and trained to
//! `r_0`. When every configuration has been started and no promotion is due, the best
//! unpromoted run of the highest rung below the top is promoted; with none, ASHA stops.
//!
//! # Median stopping rule (Golovin et al. 2017)
//! Configurations in a random order, one run at a time, step by step. After step `t ≥ grace`,
//! the run is stopped if its best value so far is below the median, over the earlier runs that
//! reached step `t`, of their running averages `(1/t) Σ_{u≤t} y_u`, provided at least
//! `min_runs` earlier runs reached `t`. Stops when every configuration has been tried.
//!
//! # References
//! - L. Li, K. Jamieson, G. DeSalvo, A. Rostamizadeh, A. Talwalkar, "Hyperband: A Novel
//!   Bandit-Based Approach to Hyperparameter Optimization", JMLR 18 (2017).
//! - L. Li, K. Jamieson, A. Rostamizadeh, E. Gonina, J. Ben-tzur, M. Hardt, B. Recht,
//!   A. Talwalkar, "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020 (ASHA).
//! - D. Golovin, B. Solnik, S. Moitra, G. Kochanski, J. Karro, D. Sculley, "Google Vizier: A
//!   Service for Black-Box Optimization", KDD 2017 (median stopping rule).

use super::{Action, Policy, View, permutation, rng};
use crate::error::ProblemError;

/// Random search: random order, every run to the end.
#[derive(Debug, Clone)]
pub struct RandomSearch {
    order: Vec<usize>,
    next: usize,
    seed: u64,
}

impl RandomSearch {
    /// For a seed.
    pub fn new(seed: u64) -> Self {
        Self {
            order: Vec::new(),
            next: 0,
            seed,
        }
    }
}

impl Policy for RandomSearch {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        if self.order.is_empty() {
            self.order = permutation(view.configs(), &mut rng(self.seed));
        }
        if let Some(r) = view.runs.len().checked_sub(1)
            && !view.complete(r)
        {
            return Ok(Action::Continue(r));
        }
        match self.order.get(self.next) {
            Some(&k) => {
                self.next += 1;
                Ok(Action::Start(k))
            }
            None => Ok(Action::Stop),
        }
    }
}

/// The rung targets (steps) of a successive-halving bracket `s` for `R` steps and `η`.
pub fn rung_steps(r_max: usize, eta: usize, s: usize) -> Vec<usize> {
    (0..=s)
        .map(|i| {
            let r = r_max as f64 * (eta as f64).powi(i as i32 - s as i32);
            (r.round() as usize).clamp(1, r_max)
        })
        .collect()
}

/// `s_max = ⌊log_η R⌋` (integer arithmetic).
pub fn s_max(r_max: usize, eta: usize) -> usize {
    let mut s = 0;
    let mut p = eta;
    while p <= r_max {
        s += 1;
        p *= eta;
    }
    s
}

/// Configurations of bracket `s`: `⌈(s_max+1)/(s+1) · η^s⌉`.
pub fn bracket_size(s_max: usize, eta: usize, s: usize) -> usize {
    ((s_max + 1) * eta.pow(s as u32)).div_ceil(s + 1)
}

/// A member of the current rung: its configuration and run (once started).
#[derive(Debug, Clone, Copy)]
struct Member {
    config: usize,
    run: Option<usize>,
}

/// Hyperband with successive halving inside each bracket.
#[derive(Debug, Clone)]
pub struct Hyperband {
    eta: usize,
    seed: u64,
    brackets_done: u64,
    s: usize,
    rung: usize,
    members: Vec<Member>,
    /// Only one bracket `s` (successive halving), if set.
    only: Option<usize>,
}

impl Hyperband {
    /// Hyperband with reduction factor `eta` (≥ 2).
    pub fn new(eta: usize, seed: u64) -> Result<Self, ProblemError> {
        if eta < 2 {
            return Err(ProblemError(format!("eta: {eta} must be at least 2")));
        }
        Ok(Self {
            eta,
            seed,
            brackets_done: 0,
            s: 0,
            rung: 0,
            members: Vec::new(),
            only: None,
        })
    }

    /// Successive halving: bracket `s` only, repeated with new samples.
    pub fn successive_halving(eta: usize, s: usize, seed: u64) -> Result<Self, ProblemError> {
        Ok(Self {
            only: Some(s),
            ..Self::new(eta, seed)?
        })
    }

    fn open_bracket(&mut self, view: &View<'_>) {
        let sm = s_max(view.steps(), self.eta);
        self.s = match self.only {
            Some(s) => s.min(sm),
            None => sm - (self.brackets_done as usize % (sm + 1)),
        };
        let n = bracket_size(sm, self.eta, self.s).min(view.configs());
        let mut g = rng(self.seed ^ self.brackets_done.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        self.members = permutation(view.configs(), &mut g)[..n]
            .iter()
            .map(|&config| Member { config, run: None })
            .collect();
        self.rung = 0;
        self.brackets_done += 1;
    }

    fn promote(&mut self, view: &View<'_>, target: usize) {
        let n0 = self.members.len();
        let keep = (n0 / self.eta).max(1);
        let value = |m: &Member| {
            m.run
                .map_or(f64::NEG_INFINITY, |r| view.runs[r].values[target - 1])
        };
        let mut order: Vec<usize> = (0..n0).collect();
        order.sort_by(|&a, &b| value(&self.members[b]).total_cmp(&value(&self.members[a])));
        order.truncate(keep);
        order.sort_unstable();
        self.members = order.into_iter().map(|i| self.members[i]).collect();
        self.rung += 1;
    }
}

impl Policy for Hyperband {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        if self.members.is_empty() {
            self.open_bracket(view);
        }
        loop {
            let targets = rung_steps(view.steps(), self.eta, self.s);
            let target = targets[self.rung];
            for m in &mut self.members {
                match m.run {
                    None => {
                        m.run = Some(view.runs.len());
                        return Ok(Action::Start(m.config));
                    }
                    Some(r) if view.runs[r].values.len() < target => {
                        return Ok(Action::Continue(r));
                    }
                    Some(_) => {}
                }
            }
            if self.rung + 1 < targets.len() {
                self.promote(view, target);
            } else {
                self.open_bracket(view);
            }
        }
    }
}

/// ASHA with one worker.
#[derive(Debug, Clone)]
pub struct Asha {
    eta: usize,
    order: Vec<usize>,
    next_config: usize,
    seed: u64,
    /// Runs promoted out of each rung.
    promoted: Vec<Vec<usize>>,
    /// The run being trained and its target step.
    job: Option<(usize, usize)>,
}

impl Asha {
    /// ASHA with reduction factor `eta` (≥ 2).
    pub fn new(eta: usize, seed: u64) -> Result<Self, ProblemError> {
        if eta < 2 {
            return Err(ProblemError(format!("eta: {eta} must be at least 2")));
        }
        Ok(Self {
            eta,
            order: Vec::new(),
            next_config: 0,
            seed,
            promoted: Vec::new(),
            job: None,
        })
    }

    /// Rung targets `min(R, η^k)`, the last `R`.
    pub fn rungs(r_max: usize, eta: usize) -> Vec<usize> {
        let mut r = vec![1];
        while *r.last().unwrap_or(&r_max) < r_max {
            let next = (r[r.len() - 1] * eta).min(r_max);
            r.push(next);
        }
        r
    }

    /// Runs that reached rung `k` (target `r_k`), best first (ties: the earlier run), not yet
    /// promoted out of it.
    fn ranked(&self, view: &View<'_>, k: usize, target: usize) -> (usize, Vec<usize>) {
        let mut reached: Vec<usize> = (0..view.runs.len())
            .filter(|&r| view.runs[r].values.len() >= target)
            .collect();
        let n = reached.len();
        reached.sort_by(|&a, &b| {
            view.runs[b].values[target - 1].total_cmp(&view.runs[a].values[target - 1])
        });
        reached.retain(|r| !self.promoted[k].contains(r));
        (n, reached)
    }

    fn promotion(&mut self, view: &View<'_>, rungs: &[usize], forced: bool) -> Option<usize> {
        for k in (0..rungs.len() - 1).rev() {
            let (n, ranked) = self.ranked(view, k, rungs[k]);
            let quota = n / self.eta;
            let already = self.promoted[k].len();
            let due = if forced {
                !ranked.is_empty()
            } else {
                already < quota
            };
            if due && let Some(&r) = ranked.first() {
                if !forced && !self.is_top(view, k, rungs[k], r, quota) {
                    continue;
                }
                self.promoted[k].push(r);
                self.job = Some((r, rungs[k + 1]));
                return Some(r);
            }
        }
        None
    }

    /// Whether run `r` is in the top `quota` of everything that reached rung `k`.
    fn is_top(&self, view: &View<'_>, _k: usize, target: usize, r: usize, quota: usize) -> bool {
        let v = view.runs[r].values[target - 1];
        let better = view
            .runs
            .iter()
            .enumerate()
            .filter(|(j, run)| {
                run.values.len() >= target
                    && (run.values[target - 1] > v || (run.values[target - 1] == v && *j < r))
            })
            .count();
        better < quota
    }
}

impl Policy for Asha {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        let rungs = Self::rungs(view.steps(), self.eta);
        if self.order.is_empty() {
            self.order = permutation(view.configs(), &mut rng(self.seed));
            self.promoted = vec![Vec::new(); rungs.len()];
        }
        if let Some((r, target)) = self.job {
            if view.runs[r].values.len() < target {
                return Ok(Action::Continue(r));
            }
            self.job = None;
        }
        if let Some(r) = self.promotion(view, &rungs, false) {
            return Ok(Action::Continue(r));
        }
        if let Some(&k) = self.order.get(self.next_config) {
            self.next_config += 1;
            self.job = Some((view.runs.len(), rungs[0]));
            return Ok(Action::Start(k));
        }
        match self.promotion(view, &rungs, true) {
            Some(r) => Ok(Action::Continue(r)),
            None => Ok(Action::Stop),
        }
    }
}

/// The median stopping rule.
#[derive(Debug, Clone)]
pub struct MedianStopping {
    grace: usize,
    min_runs: usize,
    order: Vec<usize>,
    next_config: usize,
    seed: u64,
    current: Option<usize>,
}

impl MedianStopping {
    /// Stop decisions from step `grace` (≥ 1) on, once `min_runs` (≥ 1) earlier runs reached
    /// the step.
    pub fn new(grace: usize, min_runs: usize, seed: u64) -> Result<Self, ProblemError> {
        if grace == 0 || min_runs == 0 {
            return Err(ProblemError(
                "median: grace and min_runs must be at least 1".into(),
            ));
        }
        Ok(Self {
            grace,
            min_runs,
            order: Vec::new(),
            next_config: 0,
            seed,
            current: None,
        })
    }

    /// Whether run `r`, after `t` steps, is stopped by the rule.
    pub fn prune(&self, view: &View<'_>, r: usize) -> bool {
        let t = view.runs[r].values.len();
        if t < self.grace {
            return false;
        }
        let mut averages: Vec<f64> = view.runs[..r]
            .iter()
            .filter(|run| run.values.len() >= t)
            .map(|run| run.values[..t].iter().sum::<f64>() / t as f64)
            .collect();
        if averages.len() < self.min_runs {
            return false;
        }
        averages.sort_by(f64::total_cmp);
        let n = averages.len();
        let median = if n % 2 == 1 {
            averages[n / 2]
        } else {
            0.5 * (averages[n / 2 - 1] + averages[n / 2])
        };
        let best = view.runs[r]
            .values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        best < median
    }
}

impl Policy for MedianStopping {
    fn next(&mut self, view: &View<'_>) -> Result<Action, ProblemError> {
        if self.order.is_empty() {
            self.order = permutation(view.configs(), &mut rng(self.seed));
        }
        if let Some(r) = self.current
            && !view.complete(r)
            && !self.prune(view, r)
        {
            return Ok(Action::Continue(r));
        }
        match self.order.get(self.next_config) {
            Some(&k) => {
                self.next_config += 1;
                self.current = Some(view.runs.len());
                Ok(Action::Start(k))
            }
            None => Ok(Action::Stop),
        }
    }
}
