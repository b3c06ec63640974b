//! CPU clocks: the CPU time of the calling thread (what a run's steps are timed with) and of the
//! whole process (what `pandora bench` reports beside wall time).
//!
//! **Why CPU time.** Wall time grows with the load of the machine (other jobs, the other runs of
//! the grid on the same cores); the CPU time a thread or process was given does not, to first
//! order. Plans (`pandora experiment plan`, `pandora cvs plan`) estimate CPU-hours from it.
//!
//! **Which threads it sees.** [`thread_seconds`] counts the calling thread only
//! (`CLOCK_THREAD_CPUTIME_ID`). A BO step is not always confined to its thread: the
//! hyperparameter restarts and the acquisition restarts are rayon parallel loops, which other
//! workers of the pool take part in (and a worker waiting for them runs other tasks of the pool
//! meanwhile, whole runs of the grid included). The lockstep restarts (from 64 observations on)
//! use the same pool, and faer runs sequentially inside it (`linalg::par_for`). So a step's
//! thread CPU time is its whole CPU time exactly when it runs on a rayon pool of one thread; see
//! [`exact_here`] and the trace fields that use it. (Until the lockstep restarts were driven
//! from one thread, they ran on OS threads of their own and steps with 256 observations or more
//! were read on their wall time.)
//!
//! **Where unavailable** (not Linux, Android, macOS, iOS or FreeBSD), or if the clock call
//! fails, the functions return `None` and callers fall back to wall time.

use anyhow::Context;

/// The two clocks read here.
#[derive(Debug, Clone, Copy)]
enum Clock {
    /// The calling thread's CPU time.
    Thread,
    /// The CPU time of every thread of the process.
    Process,
}

/// Reads `clock` in seconds.
#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
))]
fn read(clock: Clock) -> Option<f64> {
    let id = match clock {
        Clock::Thread => libc::CLOCK_THREAD_CPUTIME_ID,
        Clock::Process => libc::CLOCK_PROCESS_CPUTIME_ID,
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given, which lives on this frame.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// No CPU clock on this platform.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
)))]
fn read(_: Clock) -> Option<f64> {
    None
}

/// CPU seconds (user + system) the calling thread has used so far; `None` where unavailable.
pub fn thread_seconds() -> Option<f64> {
    read(Clock::Thread)
}

/// CPU seconds (user + system) of every thread of this process so far; `None` where
/// unavailable.
pub fn process_seconds() -> Option<f64> {
    read(Clock::Process)
}

/// Whether the calling thread's CPU time measures all of a step taken here: the thread is a
/// worker of a rayon pool of one thread (so the step's parallel loops run on it and it runs
/// nothing else meanwhile). See the module doc.
pub fn exact_here() -> bool {
    rayon::current_thread_index().is_some() && rayon::current_num_threads() == 1
}

/// A wall clock and the calling thread's CPU clock, started together.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: std::time::Instant,
    cpu: Option<f64>,
}

impl Stopwatch {
    /// Starts both clocks.
    pub fn start() -> Self {
        Self {
            wall: std::time::Instant::now(),
            cpu: thread_seconds(),
        }
    }

    /// Wall seconds since the start.
    pub fn wall(&self) -> f64 {
        self.wall.elapsed().as_secs_f64()
    }

    /// CPU seconds of the calling thread since the start (`None` where the clock is unavailable;
    /// meaningful only on the thread that started it).
    pub fn cpu(&self) -> Option<f64> {
        Some((thread_seconds()? - self.cpu?).max(0.0))
    }
}

/// Runs `f` on a rayon pool of one thread (so that its parallel loops run on that thread, where
/// [`thread_seconds`] sees them) and returns its result.
pub fn on_one_thread<T: Send>(f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .context("building a thread pool of one thread")?;
    Ok(pool.install(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins for about `secs` of the calling thread's CPU time (by the process clock, which this
    /// thread alone moves while the others wait).
    fn busy(secs: f64) -> f64 {
        let start = std::time::Instant::now();
        let mut x = 1.0f64;
        while start.elapsed().as_secs_f64() < secs {
            for _ in 0..1000 {
                x = (x * 1.000_001).sin() + 1.0;
            }
        }
        std::hint::black_box(x)
    }

    #[test]
    fn the_thread_clock_counts_this_thread_only() {
        if thread_seconds().is_none() {
            eprintln!("skipped: no thread CPU clock on this platform");
            return;
        }
        // Work on this thread moves its clock.
        let t0 = thread_seconds().unwrap();
        busy(0.2);
        let own = thread_seconds().unwrap() - t0;
        assert!(
            own > 0.0,
            "a busy loop on this thread moved its clock by {own}"
        );
        // Work on another thread (while this one sleeps in join) does not. The other thread
        // spins for as long as this one did, so a process clock would move by about `own`.
        let p0 = process_seconds();
        let t1 = thread_seconds().unwrap();
        let other = std::thread::spawn(|| {
            let c0 = thread_seconds().unwrap();
            busy(0.2);
            thread_seconds().unwrap() - c0
        })
        .join()
        .unwrap();
        let mine = thread_seconds().unwrap() - t1;
        assert!(other > 0.0);
        assert!(
            mine < 0.25 * other,
            "this thread's clock moved by {mine} s while another thread used {other} s"
        );
        if let Some(p0) = p0 {
            let process = process_seconds().unwrap() - p0;
            assert!(process >= 0.5 * other, "{process} < {other} / 2");
        }
    }

    #[test]
    fn exact_only_on_a_pool_of_one_thread() {
        assert!(!exact_here(), "not on a rayon worker");
        assert!(on_one_thread(exact_here).unwrap());
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert!(!two.install(exact_here));
    }
}
