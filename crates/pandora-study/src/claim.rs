//! Deciding outside the lock: decide on a snapshot, claim briefly.
//!
//! # Definition
//!
//! A study shared by many workers must never hand the same trial to two of them, and each
//! decision must see every trial pending when it is handed out. Holding the study's lock
//! ([`crate::storage::Storage::ask_with`]) for the whole decision gives that, but serializes the
//! model fits: with `W` workers an ask waits for up to `W - 1` fits. [`crate::Study::ask`]
//! instead *decides on a snapshot and claims briefly*:
//!
//! 1. read the trials and the study state without the lock ([`crate::storage::Storage::snapshot`]);
//! 2. decide on them (fit and maximize, exactly as under the lock);
//! 3. take the lock, re-read the trials and the state, and
//!    * if nothing that a decision reads has changed ([`unchanged`]), take the decision as it
//!      is ([`ClaimPath::Unchanged`]: the single-worker case, where the claim costs one read);
//!    * else, if the decision is a model step that is still valid, take it
//!      ([`ClaimPath::Revalidated`]). Valid means: no stop or finish recorded in the state
//!      meanwhile; the budget gates of the driver pass on the trials *now*
//!      ([`pandora_core::run::driver::Run::still_admits`]: trials left, budget left with the
//!      pending trials' known costs, the proposal's own cost); and the point is at least
//!      [`PENDING_EXCLUSION_RADIUS`] from every trial running now and every trial handed out
//!      since the snapshot, in the proposal space ([`near_taken`]);
//!    * else, if only the point is refused (taken meanwhile), take the best of the decision's
//!      *runner-ups* that is valid ([`ClaimPath::RunnerUp`]): the other local optima and best
//!      raw samples of the same maximization, pairwise at least the exclusion radius apart
//!      ([`pandora_core::optim::runners_up`], at most 7, kept by the pointwise acquisitions),
//!      re-scored on the decision's model with the trials handed out since the snapshot
//!      fantasized as pending ([`pandora_core::policy::StepModels::rescore`]) and taken best
//!      first, each checked as the point is (exclusion and budget gates with its own predicted
//!      cost); the trial records its re-scored value and the pending trials it saw;
//!    * else, if the decision needed no model (initial design, random search, a finish), decide
//!      again under the lock (it costs no fit);
//!    * else release the lock and start over from 1 ([`ClaimPath::Retried`]), at most
//!      [`OPTIMISTIC_ATTEMPTS`] times; then decide under the lock as before
//!      ([`ClaimPath::Locked`]).
//!
//! # Guarantees
//!
//! * No trial is handed out twice: the trial is inserted under the lock with the next number.
//! * No two running trials are closer than the exclusion radius, unless the decision under the
//!   lock itself places one there (when the pending balls cover the space, see
//!   `pandora_core::policy`): a claimed point is checked against every running trial, and
//!   against the trials handed out since its snapshot even if they are told already (so a point
//!   another worker evaluated meanwhile is not evaluated again).
//! * The budget, `max_trials` and a recorded stop hold exactly as before: they are checked on the
//!   trials and state read under the lock.
//! * A decision taken is one the lock-held protocol could have made: on the snapshot's trials,
//!   with the trials handed out meanwhile pending and not excluded by it checked against it, and
//!   the trials told meanwhile seen as still running (as if their tells came just after this
//!   ask). The stopping rule's check is the one made on the snapshot.
//!   A runner-up is, among the points kept from the snapshot's maximization and outside the
//!   balls of the points handed out meanwhile, the best on the snapshot's model with those
//!   points fantasized as pending: what the lock-held protocol, restricted to those candidates,
//!   would choose on the snapshot's hyperparameters.
//! * With one worker the snapshot is the state at the claim, so the decision and the stored
//!   state are those of the lock-held protocol, bit for bit: a resumed study continues the same
//!   way.
//!
//! # Seeds and replay
//!
//! Workers that read one snapshot see the same trials, so the same seed (a function of the
//! study's seed and the number of trials) would give them the same maximization. When trials are
//! pending (never the case for a lone worker that tells before it asks again), a snapshot study
//! folds the asking worker's name into the seed ([`worker_salt`]); the name is stored with the
//! trial it gets. The number of pending trials cannot serve: every reader of one snapshot sees
//! the same number. (Workers that read a snapshot with *nothing* pending still decide alike;
//! the runner-ups settle that case.) What is replayable: an ask's decision is a function of the
//! trials and study state it reads, the configuration and, with trials pending, the worker's
//! name, so a study resumed by any process after its workers stopped (nothing pending) continues
//! exactly as an uninterrupted one with the same stored trials would. Which snapshot a past
//! concurrent decision read is not stored, so those decisions are not re-derived from the
//! records.
//!
//! # What is shared
//!
//! The study state stores the last fit's hyperparameters (the warm start of the next fit). The
//! snapshot carries them, so every worker (a fresh process too) warm-starts from the study's
//! latest model. A claimed decision stores its own hyperparameters; an automatic stopping λ
//! chosen by another worker meanwhile is kept ([`merge_state`]).
//!
//! # Degenerate cases
//!
//! A `[cvs]` or `[fidelity]` study decides under the lock (its decisions resume paused trials
//! and follow control-set schedules that a snapshot cannot check cheaply). A snapshot decision
//! that fails (e.g. a fit error) is returned as the error it is, as under the lock.
//!
//! # References
//!
//! Optimistic concurrency control: H. T. Kung and J. T. Robinson, "On optimistic methods for
//! concurrency control", ACM TODS 6(2), 1981 (read phase, validation phase, write phase).

use crate::trial::{Decided, Trial, TrialState};
use pandora_core::optim::domain::near_pending;
use pandora_core::run::record::StudyState;
use serde::{Deserialize, Serialize};

pub use pandora_core::policy::PENDING_EXCLUSION_RADIUS;

/// How many snapshot decisions an ask tries before it decides under the lock.
pub const OPTIMISTIC_ATTEMPTS: u32 = 3;

/// How an ask got its answer ([`AskTiming::path`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimPath {
    /// Nothing had changed between the snapshot and the claim: the decision was taken as made.
    Unchanged,
    /// Trials were handed out or told meanwhile, and the decision was still valid.
    Revalidated,
    /// The decision's point was taken meanwhile; the best runner-up still valid was taken.
    RunnerUp,
    /// A snapshot decision was no longer valid; a later attempt's was taken.
    Retried,
    /// Decided under the lock: a study kind that always does, a decision that needed no model,
    /// or the attempts ran out.
    #[default]
    Locked,
}

/// Where one ask's wall-clock time went ([`crate::Study::last_ask`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AskTiming {
    /// From the call to the answer.
    pub total_s: f64,
    /// Deciding (model fits, acquisition maximization, stopping checks), in or out of the lock.
    pub compute_s: f64,
    /// Waiting for the lock: from asking for it until the decision or the claim started under
    /// it (this includes the locked read of the trials).
    pub wait_s: f64,
    /// Holding the lock after that: checking the claim or deciding, inserting, committing.
    pub held_s: f64,
    /// Snapshot decisions made (0 for a study that decides under the lock).
    pub attempts: u32,
    /// How the answer was reached.
    pub path: ClaimPath,
}

impl AskTiming {
    /// Adds one use of the lock: asked for at `asked`, held from `locked` (if it was) to now.
    pub fn add_lock(&mut self, asked: std::time::Instant, locked: Option<std::time::Instant>) {
        match locked {
            Some(l) => {
                self.wait_s += l.duration_since(asked).as_secs_f64();
                self.held_s += l.elapsed().as_secs_f64();
            }
            None => self.wait_s += asked.elapsed().as_secs_f64(),
        }
    }
}

/// What a snapshot study folds into a decision's seed for `worker` when `pending` trials are
/// running (see the module docs): 0 when none is, so a lone worker decides as under the lock;
/// else a 64-bit FNV-1a hash of the name, mixed (SplitMix64's finalizer) so that names differing
/// in one character give unrelated seeds. Stable across platforms and Rust versions.
pub fn worker_salt(worker: &str, pending: usize) -> u64 {
    if pending == 0 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in worker.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// Whether the trials and state read at the claim are, for a decision, the snapshot's: the same
/// trials with the same state, point, outcome and steps, and the same study state. Heartbeats
/// and workers do not count.
pub fn unchanged(
    snap: &[Trial],
    snap_state: &serde_json::Value,
    now: &[Trial],
    state: &serde_json::Value,
) -> bool {
    snap.len() == now.len()
        && snap_state == state
        && snap.iter().zip(now).all(|(a, b)| same_for_decision(a, b))
}

fn same_for_decision(a: &Trial, b: &Trial) -> bool {
    a.number == b.number
        && a.state == b.state
        && a.x == b.x
        && a.objective.map(f64::to_bits) == b.objective.map(f64::to_bits)
        && a.cost.map(f64::to_bits) == b.cost.map(f64::to_bits)
        && a.step_to == b.step_to
        && a.steps.len() == b.steps.len()
}

/// Whether `x` lies within [`PENDING_EXCLUSION_RADIUS`] of a trial of `trials` that is running
/// or was handed out since the snapshot (numbered `since` and up; told meanwhile or not: a point
/// another worker took after the snapshot is not taken again).
pub fn near_taken(x: &[f64], trials: &[Trial], since: usize) -> bool {
    let taken: Vec<f64> = trials
        .iter()
        .filter(|t| t.state == TrialState::Running || t.number >= since as u64)
        .filter(|t| t.x.len() == x.len())
        .flat_map(|t| t.x.iter().copied())
        .collect();
    near_pending(x, &taken)
}

/// The state to store with a claimed decision: the decision's own (`ours`: its fit's
/// hyperparameters, B-MS-EI's carry, its stopping λ) over the state read at the claim (`now`),
/// except that an automatic stopping λ already chosen (by another worker meanwhile) is kept.
pub fn merge_state(now: &StudyState, mut ours: StudyState) -> StudyState {
    if now.stopping.is_some() {
        ours.stopping = now.stopping.clone();
    }
    ours
}

/// Whether a snapshot decision is a model step (the only kind worth keeping across a change:
/// the others cost no fit and are decided again under the lock).
pub fn is_model_step(decided: &Decided) -> bool {
    matches!(decided, Decided::Trial(t, _) if t.decision.phase == pandora_core::policy::Phase::Model)
}
