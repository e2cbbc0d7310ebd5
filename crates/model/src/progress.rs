//! What a long operation (a run, a merge, a tuning search) tells its user
//! while it works: a progress meter and diagnostic lines. The library
//! calls an [`Observer`]; the command line implements it with a progress
//! bar and stderr, a test with nothing (`&()`) or a recorder. It sits at the
//! bottom of the crate, so that any layer can report through it.

/// Receives progress and notes. Every method has a default that does
/// nothing; calls may come from any worker thread.
pub trait Observer: Sync {
    /// The work ahead is `total` units (it may be raised later).
    fn length(&self, _total: u64) {}
    /// `done` units were finished before this process started (resumed).
    fn resumed_at(&self, _done: u64) {}
    /// `units` more are done.
    fn advance(&self, _units: u64) {}
    /// What is being done now (`points 3/6, replications 20/48`).
    fn message(&self, _text: String) {}
    /// The work is over: take the meter off the screen.
    fn finish(&self) {}
    /// A line the user must see (a warning, what happens to their files).
    fn warn(&self, _line: &str) {}
    /// A line of information (`--quiet` hides it).
    fn info(&self, _line: &str) {}
}

/// Observes nothing.
impl Observer for () {}
