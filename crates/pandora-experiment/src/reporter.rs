//! Where the harness tells a person what it is doing.
//!
//! The harness never prints: a run that fails, a run another process is writing, a calibration
//! that starts, the number of figure files written are each one line given to a [`Reporter`],
//! and the progress of a grid (how many runs are done) goes to its progress methods. The
//! command-line tool draws a progress bar on a terminal and writes the lines to stderr; the
//! Python package writes them to `sys.stderr` or drops them; tests use [`Quiet`].
//!
//! Methods take `&self` and the trait needs `Sync`: runs report from rayon's worker threads.

/// Receives the harness's lines and progress.
pub trait Reporter: Sync {
    /// One line for the person watching (no trailing newline).
    fn note(&self, line: &str);
    /// A grid of `runs` runs starts.
    fn start(&self, runs: usize) {
        let _ = runs;
    }
    /// What the grid is doing now, when it is not running runs (empty: nothing to say).
    fn status(&self, message: &str) {
        let _ = message;
    }
    /// One more run of the grid is done (carried out, skipped, failed).
    fn run_done(&self) {}
    /// The grid has ended: clear the progress display.
    fn finish(&self) {}
}

/// Drops every line.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Reporter for Quiet {
    fn note(&self, _line: &str) {}
}

/// Writes every line to stderr; no progress display.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stderr;

impl Reporter for Stderr {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}
