//! Reporting: reads results, never runs simulations.
//!
//! The layers above (sweep, live, calibrate, tune, the command line) use
//! report through what this file exports, never through its internals:
//!
//! - writing results: [`write_atomic`] (temporary file, then rename),
//!   [`FolderLock`] (one writer per results folder), [`same_path`] (an
//!   output must never be an input), the CSV files ([`summarise`],
//!   [`summary_csv`], [`runs_csv`], [`num`]) and the axis labels file
//!   ([`labels_toml`]);
//! - what `herdsim plot` draws where: [`plot_summary`], [`plot_timeline`];
//! - [`plot`]: the figures as a library (the comparison grid, metric
//!   plots, timelines, and the figures tune, calibrate and live draw);
//! - [`table`]: results as text for the terminal;
//! - [`versus`]: live against simulated (the table, compare.csv and the
//!   figure `herdsim live --compare` writes).

mod atomic;
mod csv_out;
mod figures;
mod labels;
mod lock;
mod paths;
pub mod plot;
pub mod table;
pub mod versus;

pub use atomic::write as write_atomic;
pub use csv_out::{SummaryRow, num, runs_csv, runs_header, summarise, summary_csv, summary_header};
pub use figures::{summary as plot_summary, timeline as plot_timeline};
pub use labels::{LABELS_FILE, to_toml as labels_toml};
pub use lock::{FolderLock, LOCK_FILE, LockError};
pub use paths::same as same_path;
