//! Reporting: reads results, never runs simulations.

pub mod atomic;
pub mod csv_out;
pub mod figures;
pub mod labels;
pub mod lock;
pub mod paths;
pub mod plot;
pub mod table;
