//! One writer per run: an exclusive lock on a run's output, held while the run is carried out, so
//! that a Slurm task resubmitted while the original still runs (or two shells started on the same
//! shard) cannot write the same trace or run record twice.
//!
//! **Definition.** The lock of output `PATH` is the file `PATH.lock` in the same directory, locked
//! with `flock(LOCK_EX | LOCK_NB)` (std's [`std::fs::File::try_lock`]) and holding a line naming
//! its holder: `pid P on HOST` (and the Slurm job, `job J_K`, inside one). A run whose lock is
//! held by another process is refused at once with that line; nothing waits.
//!
//! **Algorithm.** Acquire: open (creating) `PATH.lock`, try the lock; once held, check that the
//! path still names the file that was locked (same device and inode) — a holder that was
//! releasing may have removed it between our open and our lock, and a lock on a removed file
//! excludes no one — and retry if not; then write the holder line. Release (on drop): remove the
//! file, then close it (which unlocks). So a run that ends leaves no lock file, and the
//! remove-then-unlock order with the inode check means two processes can never both hold the lock
//! of one path.
//!
//! **Stale locks.** The kernel drops a `flock` when its holder dies (`kill -9`, the time limit's
//! SIGKILL, an out-of-memory kill), so a lock file left behind by a dead process is not held: the
//! next writer locks it and goes on; nothing has to be cleaned by hand. On a node that crashed,
//! the lock dies with the node's locks on the file server (NFS: when the server notices the
//! client is gone, at its lease time, about 90 s for NFSv4).
//!
//! **Degenerate cases.** A filesystem that does not support `flock` (Lustre mounted without
//! `-o flock`, some FUSE filesystems) makes the attempt fail with an I/O error other than "would
//! block": the run proceeds unlocked with a warning naming the error, rather than refusing every
//! run on such a filesystem. On Linux NFS clients `flock` is carried out as a whole-file POSIX lock
//! on the server, so it excludes writers on other nodes too.
//!
//! References: flock(2) (Linux man-pages), including its NFS notes; the std documentation of
//! `File::try_lock`.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// A held lock on a run's output; released (and its file removed) when dropped.
#[derive(Debug)]
pub struct RunLock {
    /// The lock file, `None` when the filesystem does not support locks.
    held: Option<(File, PathBuf)>,
}

/// What [`RunLock::acquire`] found.
#[derive(Debug)]
pub enum Acquired {
    /// The lock is ours (or locks are unsupported, with a warning printed).
    Held(RunLock),
    /// Another process holds it: its holder line (`pid P on HOST`), or a placeholder if it has
    /// not written one yet.
    Busy(String),
}

/// The lock file of output `path` (`NAME.jsonl` → `NAME.jsonl.lock`).
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// This process, as a holder line: `pid P on HOST` (`, Slurm job J_K` inside an array task).
pub fn holder() -> String {
    let mut s = format!("pid {} on {}", std::process::id(), hostname());
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID")) {
        (Some(j), Some(k)) => s += &format!(", Slurm job {j}_{k}"),
        _ => {
            if let Some(j) = var("SLURM_JOB_ID") {
                s += &format!(", Slurm job {j}");
            }
        }
    }
    s
}

/// The host name (`unknown host` if it cannot be read).
fn hostname() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let name = String::from_utf8_lossy(&buf[..end]).into_owned();
            if !name.is_empty() {
                return name;
            }
        }
    }
    "unknown host".to_string()
}

/// Whether `f` is the file `path` names now.
#[cfg(unix)]
fn same_file(f: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (f.metadata()?, std::fs::metadata(path));
    Ok(b.is_ok_and(|b| a.dev() == b.dev() && a.ino() == b.ino()))
}

#[cfg(not(unix))]
fn same_file(_: &File, path: &Path) -> std::io::Result<bool> {
    Ok(path.exists())
}

impl RunLock {
    /// Tries to lock the output `path` for this process (see the module doc).
    pub fn acquire(path: &Path) -> Result<Acquired> {
        let lock = lock_path(path);
        loop {
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock)
                .with_context(|| format!("opening the lock file {lock:?}"))?;
            match f.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut line = String::new();
                    let _ = f.read_to_string(&mut line);
                    let line = line.trim();
                    return Ok(Acquired::Busy(if line.is_empty() {
                        "another process".to_string()
                    } else {
                        line.to_string()
                    }));
                }
                Err(TryLockError::Error(e)) => {
                    eprintln!(
                        "warning: cannot lock {lock:?} ({e}): this filesystem may not support \
                         file locks; writing without one (do not run the same run twice at once)"
                    );
                    drop(f);
                    let _ = std::fs::remove_file(&lock);
                    return Ok(Acquired::Held(RunLock { held: None }));
                }
            }
            if !same_file(&f, &lock).with_context(|| format!("checking {lock:?}"))? {
                continue;
            }
            f.set_len(0)?;
            f.rewind()?;
            writeln!(f, "{}", holder()).with_context(|| format!("writing {lock:?}"))?;
            f.flush()?;
            return Ok(Acquired::Held(RunLock {
                held: Some((f, lock)),
            }));
        }
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        if let Some((f, path)) = self.held.take() {
            // Remove while still holding the lock, then unlock by closing (see the module doc).
            let _ = std::fs::remove_file(&path);
            drop(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_with_its_holder_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("a.jsonl");
        let Acquired::Held(first) = RunLock::acquire(&out).unwrap() else {
            panic!("a free lock is taken");
        };
        let text = std::fs::read_to_string(lock_path(&out)).unwrap();
        assert!(
            text.starts_with(&format!("pid {} on ", std::process::id())),
            "{text}"
        );
        // A second open file description conflicts with the first, even in one process.
        match RunLock::acquire(&out).unwrap() {
            Acquired::Busy(h) => assert_eq!(h, text.trim()),
            Acquired::Held(_) => panic!("the lock was taken twice"),
        }
        drop(first);
        assert!(!lock_path(&out).exists(), "released locks leave no file");
        assert!(matches!(RunLock::acquire(&out).unwrap(), Acquired::Held(_)));
    }

    #[test]
    fn a_stale_lock_file_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b.json");
        // What a killed holder leaves: the file with its line, no lock.
        std::fs::write(lock_path(&out), "pid 1 on elsewhere\n").unwrap();
        let Acquired::Held(l) = RunLock::acquire(&out).unwrap() else {
            panic!("a stale lock file blocks");
        };
        let text = std::fs::read_to_string(lock_path(&out)).unwrap();
        assert_eq!(text, format!("{}\n", holder()));
        drop(l);
        assert!(!lock_path(&out).exists());
    }
}
