//! Ctrl-C (SIGINT), SIGTERM and SIGHUP during `herdsim run` and `herdsim
//! live`.
//!
//! The first signal sets a flag. In `run`, the sweep starts no further replication,
//! the ones running finish and are written to the journal, the progress
//! bar is cleared and the run exits with status 130, printing how to
//! resume. A second signal stops at once (status 130; a journal line cut
//! short is detected and its replication rerun on `--resume`). In `live`,
//! the replication in progress stops and what was measured is written.

use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Exit status of a process stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP.
pub const EXIT_INTERRUPTED: u8 = 130;

static STOP: AtomicBool = AtomicBool::new(false);
/// What the first and the second signal print.
static SAY: OnceLock<(String, String)> = OnceLock::new();
/// The progress bar on screen, hidden while a message is printed.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Print a line on stderr without tearing the progress bar.
fn say(line: &str) {
    let bar = BAR.lock().ok().and_then(|b| b.clone());
    match bar {
        Some(b) => b.suspend(|| super::note(line)),
        None => super::note(line),
    }
}

/// Keep `bar` tidy when a signal's message is printed.
pub fn show(bar: ProgressBar) {
    if let Ok(mut b) = BAR.lock() {
        *b = Some(bar);
    }
}

/// Catch the signals (once per process) and return the flag the first one
/// sets, printing `first`; a second signal prints `second` and exits at
/// once with [`EXIT_INTERRUPTED`].
pub fn catch(first: &str, second: String) -> &'static AtomicBool {
    if SAY.set((first.to_string(), second)).is_ok() {
        // A failure (a handler already set) leaves the default: the
        // signal ends the process.
        let _ = ctrlc::set_handler(|| {
            let (first, second) = SAY
                .get()
                .map_or(("", ""), |(f, s)| (f.as_str(), s.as_str()));
            if STOP.swap(true, Ordering::SeqCst) {
                say(second);
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
            say(first);
        });
    }
    &STOP
}

/// [`catch`] for a sweep: the first signal lets the replications in
/// progress finish into `journal`; the second stops at once and says how
/// to resume. `bar` is the progress bar to keep tidy.
pub fn catch_run(journal: &std::path::Path, bar: ProgressBar) -> &'static AtomicBool {
    show(bar);
    let second = format!(
        "herdsim: stopped; the finished replications are in {}; to complete the run:\n  {}",
        journal.display(),
        resume_command()
    );
    catch(
        "herdsim: interrupted: finishing the replications in progress \
         (interrupt again to stop at once)",
        second,
    )
}

/// This command line with `--resume` (and without `--fresh`), quoted for
/// a POSIX shell.
pub fn resume_command() -> String {
    let mut args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    args.retain(|a| a != "--fresh");
    if !args.iter().any(|a| a == "--resume") {
        args.push("--resume".into());
    }
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A shell word: as is when it needs no quoting, else in single quotes.
pub fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--out"), "--out");
        assert_eq!(shell_quote("server.ttl_ms=5"), "server.ttl_ms=5");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("sweep.x=[1, 2]"), "'sweep.x=[1, 2]'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
