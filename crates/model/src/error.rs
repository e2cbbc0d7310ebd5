//! The error of herdsim's library entry points: one taxonomy, and the exit
//! status a failure ends the command line with ([`Error::exit_code`]).
//!
//! `live` and `observe` (in herdsim-net) keep enums of their own
//! (`LiveError`, `ObserveError`) that convert into [`Error`] keeping
//! their message and their exit status; a figure's bad input travels inside
//! an `anyhow::Error` as an [`InputError`] ([`bad_input`]).

use std::io;
use std::path::PathBuf;

/// Exit status 2: bad input (a file, a field, an argument).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status 1: any other failure.
pub const EXIT_FAILURE: u8 = 1;

/// Why a library call herdsim's command line makes did not succeed (a run,
/// a merge, a tuning search, a figure, a server). The command line prints
/// it after `herdsim: error: ` and exits with [`Error::exit_code`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input (a file, a key, an option): the message names it.
    #[error("{0}")]
    Input(String),
    /// A scenario that does not load or validate: bad input.
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    /// A file or folder that could not be read, written, created, moved or
    /// removed: what was being done, the path and the reason (bad input
    /// when the path is refused, [`crate::files::Refused`]).
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done: `writing`, `creating`, ...
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Anything else (a write that failed, a thread that did not start),
    /// shown with its causes; bad input when one of them is a
    /// [`crate::files::Refused`] path or an [`InputError`].
    #[error("{0:#}")]
    Failure(anyhow::Error),
}

impl Error {
    /// Bad input with this message.
    pub fn bad(msg: impl Into<String>) -> Error {
        Error::Input(msg.into())
    }

    /// Doing `action` (`writing`) to `path` failed.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The exit status the command line ends with: [`EXIT_BAD_INPUT`] (2)
    /// for bad input, [`EXIT_FAILURE`] (1) for anything else.
    pub fn exit_code(&self) -> u8 {
        let bad = match self {
            Error::Input(_) | Error::Scenario(_) => true,
            Error::Io { source, .. } => crate::files::is_refused_io(source),
            Error::Failure(e) => crate::files::is_refused(e) || is_input_error(e),
        };
        if bad { EXIT_BAD_INPUT } else { EXIT_FAILURE }
    }

    /// A write to a closed pipe (the reader of stdout went away, `| head`):
    /// not a failure, the reader has what it wanted.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.kind() == io::ErrorKind::BrokenPipe,
            Error::Failure(e) => e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }),
            Error::Input(_) | Error::Scenario(_) => false,
        }
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Failure(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Failure(e.into())
    }
}

/// Bad input carried inside an `anyhow::Error` (a figure's input, a
/// `labels.toml`): the message names the file and the line or field at
/// fault; [`Error::exit_code`] finds it anywhere in the chain.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Wrap an input problem into an `anyhow::Error` that stays bad input
/// ([`is_input_error`]).
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(msg.into()))
}

/// True when `e` is (or wraps) an [`InputError`].
pub fn is_input_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<InputError>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_comes_from_the_type() {
        let scenario = crate::scenario::ScenarioError {
            file: "s.toml".into(),
            key: Some("server.ttl_ms".into()),
            pos: Some((3, 10)),
            message: "must be positive".into(),
        };
        let shown = scenario.to_string();
        let e = Error::from(scenario);
        assert_eq!((e.exit_code(), e.to_string()), (2, shown));
        assert_eq!(Error::bad("x").exit_code(), 2);
        let failed = Error::from(anyhow::anyhow!("disk full").context("out/summary.csv"));
        assert_eq!(failed.exit_code(), 1);
        assert_eq!(failed.to_string(), "out/summary.csv: disk full");
        let e = Error::from(bad_input("plot.csv:2:3: not a number").context("drawing"));
        assert_eq!(e.exit_code(), 2);
        let refused = io::Error::other(crate::files::Refused("a directory".into()));
        assert_eq!(Error::io("creating", "out", refused).exit_code(), 2);
        let e = Error::io(
            "writing",
            "out/a.csv",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("writing out/a.csv: "), "{e}");
        let pipe = Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(pipe.is_broken_pipe() && !Error::bad("x").is_broken_pipe());
    }
}
