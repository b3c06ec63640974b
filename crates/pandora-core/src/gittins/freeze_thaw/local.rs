//! The local MDP's value functions `α ↦ V_α(u)` of an acyclic run, exactly, and the Gittins
//! indices they give, in one backward pass.
//!
//! `V_α(u) = max(α, v(u))` for a complete state; otherwise `V_α(u) = max(α, W_u(α))` with
//! `W_u(α) = −c(u) + Σ p(u'|u) V_α(u')`. By induction each `V_α(u)` is convex, non-decreasing and
//! piecewise linear in `α`: constant for `α` below its first breakpoint (the local policy never
//! stops, and collects the expected net value of training on), equal to `α` from the state's
//! index on (it stops at once). `W_u` is the same kind of function with breakpoints the union of
//! the successors' and `W_u(α) − α` is non-increasing, so the index `G(u) = inf{α : W_u(α) ≤ α}`
//! is found on the first breakpoint where `W_u − α ≤ 0` and is exact on its linear piece. Then
//! `V(u)` keeps `W_u`'s breakpoints below `G(u)` and ends at `(G(u), G(u))`.
//!
//! Cost: `O(k log k)` for a state whose successors' functions have `k` breakpoints in all; a
//! function's breakpoints are indices of states after it (and values of complete ones) lying
//! below its own index, so on learning-curve lattices they stay few.

use super::curve::CurveRun;

/// A convex, non-decreasing, piecewise-linear function of `α` given by its breakpoints
/// `(x, V(x))` in increasing `x`: constant left of the first, linear between, `V(α) = α` from the
/// last (whose value is its `x`).
struct Pwl {
    points: Vec<(f64, f64)>,
}

impl Pwl {
    /// `out[i] += weight · V(xs[i])` for ascending `xs`.
    fn add_to(&self, xs: &[f64], weight: f64, out: &mut [f64]) {
        let pts = &self.points;
        let (first, last) = (pts[0], pts[pts.len() - 1]);
        let mut i = 0;
        for (x, o) in xs.iter().zip(out.iter_mut()) {
            let v = if *x <= first.0 {
                first.1
            } else if *x >= last.0 {
                *x
            } else {
                while pts[i + 1].0 <= *x {
                    i += 1;
                }
                let (a, b) = (pts[i], pts[i + 1]);
                a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)
            };
            *o += weight * v;
        }
    }
}

impl CurveRun {
    /// The Gittins index of every state: the value of a complete state, and for the others the
    /// smallest `α` at which stopping (collect `α`) is optimal in the local MDP. One backward
    /// pass over the value functions `α ↦ V_α(u)` (see the module doc of `local.rs`).
    pub fn indices(&self) -> Vec<f64> {
        indices(self)
    }

    /// The index of state `s` alone (computes the states after `s` too).
    pub fn index(&self, s: usize) -> f64 {
        self.indices()[s]
    }
}

/// The Gittins index of every state of `run` (validated: acyclic in list order).
fn indices(run: &CurveRun) -> Vec<f64> {
    let n = run.nodes.len();
    let mut v: Vec<Pwl> = (0..n).map(|_| Pwl { points: Vec::new() }).collect();
    let mut g = vec![0.0; n];
    let (mut xs, mut w) = (Vec::new(), Vec::new());
    // A state's function is needed until its first predecessor is done (states are processed
    // backwards): then it is dropped, so memory stays that of a few layers of a lattice.
    let mut last_use = vec![usize::MAX; n];
    for (u, node) in run.nodes.iter().enumerate() {
        for &(s, _) in &node.next {
            last_use[s] = last_use[s].min(u);
        }
    }
    for u in (0..n).rev() {
        let node = &run.nodes[u];
        if node.is_complete() {
            let val = node
                .value
                .expect("validated: complete states carry a value");
            g[u] = val;
            v[u].points = vec![(val, val)];
            continue;
        }
        xs.clear();
        for &(s, p) in &node.next {
            if p > 0.0 {
                xs.extend(v[s].points.iter().map(|q| q.0));
            }
        }
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        w.clear();
        w.resize(xs.len(), -node.cost);
        for &(s, p) in &node.next {
            if p > 0.0 {
                v[s].add_to(&xs, p, &mut w);
            }
        }
        let (gu, keep) = root(&xs, &w);
        g[u] = gu;
        let mut points: Vec<(f64, f64)> = xs[..keep]
            .iter()
            .zip(&w[..keep])
            .map(|(&x, &y)| (x, y))
            .filter(|&(x, _)| x < gu)
            .collect();
        points.push((gu, gu));
        v[u].points = points;
        for &(s, _) in &node.next {
            if last_use[s] == u {
                v[s].points = Vec::new();
            }
        }
    }
    g
}

/// `inf{α : W(α) ≤ α}` for `W` given at the breakpoints `xs` (constant to their left, `α − c`
/// to their right), and how many breakpoints lie before it.
fn root(xs: &[f64], w: &[f64]) -> (f64, usize) {
    let h = |j: usize| w[j] - xs[j];
    match (0..xs.len()).find(|&j| h(j) <= 0.0) {
        // Left of the first breakpoint W is the constant w[0].
        Some(0) => (w[0], 0),
        Some(j) => {
            let (h0, h1) = (h(j - 1), h(j));
            let x = xs[j - 1] + h0 * (xs[j] - xs[j - 1]) / (h0 - h1);
            (x.clamp(xs[j - 1], xs[j]), j)
        }
        // Only rounding keeps the last gap (−c ≤ 0 exactly) above zero.
        None => (xs[xs.len() - 1], xs.len() - 1),
    }
}
