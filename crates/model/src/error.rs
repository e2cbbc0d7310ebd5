//! The error of herdsim's library entry points: one taxonomy, and the exit
//! status a failure ends the command line with ([`Error::exit_code`]).
//!
//! The exit status comes from the variant ([`Error::exit_code`] looks into
//! no message and no chain). `live` and `observe` (in herdsim-net) keep
//! enums of their own (`LiveError`, `ObserveError`, with their io sources)
//! that convert into [`Error`] by kind: bad input into [`Error::Input`] or
//! [`Error::Scenario`], failures into [`Error::Other`] with their sources.
//! A refused path is [`Error::Refused`]; a figure's bad input travels
//! inside an `anyhow::Error` as an [`InputError`] ([`bad_input`]) and is
//! sorted into [`Error::BadInput`] where the `anyhow::Error` enters this
//! taxonomy (`From<anyhow::Error>`).

use crate::files::Refused;
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
    /// A path refused as an input or an output (a folder, a link, a
    /// device, a file too large: [`Refused`]): bad input, shown as
    /// [`Error::Io`] is.
    #[error("{action} {}: {source}", path.display())]
    Refused {
        /// What was being done: `writing`, `creating`, ...
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// What the path is, in words.
        source: Refused,
    },
    /// A file or folder that could not be read, written, created, moved or
    /// removed: what was being done, the path and the reason (a refused
    /// path is [`Error::Refused`]).
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done: `writing`, `creating`, ...
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Bad input that a layer below reported inside an `anyhow::Error` (a
    /// figure's [`InputError`], a [`Refused`] path under a context), shown
    /// with its causes.
    #[error("{0:#}")]
    BadInput(anyhow::Error),
    /// A failure that a layer above types itself (`live`'s and `observe`'s
    /// errors, with their io sources): shown as it shows itself.
    #[error("{0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// Anything else (a write that failed, a thread that did not start),
    /// shown with its causes.
    #[error("{0:#}")]
    Failure(anyhow::Error),
}

impl Error {
    /// Bad input with this message.
    pub fn bad(msg: impl Into<String>) -> Error {
        Error::Input(msg.into())
    }

    /// Doing `action` (`writing`) to `path` failed: [`Error::Refused`] when
    /// the io error carries a [`Refused`] path (the files module hands
    /// refusals up as io errors, the type std's writers return), else
    /// [`Error::Io`].
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        if !crate::files::is_refused_io(&source) {
            return Error::Io {
                action,
                path,
                source,
            };
        }
        let kind = source.kind();
        match source.into_inner().map(|inner| inner.downcast::<Refused>()) {
            Some(Ok(refused)) => Error::Refused {
                action,
                path,
                source: *refused,
            },
            // Not reached (is_refused_io said it holds a Refused).
            Some(Err(inner)) => Error::Io {
                action,
                path,
                source: io::Error::new(kind, inner),
            },
            None => Error::Io {
                action,
                path,
                source: kind.into(),
            },
        }
    }

    /// The exit status the command line ends with: [`EXIT_BAD_INPUT`] (2)
    /// for bad input, [`EXIT_FAILURE`] (1) for anything else; from the
    /// variant alone.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) | Error::Scenario(_) | Error::Refused { .. } | Error::BadInput(_) => {
                EXIT_BAD_INPUT
            }
            Error::Io { .. } | Error::Other(_) | Error::Failure(_) => EXIT_FAILURE,
        }
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
            Error::Input(_)
            | Error::Scenario(_)
            | Error::Refused { .. }
            | Error::BadInput(_)
            | Error::Other(_) => false,
        }
    }
}

/// Where an untyped error enters the taxonomy, and the one place a chain is
/// looked into: the layers below hand up a figure's bad input and a
/// refused path inside `anyhow::Error`s and io errors (their writers'
/// signatures are std's and anyhow's), so the kind is read once here and
/// kept in the variant ([`Error::BadInput`] or [`Error::Failure`]).
impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        if crate::files::is_refused(&e) || is_input_error(&e) {
            Error::BadInput(e)
        } else {
            Error::Failure(e)
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::from(anyhow::Error::from(e))
    }
}

/// Bad input carried inside an `anyhow::Error` (a figure's input, a
/// `labels.toml`): the message names the file and the line or field at
/// fault; `From<anyhow::Error>` finds it anywhere in the chain and makes
/// it an [`Error::BadInput`].
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
        assert!(matches!(e, Error::BadInput(_)), "{e:?}");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.to_string(), "drawing: plot.csv:2:3: not a number");
        let refused = io::Error::from(Refused("a directory".into()));
        let e = Error::io("creating", "out", refused);
        assert!(matches!(&e, Error::Refused { source, .. } if source.0 == "a directory"));
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, "creating out: a directory".into())
        );
        let refused = anyhow::Error::from(io::Error::from(Refused("a FIFO".into())));
        let e = Error::from(refused.context("writing out/a.csv"));
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, "writing out/a.csv: a FIFO".into())
        );
        let other = Error::Other("the server closed the connection".into());
        assert_eq!(other.exit_code(), 1);
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
