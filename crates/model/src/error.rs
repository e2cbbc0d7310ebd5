//! The error of herdsim's library entry points.

/// Why a library call herdsim's command line makes did not succeed (a run,
/// a merge, a tuning search, a figure, a server): the command line maps
/// [`Error::Input`] to exit status 2 and [`Error::Failure`] to 1.
#[derive(Debug)]
pub enum Error {
    /// Bad input (a file, a key, an option): the message names it.
    Input(String),
    /// Anything else (a write that failed, a thread that did not start).
    Failure(anyhow::Error),
}

impl Error {
    /// Bad input with this message.
    pub fn bad(msg: impl Into<String>) -> Error {
        Error::Input(msg.into())
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Failure(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Failure(e.into())
    }
}

impl From<crate::scenario::ScenarioError> for Error {
    fn from(e: crate::scenario::ScenarioError) -> Self {
        Error::Input(e.to_string())
    }
}
