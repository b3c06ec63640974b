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
//! below its own index, so on learning-curve lattices they stay few. On the layered chains of
//! [`CurveRun::gaussian`] they do not: every state of a layer sees the indices of all later
//! layers (measured: 24 s for 50 steps × 101 points).
//!
//! # The current state alone
//! [`CurveRun::current_index`] needs only `G(at)`, the root of `d(α) = W_at(α) − α`, and finds it
//! by Newton's method on `d`, one `O(edges)` backward pass per iterate: a pass at fixed `α`
//! gives `d(α)` and a subgradient `d'(α) = P_α − 1`, where `P_α` is the probability that the
//! `α`-optimal local policy, after the first step, ends by collecting `α` (so `d' ∈ [−1, 0]`).
//! `d` is convex and non-increasing, so from any `α₀` left of the root (the expected net value
//! of never stopping, where `d ≥ 0`) the Newton iterates increase monotonically without
//! overshooting (each tangent lies below `d`), and since `d` is piecewise linear the iterate
//! after the one that reaches the root's linear piece is the root itself, up to rounding. In
//! practice a handful of passes; after 100 the search finishes by bisection (never observed).

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

    /// The index of the current state only, by Newton's method on the local MDP (see the module
    /// doc of `local.rs`): the same value as `index(at)` to rounding, in a few `O(edges)` passes.
    pub fn current_index(&self) -> f64 {
        current_index(self)
    }
}

/// `(W(α), W'(α))` at the current state: the expected value of one step and then the
/// `α`-optimal local policy, and the probability that this policy ends by collecting `α`
/// (`α = −∞`: never stop). `v` and `p` are workspaces of the run's length.
fn local_pass(run: &CurveRun, alpha: f64, v: &mut [f64], p: &mut [f64]) -> (f64, f64) {
    let step = |u: usize, v: &[f64], p: &[f64]| {
        let node = &run.nodes[u];
        node.next
            .iter()
            .fold((-node.cost, 0.0), |(w, q), &(s, pr)| {
                (w + pr * v[s], q + pr * p[s])
            })
    };
    for u in (run.at + 1..run.nodes.len()).rev() {
        let node = &run.nodes[u];
        let (w, q) = match node.value {
            Some(value) if node.is_complete() => (value, 0.0),
            _ => step(u, v, p),
        };
        (v[u], p[u]) = if alpha >= w { (alpha, 1.0) } else { (w, q) };
    }
    step(run.at, v, p)
}

fn current_index(run: &CurveRun) -> f64 {
    let node = &run.nodes[run.at];
    if node.is_complete() {
        return node
            .value
            .expect("validated: complete states carry a value");
    }
    let n = run.nodes.len();
    let (mut v, mut p) = (vec![0.0; n], vec![0.0; n]);
    // Left of the root: the never-stopping value W(−∞), where d ≥ 0.
    let mut alpha = local_pass(run, f64::NEG_INFINITY, &mut v, &mut p).0;
    for _ in 0..100 {
        let (w, q) = local_pass(run, alpha, &mut v, &mut p);
        let (d, slope) = (w - alpha, q - 1.0);
        if d <= 0.0 || slope >= 0.0 {
            return alpha;
        }
        let next = alpha - d / slope;
        if next <= alpha {
            return alpha;
        }
        alpha = next;
    }
    // Never observed: finish by bisection between the last iterate and the largest value.
    let mut hi = run
        .nodes
        .iter()
        .filter_map(|u| u.value.filter(|_| u.is_complete()))
        .fold(alpha, f64::max);
    for _ in 0..200 {
        let mid = 0.5 * (alpha + hi);
        if mid <= alpha || mid >= hi {
            break;
        }
        if local_pass(run, mid, &mut v, &mut p).0 > mid {
            alpha = mid;
        } else {
            hi = mid;
        }
    }
    alpha
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
