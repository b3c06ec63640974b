//! Many L-BFGS-B runs in lockstep, so that their objective evaluations become one block.
//!
//! **Why.** At a point, a GP acquisition costs `O(n²)` (the variance `k(x,x) − ‖L⁻¹k(X,x)‖²` and
//! its gradient): two triangular matrix–vector products that stream the `n × n` factor from memory
//! once per point. For `m` points at once the same work is two triangular matrix–matrix products,
//! which run at the processor's arithmetic speed instead of its memory bandwidth. The restarts of
//! a multi-start maximization are independent, so they can be evaluated together if they advance
//! together.
//!
//! **How.** Every run is an L-BFGS-B solve driven from outside (`lbfgsb::Stepper`, reverse
//! communication): it says which point it needs next and waits for the value. A round collects
//! the pending point of every unfinished run, in run order, evaluates them with
//! [`Objective::value_grads`] in chunks of [`CHUNK`] points (the chunks spread over rayon's
//! pool), and hands every run its value, which advances it to its next request (these updates,
//! the solvers' own work, run in parallel too). A run that finishes leaves the rounds.
//!
//! One thread drives all runs; nothing blocks. (The first version gave every run its own OS
//! thread, which deposited its point and slept on a condition variable until the round was
//! complete: at d = 16 that is 160 threads per maximization and 160 wake-ups per round, about a
//! quarter of the maximization's CPU time in the kernel's scheduler, and two such maximizations
//! side by side on two cores, as `pandora experiment --jobs 2` runs them, oversubscribed the
//! cores.) Because nothing blocks, the parallel parts may use rayon's pool even when the caller
//! is itself one of its workers.
//!
//! **Determinism.** A run's sequence of points depends only on the values it receives, and the
//! chunks of a round are formed from the waiting runs in run order, with a fixed chunk size: by
//! induction every round has the same composition in every execution, whatever the number of
//! threads. The values equal the one-point evaluations up to rounding (a matrix product sums in
//! another order than a matrix–vector product).

use rayon::prelude::*;

use super::lbfgsb::{LbfgsbOptions, LbfgsbWorkspace, Request, Stepper};
use super::objective::Objective;
use crate::error::Result;

/// Points per `value_grads` call within a round. Fixed (not derived from the thread count) for
/// determinism.
pub(crate) const CHUNK: usize = 32;

/// `value_grads` over fixed chunks of `CHUNK` points, the chunks spread over rayon's pool (the
/// result does not depend on the split).
fn evaluate_chunks(obj: &dyn Objective, xs: &[f64], vals: &mut [f64], grads: &mut [f64], d: usize) {
    xs.par_chunks(CHUNK * d)
        .zip(
            vals.par_chunks_mut(CHUNK)
                .zip(grads.par_chunks_mut(CHUNK * d)),
        )
        .for_each(|(x, (v, g))| obj.value_grads(x, v, g));
}

/// Maximizes `obj` by L-BFGS-B from every start in lockstep (see the module docs); returns the
/// end point, value and evaluation count of each run in start order, as the one-at-a-time
/// restarts of [`super::multistart::maximize`] do.
pub(crate) fn maximize_lockstep(
    obj: &dyn Objective,
    mut starts: Vec<Vec<f64>>,
    lower: &[f64],
    upper: &[f64],
    opts: &LbfgsbOptions,
) -> Vec<Result<(Vec<f64>, f64, usize)>> {
    let d = obj.dim();
    let k = starts.len();
    let mut workspaces: Vec<LbfgsbWorkspace> = (0..k)
        .map(|_| LbfgsbWorkspace::new(d, opts.memory))
        .collect();
    // (final value of the minimized −obj, evaluations) of each run, or its error.
    let ends: Vec<Result<(f64, usize)>> = {
        let mut runs: Vec<Result<Stepper<'_>>> = starts
            .iter_mut()
            .zip(workspaces.iter_mut())
            .map(|(x, ws)| Stepper::new(x, lower, upper, opts, ws))
            .collect();
        let mut xs: Vec<f64> = Vec::with_capacity(k * d);
        let mut slot: Vec<Option<usize>> = vec![None; k];
        let mut vals: Vec<f64> = Vec::with_capacity(k);
        let mut grads: Vec<f64> = Vec::with_capacity(k * d);
        loop {
            xs.clear();
            let mut waiting = 0;
            for (run, s) in runs.iter_mut().zip(slot.iter_mut()) {
                *s = None;
                if let Ok(run) = run
                    && let Request::Evaluate { point, .. } = run.request()
                {
                    xs.extend_from_slice(point);
                    *s = Some(waiting);
                    waiting += 1;
                }
            }
            if waiting == 0 {
                break;
            }
            vals.clear();
            vals.resize(waiting, f64::NAN);
            grads.clear();
            grads.resize(waiting * d, 0.0);
            evaluate_chunks(obj, &xs, &mut vals, &mut grads, d);
            // Hand back −value and −gradient (the solver minimizes).
            runs.par_iter_mut()
                .zip(slot.par_iter())
                .for_each(|(run, s)| {
                    if let (Ok(run), Some(j)) = (run, *s) {
                        if let Request::Evaluate { grad, .. } = run.request() {
                            for (gi, v) in grad.iter_mut().zip(&grads[j * d..(j + 1) * d]) {
                                *gi = -v;
                            }
                        }
                        run.answer(-vals[j]);
                    }
                });
        }
        runs.into_iter()
            .map(|run| match run?.request() {
                Request::Done(r) => Ok((r.f, r.evaluations)),
                Request::Evaluate { .. } => Err(crate::error::Error::Numerical(
                    "a lockstep run ended without a result".into(),
                )),
            })
            .collect()
    };
    starts
        .into_iter()
        .zip(ends)
        .map(|(x, end)| end.map(|(f, evals)| (x, -f, evals)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::lbfgsb::minimize;

    /// A multimodal objective on `[0, 1]³` (runs from different starts take different numbers of
    /// iterations and end at different optima), NaN on a corner slab (the line searches back
    /// off), evaluated point by point also in blocks, so lockstep runs must equal independent
    /// solves bit for bit.
    struct Wavy;

    impl Objective for Wavy {
        fn dim(&self) -> usize {
            3
        }

        fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64 {
            if x[0] > 0.95 && x[1] > 0.95 {
                grad.fill(0.0);
                return f64::NAN;
            }
            let mut v = 0.0;
            for (i, (&xi, g)) in x.iter().zip(grad.iter_mut()).enumerate() {
                let c = 0.3 + 0.2 * i as f64;
                v += -(xi - c) * (xi - c) + 0.05 * (11.0 * xi).sin();
                *g = -2.0 * (xi - c) + 0.55 * (11.0 * xi).cos();
            }
            v
        }

        fn prefers_blocks(&self) -> bool {
            true
        }
    }

    #[test]
    fn lockstep_runs_equal_independent_solves() {
        let (lo, hi) = (vec![0.0; 3], vec![1.0; 3]);
        let opts = LbfgsbOptions::default();
        let mut starts: Vec<Vec<f64>> = (0..70)
            .map(|k| {
                let t = k as f64;
                vec![
                    (t * 0.618_034).fract(),
                    (t * 0.414_214 + 0.9).fract(),
                    (t * 0.732_051).fract(),
                ]
            })
            .collect();
        starts.push(vec![0.97, 0.98, 0.5]); // NaN at the start
        starts.push(vec![f64::NAN, 0.5, 0.5]); // refused
        let got = maximize_lockstep(&Wavy, starts.clone(), &lo, &hi, &opts);
        assert_eq!(got.len(), starts.len());
        let mut evals = std::collections::BTreeSet::new();
        for (k, (start, run)) in starts.into_iter().zip(got).enumerate() {
            let mut x = start;
            let alone = minimize(
                |x, g| {
                    let v = Wavy.value_grad(x, g);
                    g.iter_mut().for_each(|gi| *gi = -*gi);
                    -v
                },
                &mut x,
                &lo,
                &hi,
                &opts,
            );
            match (alone, run) {
                (Ok(r), Ok((xl, vl, el))) => {
                    assert_eq!(x, xl, "run {k}: end point");
                    assert_eq!((-r.f).to_bits(), vl.to_bits(), "run {k}: value");
                    assert_eq!(r.evaluations, el, "run {k}: evaluations");
                    evals.insert(el);
                }
                (Err(_), Err(_)) => assert_eq!(k, 71, "only the NaN start is refused"),
                (a, b) => panic!("run {k}: alone {a:?}, lockstep {b:?}"),
            }
        }
        assert!(evals.len() > 3, "runs of different lengths: {evals:?}");
    }
}
