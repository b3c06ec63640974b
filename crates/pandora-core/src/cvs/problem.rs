//! The BOCVS problem description: control sets with costs, the distributions of the variables
//! that are left random, and a fixed quasi-Monte-Carlo bank for expectations over them.

use super::CvsFunction;
use super::dist::Distribution;
use crate::error::{Error, Result};
use crate::optim::multistart::{MultiStartOptions, Objective, maximize};
use crate::optim::sobol::scrambled_sobol;

/// Default number of rows of the sample bank (`2^10`, as in the BOCVS experiments).
pub const DEFAULT_BANK_SIZE: usize = 1024;

/// Whether a cost fits in what is left of a budget (relative and absolute tolerance `1e-12`):
/// the affordability rule of a run and of the plans of its decisions.
pub fn fits(cost: f64, remaining: f64) -> bool {
    cost <= remaining * (1.0 + 1e-12) + 1e-12
}

/// A control set: the variables whose values the learner chooses, and what that costs.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlSet {
    /// Indices of the controlled variables (zero-based, strictly increasing).
    pub vars: Vec<usize>,
    /// Cost of one query with this control set (`> 0`).
    pub cost: f64,
}

impl ControlSet {
    /// A control set over `vars` (sorted and deduplicated here) with cost `cost`.
    pub fn new(mut vars: Vec<usize>, cost: f64) -> Self {
        vars.sort_unstable();
        vars.dedup();
        Self { vars, cost }
    }
}

/// Control sets that share one cost (ETC explores them together).
#[derive(Debug, Clone, PartialEq)]
pub struct CostGroup {
    /// The common cost.
    pub cost: f64,
    /// Indices of the control sets with that cost, increasing.
    pub sets: Vec<usize>,
}

/// A fixed bank of draws of every variable (`n × d`, row-major): row `s` holds the quantiles of
/// point `s` of an Owen-scrambled Sobol sequence under each variable's distribution (columns of
/// variables without a distribution hold the uniform value and are never used).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleBank {
    n: usize,
    d: usize,
    rows: Vec<f64>,
}

impl SampleBank {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether the bank has no rows.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Row `s` (length `d`).
    pub fn row(&self, s: usize) -> &[f64] {
        &self.rows[s * self.d..(s + 1) * self.d]
    }
    /// All rows, row-major `n × d`.
    pub fn rows(&self) -> &[f64] {
        &self.rows
    }
}

/// A BOCVS problem on `[0,1]^d`.
#[derive(Debug, Clone)]
pub struct CvsProblem {
    d: usize,
    sets: Vec<ControlSet>,
    dists: Vec<Option<Distribution>>,
    /// Per set: the random (uncontrolled) variables, increasing.
    random: Vec<Vec<usize>>,
    bank: SampleBank,
}

impl CvsProblem {
    /// A problem in `d` dimensions with the given control sets and, for every variable, its
    /// distribution when it is not controlled (`dists.len() == d`; `None` only for variables that
    /// every control set controls). Expectations use a bank of `bank_size` scrambled-Sobol draws
    /// seeded by `bank_seed`.
    ///
    /// Errors on: `d == 0`; no control sets; an index `≥ d`; a cost that is not finite and
    /// positive; a missing distribution for a variable some set leaves random; a distribution
    /// with support outside `[0, 1]`; `bank_size == 0`.
    pub fn new(
        d: usize,
        sets: Vec<ControlSet>,
        dists: Vec<Option<Distribution>>,
        bank_size: usize,
        bank_seed: u64,
    ) -> Result<Self> {
        if d == 0 {
            return Err(Error::invalid("dimension", "must be at least 1"));
        }
        if sets.is_empty() {
            return Err(Error::invalid("control sets", "need at least one"));
        }
        if dists.len() != d {
            return Err(Error::dim("distributions", d, dists.len()));
        }
        if bank_size == 0 {
            return Err(Error::invalid("bank_size", "must be at least 1"));
        }
        let mut sets = sets;
        let mut random = Vec::with_capacity(sets.len());
        for (i, s) in sets.iter_mut().enumerate() {
            s.vars.sort_unstable();
            s.vars.dedup();
            if let Some(&v) = s.vars.iter().find(|&&v| v >= d) {
                return Err(Error::invalid(
                    format!("control set {i}"),
                    format!("variable {v} is out of range for d = {d}"),
                ));
            }
            if !(s.cost.is_finite() && s.cost > 0.0) {
                return Err(Error::invalid(
                    format!("control set {i} cost"),
                    format!("must be finite and > 0, got {}", s.cost),
                ));
            }
            let r: Vec<usize> = (0..d).filter(|v| !s.vars.contains(v)).collect();
            if let Some(&v) = r.iter().find(|&&v| dists[v].is_none()) {
                return Err(Error::invalid(
                    format!("distribution of variable {v}"),
                    format!("missing, but control set {i} leaves it random"),
                ));
            }
            random.push(r);
        }
        for (v, dist) in dists.iter().enumerate() {
            if let Some(dist) = dist {
                let (lo, hi) = dist.support();
                if !(lo >= 0.0 && hi <= 1.0) {
                    return Err(Error::invalid(
                        format!("distribution of variable {v}"),
                        format!("support [{lo}, {hi}] is not inside [0, 1]"),
                    ));
                }
            }
        }
        let mut rows = scrambled_sobol(bank_size, d, bank_seed)?;
        for row in rows.chunks_exact_mut(d) {
            for (x, dist) in row.iter_mut().zip(&dists) {
                // Sobol points lie in [0, 1); keep them off the endpoints.
                let u = x.clamp(1e-16, 1.0 - 1e-16);
                *x = dist.as_ref().map_or(u, |p| p.quantile(u));
            }
        }
        Ok(Self {
            d,
            sets,
            dists,
            random,
            bank: SampleBank {
                n: bank_size,
                d,
                rows,
            },
        })
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        self.d
    }
    /// The control sets.
    pub fn sets(&self) -> &[ControlSet] {
        &self.sets
    }
    /// Number of control sets `m`.
    pub fn num_sets(&self) -> usize {
        self.sets.len()
    }
    /// The distribution of every variable.
    pub fn dists(&self) -> &[Option<Distribution>] {
        &self.dists
    }
    /// The sample bank.
    pub fn bank(&self) -> &SampleBank {
        &self.bank
    }
    /// The random variables of set `i` (its complement), increasing.
    pub fn random_vars(&self, i: usize) -> &[usize] {
        &self.random[i]
    }
    /// Whether set `i` controls every variable (a full query).
    pub fn is_full(&self, i: usize) -> bool {
        self.random[i].is_empty()
    }
    /// The largest cost.
    pub fn max_cost(&self) -> f64 {
        self.sets.iter().map(|s| s.cost).fold(0.0, f64::max)
    }

    /// Groups of sets with equal cost, by increasing cost (built from the costs, not from
    /// positions).
    pub fn cost_groups(&self) -> Vec<CostGroup> {
        let mut groups: Vec<CostGroup> = Vec::new();
        let mut order: Vec<usize> = (0..self.sets.len()).collect();
        order.sort_by(|&a, &b| {
            self.sets[a]
                .cost
                .total_cmp(&self.sets[b].cost)
                .then(a.cmp(&b))
        });
        for i in order {
            let c = self.sets[i].cost;
            match groups.last_mut() {
                Some(g) if g.cost == c => g.sets.push(i),
                _ => groups.push(CostGroup {
                    cost: c,
                    sets: vec![i],
                }),
            }
        }
        groups
    }

    /// Number of rows an expectation for set `i` averages over: the bank size, or 1 for a full
    /// query.
    pub fn rows_for(&self, i: usize) -> usize {
        if self.is_full(i) { 1 } else { self.bank.n }
    }

    /// Writes the points `[x^I, S_s^{−I}]` for every bank row `s` (or the single point `x^I` for a
    /// full query) into `out` (row-major, `rows_for(i) × d`).
    pub fn fill_points(&self, i: usize, x_ctrl: &[f64], out: &mut [f64]) {
        let d = self.d;
        let vars = &self.sets[i].vars;
        if self.is_full(i) {
            for (&v, &x) in vars.iter().zip(x_ctrl) {
                out[v] = x;
            }
            return;
        }
        for (o, row) in out.chunks_exact_mut(d).zip(self.bank.rows.chunks_exact(d)) {
            o.copy_from_slice(row);
            for (&v, &x) in vars.iter().zip(x_ctrl) {
                o[v] = x;
            }
        }
    }

    /// The points of [`CvsProblem::fill_points`] as a new vector.
    pub fn points(&self, i: usize, x_ctrl: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; self.rows_for(i) * self.d];
        self.fill_points(i, x_ctrl, &mut out);
        out
    }

    /// The full query from the controlled values of set `i` and values of the other variables
    /// taken from `rest` (a full-length vector; its controlled entries are ignored).
    pub fn assemble(&self, i: usize, x_ctrl: &[f64], rest: &[f64]) -> Vec<f64> {
        let mut x = rest.to_vec();
        for (&v, &xv) in self.sets[i].vars.iter().zip(x_ctrl) {
            x[v] = xv;
        }
        x
    }

    /// Fresh draws of the random variables of set `i` (a full-length vector with the controlled
    /// entries set to NaN; one uniform per random variable, in index order).
    pub fn draw_random<R: rand::Rng + ?Sized>(&self, i: usize, rng: &mut R) -> Vec<f64> {
        let mut x = vec![f64::NAN; self.d];
        for &v in &self.random[i] {
            x[v] = self.dists[v].as_ref().expect("validated").sample(rng);
        }
        x
    }

    fn check_set(&self, i: usize, x_ctrl: &[f64]) -> Result<()> {
        if i >= self.sets.len() {
            return Err(Error::invalid(
                "control set",
                format!("index {i} out of range ({} sets)", self.sets.len()),
            ));
        }
        if x_ctrl.len() != self.sets[i].vars.len() {
            return Err(Error::dim(
                "controlled values",
                self.sets[i].vars.len(),
                x_ctrl.len(),
            ));
        }
        Ok(())
    }

    /// The bank estimate of the expected objective `E f([x^I, X^{−I}])` for set `i` (exact `f(x)`
    /// for a full query).
    pub fn expected_value(&self, f: &dyn CvsFunction, i: usize, x_ctrl: &[f64]) -> Result<f64> {
        self.check_set(i, x_ctrl)?;
        if f.dim() != self.d {
            return Err(Error::dim("objective dimension", self.d, f.dim()));
        }
        let pts = self.points(i, x_ctrl);
        let n = self.rows_for(i);
        let s: f64 = pts.chunks_exact(self.d).map(|x| f.value(x)).sum();
        Ok(s / n as f64)
    }

    /// Maximizes `E f([x^I, X^{−I}])` over the controlled values of every set (multi-start
    /// L-BFGS-B with `f`'s gradient); returns the best `(set, x^I, value)` and the per-set optima.
    pub fn optimum(
        &self,
        f: &dyn CvsFunction,
        opts: &SetOptimizer,
        seed: u64,
    ) -> Result<(Optimum, Vec<Optimum>)> {
        if f.dim() != self.d {
            return Err(Error::dim("objective dimension", self.d, f.dim()));
        }
        let mut per = Vec::with_capacity(self.sets.len());
        for i in 0..self.sets.len() {
            let obj = ExpectedFunction {
                problem: self,
                set: i,
                f,
            };
            let (x, value) = opts.maximize(self, i, &obj, &[], seed.wrapping_add(i as u64))?;
            per.push(Optimum {
                set: i,
                x_ctrl: x,
                value,
            });
        }
        let best = per
            .iter()
            .fold(None::<&Optimum>, |b, o| match b {
                Some(b) if b.value >= o.value => Some(b),
                _ => Some(o),
            })
            .expect("at least one set")
            .clone();
        Ok((best, per))
    }
}

/// The optimum of the expected objective for one control set.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// Control-set index.
    pub set: usize,
    /// Maximizing controlled values.
    pub x_ctrl: Vec<f64>,
    /// `max E f([x^I, X^{−I}])` (bank estimate).
    pub value: f64,
}

/// How expectations over the controlled values of a set are maximized: multi-start L-BFGS-B
/// (see [`crate::optim::multistart`]) with separate effort for full and partial queries.
#[derive(Debug, Clone, PartialEq)]
pub struct SetOptimizer {
    /// Scrambled-Sobol raw samples for a partial query (default 100, as the BOCVS code).
    pub raw_partial: usize,
    /// L-BFGS-B restarts for a partial query (default 5).
    pub restarts_partial: usize,
    /// Raw samples for a full query (default 2048).
    pub raw_full: usize,
    /// Restarts for a full query (default 8).
    pub restarts_full: usize,
    /// Maximum L-BFGS-B iterations per restart (default 100).
    pub max_iter: usize,
}

impl Default for SetOptimizer {
    fn default() -> Self {
        Self {
            raw_partial: 100,
            restarts_partial: 5,
            raw_full: 2048,
            restarts_full: 8,
            max_iter: 100,
        }
    }
}

impl SetOptimizer {
    /// Maximizes `obj` (an objective on the controlled values of set `i`) on `[0,1]^{|I|}` with
    /// the warm starts `warm`; a set without controlled variables is evaluated once at the empty
    /// point. Returns `(x^I, value)`.
    pub fn maximize(
        &self,
        problem: &CvsProblem,
        i: usize,
        obj: &dyn Objective,
        warm: &[Vec<f64>],
        seed: u64,
    ) -> Result<(Vec<f64>, f64)> {
        if obj.dim() == 0 {
            let mut g = [];
            let v = obj.value_grad(&[], &mut g);
            if v.is_nan() {
                return Err(Error::Numerical("objective is NaN".into()));
            }
            return Ok((Vec::new(), v));
        }
        let full = problem.is_full(i);
        let mut opts = MultiStartOptions {
            raw_samples: Some(if full {
                self.raw_full
            } else {
                self.raw_partial
            }),
            num_restarts: Some(if full {
                self.restarts_full
            } else {
                self.restarts_partial
            }),
            extra_starts: warm
                .iter()
                .filter(|w| w.len() == obj.dim())
                .cloned()
                .collect(),
            ..Default::default()
        };
        opts.lbfgsb.max_iter = self.max_iter;
        let r = maximize(obj, &opts, seed)?;
        Ok((r.x, r.value))
    }
}

/// `x^I ↦ E f([x^I, X^{−I}])` over the bank, with its gradient, as an [`Objective`].
pub struct ExpectedFunction<'a> {
    /// The problem.
    pub problem: &'a CvsProblem,
    /// The control set.
    pub set: usize,
    /// The objective of full queries.
    pub f: &'a dyn CvsFunction,
}

impl Objective for ExpectedFunction<'_> {
    fn dim(&self) -> usize {
        self.problem.sets[self.set].vars.len()
    }

    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        let p = self.problem;
        let d = p.d;
        let n = p.rows_for(self.set);
        let pts = p.points(self.set, x);
        let mut g = vec![0.0; d];
        let mut sum = 0.0;
        grad.fill(0.0);
        for q in pts.chunks_exact(d) {
            sum += self.f.value_grad(q, &mut g);
            for (gk, &v) in grad.iter_mut().zip(&p.sets[self.set].vars) {
                *gk += g[v];
            }
        }
        for gk in grad.iter_mut() {
            *gk /= n as f64;
        }
        sum / n as f64
    }

    fn values(&self, xs: &[f64], out: &mut [f64]) {
        let k = self.dim();
        for (x, o) in xs.chunks_exact(k.max(1)).zip(out.iter_mut()) {
            let pts = self.problem.points(self.set, x);
            let n = self.problem.rows_for(self.set);
            *o = pts
                .chunks_exact(self.problem.d)
                .map(|q| self.f.value(q))
                .sum::<f64>()
                / n as f64;
        }
    }
}
