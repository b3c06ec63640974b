//! Many L-BFGS-B runs in lockstep, so that their objective evaluations become one block.
//!
//! **Why.** At a point, a GP acquisition costs `O(n²)` (the variance `k(x,x) − ‖L⁻¹k(X,x)‖²` and
//! its gradient): two triangular matrix–vector products that stream the `n × n` factor from memory
//! once per point. For `m` points at once the same work is two triangular matrix–matrix products,
//! which run at the processor's arithmetic speed instead of its memory bandwidth. The restarts of
//! a multi-start maximization are independent, so they can be evaluated together if they advance
//! together.
//!
//! **How.** Every run keeps its own, unchanged L-BFGS-B (the solver calls its objective and waits
//! for the answer). Each run lives on its own (small-stack) thread; its objective deposits the
//! point in a shared round and sleeps. When every unfinished run has deposited a point, the last
//! one to arrive evaluates the whole round with [`Objective::value_grads`] in chunks of
//! [`CHUNK`] points (spread over helper threads), hands the results back and wakes the others.
//! A run that finishes leaves the round, which may complete it.
//!
//! **Determinism.** A run's sequence of points depends only on the values it receives, and the
//! chunks of a round are formed from the waiting runs in run order, with a fixed chunk size: by
//! induction every round has the same composition in every execution, whatever the number of
//! threads. The values equal the one-point evaluations up to rounding (a matrix product sums in
//! another order than a matrix–vector product).
//!
//! The threads are plain OS threads, not rayon workers: a run blocks while it waits, and blocking
//! rayon workers could starve a caller that itself runs inside the rayon pool.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::lbfgsb::{LbfgsbOptions, LbfgsbWorkspace, minimize_with_workspace};
use super::objective::Objective;
use crate::error::Result;

/// Points per `value_grads` call within a round. Fixed (not derived from the thread count) for
/// determinism.
pub(crate) const CHUNK: usize = 32;

/// Stack of a run's thread (L-BFGS-B keeps its arrays on the heap; the run that completes a
/// round evaluates it, matrix products included, on this stack).
const RUN_STACK: usize = 1024 * 1024;

/// The shared state of a round.
struct Round {
    /// Point of run `i` at `[i·d, (i+1)·d)`.
    xs: Vec<f64>,
    vals: Vec<f64>,
    grads: Vec<f64>,
    /// Runs that have deposited a point in this round.
    waiting: Vec<bool>,
    /// Runs not yet finished.
    active: usize,
    /// Points deposited in this round.
    submitted: usize,
    /// Completed rounds.
    generation: u64,
}

struct Lockstep<'a> {
    obj: &'a dyn Objective,
    d: usize,
    round: Mutex<Round>,
    done: Condvar,
}

impl Lockstep<'_> {
    fn lock(&self) -> MutexGuard<'_, Round> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Value and gradient at `x` for run `i`: waits for the round to complete.
    fn eval(&self, i: usize, x: &[f64], grad: &mut [f64]) -> f64 {
        let d = self.d;
        let mut r = self.lock();
        r.xs[i * d..(i + 1) * d].copy_from_slice(x);
        r.waiting[i] = true;
        r.submitted += 1;
        let generation = r.generation;
        if r.submitted == r.active {
            self.complete(&mut r);
        } else {
            while r.generation == generation {
                r = self.done.wait(r).unwrap_or_else(PoisonError::into_inner);
            }
        }
        grad.copy_from_slice(&r.grads[i * d..(i + 1) * d]);
        r.vals[i]
    }

    /// Run `i` is done; completes the round if everyone else is waiting.
    fn finish(&self) {
        let mut r = self.lock();
        r.active -= 1;
        if r.active > 0 && r.submitted == r.active {
            self.complete(&mut r);
        }
    }

    /// Evaluates the waiting points (in run order), hands the results back and wakes the runs.
    fn complete(&self, r: &mut Round) {
        let d = self.d;
        let who: Vec<usize> = (0..r.waiting.len()).filter(|&i| r.waiting[i]).collect();
        let mut xs = Vec::with_capacity(who.len() * d);
        for &i in &who {
            xs.extend_from_slice(&r.xs[i * d..(i + 1) * d]);
        }
        let mut vals = vec![f64::NAN; who.len()];
        let mut grads = vec![0.0; who.len() * d];
        evaluate_chunks(self.obj, &xs, &mut vals, &mut grads, d);
        for (k, &i) in who.iter().enumerate() {
            r.vals[i] = vals[k];
            r.grads[i * d..(i + 1) * d].copy_from_slice(&grads[k * d..(k + 1) * d]);
            r.waiting[i] = false;
        }
        r.submitted = 0;
        r.generation += 1;
        self.done.notify_all();
    }
}

/// `value_grads` over fixed chunks of `CHUNK` points, the chunks spread over the available cores
/// by scoped threads (one chunk list per thread; the result does not depend on the split).
fn evaluate_chunks(obj: &dyn Objective, xs: &[f64], vals: &mut [f64], grads: &mut [f64], d: usize) {
    let chunks: Vec<_> = xs
        .chunks(CHUNK * d)
        .zip(vals.chunks_mut(CHUNK).zip(grads.chunks_mut(CHUNK * d)))
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(chunks.len())
        .max(1);
    if workers == 1 {
        for (x, (v, g)) in chunks {
            obj.value_grads(x, v, g);
        }
        return;
    }
    let mut lists: Vec<Vec<_>> = (0..workers).map(|_| Vec::new()).collect();
    for (k, c) in chunks.into_iter().enumerate() {
        lists[k % workers].push(c);
    }
    std::thread::scope(|s| {
        let mut lists = lists.into_iter();
        let mine = lists.next().unwrap_or_default();
        for list in lists {
            s.spawn(move || {
                for (x, (v, g)) in list {
                    obj.value_grads(x, v, g);
                }
            });
        }
        for (x, (v, g)) in mine {
            obj.value_grads(x, v, g);
        }
    });
}

/// Leaves the round when a run ends, also when it ends by a panic.
struct Leave<'a, 'b>(&'a Lockstep<'b>);

impl Drop for Leave<'_, '_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// Maximizes `obj` by L-BFGS-B from every start in lockstep (see the module docs); returns the
/// end point, value and evaluation count of each run in start order, as the one-at-a-time
/// restarts of [`super::multistart::maximize`] do.
pub(crate) fn maximize_lockstep(
    obj: &dyn Objective,
    starts: Vec<Vec<f64>>,
    lower: &[f64],
    upper: &[f64],
    opts: &LbfgsbOptions,
) -> Vec<Result<(Vec<f64>, f64, usize)>> {
    let d = obj.dim();
    let k = starts.len();
    let shared = Lockstep {
        obj,
        d,
        round: Mutex::new(Round {
            xs: vec![0.0; k * d],
            vals: vec![f64::NAN; k],
            grads: vec![0.0; k * d],
            waiting: vec![false; k],
            active: k,
            submitted: 0,
            generation: 0,
        }),
        done: Condvar::new(),
    };
    let shared = &shared;
    std::thread::scope(|s| {
        let handles: Vec<_> = starts
            .into_iter()
            .enumerate()
            .map(|(i, mut x)| {
                let run = move || {
                    let _leave = Leave(shared);
                    let mut ws = LbfgsbWorkspace::new(d, opts.memory);
                    let r = minimize_with_workspace(
                        |x, g| {
                            let v = shared.eval(i, x, g);
                            for gi in g.iter_mut() {
                                *gi = -*gi;
                            }
                            -v
                        },
                        &mut x,
                        lower,
                        upper,
                        opts,
                        &mut ws,
                    )?;
                    Ok((x, -r.f, r.evaluations))
                };
                let handle = std::thread::Builder::new()
                    .stack_size(RUN_STACK)
                    .spawn_scoped(s, run);
                if handle.is_err() {
                    // The run never starts: it must not hold up the rounds of the others.
                    shared.finish();
                }
                handle
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(e) => Err(crate::error::Error::Numerical(format!(
                    "could not start a restart thread: {e}"
                ))),
            })
            .collect()
    })
}
