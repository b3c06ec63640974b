//! Bound-constrained limited-memory BFGS (L-BFGS-B), written for this crate.
//!
//! The method follows Byrd, Lu, Nocedal & Zhu (1995), "A limited memory algorithm for bound
//! constrained optimization", with the subspace step of Morales & Nocedal (2011):
//!
//! 1. The Hessian approximation is kept in compact form `B = θI − W M Wᵀ` with `W = [Y, θS]`
//!    (at most `memory` correction pairs). `M` is never formed; it is applied through a Cholesky
//!    factor of `θSᵀS + L D⁻¹ Lᵀ` (a `k×k` matrix, `k ≤ memory`).
//! 2. The generalized Cauchy point is the first local minimizer of the quadratic model along the
//!    projected steepest-descent path, found by walking the sorted breakpoints.
//! 3. The model is then minimized over the variables that are free at the Cauchy point (direct
//!    primal method with the Sherman–Morrison–Woodbury formula). The result is projected onto the
//!    box; if that does not give a descent direction, the step is truncated instead (Morales &
//!    Nocedal 2011).
//! 4. A Moré–Thuente line search enforces the strong Wolfe conditions along the direction, with
//!    the step capped so that every trial point stays in the box.
//!
//! Non-finite function values or gradients at trial points are treated as `+∞`: the line search
//! backs off towards the last good step. The iterate held by the solver is always the best finite
//! point seen so far.
//!
//! All work arrays live in an [`LbfgsbWorkspace`]; after it is set up an iteration allocates
//! nothing, so one workspace can be reused for many solves of the same dimension.
//!
//! The solver is written for reverse communication, like the original Fortran code: a
//! `Stepper` says which point it needs next and is handed the value, so that a caller can
//! advance many solves together and evaluate their points as one block (`optim::lockstep`).
//! [`minimize`] and [`minimize_with_workspace`] drive one stepper with a closure; both ways run
//! the same code and produce the same iterates.

// Index loops mirror the algebra of the paper; negated comparisons are deliberate: they are
// true for NaN, which is exactly the case they must catch.
#![allow(clippy::needless_range_loop, clippy::neg_cmp_op_on_partial_ord)]

use crate::error::{Error, Result};

const EPS: f64 = f64::EPSILON;

/// Options of [`minimize`]. Defaults match SciPy's `L-BFGS-B` where SciPy has the same knob.
#[derive(Debug, Clone, PartialEq)]
pub struct LbfgsbOptions {
    /// Number of correction pairs kept (`m`). Default 10.
    pub memory: usize,
    /// Maximum number of iterations (accepted line-search steps). Default 200.
    pub max_iter: usize,
    /// Maximum number of function evaluations, including the first one. Default 500.
    pub max_evals: usize,
    /// Stop when the infinity norm of the projected gradient is at most this. Default `1e-5`.
    pub pgtol: f64,
    /// Stop when `(f_old − f_new) / max(|f_old|, |f_new|, 1) ≤ factr · ε_machine`. Default `1e7`.
    pub factr: f64,
    /// Sufficient-decrease constant of the line search (Armijo). Default `1e-3`.
    pub ftol: f64,
    /// Curvature constant of the line search (strong Wolfe). Default `0.9`.
    pub gtol: f64,
    /// Relative width of the uncertainty interval at which the line search stops. Default `0.1`.
    pub xtol: f64,
    /// Maximum number of function evaluations in one line search. Default 20.
    pub max_line_search: usize,
}

impl Default for LbfgsbOptions {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iter: 200,
            max_evals: 500,
            pgtol: 1e-5,
            factr: 1e7,
            ftol: 1e-3,
            gtol: 0.9,
            xtol: 0.1,
            max_line_search: 20,
        }
    }
}

impl LbfgsbOptions {
    /// Checks the options; [`minimize`] does this itself.
    pub fn validate(&self) -> Result<()> {
        if self.memory == 0 {
            return Err(Error::invalid(
                "LbfgsbOptions::memory",
                "must be at least 1",
            ));
        }
        if self.max_evals == 0 {
            return Err(Error::invalid(
                "LbfgsbOptions::max_evals",
                "must be at least 1",
            ));
        }
        if self.max_line_search == 0 {
            return Err(Error::invalid(
                "LbfgsbOptions::max_line_search",
                "must be at least 1",
            ));
        }
        let nonneg = |v: f64| v.is_finite() && v >= 0.0;
        if !nonneg(self.pgtol) {
            return Err(Error::invalid(
                "LbfgsbOptions::pgtol",
                "must be finite and >= 0",
            ));
        }
        if !nonneg(self.factr) {
            return Err(Error::invalid(
                "LbfgsbOptions::factr",
                "must be finite and >= 0",
            ));
        }
        if !(self.ftol > 0.0 && self.ftol < 1.0) {
            return Err(Error::invalid("LbfgsbOptions::ftol", "must be in (0, 1)"));
        }
        if !(self.gtol > self.ftol && self.gtol < 1.0) {
            return Err(Error::invalid(
                "LbfgsbOptions::gtol",
                "must be in (ftol, 1)",
            ));
        }
        if !(self.xtol >= 0.0 && self.xtol < 1.0) {
            return Err(Error::invalid("LbfgsbOptions::xtol", "must be in [0, 1)"));
        }
        Ok(())
    }
}

/// Why [`minimize`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Termination {
    /// The infinity norm of the projected gradient fell to `pgtol` or below.
    ConvergedGradient,
    /// The relative reduction of `f` in the last iteration fell below `factr · ε`.
    ConvergedRelativeReduction,
    /// `max_iter` iterations were done.
    MaxIter,
    /// `max_evals` function evaluations were used.
    MaxEvals,
    /// No step along the search direction decreased `f`, even after the memory was reset.
    LineSearchFailed,
    /// The function value or gradient at the starting point was not finite.
    NonFinite,
}

/// Outcome of [`minimize`]; the minimizer itself is written back into `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct LbfgsbResult {
    /// Function value at the returned `x`.
    pub f: f64,
    /// Number of iterations (accepted steps).
    pub iterations: usize,
    /// Number of function evaluations.
    pub evaluations: usize,
    /// Why the solver stopped.
    pub status: Termination,
    /// Infinity norm of the projected gradient at the returned `x` (`NaN` if not finite).
    pub projected_gradient: f64,
}

/// Reusable work arrays of [`minimize_with_workspace`] for one dimension and memory size.
///
/// Creating it is the only allocation of a solve; reuse it across solves (for example one per
/// thread) to make repeated solves allocation-free.
#[derive(Debug, Clone)]
pub struct LbfgsbWorkspace {
    n: usize,
    m: usize,
    // length n
    g: Vec<f64>,
    x_prev: Vec<f64>,
    g_prev: Vec<f64>,
    dir: Vec<f64>,
    xcp: Vec<f64>,
    brk: Vec<f64>,
    dcp: Vec<f64>,
    xt: Vec<f64>,
    gt: Vec<f64>,
    xbest: Vec<f64>,
    gbest: Vec<f64>,
    du: Vec<f64>,
    order: Vec<usize>,
    free: Vec<usize>,
    state: Vec<VarState>,
    // memory, pair j at [j*n, (j+1)*n), oldest first
    s_mem: Vec<f64>,
    y_mem: Vec<f64>,
    // m x m, row-major with stride m
    ss: Vec<f64>,
    sy: Vec<f64>,
    yy: Vec<f64>,
    tchol: Vec<f64>,
    // length 2m
    p: Vec<f64>,
    c: Vec<f64>,
    mp: Vec<f64>,
    mc: Vec<f64>,
    wb: Vec<f64>,
    mwb: Vec<f64>,
    v2: Vec<f64>,
    // m x m, stride m: blocks of the subspace matrix and their factors
    pj: Vec<f64>,
    ce: Vec<f64>,
    s2: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VarState {
    Free,
    AtBound,
    Fixed,
}

impl LbfgsbWorkspace {
    /// Work arrays for dimension `n` and `memory` correction pairs.
    pub fn new(n: usize, memory: usize) -> Self {
        let m = memory.max(1);
        let v = |len: usize| vec![0.0; len];
        Self {
            n,
            m,
            g: v(n),
            x_prev: v(n),
            g_prev: v(n),
            dir: v(n),
            xcp: v(n),
            brk: v(n),
            dcp: v(n),
            xt: v(n),
            gt: v(n),
            xbest: v(n),
            gbest: v(n),
            du: v(n),
            order: vec![0; n],
            free: vec![0; n],
            state: vec![VarState::Free; n],
            s_mem: v(m * n),
            y_mem: v(m * n),
            ss: v(m * m),
            sy: v(m * m),
            yy: v(m * m),
            tchol: v(m * m),
            p: v(2 * m),
            c: v(2 * m),
            mp: v(2 * m),
            mc: v(2 * m),
            wb: v(2 * m),
            mwb: v(2 * m),
            v2: v(2 * m),
            pj: v(m * m),
            ce: v(m * m),
            s2: v(m * m),
        }
    }

    /// The dimension this workspace was made for.
    pub fn dim(&self) -> usize {
        self.n
    }

    /// The memory size this workspace was made for.
    pub fn memory(&self) -> usize {
        self.m
    }
}

/// Minimizes `f` over the box `lower ≤ x ≤ upper` starting from `x`.
///
/// `f(x, grad)` returns the value at `x` and writes the gradient into `grad`. Infinite bounds
/// (`f64::NEG_INFINITY` / `f64::INFINITY`) leave a side unbounded. `x` is first projected into
/// the box; on return it holds the best point found. A non-finite value or gradient at a trial
/// point is treated as `+∞` (the line search backs off); the returned point always has a finite
/// value unless the starting point itself did not ([`Termination::NonFinite`]).
///
/// Errors on length mismatches, NaN bounds, `lower > upper`, a NaN in `x`, or invalid options.
pub fn minimize<F: FnMut(&[f64], &mut [f64]) -> f64>(
    f: F,
    x: &mut [f64],
    lower: &[f64],
    upper: &[f64],
    opts: &LbfgsbOptions,
) -> Result<LbfgsbResult> {
    let mut ws = LbfgsbWorkspace::new(x.len(), opts.memory);
    minimize_with_workspace(f, x, lower, upper, opts, &mut ws)
}

/// [`minimize`] with caller-provided work arrays (no allocation).
///
/// Errors as [`minimize`], and also when `ws` was made for another dimension or memory size.
pub fn minimize_with_workspace<F: FnMut(&[f64], &mut [f64]) -> f64>(
    mut f: F,
    x: &mut [f64],
    lower: &[f64],
    upper: &[f64],
    opts: &LbfgsbOptions,
    ws: &mut LbfgsbWorkspace,
) -> Result<LbfgsbResult> {
    let mut stepper = Stepper::new(x, lower, upper, opts, ws)?;
    loop {
        let (point, grad) = match stepper.request() {
            Request::Evaluate { point, grad } => (point, grad),
            Request::Done(result) => return Ok(result.clone()),
        };
        let value = f(point, grad);
        stepper.answer(value);
    }
}

/// One L-BFGS-B solve driven from outside ("reverse communication", as in the original Fortran
/// code): the solver says which point it needs next ([`Stepper::request`]) and the caller
/// evaluates it and hands the value back ([`Stepper::answer`]), the gradient written into the
/// buffer the request lent. [`minimize_with_workspace`] is the loop `request → f → answer`;
/// the lock-step restarts (`optim::lockstep`) advance many steppers together and evaluate
/// their points as one block, without a thread per run.
///
/// The sequence of points depends only on the values and gradients handed back, so any driver
/// that answers the same way gets the same solve.
pub(crate) struct Stepper<'a> {
    solver: Solver<'a>,
    /// The iterate (the best finite point so far), the caller's `x`.
    x: &'a mut [f64],
    phase: Phase,
    fx: f64,
    pg: f64,
    iter: usize,
    constrained: bool,
    boxed: bool,
    ls: SearchState,
}

/// What a [`Stepper`] needs next.
pub(crate) enum Request<'s> {
    /// The value at `point`; the gradient goes into `grad` (same length), then
    /// [`Stepper::answer`].
    Evaluate {
        /// The point to evaluate.
        point: &'s [f64],
        /// Where the gradient at `point` goes.
        grad: &'s mut [f64],
    },
    /// The solve is over; the minimizer is in the caller's `x`.
    Done(&'s LbfgsbResult),
}

enum Phase {
    /// Waiting for the value at the starting point (`x`, gradient into `ws.g`).
    Start,
    /// Waiting for the value at a line-search trial (`ws.xt`, gradient into `ws.gt`).
    Search,
    Done(LbfgsbResult),
}

/// The Moré–Thuente line search between two evaluations.
struct SearchState {
    st: MtState,
    stp: f64,
    stpmax_eff: f64,
    best_f: f64,
    nls: usize,
    f0: f64,
    g0d: f64,
    gtest: f64,
}

impl<'a> Stepper<'a> {
    /// A solve from `x` (projected into the box first). Errors as [`minimize_with_workspace`].
    pub(crate) fn new(
        x: &'a mut [f64],
        lower: &'a [f64],
        upper: &'a [f64],
        opts: &'a LbfgsbOptions,
        ws: &'a mut LbfgsbWorkspace,
    ) -> Result<Self> {
        check_and_project(x, lower, upper, opts, ws)?;
        let n = x.len();
        let constrained = (0..n).any(|i| lower[i].is_finite() || upper[i].is_finite());
        let boxed = (0..n).all(|i| lower[i].is_finite() && upper[i].is_finite());
        Ok(Self {
            solver: Solver {
                ws,
                lower,
                upper,
                opts,
                evals: 0,
                k: 0,
                theta: 1.0,
            },
            x,
            phase: Phase::Start,
            fx: f64::NAN,
            pg: f64::NAN,
            iter: 0,
            constrained,
            boxed,
            ls: SearchState {
                st: MtState::start(0.0, 0.0, 0.0, 0.0),
                stp: 0.0,
                stpmax_eff: 0.0,
                best_f: 0.0,
                nls: 0,
                f0: 0.0,
                g0d: 0.0,
                gtest: 0.0,
            },
        })
    }

    /// The point to evaluate next with the buffer for its gradient, or the result.
    pub(crate) fn request(&mut self) -> Request<'_> {
        let ws = &mut *self.solver.ws;
        match &self.phase {
            Phase::Start => Request::Evaluate {
                point: self.x,
                grad: &mut ws.g,
            },
            Phase::Search => Request::Evaluate {
                point: &ws.xt,
                grad: &mut ws.gt,
            },
            Phase::Done(result) => Request::Done(result),
        }
    }

    /// Hands back the value at the requested point (its gradient already in the lent buffer) and
    /// advances to the next request. A non-finite value or gradient counts as `+∞`. Does
    /// nothing once the solve is over.
    pub(crate) fn answer(&mut self, value: f64) {
        let grad = match self.phase {
            Phase::Start => &self.solver.ws.g,
            Phase::Search => &self.solver.ws.gt,
            Phase::Done(_) => return,
        };
        let v = if value.is_finite() && grad.iter().all(|gi| gi.is_finite()) {
            value
        } else {
            f64::INFINITY
        };
        match self.phase {
            Phase::Start => {
                self.solver.evals = 1;
                self.fx = v;
                if !v.is_finite() {
                    self.pg = f64::NAN;
                    return self.finish(Termination::NonFinite);
                }
                self.pg = proj_grad_norm(
                    self.x,
                    &self.solver.ws.g,
                    self.solver.lower,
                    self.solver.upper,
                );
                if self.pg <= self.solver.opts.pgtol {
                    return self.finish(Termination::ConvergedGradient);
                }
                self.next_iteration();
            }
            Phase::Search => {
                self.solver.evals += 1;
                self.ls.nls += 1;
                match self.search_step(v) {
                    Some(outcome) => self.after_search(outcome),
                    None => self.next_trial(),
                }
            }
            Phase::Done(_) => {}
        }
    }

    fn finish(&mut self, status: Termination) {
        self.phase = Phase::Done(LbfgsbResult {
            f: self.fx,
            iterations: self.iter,
            evaluations: self.solver.evals,
            status,
            projected_gradient: self.pg,
        });
    }

    /// The top of an iteration: the budgets, the search direction, the first trial step.
    fn next_iteration(&mut self) {
        let n = self.x.len();
        let (l, u) = (self.solver.lower, self.solver.upper);
        loop {
            if self.iter >= self.solver.opts.max_iter {
                return self.finish(Termination::MaxIter);
            }
            if self.solver.evals >= self.solver.opts.max_evals {
                return self.finish(Termination::MaxEvals);
            }
            let x = &*self.x;
            let solver = &mut self.solver;
            // Search direction: Cauchy point, then subspace minimization.
            if !self.constrained && solver.k > 0 {
                solver.ws.xcp.copy_from_slice(x);
                solver.ws.c[..2 * solver.k].fill(0.0);
                solver.ws.mc[..2 * solver.k].fill(0.0);
                for i in 0..n {
                    solver.ws.free[i] = i;
                }
                solver.subspace(x, n);
            } else {
                let nf = solver.cauchy(x);
                if solver.k > 0 && nf > 0 {
                    solver.subspace(x, nf);
                }
            }
            let ws = &mut *solver.ws;
            for i in 0..n {
                ws.dir[i] = ws.xcp[i] - x[i];
            }
            let gd = dot(&ws.g, &ws.dir);
            if !(gd < 0.0) {
                if solver.k > 0 {
                    solver.reset_memory();
                    continue;
                }
                return self.finish(Termination::LineSearchFailed);
            }
            // Largest feasible step along dir and the first trial step.
            let stpmax = if !self.constrained {
                1e10
            } else if solver.k == 0 {
                1.0
            } else {
                let mut smax: f64 = 1e10;
                for i in 0..n {
                    let d = ws.dir[i];
                    if d < 0.0 && l[i].is_finite() {
                        smax = smax.min((l[i] - x[i]) / d);
                    } else if d > 0.0 && u[i].is_finite() {
                        smax = smax.min((u[i] - x[i]) / d);
                    }
                }
                smax.max(0.0)
            };
            let dnorm = dot(&ws.dir, &ws.dir).sqrt();
            let stp0 = if solver.k == 0 && !self.boxed {
                (1.0 / dnorm).min(stpmax)
            } else {
                1.0_f64.min(stpmax)
            };
            if !(stp0 > 0.0) {
                if solver.k > 0 {
                    solver.reset_memory();
                    continue;
                }
                return self.finish(Termination::LineSearchFailed);
            }
            // Moré–Thuente line search from `x` along `dir`.
            self.ls = SearchState {
                st: MtState::start(self.fx, gd, stp0, stpmax),
                stp: stp0,
                stpmax_eff: stpmax,
                best_f: self.fx,
                nls: 0,
                f0: self.fx,
                g0d: gd,
                gtest: solver.opts.ftol * gd,
            };
            return self.next_trial();
        }
    }

    /// Places the next line-search trial in `ws.xt` (phase `Search`), or ends the search when
    /// its budgets are spent.
    fn next_trial(&mut self) {
        let opts = self.solver.opts;
        if self.solver.evals >= opts.max_evals {
            let outcome = match self.solver.take_best(self.ls.best_f, self.ls.f0) {
                LineSearch::Accepted(v) => LineSearch::Budget(Some(v)),
                _ => LineSearch::Budget(None),
            };
            return self.after_search(outcome);
        }
        if self.ls.nls >= opts.max_line_search {
            let outcome = self.solver.take_best(self.ls.best_f, self.ls.f0);
            return self.after_search(outcome);
        }
        let (l, u) = (self.solver.lower, self.solver.upper);
        let ws = &mut *self.solver.ws;
        for i in 0..self.x.len() {
            ws.xt[i] = (self.x[i] + self.ls.stp * ws.dir[i]).clamp(l[i], u[i]);
        }
        self.phase = Phase::Search;
    }

    /// One Moré–Thuente update with the value `ft` at the trial step (its gradient in `ws.gt`):
    /// the search's outcome, or `None` to try the next step (already in `ls.stp`).
    fn search_step(&mut self, ft: f64) -> Option<LineSearch> {
        let opts = self.solver.opts;
        let ls = &mut self.ls;
        let st = &mut ls.st;
        let gtest = ls.gtest;
        if !ft.is_finite() {
            // Back off towards the best step; never go past this point again.
            let next = st.stx + 0.5 * (ls.stp - st.stx);
            if !(next > st.stx && next < ls.stp) {
                return Some(self.solver.take_best(ls.best_f, ls.f0));
            }
            ls.stpmax_eff = next;
            ls.stp = next;
            return None;
        }
        let ws = &mut *self.solver.ws;
        let gdt = dot(&ws.gt, &ws.dir);
        if ft < ls.best_f {
            ls.best_f = ft;
            ws.xbest.copy_from_slice(&ws.xt);
            ws.gbest.copy_from_slice(&ws.gt);
        }
        let stp = &mut ls.stp;
        let ftest = ls.f0 + *stp * gtest;
        if st.stage1 && ft <= ftest && gdt >= 0.0 {
            st.stage1 = false;
        }
        if ft <= ftest && gdt.abs() <= opts.gtol * (-ls.g0d) {
            return Some(LineSearch::Accepted(ft));
        }
        if *stp >= ls.stpmax_eff && ft <= ftest && gdt <= gtest {
            return Some(LineSearch::Accepted(ft));
        }
        // Bracketed, and the trial left the interval or the interval is small enough.
        let give_up =
            *stp <= st.stmin || *stp >= st.stmax || st.stmax - st.stmin <= opts.xtol * st.stmax;
        if st.brackt && give_up {
            return Some(self.solver.take_best(ls.best_f, ls.f0));
        }
        let (smin, smax) = (st.stmin, st.stmax);
        if st.stage1 && ft <= st.fx && ft > ftest {
            let mut fxm = st.fx - st.stx * gtest;
            let mut fym = st.fy - st.sty * gtest;
            let mut gxm = st.gx - gtest;
            let mut gym = st.gy - gtest;
            let fm = ft - *stp * gtest;
            let gm = gdt - gtest;
            dcstep(
                &mut st.stx,
                &mut fxm,
                &mut gxm,
                &mut st.sty,
                &mut fym,
                &mut gym,
                stp,
                fm,
                gm,
                &mut st.brackt,
                smin,
                smax,
            );
            st.fx = fxm + st.stx * gtest;
            st.fy = fym + st.sty * gtest;
            st.gx = gxm + gtest;
            st.gy = gym + gtest;
        } else {
            dcstep(
                &mut st.stx,
                &mut st.fx,
                &mut st.gx,
                &mut st.sty,
                &mut st.fy,
                &mut st.gy,
                stp,
                ft,
                gdt,
                &mut st.brackt,
                smin,
                smax,
            );
        }
        if st.brackt {
            if (st.sty - st.stx).abs() >= 0.66 * st.width1 {
                *stp = st.stx + 0.5 * (st.sty - st.stx);
            }
            st.width1 = st.width;
            st.width = (st.sty - st.stx).abs();
            st.stmin = st.stx.min(st.sty);
            st.stmax = st.stx.max(st.sty);
        } else {
            st.stmin = *stp + 1.1 * (*stp - st.stx);
            st.stmax = *stp + 4.0 * (*stp - st.stx);
        }
        *stp = stp.clamp(0.0, ls.stpmax_eff);
        let interval_done =
            *stp <= st.stmin || *stp >= st.stmax || st.stmax - st.stmin <= opts.xtol * st.stmax;
        if (st.brackt && interval_done) || !(*stp > 0.0) {
            // The next trial would be the best step so far, which is already known.
            return Some(self.solver.take_best(ls.best_f, ls.f0));
        }
        None
    }

    /// The end of an iteration: accept the step (or give up), test convergence, update the
    /// memory and start the next iteration.
    fn after_search(&mut self, outcome: LineSearch) {
        let fnew = match outcome {
            LineSearch::Accepted(v) => v,
            LineSearch::Budget(Some(v)) => v,
            LineSearch::Budget(None) => return self.finish(Termination::MaxEvals),
            LineSearch::Failed => {
                if self.solver.k > 0 {
                    self.solver.reset_memory();
                    return self.next_iteration();
                }
                return self.finish(Termination::LineSearchFailed);
            }
        };
        // Accept the step: x_prev/g_prev keep the old point for the correction pair.
        let ws = &mut *self.solver.ws;
        ws.x_prev.copy_from_slice(self.x);
        ws.g_prev.copy_from_slice(&ws.g);
        self.x.copy_from_slice(&ws.xt);
        ws.g.copy_from_slice(&ws.gt);
        let fold = self.fx;
        self.fx = fnew;
        self.iter += 1;
        self.pg = proj_grad_norm(self.x, &ws.g, self.solver.lower, self.solver.upper);
        if matches!(outcome, LineSearch::Budget(_)) {
            return self.finish(Termination::MaxEvals);
        }
        if self.pg <= self.solver.opts.pgtol {
            return self.finish(Termination::ConvergedGradient);
        }
        let scale = fold.abs().max(self.fx.abs()).max(1.0);
        if fold - self.fx <= self.solver.opts.factr * EPS * scale {
            return self.finish(Termination::ConvergedRelativeReduction);
        }
        self.solver.update_memory(self.x);
        self.next_iteration();
    }
}

/// Checks the inputs of a solve and projects `x` into the box (an infinite start of a
/// half-bounded variable goes to its finite bound).
fn check_and_project(
    x: &mut [f64],
    lower: &[f64],
    upper: &[f64],
    opts: &LbfgsbOptions,
    ws: &LbfgsbWorkspace,
) -> Result<()> {
    opts.validate()?;
    let n = x.len();
    if lower.len() != n {
        return Err(Error::dim("lbfgsb lower bounds", n, lower.len()));
    }
    if upper.len() != n {
        return Err(Error::dim("lbfgsb upper bounds", n, upper.len()));
    }
    if ws.n != n {
        return Err(Error::dim("lbfgsb workspace dimension", n, ws.n));
    }
    if ws.m != opts.memory {
        return Err(Error::dim("lbfgsb workspace memory", opts.memory, ws.m));
    }
    for i in 0..n {
        let (l, u) = (lower[i], upper[i]);
        if l.is_nan() || u.is_nan() {
            return Err(Error::invalid(
                "lbfgsb bounds",
                format!("NaN bound at index {i}"),
            ));
        }
        if l > u {
            return Err(Error::invalid(
                "lbfgsb bounds",
                format!("lower[{i}] = {l} > upper[{i}] = {u}"),
            ));
        }
        if l == f64::INFINITY || u == f64::NEG_INFINITY {
            return Err(Error::invalid(
                "lbfgsb bounds",
                format!("empty interval at index {i}"),
            ));
        }
        if x[i].is_nan() {
            return Err(Error::invalid("lbfgsb x0", format!("NaN at index {i}")));
        }
        if x[i].is_infinite() && !(l.is_finite() || u.is_finite()) {
            return Err(Error::invalid(
                "lbfgsb x0",
                format!("infinite start at index {i} for an unbounded variable"),
            ));
        }
        x[i] = x[i].clamp(l, u);
        if !x[i].is_finite() {
            // e.g. x = +inf with a finite lower bound only: start at that bound.
            x[i] = if l.is_finite() { l } else { u };
        }
    }
    Ok(())
}

struct Solver<'a> {
    ws: &'a mut LbfgsbWorkspace,
    lower: &'a [f64],
    upper: &'a [f64],
    opts: &'a LbfgsbOptions,
    evals: usize,
    /// Number of stored correction pairs.
    k: usize,
    theta: f64,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn proj_grad_norm(x: &[f64], g: &[f64], l: &[f64], u: &[f64]) -> f64 {
    let mut norm: f64 = 0.0;
    for i in 0..x.len() {
        let gi = g[i];
        let pg = if gi < 0.0 {
            (x[i] - u[i]).max(gi)
        } else {
            (x[i] - l[i]).min(gi)
        };
        norm = norm.max(pg.abs());
    }
    norm
}

enum LineSearch {
    /// A step was accepted; the new point is in `xt`, `gt` with the given value.
    Accepted(f64),
    /// No acceptable point was found.
    Failed,
    /// The evaluation budget ran out; `Some(f)` if a decreasing point was accepted anyway.
    Budget(Option<f64>),
}

impl Solver<'_> {
    fn reset_memory(&mut self) {
        self.k = 0;
        self.theta = 1.0;
    }

    /// Stores the pair `s = x − x_prev`, `y = g − g_prev` unless the curvature is too small.
    fn update_memory(&mut self, x: &[f64]) {
        let ws = &mut *self.ws;
        let (n, m) = (ws.n, ws.m);
        // Build s in xt and y in gt (both free after the step was accepted).
        let mut sy = 0.0;
        let mut yy = 0.0;
        for i in 0..n {
            let s = x[i] - ws.x_prev[i];
            let y = ws.g[i] - ws.g_prev[i];
            ws.xt[i] = s;
            ws.gt[i] = y;
            sy += s * y;
            yy += y * y;
        }
        if !(sy > EPS * yy && sy.is_finite() && yy.is_finite()) {
            return;
        }
        if self.k == m {
            ws.s_mem.copy_within(n.., 0);
            ws.y_mem.copy_within(n.., 0);
            for i in 0..m - 1 {
                let src = (i + 1) * m + 1..(i + 2) * m;
                ws.ss.copy_within(src.clone(), i * m);
                ws.sy.copy_within(src.clone(), i * m);
                ws.yy.copy_within(src, i * m);
            }
            self.k -= 1;
        }
        let k = self.k;
        ws.s_mem[k * n..(k + 1) * n].copy_from_slice(&ws.xt);
        ws.y_mem[k * n..(k + 1) * n].copy_from_slice(&ws.gt);
        for j in 0..=k {
            let sj = &ws.s_mem[j * n..(j + 1) * n];
            let yj = &ws.y_mem[j * n..(j + 1) * n];
            let ssv = dot(&ws.xt, sj);
            ws.ss[k * m + j] = ssv;
            ws.ss[j * m + k] = ssv;
            ws.sy[k * m + j] = dot(&ws.xt, yj);
            ws.sy[j * m + k] = dot(sj, &ws.gt);
            let yyv = if j == k { yy } else { dot(&ws.gt, yj) };
            ws.yy[k * m + j] = yyv;
            ws.yy[j * m + k] = yyv;
        }
        self.k = k + 1;
        self.theta = yy / sy;
        if !self.factor_middle() {
            self.reset_memory();
        }
    }

    /// Cholesky factor of `T = θ SᵀS + L D⁻¹ Lᵀ` into `tchol` (lower). False if not PD.
    fn factor_middle(&mut self) -> bool {
        let ws = &mut *self.ws;
        let (m, k, theta) = (ws.m, self.k, self.theta);
        // ws.p is free scratch here (the Cauchy step recomputes it): 1/D.
        for q in 0..k {
            ws.p[q] = 1.0 / ws.sy[q * m + q];
        }
        for i in 0..k {
            for j in 0..=i {
                let mut t = theta * ws.ss[i * m + j];
                for q in 0..j {
                    t += ws.sy[i * m + q] * ws.sy[j * m + q] * ws.p[q];
                }
                ws.tchol[i * m + j] = t;
            }
        }
        for j in 0..k {
            let mut d = ws.tchol[j * m + j];
            for q in 0..j {
                d -= ws.tchol[j * m + q] * ws.tchol[j * m + q];
            }
            if !(d > 0.0) || !d.is_finite() {
                return false;
            }
            let d = d.sqrt();
            ws.tchol[j * m + j] = d;
            for i in j + 1..k {
                let mut t = ws.tchol[i * m + j];
                for q in 0..j {
                    t -= ws.tchol[i * m + q] * ws.tchol[j * m + q];
                }
                ws.tchol[i * m + j] = t / d;
            }
        }
        true
    }

    /// Generalized Cauchy point: fills `xcp`, `c = Wᵀ(xcp − x)`, `mc = M c`, the variable states
    /// and the list of free variables; returns the number of free variables.
    fn cauchy(&mut self, x: &[f64]) -> usize {
        let k = self.k;
        let theta = self.theta;
        let (l, u) = (self.lower, self.upper);
        let ws = &mut *self.ws;
        let n = ws.n;
        let mut nbrk = 0;
        let mut fp = 0.0;
        for i in 0..n {
            let gi = ws.g[i];
            ws.xcp[i] = x[i];
            if l[i] == u[i] {
                ws.state[i] = VarState::Fixed;
                ws.brk[i] = 0.0;
                ws.dcp[i] = 0.0;
                continue;
            }
            let t = if gi < 0.0 {
                if u[i].is_finite() {
                    (x[i] - u[i]) / gi
                } else {
                    f64::INFINITY
                }
            } else if gi > 0.0 {
                if l[i].is_finite() {
                    (x[i] - l[i]) / gi
                } else {
                    f64::INFINITY
                }
            } else {
                f64::INFINITY
            };
            if t <= 0.0 {
                ws.state[i] = VarState::AtBound;
                ws.brk[i] = 0.0;
                ws.dcp[i] = 0.0;
            } else {
                ws.state[i] = VarState::Free;
                ws.brk[i] = t;
                ws.dcp[i] = -gi;
                fp -= gi * gi;
                if t.is_finite() {
                    ws.order[nbrk] = i;
                    nbrk += 1;
                }
            }
        }
        let k2 = 2 * k;
        // p = Wᵀ d, c = 0.
        for j in 0..k {
            let yj = &ws.y_mem[j * n..(j + 1) * n];
            let sj = &ws.s_mem[j * n..(j + 1) * n];
            ws.p[j] = dot(yj, &ws.dcp);
            ws.p[k + j] = theta * dot(sj, &ws.dcp);
        }
        ws.c[..k2].fill(0.0);
        ws.mc[..k2].fill(0.0);
        if fp < 0.0 {
            apply_m(&ws.tchol, &ws.sy, ws.m, k, &ws.p[..k2], &mut ws.mp[..k2]);
            let mut fpp = -theta * fp - dot(&ws.p[..k2], &ws.mp[..k2]);
            if !(fpp > 0.0) {
                fpp = -theta * fp;
            }
            let fpp0 = fpp;
            let mut dtmin = -fp / fpp;
            let mut told = 0.0;
            {
                let brk = &ws.brk;
                ws.order[..nbrk]
                    .sort_unstable_by(|&a, &b| brk[a].total_cmp(&brk[b]).then(a.cmp(&b)));
            }
            for idx in 0..nbrk {
                let b = ws.order[idx];
                let tb = ws.brk[b];
                let dt = tb - told;
                if dtmin < dt {
                    break;
                }
                let xb = if ws.dcp[b] > 0.0 { u[b] } else { l[b] };
                let zb = xb - x[b];
                ws.xcp[b] = xb;
                let gb = ws.g[b];
                for j in 0..k2 {
                    ws.c[j] += dt * ws.p[j];
                    ws.mc[j] += dt * ws.mp[j];
                }
                if k > 0 {
                    for j in 0..k {
                        ws.wb[j] = ws.y_mem[j * n + b];
                        ws.wb[k + j] = theta * ws.s_mem[j * n + b];
                    }
                    apply_m(&ws.tchol, &ws.sy, ws.m, k, &ws.wb[..k2], &mut ws.mwb[..k2]);
                }
                let wmc = dot(&ws.wb[..k2], &ws.mc[..k2]);
                let wmp = dot(&ws.wb[..k2], &ws.mp[..k2]);
                let wmw = dot(&ws.wb[..k2], &ws.mwb[..k2]);
                fp += dt * fpp + gb * gb + theta * gb * zb - gb * wmc;
                fpp -= theta * gb * gb + 2.0 * gb * wmp + gb * gb * wmw;
                fpp = fpp.max(EPS * fpp0);
                for j in 0..k2 {
                    ws.p[j] += gb * ws.wb[j];
                    ws.mp[j] += gb * ws.mwb[j];
                }
                ws.dcp[b] = 0.0;
                ws.state[b] = VarState::AtBound;
                told = tb;
                if fp >= 0.0 {
                    dtmin = 0.0;
                    break;
                }
                dtmin = -fp / fpp;
            }
            let dtmin = dtmin.max(0.0);
            let tf = told + dtmin;
            for i in 0..n {
                if ws.state[i] == VarState::Free && ws.dcp[i] != 0.0 {
                    ws.xcp[i] = (x[i] + tf * ws.dcp[i]).clamp(l[i], u[i]);
                }
            }
            for j in 0..k2 {
                ws.c[j] += dtmin * ws.p[j];
                ws.mc[j] += dtmin * ws.mp[j];
            }
        }
        let mut nf = 0;
        for i in 0..n {
            if ws.state[i] == VarState::Free {
                ws.free[nf] = i;
                nf += 1;
            }
        }
        nf
    }

    /// Minimizes the model over the free variables (`free[..nf]`) starting from the Cauchy point
    /// and overwrites `xcp` with the result (projected, or truncated if projection does not give
    /// a descent direction).
    ///
    /// With `A = ZᵀW` (`Z` selects the free variables) the reduced Hessian is `θI − A M Aᵀ`, and
    /// by Sherman–Morrison–Woodbury the Newton step on the free variables is
    /// `du = −r/θ − A N⁻¹ Aᵀ r / θ²` with `N = M⁻¹ − AᵀA/θ`. As in the original L-BFGS-B code
    /// (`formk`), `N` is formed directly:
    ///
    /// ```text
    /// N = [ −D − YᵀZZᵀY/θ    Lᵀ − YᵀZZᵀS ]  =  [ −P  Cᵀ ]
    ///     [  L − SᵀZZᵀY      θ S_aᵀ S_a  ]     [  C  Q  ]
    /// ```
    ///
    /// (`S_a`: rows of the variables that are not free). The products over the free variables
    /// are taken from the stored `YᵀY`, `SᵀY`, `SᵀS` minus the contribution of the other
    /// variables, or summed directly, whichever set is smaller. `N` is factored as
    /// `N = [J 0; −Eᵀ I] diag(−I, Q + EᵀE) [Jᵀ −E; 0 I]` with `P = JJᵀ`, `E = J⁻¹Cᵀ` (two `k×k`
    /// Cholesky factorizations). With no bound active, `Q = 0` and `C = −R` (`R` the upper
    /// triangle of `SᵀY`), and `N q = v` is solved with two triangular solves instead.
    fn subspace(&mut self, x: &[f64], nf: usize) {
        let k = self.k;
        let theta = self.theta;
        let (l, u) = (self.lower, self.upper);
        let ws = &mut *self.ws;
        let (n, m) = (ws.n, ws.m);
        let inv_theta = 1.0 / theta;
        let na = n - nf;
        // Reduced gradient r = Zᵀ(g + θ(xcp − x) − W M c), by index in `du` (0 if not free).
        // ws.wb holds θ·(M c)₂ so that W M c = Y (M c)₁ + S wb.
        for j in 0..k {
            ws.wb[j] = theta * ws.mc[k + j];
        }
        for i in 0..n {
            ws.du[i] = ws.g[i] + theta * (ws.xcp[i] - x[i]);
        }
        for j in 0..k {
            let (yj, sj) = (&ws.y_mem[j * n..(j + 1) * n], &ws.s_mem[j * n..(j + 1) * n]);
            let (cy, cs) = (ws.mc[j], ws.wb[j]);
            for ((d, yi), si) in ws.du.iter_mut().zip(yj).zip(sj) {
                *d -= yi * cy + si * cs;
            }
        }
        for i in 0..n {
            if ws.state[i] != VarState::Free {
                ws.du[i] = 0.0;
            }
        }
        // v = Aᵀ r
        for j in 0..k {
            ws.v2[j] = dot(&ws.y_mem[j * n..(j + 1) * n], &ws.du);
            ws.v2[k + j] = theta * dot(&ws.s_mem[j * n..(j + 1) * n], &ws.du);
        }
        // Products over the smaller of the two sets: YᵀY in pj, SᵀY in ce, SᵀS in s2 (lower
        // triangles of the symmetric ones).
        let sum_free = nf < na;
        for a in 0..k {
            ws.pj[a * m..a * m + k].fill(0.0);
            ws.ce[a * m..a * m + k].fill(0.0);
            ws.s2[a * m..a * m + k].fill(0.0);
        }
        if na > 0 {
            for i in 0..n {
                if (ws.state[i] == VarState::Free) != sum_free {
                    continue;
                }
                let (cy, cs) = ws.wb[..2 * k].split_at_mut(k);
                for j in 0..k {
                    cy[j] = ws.y_mem[j * n + i];
                    cs[j] = ws.s_mem[j * n + i];
                }
                for a in 0..k {
                    let (ya, sa) = (cy[a], cs[a]);
                    let row = a * m;
                    for (t, c) in ws.pj[row..=row + a].iter_mut().zip(&cy[..=a]) {
                        *t += ya * c;
                    }
                    for (t, c) in ws.s2[row..=row + a].iter_mut().zip(&cs[..=a]) {
                        *t += sa * c;
                    }
                    for (t, c) in ws.ce[row..row + k].iter_mut().zip(&cy[..k]) {
                        *t += sa * c;
                    }
                }
            }
        }
        // P = D + YᵀZZᵀY/θ, C = L − SᵀZZᵀY, Q = θ S_aᵀS_a.
        for a in 0..k {
            let row = a * m;
            for b in 0..=a {
                let (yy_f, ss_a) = if sum_free {
                    (ws.pj[row + b], ws.ss[row + b] - ws.s2[row + b])
                } else {
                    (ws.yy[row + b] - ws.pj[row + b], ws.s2[row + b])
                };
                let d = if a == b { ws.sy[row + a] } else { 0.0 };
                ws.pj[row + b] = d + yy_f * inv_theta;
                ws.s2[row + b] = theta * ss_a;
            }
            for b in 0..k {
                let t = ws.ce[row + b];
                ws.ce[row + b] = if sum_free {
                    let lab = if a > b { ws.sy[row + b] } else { 0.0 };
                    lab - t
                } else if a > b {
                    // L − (SᵀY − S_aᵀY_a) below the diagonal, where L equals SᵀY.
                    t
                } else {
                    t - ws.sy[row + b]
                };
            }
        }
        let ok = if na == 0 {
            solve_unconstrained_middle(&ws.pj, &ws.ce, m, k, &mut ws.v2[..2 * k])
        } else {
            solve_middle(
                &mut ws.pj,
                &mut ws.ce,
                &mut ws.s2,
                m,
                k,
                &mut ws.v2[..2 * k],
            )
        };
        if !ok {
            return; // keep the Cauchy point
        }
        // du = −r/θ − (1/θ²) A q
        let q = &ws.v2[..2 * k];
        for j in 0..k {
            ws.wb[j] = q[j] * inv_theta;
            ws.wb[k + j] = q[k + j];
        }
        for i in 0..n {
            ws.du[i] *= -1.0;
        }
        for j in 0..k {
            let (yj, sj) = (&ws.y_mem[j * n..(j + 1) * n], &ws.s_mem[j * n..(j + 1) * n]);
            let (cy, cs) = (ws.wb[j], ws.wb[k + j]);
            for ((d, yi), si) in ws.du.iter_mut().zip(yj).zip(sj) {
                *d -= yi * cy + si * cs;
            }
        }
        let mut dd_proj = 0.0;
        let mut finite = true;
        for i in 0..n {
            if ws.state[i] != VarState::Free {
                dd_proj += (ws.xcp[i] - x[i]) * ws.g[i];
                continue;
            }
            let d = ws.du[i] * inv_theta;
            finite &= d.is_finite();
            ws.du[i] = d;
            let xb = (ws.xcp[i] + d).clamp(l[i], u[i]);
            dd_proj += (xb - x[i]) * ws.g[i];
        }
        if !finite {
            return;
        }
        if dd_proj < 0.0 {
            for pos in 0..nf {
                let i = ws.free[pos];
                ws.xcp[i] = (ws.xcp[i] + ws.du[i]).clamp(l[i], u[i]);
            }
        } else {
            let mut alpha: f64 = 1.0;
            for pos in 0..nf {
                let i = ws.free[pos];
                let d = ws.du[i];
                if d > 0.0 && u[i].is_finite() {
                    alpha = alpha.min((u[i] - ws.xcp[i]) / d);
                } else if d < 0.0 && l[i].is_finite() {
                    alpha = alpha.min((l[i] - ws.xcp[i]) / d);
                }
            }
            let alpha = alpha.max(0.0);
            for pos in 0..nf {
                let i = ws.free[pos];
                ws.xcp[i] = (ws.xcp[i] + alpha * ws.du[i]).clamp(l[i], u[i]);
            }
        }
    }

    /// Ends a line search that did not converge: accept the best trial if it decreased `f`.
    fn take_best(&mut self, best_f: f64, f0: f64) -> LineSearch {
        if best_f < f0 {
            let ws = &mut *self.ws;
            ws.xt.copy_from_slice(&ws.xbest);
            ws.gt.copy_from_slice(&ws.gbest);
            LineSearch::Accepted(best_f)
        } else {
            LineSearch::Failed
        }
    }
}

struct MtState {
    stx: f64,
    fx: f64,
    gx: f64,
    sty: f64,
    fy: f64,
    gy: f64,
    brackt: bool,
    stage1: bool,
    width: f64,
    width1: f64,
    stmin: f64,
    stmax: f64,
}

impl MtState {
    /// The state at the start of a search from step 0 with value `f0` and slope `g0d`, first
    /// trial `stp0`, largest step `stpmax`: stage 1, nothing bracketed.
    fn start(f0: f64, g0d: f64, stp0: f64, stpmax: f64) -> Self {
        Self {
            stx: 0.0,
            fx: f0,
            gx: g0d,
            sty: 0.0,
            fy: f0,
            gy: g0d,
            brackt: false,
            stage1: true,
            width: stpmax,
            width1: 2.0 * stpmax,
            stmin: 0.0,
            stmax: stp0 + 4.0 * stp0,
        }
    }
}

/// Safeguarded step of Moré & Thuente (1994): updates the interval of uncertainty
/// `(stx, sty)` with the trial `(stp, fp, dp)` and computes the next trial step.
#[allow(clippy::too_many_arguments)]
fn dcstep(
    stx: &mut f64,
    fx: &mut f64,
    dx: &mut f64,
    sty: &mut f64,
    fy: &mut f64,
    dy: &mut f64,
    stp: &mut f64,
    fp: f64,
    dp: f64,
    brackt: &mut bool,
    stpmin: f64,
    stpmax: f64,
) {
    let (sx, sp) = (*stx, *stp);
    let sgnd = dp * dx.signum();
    let cubic_gamma = |theta: f64, a: f64, b: f64| {
        let s = theta.abs().max(a.abs()).max(b.abs());
        if s == 0.0 {
            0.0
        } else {
            s * ((theta / s) * (theta / s) - (a / s) * (b / s))
                .max(0.0)
                .sqrt()
        }
    };
    let mut stpf;
    if fp > *fx {
        // Case 1: higher value, the minimum is bracketed.
        let theta = 3.0 * (*fx - fp) / (sp - sx) + *dx + dp;
        let mut gamma = cubic_gamma(theta, *dx, dp);
        if sp < sx {
            gamma = -gamma;
        }
        let p = (gamma - *dx) + theta;
        let q = ((gamma - *dx) + gamma) + dp;
        let r = p / q;
        let stpc = sx + r * (sp - sx);
        let stpq = sx + ((*dx / ((*fx - fp) / (sp - sx) + *dx)) / 2.0) * (sp - sx);
        stpf = if (stpc - sx).abs() < (stpq - sx).abs() {
            stpc
        } else {
            stpc + (stpq - stpc) / 2.0
        };
        *brackt = true;
    } else if sgnd < 0.0 {
        // Case 2: derivatives of opposite sign, the minimum is bracketed.
        let theta = 3.0 * (*fx - fp) / (sp - sx) + *dx + dp;
        let mut gamma = cubic_gamma(theta, *dx, dp);
        if sp > sx {
            gamma = -gamma;
        }
        let p = (gamma - dp) + theta;
        let q = ((gamma - dp) + gamma) + *dx;
        let r = p / q;
        let stpc = sp + r * (sx - sp);
        let stpq = sp + (dp / (dp - *dx)) * (sx - sp);
        stpf = if (stpc - sp).abs() > (stpq - sp).abs() {
            stpc
        } else {
            stpq
        };
        *brackt = true;
    } else if dp.abs() < dx.abs() {
        // Case 3: same sign, the derivative decreases in magnitude.
        let theta = 3.0 * (*fx - fp) / (sp - sx) + *dx + dp;
        let mut gamma = cubic_gamma(theta, *dx, dp);
        if sp > sx {
            gamma = -gamma;
        }
        let p = (gamma - dp) + theta;
        let q = (gamma + (*dx - dp)) + gamma;
        let r = p / q;
        let stpc = if r < 0.0 && gamma != 0.0 {
            sp + r * (sx - sp)
        } else if sp > sx {
            stpmax
        } else {
            stpmin
        };
        let stpq = sp + (dp / (dp - *dx)) * (sx - sp);
        if *brackt {
            stpf = if (stpc - sp).abs() < (stpq - sp).abs() {
                stpc
            } else {
                stpq
            };
            let lim = sp + 0.66 * (*sty - sp);
            stpf = if sp > sx {
                stpf.min(lim)
            } else {
                stpf.max(lim)
            };
        } else {
            stpf = if (stpc - sp).abs() > (stpq - sp).abs() {
                stpc
            } else {
                stpq
            };
            stpf = stpf.min(stpmax).max(stpmin);
        }
    } else {
        // Case 4: same sign, the derivative does not decrease in magnitude.
        if *brackt {
            let theta = 3.0 * (fp - *fy) / (*sty - sp) + *dy + dp;
            let mut gamma = cubic_gamma(theta, *dy, dp);
            if sp > *sty {
                gamma = -gamma;
            }
            let p = (gamma - dp) + theta;
            let q = ((gamma - dp) + gamma) + *dy;
            let r = p / q;
            stpf = sp + r * (*sty - sp);
        } else if sp > sx {
            stpf = stpmax;
        } else {
            stpf = stpmin;
        }
    }
    if !stpf.is_finite() {
        stpf = if *brackt { 0.5 * (sx + sp) } else { stpmax };
    }
    // Update the interval of uncertainty.
    if fp > *fx {
        *sty = sp;
        *fy = fp;
        *dy = dp;
    } else {
        if sgnd < 0.0 {
            *sty = sx;
            *fy = *fx;
            *dy = *dx;
        }
        *stx = sp;
        *fx = fp;
        *dx = dp;
    }
    *stp = stpf;
}

/// `out = M v` for the compact middle matrix `M = [[−D, Lᵀ], [L, θSᵀS]]⁻¹` of `k` pairs, using
/// the Cholesky factor of `θSᵀS + L D⁻¹ Lᵀ` in `tchol` and `sy = SᵀY` (both stride `m`).
fn apply_m(tchol: &[f64], sy: &[f64], m: usize, k: usize, v: &[f64], out: &mut [f64]) {
    if k == 0 {
        return;
    }
    let (v1, v2) = v.split_at(k);
    let (a, b) = out.split_at_mut(k);
    // a holds D⁻¹ v1 until the end (one division per entry, none in the inner loops).
    for j in 0..k {
        a[j] = v1[j] / sy[j * m + j];
    }
    // rhs = v2 + L D⁻¹ v1, then forward and backward substitution with the Cholesky factor.
    for i in 0..k {
        let (sy_i, t_i) = (&sy[i * m..i * m + i], &tchol[i * m..=i * m + i]);
        let t = sy_i
            .iter()
            .zip(&a[..i])
            .fold(v2[i], |t, (l, aj)| t + l * aj);
        let t = t_i[..i]
            .iter()
            .zip(&b[..i])
            .fold(t, |t, (c, bj)| t - c * bj);
        b[i] = t / t_i[i];
    }
    for i in (0..k).rev() {
        let col = tchol[i..k * m].iter().step_by(m).skip(i + 1);
        let t = col.zip(&b[i + 1..k]).fold(b[i], |t, (c, bj)| t - c * bj);
        b[i] = t / tchol[i * m + i];
    }
    // a = D⁻¹ (Lᵀ b − v1) = D⁻¹ Lᵀ b − D⁻¹ v1 (column j of L read with stride m).
    for j in 0..k {
        let col = sy[j..k * m].iter().step_by(m).skip(j + 1);
        let t = col.zip(&b[j + 1..k]).fold(0.0, |t, (l, bi)| t + l * bi);
        a[j] = t / sy[j * m + j] - a[j];
    }
}

/// Solves `N q = v` in place for `N = [−P Cᵀ; C Q]` (all blocks `k×k`, stride `m`; `P`, `Q`
/// symmetric with their lower triangles stored). `P` and `Q` are overwritten by the Cholesky
/// factors `J` of `P` and of `Q + EᵀE`, and row `a` of `c` by column `a` of `E = J⁻¹Cᵀ`.
/// False if a factorization fails or the result is not finite.
fn solve_middle(
    p: &mut [f64],
    c: &mut [f64],
    q: &mut [f64],
    m: usize,
    k: usize,
    v: &mut [f64],
) -> bool {
    if !cholesky(p, m, k) {
        return false;
    }
    for a in 0..k {
        forward_sub(p, m, k, &mut c[a * m..a * m + k]);
    }
    for a in 0..k {
        let ea = &c[a * m..a * m + k];
        for b in 0..=a {
            q[a * m + b] += dot(ea, &c[b * m..b * m + k]);
        }
    }
    if !cholesky(q, m, k) {
        return false;
    }
    // w1 = J⁻¹v1, q2 = S₂⁻¹(v2 + Eᵀw1), q1 = J⁻ᵀ(E q2 − w1).
    let (v1, v2) = v.split_at_mut(k);
    forward_sub(p, m, k, v1);
    for a in 0..k {
        v2[a] += dot(&c[a * m..a * m + k], v1);
    }
    forward_sub(q, m, k, v2);
    backward_sub(q, m, k, v2);
    for t in v1.iter_mut() {
        *t = -*t;
    }
    for a in 0..k {
        let qa = v2[a];
        for (t, e) in v1.iter_mut().zip(&c[a * m..a * m + k]) {
            *t += e * qa;
        }
    }
    backward_sub(p, m, k, v1);
    v.iter().all(|t| t.is_finite())
}

/// [`solve_middle`] when no variable is bound: `Q = 0` and `C` is upper triangular, so
/// `C q1 = v2` and `Cᵀ q2 = v1 + P q1` are triangular solves (`p`, `c` are not modified).
fn solve_unconstrained_middle(p: &[f64], c: &[f64], m: usize, k: usize, v: &mut [f64]) -> bool {
    let (v1, v2) = v.split_at_mut(k);
    // q1 = C⁻¹ v2 (backward substitution), stored in v2.
    for a in (0..k).rev() {
        let row = &c[a * m..a * m + k];
        let t = v2[a] - dot(&row[a + 1..], &v2[a + 1..k]);
        v2[a] = t / row[a];
    }
    // v1 += P q1 with P symmetric (lower triangle stored).
    for a in 0..k {
        let row = &p[a * m..a * m + a + 1];
        let mut t = dot(row, &v2[..=a]);
        for b in a + 1..k {
            t += p[b * m + a] * v2[b];
        }
        v1[a] += t;
    }
    // Cᵀ q2 = v1 (forward substitution over the columns of C).
    for a in 0..k {
        let mut t = v1[a];
        for b in 0..a {
            t -= c[b * m + a] * v1[b];
        }
        v1[a] = t / c[a * m + a];
    }
    // q = [q1; q2]: q1 is in v2 and q2 in v1.
    v1.swap_with_slice(v2);
    v.iter().all(|t| t.is_finite())
}

/// Cholesky factorization in place of the leading `k×k` block of the symmetric matrix `a`
/// (stride `m`; only the lower triangle is read and written). False if not positive definite.
fn cholesky(a: &mut [f64], m: usize, k: usize) -> bool {
    for i in 0..k {
        let (above, rest) = a.split_at_mut(i * m);
        let rowi = &mut rest[..i + 1];
        for j in 0..i {
            let rowj = &above[j * m..j * m + j + 1];
            rowi[j] = (rowi[j] - dot(&rowi[..j], &rowj[..j])) / rowj[j];
        }
        let d = rowi[i] - dot(&rowi[..i], &rowi[..i]);
        if !(d > 0.0) || !d.is_finite() {
            return false;
        }
        rowi[i] = d.sqrt();
    }
    true
}

/// Solves `L z = b` in place for the lower-triangular `k×k` factor `l` (stride `m`).
fn forward_sub(l: &[f64], m: usize, k: usize, b: &mut [f64]) {
    for i in 0..k {
        let row = &l[i * m..i * m + i + 1];
        b[i] = (b[i] - dot(&row[..i], &b[..i])) / row[i];
    }
}

/// Solves `Lᵀ z = b` in place for the lower-triangular `k×k` factor `l` (stride `m`).
fn backward_sub(l: &[f64], m: usize, k: usize, b: &mut [f64]) {
    for i in (0..k).rev() {
        let bi = b[i] / l[i * m + i];
        b[i] = bi;
        let row = &l[i * m..i * m + i];
        for (bj, lij) in b[..i].iter_mut().zip(row) {
            *bj -= lij * bi;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `apply_m` must invert the compact middle matrix `K = [[−D, Lᵀ], [L, θSᵀS]]`.
    #[test]
    fn apply_m_inverts_the_middle_matrix() {
        let (n, m) = (5, 4);
        let mut ws = LbfgsbWorkspace::new(n, m);
        let lower = vec![f64::NEG_INFINITY; n];
        let upper = vec![f64::INFINITY; n];
        let opts = LbfgsbOptions {
            memory: m,
            ..Default::default()
        };
        let mut solver = Solver {
            ws: &mut ws,
            lower: &lower,
            upper: &upper,
            opts: &opts,
            evals: 0,
            k: 0,
            theta: 1.0,
        };
        // Feed six pairs (two of them push out old ones) from a convex quadratic so s·y > 0.
        let hess = |v: &[f64], out: &mut [f64]| {
            for i in 0..n {
                out[i] = (2.0 + i as f64) * v[i] + 0.3 * v[(i + 1) % n] + 0.3 * v[(i + n - 1) % n];
            }
        };
        let mut x = vec![0.0; n];
        let mut g = vec![0.0; n];
        for step in 0..6 {
            solver.ws.x_prev.copy_from_slice(&x);
            solver.ws.g_prev.copy_from_slice(&g);
            for i in 0..n {
                x[i] += ((step * 7 + i * 3) % 5) as f64 * 0.1 - 0.2
                    + if i == step % n { 0.5 } else { 0.0 };
            }
            hess(&x, &mut g);
            solver.ws.g.copy_from_slice(&g);
            solver.update_memory(&x);
        }
        let k = solver.k;
        assert_eq!(k, m);
        let theta = solver.theta;
        let ws = &*solver.ws;
        // Dense K.
        let k2 = 2 * k;
        let mut kmat = vec![0.0; k2 * k2];
        for i in 0..k {
            for j in 0..k {
                let sy = ws.sy[i * m + j];
                if i == j {
                    kmat[i * k2 + j] = -sy;
                }
                if i > j {
                    kmat[(k + i) * k2 + j] = sy; // L block (lower left)
                    kmat[j * k2 + k + i] = sy; // Lᵀ block (upper right)
                }
                kmat[(k + i) * k2 + k + j] = theta * ws.ss[i * m + j];
            }
        }
        let mut e = vec![0.0; k2];
        let mut col = vec![0.0; k2];
        for j in 0..k2 {
            e.fill(0.0);
            e[j] = 1.0;
            apply_m(&ws.tchol, &ws.sy, m, k, &e, &mut col);
            for r in 0..k2 {
                let prod: f64 = (0..k2).map(|c| kmat[r * k2 + c] * col[c]).sum();
                let want = if r == j { 1.0 } else { 0.0 };
                assert!((prod - want).abs() < 1e-9, "(K·M)[{r}][{j}] = {prod}");
            }
        }
        // The stored pairs are the last `m` ones, oldest first: s·y of the newest matches.
        let last = (m - 1) * n;
        let sy_last: f64 = (0..n)
            .map(|i| ws.s_mem[last + i] * ws.y_mem[last + i])
            .sum();
        assert!((sy_last - ws.sy[(m - 1) * m + m - 1]).abs() < 1e-12);
    }

    #[test]
    fn dcstep_brackets_a_minimum_with_a_cubic_step() {
        // f(t) = (t − 1)², from stx = 0 (f = 1, f' = −2) to stp = 3 (f = 4, f' = 4): case 1.
        let (mut stx, mut fx, mut dx) = (0.0, 1.0, -2.0);
        let (mut sty, mut fy, mut dy) = (0.0, 1.0, -2.0);
        let mut stp = 3.0;
        let mut brackt = false;
        dcstep(
            &mut stx,
            &mut fx,
            &mut dx,
            &mut sty,
            &mut fy,
            &mut dy,
            &mut stp,
            4.0,
            4.0,
            &mut brackt,
            0.0,
            10.0,
        );
        assert!(brackt);
        assert_eq!((sty, fy, dy), (3.0, 4.0, 4.0));
        // The cubic fitted to a quadratic has its minimizer at the true minimum.
        assert!((stp - 1.0).abs() < 1e-12, "stp = {stp}");
    }
}
