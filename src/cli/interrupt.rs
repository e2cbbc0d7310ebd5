//! Ctrl-C (SIGINT), SIGTERM and SIGHUP during `herdsim run`.
//!
//! The first signal sets a flag: the sweep starts no further replication,
//! the ones running finish and are written to the journal, the progress
//! bar is cleared and the run exits with status 130, printing how to
//! resume. A second signal stops at once (status 130; a journal line cut
//! short is detected and its replication rerun on `--resume`).

use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static STOP: AtomicBool = AtomicBool::new(false);
static HINT: OnceLock<String> = OnceLock::new();
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

/// Catch the signals (once per process) and return the flag they set.
/// `journal` is named in the message a second signal prints; `bar` is
/// the progress bar to keep tidy.
pub fn catch(journal: &std::path::Path, bar: ProgressBar) -> &'static AtomicBool {
    if let Ok(mut b) = BAR.lock() {
        *b = Some(bar);
    }
    let hint = format!(
        "the finished replications are in {}; to complete the run:\n  {}",
        journal.display(),
        resume_command()
    );
    if HINT.set(hint).is_ok() {
        // A failure (a handler already set) leaves the default: the
        // signal ends the process, and the journal still holds every
        // finished replication.
        let _ = ctrlc::set_handler(|| {
            if STOP.swap(true, Ordering::SeqCst) {
                say(&format!(
                    "herdsim: stopped; {}",
                    HINT.get().map_or("", String::as_str)
                ));
                std::process::exit(i32::from(super::EXIT_INTERRUPTED));
            }
            say(
                "herdsim: interrupted: finishing the replications in progress \
                 (interrupt again to stop at once)",
            );
        });
    }
    &STOP
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

fn shell_quote(a: &str) -> String {
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
