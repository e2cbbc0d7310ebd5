//! Reporting: reads results, never runs simulations.

pub mod atomic;
#[cfg(feature = "wip")]
pub mod csv_out;
pub mod plot;
#[cfg(feature = "wip")]
pub mod table;
