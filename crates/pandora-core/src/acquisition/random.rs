//! Random search: the design sequence continued.
//!
//! ## Definition
//!
//! The `random` acquisition proposes point `k` of the run's scrambled Sobol design sequence for
//! the `k`-th trial handed out (observed or pending), the sequence whose first points are the
//! initial design. Its points are quasi-random (low discrepancy) rather than independent
//! uniforms, which is the stronger baseline and makes parallel workers receive distinct points.
//!
//! ## Algorithm
//!
//! [`RandomSearch`] needs no model ([`Needs::Nothing`]): the step fits nothing and records the
//! point as phase `random`, with no acquisition value (NaN).
//!
//! ## Degenerate cases
//!
//! The sequence holds `2^32` points per seed (see [`crate::optim::sobol`]); past it the step
//! errors.

use super::acquirer::{Acquired, Acquirer, Needs, StepInputs};
use crate::error::Result;
use crate::optim::sobol::design_point;

/// The `random` acquisition's step (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomSearch;

impl Acquirer for RandomSearch {
    fn needs(&self) -> Needs {
        Needs::Nothing
    }

    fn acquire(&self, s: &StepInputs<'_>) -> Result<Acquired> {
        let x = design_point(s.d, s.design_index, s.design_seed)?;
        Ok(Acquired::point(x, f64::NAN))
    }
}
