//! The terminal side of any front end: one-line notes on stderr that never
//! panic, results on stdout, a progress bar that implements the library's
//! [`Observer`](crate::progress::Observer), and Ctrl-C handling that turns the
//! first signal into a stop flag. The CLI and `live` share it; nothing on a
//! simulated run's path calls it.

pub mod interrupt;
pub mod progress;

pub use progress::Term;

use crate::error::Error;
use std::io::Write;

/// Write `text` to stdout, all of it, and flush. Never panics (unlike
/// `print!`): a write error comes back as a failure naming stdout; a
/// closed pipe (`herdsim ... | head`) is recognised by [`main`], which
/// then exits quietly.
pub fn print_out(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Error::Failure(anyhow::Error::new(e).context("cannot write to stdout")))
}

/// Write one diagnostic line to stderr. Never panics: when stderr itself
/// cannot be written (closed, a full disk), the line is lost and nothing
/// else happens (the exit status still tells).
pub fn note(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `1 thread`, `2 threads`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}
