//! Running an objective command (`pandora run`'s command objectives): one evaluation, one process
//! group, bounded in time and memory.
//!
//! # The problem
//!
//! An objective command is rarely a single process. `bash train.sh` starts Python, which starts
//! data-loader workers; `sh -c "a; b"` runs `a` and `b` as its children. Killing only the direct
//! child on a timeout leaves its descendants running, and since they inherited the child's stdout
//! and stderr, a runner that reads those pipes to the end waits for them too: a 2 s timeout took
//! 15–20 s, and a truly hung job blocked its worker forever. Likewise, when `pandora run` itself
//! dies (`kill -9`, a lost terminal), nothing tied the evaluations to it: they ran on, and their
//! results were thrown away.
//!
//! # What is done
//!
//! * **One evaluation, one session.** The command starts in a new session (`setsid`), hence in a
//!   process group of its own whose id is its pid. Everything it starts stays in that group unless
//!   it deliberately leaves it (`setsid`/`setpgid` of its own, as daemons do).
//! * **Timeouts kill the group.** At the deadline the whole group gets `SIGTERM`; the command has
//!   [`KILL_GRACE`] to exit, then the group gets `SIGKILL`. The trial fails with "timed out after
//!   T s".
//! * **The worker's shutdown stops it like a timeout.** Given the worker's
//!   [`Shutdown`] (`pandora run` on `SIGTERM`/`SIGINT`), the runner
//!   checks it at least every [`TICK`]; once its grace period has ended, the group gets `SIGTERM`
//!   and, [`KILL_GRACE`] later, `SIGKILL` (at once after a second signal), and the evaluation
//!   fails with [`CommandError::Stopped`].
//! * **The evaluation ends with its command.** When the command has exited (or been killed), every
//!   process still in its group is killed with `SIGKILL`: background jobs it left behind are part
//!   of the evaluation, not something that outlives it. The pipes are then read to their end,
//!   but never longer than [`PIPE_GRACE`] (a process that left the group may hold them open).
//! * **The evaluation dies with `pandora run` (Linux).** The command gets
//!   `PR_SET_PDEATHSIG = SIGKILL` (it is killed when the worker thread that started it ends, which
//!   is when `pandora run` ends, however it ends). That signal reaches the direct child only, so
//!   each evaluation also has a watchdog: a tiny process forked inside the new group before the
//!   command is executed, which closes every descriptor but the read end of a pipe whose write end
//!   only the worker holds, ignores `SIGTERM`/`SIGINT`/`SIGHUP`/`SIGQUIT`, and blocks reading.
//!   When the worker drops its end, or `pandora run` dies and the kernel closes it, the read
//!   returns and the watchdog kills its group, itself included, with `SIGKILL`. Being a member of
//!   the group, the watchdog also keeps the group id from being reused while the worker may still
//!   signal it. (The watchdog is the command's child; it exits with the evaluation. Under a
//!   container whose PID 1 does not reap orphans, run with an init, e.g. `docker run --init`.)
//! * **Bounded memory.** Only the last [`STDOUT_KEEP`] bytes of stdout are kept (the result is
//!   the whole of stdout, so a longer stdout fails the trial, and memory stays bounded however
//!   much the command prints), and the last [`STDERR_KEEP_CHARS`] characters of stderr (the
//!   reason of a failed trial).
//!
//! On other Unix systems everything but the parent-death signal and the watchdog holds; on
//! non-Unix systems commands are neither grouped nor killed on timeout.
//!
//! # Protocol
//!
//! The parameters are written as JSON to the command's stdin; it prints on stdout either a bare
//! number or `{"objective": v, "cost": c}` ([`parse_output`]). A trial with steps (a `[fidelity]`
//! study) runs a range of steps: the command gets them in its environment and prints one line
//! `{"step": t, "objective": v, "cost": c}` per step ([`parse_steps`]; see `docs/freeze-thaw.md`),
//! which [`run_lines`] passes on as each is printed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::shutdown::{Shutdown, StopSignal, TICK};

/// Time between `SIGTERM` and `SIGKILL` when a command times out.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long the pipes are read after the command's group was killed.
pub const PIPE_GRACE: Duration = Duration::from_secs(2);
/// Bytes of stdout kept (the end).
pub const STDOUT_KEEP: usize = 1 << 20;
/// Characters of stderr kept (the end) in the reason of a failed trial.
pub const STDERR_KEEP_CHARS: usize = 1000;

/// How to run an objective command.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// Program and arguments.
    pub argv: &'a [String],
    /// Working directory (the configuration file's directory); `None`: the current one.
    pub dir: Option<&'a Path>,
    /// Time limit of one evaluation.
    pub timeout: Option<Duration>,
    /// The worker's shutdown state: past its deadline, the command is stopped like a timed-out
    /// one (immediately with `SIGKILL` once it is urgent) and fails with [`CommandError::Stopped`].
    pub stop: Option<&'a Shutdown>,
    /// Environment variables set for the command (besides the worker's own).
    pub env: &'a [(String, String)],
}

/// What a command reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reported {
    /// The objective value (finite).
    pub objective: f64,
    /// The reported cost (finite, > 0), if any.
    pub cost: Option<f64>,
}

/// Why an evaluation by command failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program could not be started.
    #[error("cannot start {program:?}: {source}")]
    Start {
        /// The program as resolved.
        program: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The command ran past its time limit (its process group was killed).
    #[error("timed out after {seconds:.1} s")]
    Timeout {
        /// The time limit.
        seconds: f64,
    },
    /// The worker was stopped by a signal and the grace period ended before the command (its
    /// process group was killed).
    #[error("stopped by {signal}: the grace period ended before the evaluation")]
    Stopped {
        /// The first signal the worker received.
        signal: StopSignal,
    },
    /// The command exited unsuccessfully.
    #[error("{status}{}", if stderr.is_empty() { String::new() } else { format!("; stderr: {stderr}") })]
    Exit {
        /// "exited with code 3", "killed by signal 9 (SIGKILL)".
        status: String,
        /// The end of its stderr.
        stderr: String,
    },
    /// Waiting for the command failed.
    #[error("waiting for the command: {0}")]
    Wait(std::io::Error),
    /// The command succeeded but its output is not a valid result.
    #[error("{0}")]
    Output(String),
}

/// One step a command reported ([`parse_steps`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportedStep {
    /// The step (1-based).
    pub step: u32,
    /// The objective value at this step (finite).
    pub objective: f64,
    /// The step's reported cost (finite, > 0), if any.
    pub cost: Option<f64>,
}

/// An evaluation's raw stdout (the kept end; empty if the command never ran) and how the command
/// ended ([`run_raw`]).
#[derive(Debug)]
pub struct RawEvaluation {
    /// `Ok` if the command exited successfully with an output that fits in [`STDOUT_KEEP`].
    pub status: Result<(), CommandError>,
    /// The stdout read, also when the command failed (what it printed before).
    pub stdout: String,
    /// Seconds from start to exit (0 if it never started).
    pub elapsed_s: f64,
}

/// One evaluation: its result and the wall time until the command exited (seconds).
#[derive(Debug)]
pub struct Evaluation {
    /// The reported result, or why there is none.
    pub result: Result<Reported, CommandError>,
    /// Seconds from start to exit (0 if it never started).
    pub elapsed_s: f64,
}

/// Runs `spec` with `input` on stdin (see the module documentation).
pub fn run(spec: &CommandSpec, input: &[u8]) -> Evaluation {
    let raw = run_raw(spec, input);
    let result = raw
        .status
        .and_then(|()| parse_output(&raw.stdout).map_err(CommandError::Output));
    Evaluation {
        result,
        elapsed_s: raw.elapsed_s,
    }
}

/// Runs `spec` with `input` on stdin and returns its stdout unparsed, with how it ended.
pub fn run_raw(spec: &CommandSpec, input: &[u8]) -> RawEvaluation {
    run_with(spec, input, None)
}

/// [`run_raw`], calling `on_line` with each line of stdout (without its line end) as soon as
/// the command has printed it, with the time since the start. Lines come in order, on the
/// calling thread, before this returns: all of them when the command exits by itself; those
/// read by then when it is stopped or times out (its output is not waited for). A line longer
/// than [`STDOUT_KEEP`] bytes is passed cut to its first [`LONG_LINE_KEEP`] bytes.
pub fn run_lines(
    spec: &CommandSpec,
    input: &[u8],
    on_line: &mut dyn FnMut(&str, Duration),
) -> RawEvaluation {
    run_with(spec, input, Some(on_line))
}

/// Bytes of an overlong stdout line passed to [`run_lines`]'s callback.
pub const LONG_LINE_KEEP: usize = 1000;

/// [`run_lines`]'s callback: a line of stdout, and the time since the command started.
type OnLine<'f> = &'f mut dyn FnMut(&str, Duration);

fn run_with(spec: &CommandSpec, input: &[u8], on_line: Option<OnLine>) -> RawEvaluation {
    let start = Instant::now();
    let (mut child, lifeline) = match spawn(spec) {
        Ok(c) => c,
        Err(source) => {
            return RawEvaluation {
                status: Err(CommandError::Start {
                    program: program(spec).display().to_string(),
                    source,
                }),
                stdout: String::new(),
                elapsed_s: 0.0,
            };
        }
    };
    let pid = child.id();
    feed_stdin(&mut child, input.to_vec());
    let (tx, rx) = mpsc::channel();
    let lines = on_line.is_some().then(|| tx.clone());
    let out = Capture::start(child.stdout.take(), STDOUT_KEEP, lines);
    let err = Capture::start(child.stderr.take(), 4 * STDERR_KEEP_CHARS, None);
    wait_in_background(child, tx);
    let mut events = Events { rx, on_line, start };
    let deadline = spec.timeout.and_then(|t| start.checked_add(t));
    let status = match supervise(&mut events, pid, deadline, spec.stop) {
        Ended::Exited(s) => s.map_err(CommandError::Wait),
        Ended::TimedOut => Err(CommandError::Timeout {
            seconds: spec.timeout.unwrap_or_default().as_secs_f64(),
        }),
        Ended::Stopped(signal) => Err(CommandError::Stopped { signal }),
    };
    let elapsed_s = start.elapsed().as_secs_f64();
    // Whatever the command left behind in its group goes with it; the watchdog (a member) kept
    // the group id from being reused until now.
    signal_group(pid, Signal::Kill);
    drop(lifeline);
    // The pipes are read to their end only when the command exited by itself (a timed-out or
    // stopped command's output is not waited for).
    let mut text = String::new();
    let status = status.and_then(|s| {
        let stdout = out.finish(Instant::now() + PIPE_GRACE);
        events.deliver_sent();
        text = String::from_utf8_lossy(&stdout.kept).into_owned();
        let stderr = err.finish(Instant::now() + PIPE_GRACE);
        if !s.success() {
            return Err(CommandError::Exit {
                status: describe(s),
                stderr: last_chars(
                    String::from_utf8_lossy(&stderr.kept).trim(),
                    STDERR_KEEP_CHARS,
                ),
            });
        }
        if stdout.total > STDOUT_KEEP as u64 {
            return Err(CommandError::Output(format!(
                "the output is {} bytes, more than the {STDOUT_KEEP} read (the result must be \
                 all of stdout); it ends with: {}",
                stdout.total,
                last_chars(text.trim(), 200)
            )));
        }
        Ok(())
    });
    // A stopped or timed-out command: the lines read before it was killed.
    events.deliver_sent();
    RawEvaluation {
        status,
        stdout: text,
        elapsed_s,
    }
}

/// What the threads of an evaluation tell the one supervising it.
enum Event {
    /// A line of stdout (without its line end), and when it was read.
    Line(String, Instant),
    /// The command exited (the reaping thread's status).
    Exited(std::io::Result<ExitStatus>),
}

/// The supervising end of the evaluation's events: lines go to the caller as they come.
struct Events<'f> {
    rx: mpsc::Receiver<Event>,
    on_line: Option<OnLine<'f>>,
    start: Instant,
}

impl Events<'_> {
    /// Passes on lines until the command's exit status comes (returned) or `deadline` passes
    /// (`None`; no deadline: as long as it takes).
    fn exit_until(&mut self, deadline: Option<Instant>) -> Option<std::io::Result<ExitStatus>> {
        loop {
            match recv_until(&self.rx, deadline)? {
                Event::Line(line, at) => self.deliver(&line, at),
                Event::Exited(status) => return Some(status),
            }
        }
    }

    /// Passes on the lines sent so far.
    fn deliver_sent(&mut self) {
        while let Ok(event) = self.rx.try_recv() {
            if let Event::Line(line, at) = event {
                self.deliver(&line, at);
            }
        }
    }

    fn deliver(&mut self, line: &str, at: Instant) {
        if let Some(f) = self.on_line.as_mut() {
            f(line, at.saturating_duration_since(self.start));
        }
    }
}

/// How an evaluation ended.
enum Ended {
    /// The command exited by itself.
    Exited(std::io::Result<ExitStatus>),
    /// It ran past its time limit and was killed.
    TimedOut,
    /// The worker's grace period ended first and it was killed.
    Stopped(StopSignal),
}

/// Waits for the command (group `pid`) to exit, or for its time limit (`deadline`) or the
/// worker's shutdown deadline to pass, whichever comes first; in the latter cases stops the group.
fn supervise(
    events: &mut Events,
    pid: u32,
    deadline: Option<Instant>,
    stop: Option<&Shutdown>,
) -> Ended {
    loop {
        let now = Instant::now();
        let stop_at = stop.and_then(Shutdown::deadline);
        if let Some(signal) = stop.and_then(Shutdown::signal)
            && stop_at.is_some_and(|d| d <= now)
        {
            terminate(events, pid, stop);
            return Ended::Stopped(signal);
        }
        if deadline.is_some_and(|d| d <= now) {
            terminate(events, pid, stop);
            return Ended::TimedOut;
        }
        // With a shutdown to watch, wake up every tick to see whether a signal came.
        let tick = stop.map(|_| now + TICK);
        let wake = [deadline, stop_at, tick].into_iter().flatten().min();
        if let Some(s) = events.exit_until(wake) {
            return Ended::Exited(s);
        }
        if wake.is_none() {
            // The reaping thread ended without a status (it cannot, short of a panic).
            return Ended::Exited(Err(std::io::Error::other("the command's status was lost")));
        }
    }
}

/// Stops the group `pid`: `SIGTERM`, then `SIGKILL` after [`KILL_GRACE`] (at once when the
/// worker's shutdown is or becomes urgent).
fn terminate(events: &mut Events, pid: u32, stop: Option<&Shutdown>) {
    let urgent = || stop.is_some_and(Shutdown::urgent);
    if !urgent() {
        signal_group(pid, Signal::Term);
        let kill_at = Instant::now() + KILL_GRACE;
        loop {
            let now = Instant::now();
            if now >= kill_at || urgent() {
                break;
            }
            let wake = if stop.is_some() {
                kill_at.min(now + TICK)
            } else {
                kill_at
            };
            if events.exit_until(Some(wake)).is_some() {
                return;
            }
        }
    }
    signal_group(pid, Signal::Kill);
    let _ = events.exit_until(Some(Instant::now() + PIPE_GRACE));
}

/// The program to execute: a relative path with a directory part (`./train.sh`,
/// `scripts/train.sh`) is taken from `spec.dir`; a bare name is looked up in `PATH`.
fn program(spec: &CommandSpec) -> PathBuf {
    let p = Path::new(&spec.argv[0]);
    match spec.dir {
        Some(dir) if p.is_relative() && p.components().count() > 1 => dir.join(p),
        _ => p.to_path_buf(),
    }
}

/// Starts the command in its own session (and, on Linux, with its watchdog); returns it and the
/// write end of the watchdog's pipe (the lifeline: dropping it ends the evaluation's group).
fn spawn(spec: &CommandSpec) -> std::io::Result<(Child, Option<std::io::PipeWriter>)> {
    let mut cmd = Command::new(program(spec));
    cmd.args(&spec.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = spec.dir {
        cmd.current_dir(dir);
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let (reader, writer) = std::io::pipe()?;
        let fd = reader.as_raw_fd();
        // SAFETY: `enter_group` only makes async-signal-safe system calls.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || group::enter(parent, fd));
        }
        let child = cmd.spawn()?;
        drop(reader);
        Ok((child, Some(writer)))
    }
    #[cfg(not(unix))]
    {
        Ok((cmd.spawn()?, None))
    }
}

/// Writes the input on a thread of its own (a command that does not read its stdin must not
/// block the worker), then closes stdin.
fn feed_stdin(child: &mut Child, input: Vec<u8>) {
    if let Some(mut stdin) = child.stdin.take() {
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
}

/// Reaps the child on a thread of its own, so that its exit is seen at once.
fn wait_in_background(mut child: Child, tx: mpsc::Sender<Event>) {
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exited(child.wait()));
    });
}

/// The next message if it comes before `deadline` (`None`: wait as long as it takes).
fn recv_until<T>(rx: &mpsc::Receiver<T>, deadline: Option<Instant>) -> Option<T> {
    match deadline {
        None => rx.recv().ok(),
        Some(d) => rx
            .recv_timeout(d.saturating_duration_since(Instant::now()))
            .ok(),
    }
}

/// A stream being read to its end on a thread of its own, keeping only its last bytes.
struct Capture {
    tail: Arc<Mutex<Tail>>,
    done: mpsc::Receiver<()>,
}

/// The end of a stream: at most `keep` bytes, and the total read.
#[derive(Debug, Default)]
struct Tail {
    kept: Vec<u8>,
    total: u64,
    keep: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.kept.extend_from_slice(chunk);
        // Trim in batches: the buffer stays below 2·keep and trimming costs O(1) per byte.
        if self.kept.len() > 2 * self.keep {
            let cut = self.kept.len() - self.keep;
            self.kept.drain(..cut);
        }
    }

    fn into_kept(mut self) -> Self {
        if self.kept.len() > self.keep {
            let cut = self.kept.len() - self.keep;
            self.kept.drain(..cut);
        }
        self
    }
}

/// A readable pipe of the child.
trait Pipe: Read + Send + 'static {}
impl Pipe for ChildStdout {}
impl Pipe for ChildStderr {}

impl Capture {
    /// Reads `pipe` to its end on a thread of its own, keeping its last `keep` bytes and, given
    /// `lines`, sending each line on as it is read (all of them before the end is signalled).
    fn start(pipe: Option<impl Pipe>, keep: usize, lines: Option<mpsc::Sender<Event>>) -> Self {
        let tail = Arc::new(Mutex::new(Tail {
            keep,
            ..Tail::default()
        }));
        let (tx, done) = mpsc::channel();
        if let Some(mut pipe) = pipe {
            let tail = Arc::clone(&tail);
            let mut lines = lines.map(LineCutter::new);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            lock(&tail).push(&buf[..n]);
                            if let Some(l) = lines.as_mut() {
                                l.push(&buf[..n]);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                if let Some(l) = lines {
                    l.finish();
                }
                let _ = tx.send(());
            });
        }
        Self { tail, done }
    }

    /// What was read by the end of the stream, or by `deadline` if it is still open.
    fn finish(self, deadline: Instant) -> Tail {
        let _ = recv_until(&self.done, Some(deadline));
        std::mem::take(&mut *lock(&self.tail)).into_kept()
    }
}

/// Cuts a stream into lines as it is read, for [`run_lines`]: a line ends at `\n` (a `\r`
/// before it is dropped) or at the end of the stream; a line longer than [`STDOUT_KEEP`] bytes
/// is sent cut to its first [`LONG_LINE_KEEP`] bytes and the rest of it is skipped, so memory
/// stays bounded.
struct LineCutter {
    tx: mpsc::Sender<Event>,
    partial: Vec<u8>,
    /// The rest of an overlong line is being skipped.
    skipping: bool,
}

impl LineCutter {
    fn new(tx: mpsc::Sender<Event>) -> Self {
        Self {
            tx,
            partial: Vec::new(),
            skipping: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let at = Instant::now();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..i], at);
            if !self.skipping {
                self.send(at);
            }
            self.skipping = false;
            rest = &rest[i + 1..];
        }
        self.take(rest, at);
    }

    fn take(&mut self, bytes: &[u8], at: Instant) {
        if self.skipping {
            return;
        }
        self.partial.extend_from_slice(bytes);
        if self.partial.len() > STDOUT_KEEP {
            self.partial.truncate(LONG_LINE_KEEP);
            self.send(at);
            self.skipping = true;
        }
    }

    fn send(&mut self, at: Instant) {
        if self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        let _ = self.tx.send(Event::Line(line, at));
    }

    /// The end of the stream: a last line without its `\n` is a line too.
    fn finish(mut self) {
        if !self.partial.is_empty() && !self.skipping {
            self.send(Instant::now());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The signals sent to an evaluation's group.
#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// Sends `sig` to the process group `pgid` (the command's pid); no group, nothing to do.
#[cfg(unix)]
fn signal_group(pgid: u32, sig: Signal) {
    let sig = match sig {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // SAFETY: killpg has no memory effects; ESRCH (the group is gone) is expected.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: u32, _sig: Signal) {}

/// "exited with code 3", "killed by signal 9 (SIGKILL)".
fn describe(s: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            let name = match sig {
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGINT => " (SIGINT)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGFPE => " (SIGFPE)",
                _ => "",
            };
            return format!("killed by signal {sig}{name}");
        }
    }
    match s.code() {
        Some(c) => format!("exited with code {c}"),
        None => "exited unsuccessfully".to_string(),
    }
}

/// The last `n` characters of `s` (with "..." in front when cut).
pub fn last_chars(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count > n {
        format!("...{}", s.chars().skip(count - n).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Parses the objective command's stdout: a bare number or `{"objective": v, "cost": c}`.
pub fn parse_output(text: &str) -> Result<Reported, String> {
    let text = text.trim();
    let v: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            // Python's json module writes NaN and Infinity, which are not JSON.
            if let Ok(x) = text.parse::<f64>() {
                return Err(format!("objective is not finite: {x}"));
            }
            if text.contains("NaN") || text.contains("Infinity") {
                return Err(format!(
                    "output contains a value that is not finite: {}",
                    last_chars(text, 200)
                ));
            }
            let last: Vec<&str> = text.lines().rev().take(3).collect();
            let last = last.into_iter().rev().collect::<Vec<_>>().join("\n");
            return Err(format!(
                "malformed output (expected a number or JSON): {e}; output: {}",
                last_chars(&last, 1000)
            ));
        }
    };
    let (obj, cost) = match &v {
        serde_json::Value::Number(n) => (n.as_f64(), None),
        serde_json::Value::Object(m) => {
            let o = m
                .get("objective")
                .ok_or("output has no \"objective\" field")?;
            let o = o.as_f64().ok_or("\"objective\" is not a number")?;
            let c = match m.get("cost") {
                None | Some(serde_json::Value::Null) => None,
                Some(c) => Some(c.as_f64().ok_or("\"cost\" is not a number")?),
            };
            (Some(o), c)
        }
        _ => return Err("output is neither a number nor an object".into()),
    };
    let objective = obj.ok_or("objective is not a finite number")?;
    if !objective.is_finite() {
        return Err(format!("objective is not finite: {objective}"));
    }
    if let Some(c) = cost
        && !(c.is_finite() && c > 0.0)
    {
        return Err(format!("cost must be finite and > 0, got {c}"));
    }
    Ok(Reported { objective, cost })
}

/// Parses the step lines a command printed for the steps `from..=to` of a trial with steps: one
/// JSON object `{"step": t, "objective": v, "cost": c}` per non-empty line (`cost` optional), the
/// steps in order from `from`. Returns the steps up to the first line that is not a valid next
/// step, and the reason that line was refused, if one was.
pub fn parse_steps(text: &str, from: u32, to: u32) -> (Vec<ReportedStep>, Option<String>) {
    let mut reader = StepReader::new(from, to);
    let steps = text.lines().filter_map(|l| reader.read(l)).collect();
    (steps, reader.refused)
}

/// Reads the step lines of a run of the steps `from..=to` one at a time, as [`parse_steps`]
/// reads a whole output: blank lines are skipped, each other line must be the next step, and
/// the first that is not ends the run's steps (every later line is ignored).
#[derive(Debug, Clone)]
pub struct StepReader {
    next: u32,
    to: u32,
    /// Why a line was refused, once one was.
    pub refused: Option<String>,
}

impl StepReader {
    /// A reader expecting step `from` first, of a run that ends at step `to`.
    pub fn new(from: u32, to: u32) -> Self {
        Self {
            next: from,
            to,
            refused: None,
        }
    }

    /// The step `line` reports, if it is the next one (`None` for a blank line, a refused line
    /// and every line after one).
    pub fn read(&mut self, line: &str) -> Option<ReportedStep> {
        let line = line.trim();
        if line.is_empty() || self.refused.is_some() {
            return None;
        }
        match parse_step_line(line, self.next, self.to) {
            Ok(step) => {
                self.next += 1;
                Some(step)
            }
            Err(why) => {
                self.refused = Some(why);
                None
            }
        }
    }
}

/// Parses one step line (trimmed, not empty) of a trial with steps, which must be step `next`
/// of a run that ends at step `to` ([`parse_steps`] reads a whole output with it); the error
/// says why the line was refused.
pub fn parse_step_line(line: &str, next: u32, to: u32) -> Result<ReportedStep, String> {
    let shown = || last_chars(line, 200);
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        format!(
            "a step line must be a JSON object {{\"step\", \"objective\"}}: {e}: {}",
            shown()
        )
    })?;
    let step = v.get("step").and_then(serde_json::Value::as_u64);
    if step != Some(u64::from(next)) || next > to {
        return Err(if next > to {
            format!(
                "the run ends at step {to}, but the command printed more: {}",
                shown()
            )
        } else {
            format!("expected step {next}: {}", shown())
        });
    }
    let Reported { objective, cost } = parse_output(line)?;
    Ok(ReportedStep {
        step: next,
        objective,
        cost,
    })
}

/// What runs in the forked child before the command is executed.
#[cfg(unix)]
mod group {
    use std::io;
    use std::os::fd::RawFd;

    /// Puts the child in a new session; on Linux, ties it to its parent (`PR_SET_PDEATHSIG`) and
    /// forks its watchdog, which holds `lifeline` (see the module documentation).
    ///
    /// Runs between `fork` and `exec` of a multithreaded process: only async-signal-safe system
    /// calls, no allocation, no locks.
    pub(super) fn enter(parent: libc::pid_t, lifeline: RawFd) -> io::Result<()> {
        // SAFETY: plain system calls on this process.
        unsafe {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(target_os = "linux")]
        linux::tie_to_parent(parent, lifeline)?;
        #[cfg(not(target_os = "linux"))]
        let _ = (parent, lifeline);
        Ok(())
    }

    #[cfg(target_os = "linux")]
    mod linux {
        use std::io;
        use std::os::fd::RawFd;

        pub(super) fn tie_to_parent(parent: libc::pid_t, lifeline: RawFd) -> io::Result<()> {
            // SAFETY: system calls without memory effects, and a fork of this (single-threaded)
            // child whose copy runs `watchdog` and never returns.
            unsafe {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == -1
                {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before the prctl: then nobody will signal us.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                // A raw fork (no atfork handlers, which may take locks held by other threads of
                // the parent at the time of the first fork).
                let pid = libc::syscall(
                    libc::SYS_clone,
                    libc::SIGCHLD as libc::c_long,
                    0 as libc::c_long,
                    0 as libc::c_long,
                    0 as libc::c_long,
                    0 as libc::c_long,
                );
                match pid {
                    -1 => Err(io::Error::last_os_error()),
                    0 => watchdog(lifeline),
                    _ => Ok(()),
                }
            }
        }

        /// Waits until every write end of `lifeline` is closed, then kills its process group.
        ///
        /// # Safety
        /// Only in a freshly forked child: it closes every other descriptor and never returns.
        unsafe fn watchdog(lifeline: RawFd) -> ! {
            // SAFETY (whole body): async-signal-safe system calls on this process only.
            unsafe {
                for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                close_all_but(lifeline);
                let mut byte = 0u8;
                loop {
                    let n = libc::read(lifeline, (&raw mut byte).cast(), 1);
                    if n > 0 || (n == -1 && *libc::__errno_location() == libc::EINTR) {
                        continue;
                    }
                    break;
                }
                libc::kill(0, libc::SIGKILL);
                libc::_exit(0)
            }
        }

        /// Closes every descriptor except `keep` (the command's pipes, the parent's
        /// descriptors inherited by the fork, the exec-error pipe of `std::process`).
        ///
        /// # Safety
        /// Only in a freshly forked child.
        unsafe fn close_all_but(keep: RawFd) {
            // SAFETY: closing descriptors of this process.
            unsafe {
                let keep = keep as libc::c_uint;
                let below = keep == 0
                    || libc::syscall(libc::SYS_close_range, 0 as libc::c_uint, keep - 1, 0) == 0;
                let above = libc::syscall(
                    libc::SYS_close_range,
                    keep + 1,
                    libc::c_uint::MAX,
                    0 as libc::c_uint,
                ) == 0;
                if !(below && above) {
                    // Kernels before 5.9: close them one by one.
                    for fd in 0..65536 {
                        if fd != keep as libc::c_int {
                            libc::close(fd);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(chunks: &[&[u8]]) -> Vec<String> {
        let (tx, rx) = mpsc::channel();
        let mut c = LineCutter::new(tx);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish();
        rx.try_iter()
            .map(|e| match e {
                Event::Line(l, _) => l,
                Event::Exited(_) => panic!("not a line"),
            })
            .collect()
    }

    #[test]
    fn lines_are_cut_across_chunks_and_bounded() {
        let lines = cut(&[b"a", b"b\r\nc", b"\n\nd\r", b"\ne"]);
        assert_eq!(lines, ["ab", "c", "", "d", "e"]);
        assert_eq!(cut(&[b"x\n"]), ["x"]);
        assert!(cut(&[]).is_empty());
        // An overlong line is cut to its start; the next line is whole.
        let long = vec![b'z'; STDOUT_KEEP + 10];
        let lines = cut(&[
            &long[..STDOUT_KEEP / 2],
            &long[STDOUT_KEEP / 2..],
            b"zz\nok\n",
        ]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), LONG_LINE_KEEP);
        assert_eq!(lines[1], "ok");
    }

    #[cfg(unix)]
    #[test]
    fn run_lines_passes_each_line_in_order_also_when_the_command_fails() {
        let argv: Vec<String> = [
            "sh",
            "-c",
            "printf 'one\\ntwo\\r\\n'; sleep 0.1; printf three; exit 3",
        ]
        .map(String::from)
        .to_vec();
        let spec = CommandSpec {
            argv: &argv,
            dir: None,
            timeout: None,
            stop: None,
            env: &[],
        };
        let mut seen = Vec::new();
        let raw = run_lines(&spec, b"", &mut |l, at| seen.push((l.to_string(), at)));
        assert!(
            matches!(raw.status, Err(CommandError::Exit { .. })),
            "{:?}",
            raw.status
        );
        let lines: Vec<&str> = seen.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(lines, ["one", "two", "three"]);
        assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(seen[2].1 >= Duration::from_millis(100));
        // Without a callback nothing changes: stdout is the whole output.
        let raw = run_raw(&spec, b"");
        assert!(raw.status.is_err());
    }

    #[test]
    fn tails_keep_the_end_within_bounds() {
        let mut t = Tail {
            keep: 4,
            ..Tail::default()
        };
        for chunk in [&b"abc"[..], b"defgh", b"ij", b"klmnopq"] {
            t.push(chunk);
            assert!(t.kept.len() <= 8);
        }
        let t = t.into_kept();
        assert_eq!(t.kept, b"nopq");
        assert_eq!(t.total, 17);
    }

    #[test]
    fn output_is_a_number_or_an_object() {
        assert_eq!(
            parse_output("1.5\n"),
            Ok(Reported {
                objective: 1.5,
                cost: None
            })
        );
        assert_eq!(
            parse_output(r#"{"objective": -2, "cost": 3}"#),
            Ok(Reported {
                objective: -2.0,
                cost: Some(3.0)
            })
        );
        assert!(parse_output("NaN").unwrap_err().contains("not finite"));
        assert!(parse_output("hello").unwrap_err().contains("malformed"));
    }

    #[test]
    fn exit_errors_say_the_status_once() {
        let e = CommandError::Exit {
            status: "exited with code 2".into(),
            stderr: "boom".into(),
        };
        assert_eq!(e.to_string(), "exited with code 2; stderr: boom");
        let e = CommandError::Exit {
            status: "exited with code 2".into(),
            stderr: String::new(),
        };
        assert_eq!(e.to_string(), "exited with code 2");
    }

    #[test]
    fn step_lines_are_read_in_order_up_to_the_first_bad_one() {
        let text =
            "{\"step\": 3, \"objective\": 0.5}\n\n{\"step\": 4, \"objective\": 0.6, \"cost\": 2}\n";
        let (steps, why) = parse_steps(text, 3, 5);
        assert_eq!(why, None);
        assert_eq!(steps.len(), 2);
        assert_eq!(
            (steps[1].step, steps[1].objective, steps[1].cost),
            (4, 0.6, Some(2.0))
        );
        for (bad, msg) in [
            ("{\"step\": 5, \"objective\": 1}", "expected step 3"),
            ("0.5", "expected step 3"),
            ("log line", "JSON object"),
            ("{\"step\": 3, \"objective\": NaN}", "JSON object"),
            ("{\"step\": 3}", "objective"),
            ("{\"step\": 3, \"objective\": 1, \"cost\": 0}", "cost"),
        ] {
            let (steps, why) = parse_steps(&format!("{bad}\n"), 3, 5);
            assert!(steps.is_empty(), "{bad}");
            assert!(why.as_deref().unwrap_or("").contains(msg), "{bad}: {why:?}");
        }
        let two = "{\"step\": 1, \"objective\": 1}\n{\"step\": 2, \"objective\": 1}\n";
        let (steps, why) = parse_steps(two, 1, 1);
        assert_eq!(steps.len(), 1);
        assert!(why.unwrap().contains("ends at step 1"));
    }

    #[test]
    fn last_chars_counts_characters() {
        assert_eq!(last_chars("héllo", 3), "...llo");
        assert_eq!(last_chars("ab", 3), "ab");
    }
}
