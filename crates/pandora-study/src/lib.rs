//! # pandora-study
//!
//! Studies and trials: search spaces mapped to the unit cube, the ask/tell loop over the BO step
//! of `pandora-core`, budgets in cost units, and persistent storage (SQLite embedded by default).
//!
//! Data flows one way: a [`space::SearchSpace`] encodes user parameters to `[0,1]^d`; the
//! [`study::Study`] reads the trials from a [`storage::Storage`], asks `pandora_core::policy` for the
//! next point on a snapshot and claims it under the storage's lock ([`claim`]: no two workers
//! receive the same trial), stores it as a running trial, and records the outcome on `tell`. [`optimize()`] is the worker loop over
//! ask and tell (`pandora run`'s), with the study's configured objective ([`ConfigObjective`]) or
//! any [`Objective`].

pub mod claim;
pub mod command;
pub mod config;
pub mod csv;
pub mod cvs;
pub mod error;
pub mod export;
pub mod fidelity;
pub mod optimize;
pub mod redact;
pub mod report;
pub mod shutdown;
pub mod space;
pub mod storage;
pub mod study;
pub mod trial;

pub use claim::{AskTiming, ClaimPath};
pub use config::StudyConfig;
pub use error::{Error, Result};
pub use optimize::{ConfigObjective, Objective, Optimized, optimize};
pub use report::Report;
pub use study::{Ask, Finished, LateOutcome, Recorded, StoppingStatus, Study, Summary, TimeSpent};
pub use trial::{NewTrial, Outcome, StepOutcome, StepReport, Told, Trial, TrialCounts, TrialState};
