//! The world model of MODEL.md: agents, links, workload, faults. Randomness
//! enters the simulation only here (per-component ChaCha streams).

pub mod dist;
pub mod names;
#[cfg(feature = "wip")]
pub mod world;

#[cfg(feature = "wip")]
pub use world::{Prepared, TraceBuf, simulate};
