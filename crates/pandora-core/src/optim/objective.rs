//! The objective every maximizer of this module maximizes ([`Objective`]): its value and
//! gradient at one point, and (optionally) at many points as one block.
//!
//! It lives in a leaf file of its own, re-exported as `multistart::Objective`, so that the
//! lock-step restarts (which `multistart` calls) can use it without importing `multistart` back.

/// An objective to maximize on a box of dimension `dim()`. Must be `Sync`: restarts run in
/// parallel with rayon.
pub trait Objective: Sync {
    /// The dimension of the input.
    fn dim(&self) -> usize;

    /// Value and gradient at `x` (gradient written into `grad`, `len = dim`). Maximization
    /// convention. A non-finite value marks `x` as outside the usable domain.
    fn value_grad(&self, x: &[f64], grad: &mut [f64]) -> f64;

    /// Values at many points: `xs` is row-major `m × dim`, `out` has length `m`.
    /// Implementations override this with a batched (much faster) version; the default loops over
    /// [`Objective::value_grad`].
    fn values(&self, xs: &[f64], out: &mut [f64]) {
        let d = self.dim();
        if d == 0 {
            return;
        }
        let mut g = vec![0.0; d];
        for (x, o) in xs.chunks_exact(d).zip(out.iter_mut()) {
            *o = self.value_grad(x, &mut g);
        }
    }

    /// Values and gradients at many points: `xs` row-major `m × dim`, `out` of length `m`,
    /// `grads` row-major `m × dim`. The default loops over [`Objective::value_grad`]; objectives
    /// whose per-point cost is dominated by work a block shares (a GP posterior with many
    /// training points) override it together with [`Objective::prefers_blocks`].
    fn value_grads(&self, xs: &[f64], out: &mut [f64], grads: &mut [f64]) {
        let d = self.dim();
        if d == 0 {
            return;
        }
        for ((x, o), g) in xs
            .chunks_exact(d)
            .zip(out.iter_mut())
            .zip(grads.chunks_exact_mut(d))
        {
            *o = self.value_grad(x, g);
        }
    }

    /// Whether [`Objective::value_grads`] on a block is much cheaper than its points one at a
    /// time: [`maximize`](super::multistart::maximize) then runs the L-BFGS-B restarts in lockstep and evaluates each round as
    /// one block (see `optim::lockstep`). Default `false`.
    fn prefers_blocks(&self) -> bool {
        false
    }
}
