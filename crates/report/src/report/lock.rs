//! One writer per results folder: an advisory lock on `<folder>/.herdsim.lock`.
//!
//! Every herdsim command that writes into a results folder (`run`, `merge`,
//! `tune`) holds an exclusive lock on that folder's lock file for its whole
//! run; `merge` holds a shared lock on each shard folder it reads. A second
//! writer is refused at once (exit 2), naming the folder and the holder's
//! process id, which the holder writes into the lock file. The lock is the
//! operating system's (`flock` on Unix, `LockFileEx` on Windows, through
//! `std::fs::File::try_lock`): it goes away with the process, however the
//! process ends, so a killed run never leaves a folder locked.
//!
//! The lock file itself stays: deleting it would let a process that opened
//! the old file and one that creates a new one both "hold" the lock.
//!
//! Holding the lock also makes cleaning up safe: a temporary file
//! `.<name>.<pid>.tmp` (see [`super::atomic`]) whose process is gone is a
//! leftover of a killed run, and [`FolderLock::remove_stale_temps`] removes it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Name of the lock file inside a results folder.
pub const LOCK_FILE: &str = ".herdsim.lock";

/// Why a folder could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it (its pid, when it could be read).
    Held { dir: PathBuf, pid: Option<u32> },
    /// The folder or the lock file could not be created or opened.
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { dir, pid } => {
                let who = pid.map_or_else(
                    || "another herdsim process".to_string(),
                    |p| format!("another herdsim process (pid {p})"),
                );
                write!(
                    f,
                    "{}: this results folder is in use by {who}; wait for it to finish, \
                     or write to another folder with --out",
                    dir.display()
                )
            }
            LockError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for LockError {}

/// A held lock on a results folder; released when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct FolderLock {
    dir: PathBuf,
    /// `None` when the file system does not support locks (warned about).
    _file: Option<File>,
    /// Set when locking was not possible on this file system.
    pub unsupported: Option<String>,
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The pid in a lock file held by another process. The holder writes it
/// right after it takes the lock, so an empty file is read again briefly.
fn holder_pid(file: &mut File) -> Option<u32> {
    for _ in 0..50 {
        if let Some(pid) = read_pid(file) {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    None
}

impl FolderLock {
    /// Create `dir` if needed and lock it for writing, or fail at once if
    /// another process holds it.
    pub fn exclusive(dir: &Path) -> Result<FolderLock, LockError> {
        std::fs::create_dir_all(dir).map_err(|error| LockError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        let path = dir.join(LOCK_FILE);
        let io = |error| LockError::Io {
            path: path.clone(),
            error,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {
                // Ours now: say who holds it.
                file.set_len(0).map_err(io)?;
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                file.write_all(format!("{}\n", std::process::id()).as_bytes())
                    .map_err(io)?;
                Ok(FolderLock {
                    dir: dir.to_path_buf(),
                    _file: Some(file),
                    unsupported: None,
                })
            }
            Err(TryLockError::WouldBlock) => Err(LockError::Held {
                dir: dir.to_path_buf(),
                pid: holder_pid(&mut file),
            }),
            // A file system without locks (some network mounts): go on,
            // and let the caller warn.
            Err(TryLockError::Error(e)) => Ok(FolderLock {
                dir: dir.to_path_buf(),
                _file: None,
                unsupported: Some(e.to_string()),
            }),
        }
    }

    /// Lock `dir` for reading, shared with other readers, if it has a lock
    /// file; fail at once if a writer holds it. A folder without a lock
    /// file (or one that cannot be opened, say on read-only media) is read
    /// without a lock: nothing written by this herdsim can be in progress
    /// there.
    pub fn shared(dir: &Path) -> Result<Option<FolderLock>, LockError> {
        let path = dir.join(LOCK_FILE);
        // Not a regular file (a FIFO would block this open): no lock to share.
        let Ok(mut file) = crate::files::open_input(&path) else {
            return Ok(None);
        };
        match file.try_lock_shared() {
            Ok(()) => Ok(Some(FolderLock {
                dir: dir.to_path_buf(),
                _file: Some(file),
                unsupported: None,
            })),
            Err(TryLockError::WouldBlock) => Err(LockError::Held {
                dir: dir.to_path_buf(),
                pid: holder_pid(&mut file),
            }),
            Err(TryLockError::Error(_)) => Ok(None),
        }
    }

    /// The locked folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Remove temporary files (`.<name>.<pid>.tmp`, as [`super::write_atomic`]
    /// names them) that a process which is no longer alive left in the
    /// folder, and return their names. Only safe while holding the lock:
    /// no other herdsim writes here then.
    pub fn remove_stale_temps(&self) -> Vec<String> {
        let mut removed = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return removed;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = temp_pid(&name) else {
                continue;
            };
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file
                && pid != std::process::id()
                && !process_alive(pid)
                && std::fs::remove_file(entry.path()).is_ok()
            {
                removed.push(name);
            }
        }
        removed.sort();
        removed
    }
}

/// The pid in a temporary file name: `.<name>.<pid>.tmp` (see
/// [`super::atomic`], which figures use too) or `.<stem>.tmp-<pid>-<n>.<png|svg>`
/// (a figure left behind by a build that wrote figures on its own).
fn temp_pid(name: &str) -> Option<u32> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let rest = name.strip_prefix('.')?;
    if let Some(rest) = rest.strip_suffix(".tmp") {
        let (base, pid) = rest.rsplit_once('.')?;
        return (!base.is_empty() && digits(pid)).then(|| pid.parse().ok())?;
    }
    let rest = rest
        .strip_suffix(".png")
        .or_else(|| rest.strip_suffix(".svg"))?;
    let (base, tail) = rest.rsplit_once(".tmp-")?;
    let (pid, n) = tail.split_once('-')?;
    (!base.is_empty() && digits(pid) && digits(n)).then(|| pid.parse().ok())?
}

/// Whether process `pid` exists (on Unix: `kill(pid, 0)` does not fail
/// with "no such process"). Elsewhere, assume it does: keep the file.
#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names() {
        assert_eq!(temp_pid(".runs.csv.1234.tmp"), Some(1234));
        assert_eq!(temp_pid(".runs.journal.7.tmp"), Some(7));
        assert_eq!(temp_pid("runs.csv.1234.tmp"), None);
        assert_eq!(temp_pid(".runs.csv.tmp"), None);
        assert_eq!(temp_pid(".1234.tmp"), None);
        assert_eq!(temp_pid(".x.12a.tmp"), None);
        assert_eq!(temp_pid(".comparison.tmp-4321-0.png"), Some(4321));
        assert_eq!(temp_pid(".pareto.tmp-9-12.svg"), Some(9));
        assert_eq!(temp_pid(".comparison.tmp-4321.png"), None);
        assert_eq!(temp_pid("comparison.png"), None);
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("res");
        let held = FolderLock::exclusive(&d).expect("first lock");
        assert!(held.unsupported.is_none());
        // Another handle, as a second process would open (flock locks
        // belong to the open file, so this conflicts within one process too).
        match FolderLock::exclusive(&d) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        assert!(matches!(
            FolderLock::shared(&d),
            Err(LockError::Held { .. })
        ));
        drop(held);
        assert!(FolderLock::shared(&d).expect("free").is_some());
        FolderLock::exclusive(&d).expect("free again");
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lock = FolderLock::exclusive(dir.path()).expect("lock");
        // A pid that cannot be alive (above the Linux maximum of 2^22).
        let dead = dir.path().join(".runs.csv.99999999.tmp");
        let mine = dir
            .path()
            .join(format!(".summary.csv.{}.tmp", std::process::id()));
        let other = dir.path().join("notes.tmp");
        for p in [&dead, &mine, &other] {
            std::fs::write(p, "x").expect("write");
        }
        let removed = lock.remove_stale_temps();
        if cfg!(unix) {
            assert_eq!(removed, vec![".runs.csv.99999999.tmp".to_string()]);
            assert!(!dead.exists());
        }
        assert!(mine.exists() && other.exists());
    }
}
