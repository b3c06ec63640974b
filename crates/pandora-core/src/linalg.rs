//! Dense linear algebra for Gaussian processes, on top of [faer](https://docs.rs/faer).
//!
//! faer was chosen by measurement (see the README's design notes): on this 2-core machine it
//! factorizes a 1000 × 1000 kernel matrix in about 7 ms (nalgebra: 52 ms, OpenBLAS via numpy:
//! 12 ms) and solves 1000 right-hand sides 6–13× faster than nalgebra, in pure Rust. Everything
//! faer-specific is kept in this module so that an upgrade touches one file.
//!
//! Pandora parallelizes across restarts and candidates with rayon, which is faster at the sizes
//! of Bayesian optimization, so the routines here run with `Par::Seq`, except the cubic ones on
//! large matrices called from outside rayon's pool ([`par_for`]): the factorization, the inverse
//! and the triangular solves with many right-hand sides once `n ≥ 512`, where a cost-aware study
//! reaches a thousand observations and one likelihood evaluation is a quarter of a second on one
//! core (n = 2000). faer splits that work over output blocks without changing any sum's order:
//! its results are the same to the bit with any number of threads (checked by
//! `parallel_routines_are_bit_identical_to_sequential`), so decisions do not depend on the
//! machine.

use crate::error::{Error, Result};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt;
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// The smallest order from which [`par_for`] runs the cubic routines on rayon's pool.
const PAR_MIN_N: usize = 512;

/// The parallelism for a cubic routine on an `n × n` factor with `cols` right-hand sides (use
/// `cols = n` for a factorization or an inverse): all of rayon's threads when the work is large
/// (`n ≥ 512`, `cols ≥ 64`) and the caller is not already one of rayon's workers (a fit's
/// parallel starts, the maximization's candidates), sequential otherwise. The results do not
/// depend on it (see the module doc).
pub fn par_for(n: usize, cols: usize) -> Par {
    if n >= PAR_MIN_N && cols >= 64 && rayon::current_thread_index().is_none() {
        Par::rayon(0)
    } else {
        Par::Seq
    }
}

/// How much diagonal jitter [`Cholesky::factor`] may add to a matrix that is not numerically
/// positive definite.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JitterPolicy {
    /// First jitter tried after the plain factorization fails, relative to the mean diagonal.
    pub initial: f64,
    /// Largest jitter tried, relative to the mean diagonal.
    pub max: f64,
    /// Factor by which the jitter grows between attempts.
    pub growth: f64,
}

impl Default for JitterPolicy {
    /// Tries no jitter, then 1e-10, 1e-9, …, 1e-3 times the mean diagonal.
    fn default() -> Self {
        Self {
            initial: 1e-10,
            max: 1e-3,
            growth: 10.0,
        }
    }
}

/// A lower Cholesky factor `L` with `L Lᵀ = A + jitter·I`, that can grow by appended rows.
#[derive(Debug, Clone)]
pub struct Cholesky {
    l: Mat<f64>,
    jitter: f64,
    policy: JitterPolicy,
}

/// Smallest accepted squared pivot relative to the matrix diagonal.
const MIN_PIVOT_REL: f64 = 16.0 * f64::EPSILON;

fn try_factor(a: MatRef<'_, f64>, jitter: f64) -> Option<Mat<f64>> {
    let n = a.nrows();
    let mut l = Mat::from_fn(n, n, |i, j| {
        if i >= j {
            a[(i, j)] + if i == j { jitter } else { 0.0 }
        } else {
            0.0
        }
    });
    let par = par_for(n, n);
    let req = llt::factor::cholesky_in_place_scratch::<f64>(n, par, Default::default());
    let mut buf = MemBuffer::new(req);
    let stack = MemStack::new(&mut buf);
    match llt::factor::cholesky_in_place(
        l.as_mut(),
        Default::default(),
        par,
        stack,
        Default::default(),
    ) {
        Ok(_) => {
            // The routine only touches the lower triangle; make the upper one exactly zero.
            for j in 1..n {
                for i in 0..j {
                    l[(i, j)] = 0.0;
                }
            }
            // Reject factors whose pivots are lost in rounding (e.g. exact duplicates without
            // noise): such a factor "succeeds" but its solves are dominated by rounding error.
            let ok = (0..n).all(|i| {
                let p = l[(i, i)];
                let diag = a[(i, i)].abs() + jitter;
                p.is_finite() && p > 0.0 && p * p >= MIN_PIVOT_REL * diag
            });
            ok.then_some(l)
        }
        Err(_) => None,
    }
}

impl Cholesky {
    /// Factorizes the symmetric matrix `a` (only its lower triangle is read). If the plain
    /// factorization fails, retries with growing diagonal jitter under `policy`; the jitter used is
    /// reported by [`Cholesky::jitter`]. Errors if `a` is not square or not finite, or if even the
    /// largest jitter fails.
    pub fn factor(a: MatRef<'_, f64>, policy: JitterPolicy) -> Result<Self> {
        let n = a.nrows();
        if a.ncols() != n {
            return Err(Error::dim("Cholesky: columns", n, a.ncols()));
        }
        for j in 0..n {
            for i in j..n {
                if !a[(i, j)].is_finite() {
                    return Err(Error::invalid(
                        "matrix",
                        format!("non-finite entry at ({i}, {j})"),
                    ));
                }
            }
        }
        if let Some(l) = try_factor(a, 0.0) {
            return Ok(Self {
                l,
                jitter: 0.0,
                policy,
            });
        }
        let scale = if n == 0 {
            1.0
        } else {
            ((0..n).map(|i| a[(i, i)].abs()).sum::<f64>() / n as f64).max(f64::MIN_POSITIVE)
        };
        let mut rel = policy.initial;
        while rel <= policy.max * (1.0 + 1e-12) {
            let jitter = rel * scale;
            if let Some(l) = try_factor(a, jitter) {
                return Ok(Self { l, jitter, policy });
            }
            rel *= policy.growth.max(1.5);
        }
        Err(Error::NotPositiveDefinite {
            jitter: policy.max * scale,
        })
    }

    /// Size `n` of the factor.
    pub fn n(&self) -> usize {
        self.l.nrows()
    }

    /// The diagonal jitter that was added to the factorized matrix (0 if none was needed).
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The lower-triangular factor `L`.
    pub fn l(&self) -> MatRef<'_, f64> {
        self.l.as_ref()
    }

    /// `log det(A + jitter·I) = 2 Σ log L_ii`.
    pub fn log_det(&self) -> f64 {
        2.0 * (0..self.n()).map(|i| self.l[(i, i)].ln()).sum::<f64>()
    }

    /// Appends `m` rows and columns to the factorized matrix in `O(n² m)`: `cross` is the `n × m`
    /// block `A₁₂` between the old and the new points and `block` the `m × m` block `A₂₂` of the new
    /// points (lower triangle read). The factor's jitter is added to the new diagonal too; if a new
    /// pivot is still not positive (e.g. an exact duplicate without noise), jitter escalates for the
    /// new block only, following the factor's policy. Returns an error (leaving the factor
    /// unchanged) if that fails as well.
    pub fn append(&mut self, cross: MatRef<'_, f64>, block: MatRef<'_, f64>) -> Result<()> {
        *self = self.appended(cross, block)?;
        Ok(())
    }

    /// The factor of the bordered matrix (see [`Cholesky::append`]) as a new factor, leaving
    /// `self` unchanged (no copy of `self` is made first).
    pub fn appended(&self, cross: MatRef<'_, f64>, block: MatRef<'_, f64>) -> Result<Self> {
        let n = self.n();
        let m = block.nrows();
        if cross.nrows() != n {
            return Err(Error::dim("Cholesky::append: cross rows", n, cross.nrows()));
        }
        if cross.ncols() != m || block.ncols() != m {
            return Err(Error::dim(
                "Cholesky::append: new columns",
                m,
                cross.ncols(),
            ));
        }
        // L21ᵀ = L⁻¹ A12.
        let mut l12 = cross.to_owned();
        solve_lower_triangular_in_place(self.l.as_ref(), l12.as_mut(), Par::Seq);
        // Schur complement S = A22 − L21 L21ᵀ.
        let mut s = Mat::from_fn(m, m, |i, j| block[(i.max(j), i.min(j))]);
        matmul(
            s.as_mut(),
            Accum::Add,
            l12.transpose(),
            l12.as_ref(),
            -1.0,
            Par::Seq,
        );
        let scale = ((0..m).map(|i| block[(i, i)].abs()).sum::<f64>() / m.max(1) as f64)
            .max(f64::MIN_POSITIVE);
        let mut extra = self.jitter;
        let mut rel = self.policy.initial;
        let l22 = loop {
            if let Some(l22) = try_factor(s.as_ref(), extra) {
                break l22;
            }
            if rel > self.policy.max * (1.0 + 1e-12) {
                return Err(Error::NotPositiveDefinite { jitter: extra });
            }
            extra = self.jitter.max(rel * scale);
            rel *= self.policy.growth.max(1.5);
        };
        let mut l = Mat::zeros(n + m, n + m);
        l.as_mut()
            .submatrix_mut(0, 0, n, n)
            .copy_from(self.l.as_ref());
        l.as_mut()
            .submatrix_mut(n, 0, m, n)
            .copy_from(l12.transpose());
        l.as_mut().submatrix_mut(n, n, m, m).copy_from(l22.as_ref());
        Ok(Self {
            l,
            jitter: self.jitter,
            policy: self.policy,
        })
    }

    /// Solves `L X = B` in place.
    pub fn solve_lower_in_place(&self, rhs: MatMut<'_, f64>) {
        let par = par_for(self.n(), rhs.ncols());
        solve_lower_triangular_in_place(self.l.as_ref(), rhs, par);
    }

    /// Solves `Lᵀ X = B` in place.
    pub fn solve_upper_in_place(&self, rhs: MatMut<'_, f64>) {
        let par = par_for(self.n(), rhs.ncols());
        solve_upper_triangular_in_place(self.l.transpose(), rhs, par);
    }

    /// Solves `(L Lᵀ) X = B` in place.
    pub fn solve_in_place(&self, mut rhs: MatMut<'_, f64>) {
        self.solve_lower_in_place(rhs.as_mut());
        self.solve_upper_in_place(rhs);
    }

    /// Solves `(L Lᵀ) x = b` for one vector.
    pub fn solve_vec(&self, b: &[f64]) -> Vec<f64> {
        let mut m = Mat::from_fn(b.len(), 1, |i, _| b[i]);
        self.solve_in_place(m.as_mut());
        (0..b.len()).map(|i| m[(i, 0)]).collect()
    }

    /// The full symmetric inverse `(L Lᵀ)⁻¹`.
    pub fn inverse(&self) -> Mat<f64> {
        let n = self.n();
        let mut out = self.inverse_lower();
        for j in 1..n {
            for i in 0..j {
                out[(i, j)] = out[(j, i)];
            }
        }
        out
    }
}

impl Cholesky {
    /// The lower triangle (with the diagonal) of `(L Lᵀ)⁻¹`; the strict upper triangle is
    /// unspecified. For callers that read one triangle only (the likelihood gradient): the
    /// `O(n²)` strided copy of [`Cholesky::inverse`] is skipped.
    pub fn inverse_lower(&self) -> Mat<f64> {
        let n = self.n();
        let mut out = Mat::zeros(n, n);
        let par = par_for(n, n);
        let req = llt::inverse::inverse_scratch::<f64>(n, par);
        let mut buf = MemBuffer::new(req);
        let stack = MemStack::new(&mut buf);
        llt::inverse::inverse(out.as_mut(), self.l.as_ref(), par, stack);
        out
    }
}

/// Solves `L X = B` in place for a lower-triangular `L` (sequential).
pub fn solve_lower(l: MatRef<'_, f64>, rhs: MatMut<'_, f64>) {
    solve_lower_triangular_in_place(l, rhs, Par::Seq);
}

/// `C = A Bᵀ`-style helper: `dst ← beta·dst + alpha·lhs·rhs` with faer's sequential matmul.
pub fn gemm(
    dst: MatMut<'_, f64>,
    accumulate: bool,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    alpha: f64,
) {
    let accum = if accumulate {
        Accum::Add
    } else {
        Accum::Replace
    };
    matmul(dst, accum, lhs, rhs, alpha, Par::Seq);
}

/// `dst ← lhs · rhs` where `lhs` is lower triangular (`upper = false`) or upper triangular
/// (`upper = true`); only that triangle of `lhs` is read, halving the work of a dense product.
pub fn trmm(dst: MatMut<'_, f64>, lhs: MatRef<'_, f64>, upper: bool, rhs: MatRef<'_, f64>) {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul as tri_matmul};
    let structure = if upper {
        BlockStructure::TriangularUpper
    } else {
        BlockStructure::TriangularLower
    };
    tri_matmul(
        dst,
        BlockStructure::Rectangular,
        Accum::Replace,
        lhs,
        structure,
        rhs,
        BlockStructure::Rectangular,
        1.0,
        Par::Seq,
    );
}

/// Rows per block of [`padded_trmm`]. Fixed, so that results never depend on the machine.
const PADDED_BLOCK: usize = 96;

/// `dst ← L · rhs` (`transpose = false`) or `dst ← Lᵀ · rhs` (`transpose = true`) for a
/// lower-triangular `L` **stored with exact zeros above its diagonal** (as an explicit inverse
/// `L⁻¹` is, see [`zero_upper`]).
///
/// The product runs as row blocks of dense matrix products that skip the zero blocks: row block
/// `I = [i₀, i₁)` of `L · rhs` is `L[I, 0..i₁] · rhs[0..i₁]`, and of `Lᵀ · rhs` it is
/// `L[i₀..n, I]ᵀ · rhs[i₀..n]`. Only the diagonal blocks' zeros are multiplied (`n·b/2` of the
/// `n²/2` products, `b` = 96), and every block runs in the dense kernel. faer's triangular
/// product ([`trmm`]) copies each diagonal block first; measured side by side (one core, f64,
/// `m` right-hand columns) the padded form took 0.70× its time at `n = 600, m = 256`, 0.45–0.5×
/// at `n = 1000` and 0.55–0.75× at `n = 2000`. The sums run in another order than [`trmm`]'s
/// (agreement to rounding, about 1e-15 relative).
pub fn padded_trmm(
    dst: MatMut<'_, f64>,
    l: MatRef<'_, f64>,
    transpose: bool,
    rhs: MatRef<'_, f64>,
) {
    let n = l.nrows();
    let mut dst = dst;
    let mut i0 = 0;
    while i0 < n {
        let i1 = (i0 + PADDED_BLOCK).min(n);
        let rows = dst.as_mut().subrows_mut(i0, i1 - i0);
        if transpose {
            let lhs = l.submatrix(i0, i0, n - i0, i1 - i0).transpose();
            gemm(rows, false, lhs, rhs.subrows(i0, n - i0), 1.0);
        } else {
            gemm(
                rows,
                false,
                l.submatrix(i0, 0, i1 - i0, i1),
                rhs.subrows(0, i1),
                1.0,
            );
        }
        i0 = i1;
    }
}

/// Sets the entries above the diagonal of `m` to exactly zero (for [`padded_trmm`]).
pub fn zero_upper(mut m: MatMut<'_, f64>) {
    for j in 1..m.ncols() {
        for i in 0..j.min(m.nrows()) {
            m[(i, j)] = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn random_spd(n: usize, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let b = Mat::from_fn(n, n, |_, _| rng.random::<f64>() - 0.5);
        let mut a = Mat::zeros(n, n);
        gemm(a.as_mut(), false, b.as_ref(), b.transpose(), 1.0);
        for i in 0..n {
            a[(i, i)] += 0.5;
        }
        a
    }

    fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
        let mut m: f64 = 0.0;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                m = m.max((a[(i, j)] - b[(i, j)]).abs());
            }
        }
        m
    }

    #[test]
    fn factor_reconstructs_and_solves() {
        let a = random_spd(30, 1);
        let c = Cholesky::factor(a.as_ref(), JitterPolicy::default()).unwrap();
        assert_eq!(c.jitter(), 0.0);
        let mut llt = Mat::zeros(30, 30);
        gemm(llt.as_mut(), false, c.l(), c.l().transpose(), 1.0);
        assert!(max_abs_diff(llt.as_ref(), a.as_ref()) < 1e-12);
        let inv = c.inverse();
        let mut eye = Mat::zeros(30, 30);
        gemm(eye.as_mut(), false, a.as_ref(), inv.as_ref(), 1.0);
        assert!(max_abs_diff(eye.as_ref(), Mat::<f64>::identity(30, 30).as_ref()) < 1e-10);
        let b: Vec<f64> = (0..30).map(|i| (i as f64).sin()).collect();
        let x = c.solve_vec(&b);
        for i in 0..30 {
            let ax: f64 = (0..30).map(|j| a[(i, j)] * x[j]).sum();
            assert!((ax - b[i]).abs() < 1e-11);
        }
    }

    #[test]
    fn append_equals_refactorization() {
        let a = random_spd(40, 2);
        for (n0, m) in [(25, 1), (25, 15), (0, 40), (39, 1)] {
            let mut c =
                Cholesky::factor(a.as_ref().submatrix(0, 0, n0, n0), JitterPolicy::default())
                    .unwrap();
            c.append(
                a.as_ref().submatrix(0, n0, n0, m),
                a.as_ref().submatrix(n0, n0, m, m),
            )
            .unwrap();
            let full = Cholesky::factor(
                a.as_ref().submatrix(0, 0, n0 + m, n0 + m),
                JitterPolicy::default(),
            )
            .unwrap();
            assert!(max_abs_diff(c.l(), full.l()) < 1e-12, "n0={n0} m={m}");
            assert!((c.log_det() - full.log_det()).abs() < 1e-10);
        }
    }

    #[test]
    fn duplicate_rows_get_jitter_instead_of_failing() {
        // Rank-deficient: two identical points under an RBF kernel and no noise.
        let pts: [f64; 4] = [0.1, 0.5, 0.5, 0.9];
        let a = Mat::from_fn(4, 4, |i, j| (-0.5 * (pts[i] - pts[j]).powi(2) / 0.04).exp());
        let c = Cholesky::factor(a.as_ref(), JitterPolicy::default()).unwrap();
        assert!(c.jitter() > 0.0 && c.jitter() <= 1e-3);
        assert!(c.log_det().is_finite());
        // Appending another duplicate escalates jitter for the new block only.
        let mut c2 =
            Cholesky::factor(a.as_ref().submatrix(0, 0, 2, 2), JitterPolicy::default()).unwrap();
        c2.append(
            a.as_ref().submatrix(0, 2, 2, 1),
            a.as_ref().submatrix(2, 2, 1, 1),
        )
        .unwrap();
        assert!(c2.l()[(2, 2)] > 0.0);
    }

    #[test]
    fn triangular_products_match_dense() {
        let a = random_spd(20, 4);
        let c = Cholesky::factor(a.as_ref(), JitterPolicy::default()).unwrap();
        let b = random_spd(20, 5);
        let b = b.as_ref().submatrix(0, 0, 20, 7);
        let mut dense = Mat::zeros(20, 7);
        let mut tri = Mat::zeros(20, 7);
        gemm(dense.as_mut(), false, c.l(), b, 1.0);
        trmm(tri.as_mut(), c.l(), false, b);
        assert!(max_abs_diff(dense.as_ref(), tri.as_ref()) < 1e-13);
        gemm(dense.as_mut(), false, c.l().transpose(), b, 1.0);
        trmm(tri.as_mut(), c.l().transpose(), true, b);
        assert!(max_abs_diff(dense.as_ref(), tri.as_ref()) < 1e-13);
    }

    /// Bits of every entry of a matrix, column by column.
    fn bits(m: MatRef<'_, f64>) -> Vec<u64> {
        (0..m.ncols())
            .flat_map(|j| (0..m.nrows()).map(move |i| m[(i, j)].to_bits()))
            .collect()
    }

    /// The routines [`par_for`] runs on rayon's pool give the same bits as on one thread: called
    /// from outside the pool (parallel from `n = 512`) and from inside a one-thread pool
    /// (sequential), and faer's factorization with 3 tasks against `Par::Seq`. A decision must
    /// not depend on the machine's core count.
    #[test]
    fn parallel_routines_are_bit_identical_to_sequential() {
        let seq = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for (n, seed) in [(511, 1), (512, 2), (777, 3), (1100, 4)] {
            let a = random_spd(n, seed);
            assert_eq!(par_for(n, n) != Par::Seq, n >= PAR_MIN_N);
            assert_eq!(seq.install(|| par_for(n, n)), Par::Seq);
            let run = || {
                let c = Cholesky::factor(a.as_ref(), JitterPolicy::default()).unwrap();
                let inv = c.inverse_lower();
                let mut rhs = Mat::from_fn(n, 100, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
                c.solve_in_place(rhs.as_mut());
                (bits(c.l.as_ref()), bits(inv.as_ref()), bits(rhs.as_ref()))
            };
            let parallel = run();
            let sequential = seq.install(run);
            assert!(parallel == sequential, "n = {n}");
        }
        // Thread-count independence of faer's own split.
        let a = random_spd(1100, 5);
        let factor = |par: Par| {
            let mut l = a.clone();
            let req = llt::factor::cholesky_in_place_scratch::<f64>(1100, par, Default::default());
            let mut buf = MemBuffer::new(req);
            llt::factor::cholesky_in_place(
                l.as_mut(),
                Default::default(),
                par,
                MemStack::new(&mut buf),
                Default::default(),
            )
            .unwrap();
            bits(l.as_ref())
        };
        assert!(factor(Par::rayon(3)) == factor(Par::Seq));
    }

    /// The padded product equals the dense one on sizes around the block size (one block, a
    /// partial last block, several blocks) with garbage written first into the destination.
    #[test]
    fn padded_triangular_products_match_dense() {
        for n in [1, 5, 95, 96, 97, 200, 300] {
            let a = random_spd(n, 40 + n as u64);
            let c = Cholesky::factor(a.as_ref(), JitterPolicy::default()).unwrap();
            let mut l = c.l().to_owned();
            zero_upper(l.as_mut());
            let b = Mat::from_fn(n, 9, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0);
            for transpose in [false, true] {
                let lhs = if transpose { l.transpose() } else { l.as_ref() };
                let mut dense = Mat::zeros(n, 9);
                gemm(dense.as_mut(), false, lhs, b.as_ref(), 1.0);
                let mut padded = Mat::from_fn(n, 9, |_, _| f64::NAN);
                padded_trmm(padded.as_mut(), l.as_ref(), transpose, b.as_ref());
                let scale = 1.0 + dense.norm_max();
                assert!(
                    max_abs_diff(dense.as_ref(), padded.as_ref()) < 1e-13 * scale,
                    "n = {n}, transpose = {transpose}"
                );
            }
        }
    }

    #[test]
    fn rejects_bad_input() {
        let a = Mat::from_fn(2, 2, |i, j| if i == j { f64::NAN } else { 0.0 });
        assert!(Cholesky::factor(a.as_ref(), JitterPolicy::default()).is_err());
        let neg = Mat::from_fn(2, 2, |i, j| if i == j { -1.0 } else { 0.0 });
        assert!(matches!(
            Cholesky::factor(neg.as_ref(), JitterPolicy::default()),
            Err(Error::NotPositiveDefinite { .. })
        ));
    }
}
