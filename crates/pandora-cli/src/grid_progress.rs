//! Progress of a grid command (`pandora experiment`, `pandora cvs`, `pandora freeze-thaw-bench`):
//! the [`pandora_experiment::Reporter`] of the command line.
//!
//! On a terminal, an `indicatif` bar counts the runs done and the lines are printed above it; on
//! anything else (CI logs, files) the lines go to stderr and there is no bar, so logs never
//! contain control sequences.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// The command line's reporter: a bar on a terminal, lines on stderr.
pub struct GridProgress {
    bar: ProgressBar,
}

impl GridProgress {
    /// A reporter whose bar is drawn only when stderr is a terminal.
    pub fn new() -> Self {
        let bar = if std::io::stderr().is_terminal() {
            let b = ProgressBar::new(0);
            if let Ok(style) = ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta} {msg}",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b
        } else {
            ProgressBar::hidden()
        };
        GridProgress { bar }
    }
}

impl pandora_experiment::Reporter for GridProgress {
    fn note(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    fn start(&self, runs: usize) {
        self.bar.set_length(runs as u64);
        self.bar.set_position(0);
    }

    fn status(&self, message: &str) {
        self.bar.set_message(message.to_string());
    }

    fn run_done(&self) {
        self.bar.inc(1);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
