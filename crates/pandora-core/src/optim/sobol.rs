//! Sobol low-discrepancy points in `[0,1)^d`, plain or Owen-scrambled, in `f64`.
//!
//! Written here rather than taken from a crate: `sobol_burley` returns `f32` (24 bits, too coarse
//! for optimization starts and unable to keep all `2^k` strata apart past `2^24` points), and the
//! generator is short. Direction numbers are Joe & Kuo's (2008) `new-joe-kuo-6.21201` for the
//! first [`MAX_DIM`] dimensions, with 32-bit precision, so up to `2^32` points can be drawn.
//!
//! Points come in Gray-code order (the order of Joe & Kuo and SciPy), computed directly from the
//! index, so any sub-range can be generated independently.
//!
//! **Scrambling** is Owen's nested uniform scrambling realised by hashing: digit `j` of a
//! coordinate is flipped by a pseudo-random bit that is a hash of the seed, the dimension, the
//! depth `j` and the `j` leading digits of the unscrambled coordinate. This is exactly a random
//! nested permutation of the base-2 digit tree, so every property Owen scrambling preserves (each
//! `(t, m, s)`-net stays a net; in particular each 1-D projection of the first `2^k` points has one
//! point in each of the `2^k` intervals) holds for every seed. Below the 32 digits of the net, the
//! remaining 21 bits of the `f64` mantissa are filled from a hash of the whole digit path, as a
//! full Owen scramble of infinite precision would do. Scrambled points lie in `[0, 1)`.

use super::sobol_directions::DIRECTIONS;
use crate::error::{Error, Result};

/// Largest supported dimension.
pub const MAX_DIM: usize = DIRECTIONS.len() + 1;

/// Number of points that can be drawn from one sequence (`2^32`).
pub const MAX_POINTS: u64 = 1 << 32;

const BITS: usize = 32;

/// A Sobol sequence of fixed dimension, optionally Owen-scrambled with a seed.
#[derive(Debug, Clone)]
pub struct Sobol {
    dim: usize,
    /// `dirs[d * 32 + k]`: direction number `k` of dimension `d`, MSB-aligned.
    dirs: Vec<u32>,
    /// Per-dimension scrambling keys, `None` for the plain sequence.
    keys: Option<Vec<u64>>,
}

impl Sobol {
    /// The plain (unscrambled) sequence in dimension `dim` (`1 ..= MAX_DIM`). Its first point is 0.
    pub fn new(dim: usize) -> Result<Self> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::invalid(
                "Sobol dimension",
                format!("must be in 1..={MAX_DIM}, got {dim}"),
            ));
        }
        let mut dirs = vec![0u32; dim * BITS];
        for (k, v) in dirs[..BITS].iter_mut().enumerate() {
            *v = 1u32 << (BITS - 1 - k);
        }
        for d in 1..dim {
            let (poly, m) = DIRECTIONS[d - 1];
            let s = (u16::BITS - poly.leading_zeros() - 1) as usize;
            let v = &mut dirs[d * BITS..(d + 1) * BITS];
            for (k, (vk, &mk)) in v.iter_mut().zip(m).enumerate() {
                *vk = u32::from(mk) << (BITS - 1 - k);
            }
            for k in s..BITS {
                let mut val = v[k - s] ^ (v[k - s] >> s);
                for j in 1..s {
                    if (poly >> (s - j)) & 1 == 1 {
                        val ^= v[k - j];
                    }
                }
                v[k] = val;
            }
        }
        Ok(Self {
            dim,
            dirs,
            keys: None,
        })
    }

    /// The Owen-scrambled sequence in dimension `dim`; the same seed always gives the same points.
    pub fn scrambled(dim: usize, seed: u64) -> Result<Self> {
        let mut s = Self::new(dim)?;
        let base = mix(seed ^ 0x5107_0b01_5eed_0001);
        s.keys = Some(
            (0..dim as u64)
                .map(|d| mix(base.wrapping_add(mix(d.wrapping_add(0x9e37_79b9_7f4a_7c15)))))
                .collect(),
        );
        Ok(s)
    }

    /// The dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether the points are scrambled.
    pub fn is_scrambled(&self) -> bool {
        self.keys.is_some()
    }

    /// Writes point number `index` (0-based) into `out` (length `dim`).
    pub fn point(&self, index: u64, out: &mut [f64]) -> Result<()> {
        if out.len() != self.dim {
            return Err(Error::dim("Sobol point buffer", self.dim, out.len()));
        }
        if index >= MAX_POINTS {
            return Err(Error::invalid(
                "Sobol index",
                format!("must be below 2^32, got {index}"),
            ));
        }
        self.point_unchecked(index as u32, out);
        Ok(())
    }

    /// Writes `count` consecutive points starting at `start` into `out`, row-major
    /// (`count × dim`).
    pub fn fill(&self, start: u64, count: usize, out: &mut [f64]) -> Result<()> {
        let need = count
            .checked_mul(self.dim)
            .ok_or_else(|| Error::invalid("Sobol count", "count × dim overflows"))?;
        if out.len() != need {
            return Err(Error::dim("Sobol output buffer", need, out.len()));
        }
        if start
            .checked_add(count as u64)
            .is_none_or(|end| end > MAX_POINTS)
        {
            return Err(Error::invalid(
                "Sobol range",
                format!("points {start}..{start}+{count} exceed 2^32"),
            ));
        }
        for (r, row) in out.chunks_exact_mut(self.dim.max(1)).enumerate() {
            self.point_unchecked((start + r as u64) as u32, row);
        }
        Ok(())
    }

    /// The first `count` points, row-major (`count × dim`).
    pub fn points(&self, count: usize) -> Result<Vec<f64>> {
        let len = count
            .checked_mul(self.dim)
            .ok_or_else(|| Error::invalid("Sobol count", "count × dim overflows"))?;
        let mut out = vec![0.0; len];
        self.fill(0, count, &mut out)?;
        Ok(out)
    }

    fn point_unchecked(&self, index: u32, out: &mut [f64]) {
        let gray = index ^ (index >> 1);
        for (d, o) in out.iter_mut().enumerate() {
            let v = &self.dirs[d * BITS..(d + 1) * BITS];
            let mut x = 0u32;
            let mut g = gray;
            while g != 0 {
                let k = g.trailing_zeros() as usize;
                x ^= v[k];
                g &= g - 1;
            }
            *o = match &self.keys {
                None => f64::from(x) * (1.0 / 4_294_967_296.0),
                Some(keys) => owen_scramble(x, keys[d]),
            };
        }
    }
}

/// The first `count` Owen-scrambled Sobol points in `[0,1)^dim`, row-major.
pub fn scrambled_sobol(count: usize, dim: usize, seed: u64) -> Result<Vec<f64>> {
    Sobol::scrambled(dim, seed)?.points(count)
}

/// Point `index` of the initial design: one scrambled Sobol sequence per `seed` (random search
/// continues the same sequence).
pub fn design_point(d: usize, index: u64, seed: u64) -> Result<Vec<f64>> {
    let mut x = vec![0.0; d];
    Sobol::scrambled(d, seed)?.point(index, &mut x)?;
    Ok(x)
}

/// SplitMix64 finalizer: a bijective 64-bit mixer with good avalanche.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Nested uniform scrambling of the 32 digits of `x`, then 21 random trailing bits; returns a
/// value in `[0, 1)` with 53 significant bits.
#[inline]
fn owen_scramble(x: u32, key: u64) -> f64 {
    let x = u64::from(x);
    let mut out = 0u64;
    for depth in 0..BITS {
        // The node of the digit tree: the `depth` leading digits, tagged with a marker bit so
        // nodes of different depths never share a hash input.
        let prefix = if depth == 0 { 0 } else { x >> (BITS - depth) };
        let node = prefix | (1u64 << depth);
        let flip = mix(key ^ node.wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 63;
        let bit = ((x >> (BITS - 1 - depth)) & 1) ^ flip;
        out |= bit << (BITS - 1 - depth);
    }
    let tail =
        mix(key.rotate_left(17) ^ (x | (1u64 << BITS)).wrapping_mul(0xd1b5_4a32_d192_ed03)) >> 43;
    ((out << 21) | tail) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_u32(v: f64) -> u64 {
        (v * 4_294_967_296.0) as u64
    }

    #[test]
    fn plain_sequence_matches_joe_kuo_reference() {
        // Reference: SciPy 1.17 `qmc.Sobol(d=1024, scramble=False)`, values times 2^32.
        let expected: [[u64; 4]; 8] = [
            [0, 0, 0, 0],
            [2147483648, 2147483648, 2147483648, 2147483648],
            [3221225472, 1073741824, 1073741824, 1073741824],
            [1073741824, 3221225472, 3221225472, 3221225472],
            [1610612736, 1610612736, 2684354560, 3758096384],
            [3758096384, 3758096384, 536870912, 1610612736],
            [2684354560, 536870912, 3758096384, 2684354560],
            [536870912, 2684354560, 1610612736, 536870912],
        ];
        let s = Sobol::new(1024).unwrap();
        let mut p = vec![0.0; 1024];
        for (i, row) in expected.iter().enumerate() {
            s.point(i as u64, &mut p).unwrap();
            let got: Vec<u64> = p[..4].iter().map(|&v| as_u32(v)).collect();
            assert_eq!(&got[..], &row[..], "row {i}");
        }
        let far: [(u64, usize, [u64; 4]); 4] = [
            (1000, 60, [1916796928, 2587885568, 1111490560, 1916796928]),
            (1000, 1020, [2470445056, 1262485504, 591396864, 3066036224]),
            (4095, 60, [1274019840, 1653604352, 2949644288, 2377121792]),
            (4095, 1020, [888143872, 976224256, 4145020928, 1523580928]),
        ];
        for (i, d0, row) in far {
            s.point(i, &mut p).unwrap();
            let got: Vec<u64> = p[d0..d0 + 4].iter().map(|&v| as_u32(v)).collect();
            assert_eq!(&got[..], &row[..], "row {i} dims {d0}..");
        }
    }

    /// Each 1-D projection of the first 2^k points has exactly one point per interval of width 2^-k.
    fn assert_stratified(pts: &[f64], dim: usize, k: u32) {
        let n = 1usize << k;
        for d in 0..dim {
            let mut seen = vec![false; n];
            for r in 0..n {
                let v = pts[r * dim + d];
                assert!((0.0..1.0).contains(&v), "point {r} dim {d}: {v}");
                let cell = (v * n as f64) as usize;
                assert!(!seen[cell], "dim {d}: two points in cell {cell} of {n}");
                seen[cell] = true;
            }
        }
    }

    #[test]
    fn plain_and_scrambled_points_are_stratified() {
        for k in [1, 4, 10] {
            let n = 1usize << k;
            let plain = Sobol::new(64).unwrap().points(n).unwrap();
            assert_stratified(&plain, 64, k);
            for seed in [0, 1, 12345] {
                let pts = scrambled_sobol(n, 64, seed).unwrap();
                assert_stratified(&pts, 64, k);
            }
        }
        // A large power of two in a few dimensions (also checks the tail bits keep strata apart).
        let pts = scrambled_sobol(1 << 16, 3, 7).unwrap();
        assert_stratified(&pts, 3, 16);
    }

    #[test]
    fn scrambled_first_two_dims_form_a_zero_net() {
        // Dimensions 1 and 2 of Sobol form a (0, m, 2)-net: for every split a + b = m, each box
        // of size 2^-a × 2^-b holds exactly one of the first 2^m points. Owen scrambling keeps it.
        let m = 8u32;
        let n = 1usize << m;
        let pts = scrambled_sobol(n, 2, 99).unwrap();
        for a in 0..=m {
            let b = m - a;
            let mut seen = vec![false; n];
            for r in 0..n {
                let i = (pts[2 * r] * (1u64 << a) as f64) as usize;
                let j = (pts[2 * r + 1] * (1u64 << b) as f64) as usize;
                let cell = (i << b) | j;
                assert!(!seen[cell], "split {a}+{b}: duplicate box");
                seen[cell] = true;
            }
        }
    }

    #[test]
    fn seeds_are_deterministic_and_distinct() {
        let a = scrambled_sobol(64, 5, 42).unwrap();
        let b = scrambled_sobol(64, 5, 42).unwrap();
        let c = scrambled_sobol(64, 5, 43).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let differing = a.iter().zip(&c).filter(|(x, y)| x != y).count();
        assert!(
            differing > 300,
            "only {differing} of 320 coordinates differ"
        );
        // Scrambling moves the plain sequence's 0 point and uses all 53 bits.
        assert_ne!(a[0], 0.0);
        assert!(
            a.iter()
                .any(|v| !((v * 9_007_199_254_740_992.0) as u64).is_multiple_of(2048))
        );
        // fill() on a sub-range agrees with points().
        let s = Sobol::scrambled(5, 42).unwrap();
        let mut tail = vec![0.0; 10 * 5];
        s.fill(54, 10, &mut tail).unwrap();
        assert_eq!(&tail[..], &a[54 * 5..]);
    }

    #[test]
    fn scrambled_mean_is_close_to_half() {
        let n = 1 << 12;
        let pts = scrambled_sobol(n, 16, 3).unwrap();
        for d in 0..16 {
            let mean: f64 = (0..n).map(|r| pts[r * 16 + d]).sum::<f64>() / n as f64;
            assert!((mean - 0.5).abs() < 1e-3, "dim {d}: mean {mean}");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(Sobol::new(0).is_err());
        assert!(Sobol::new(MAX_DIM + 1).is_err());
        assert!(Sobol::new(MAX_DIM).is_ok());
        let s = Sobol::new(3).unwrap();
        assert!(s.point(0, &mut [0.0; 2]).is_err());
        assert!(s.point(MAX_POINTS, &mut [0.0; 3]).is_err());
        assert!(s.fill(MAX_POINTS - 1, 2, &mut [0.0; 6]).is_err());
        assert!(s.fill(0, 2, &mut [0.0; 5]).is_err());
        assert!(s.fill(MAX_POINTS - 2, 2, &mut [0.0; 6]).is_ok());
    }
}
