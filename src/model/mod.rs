//! The world model of docs/model.md: agents, links, workload, faults. Randomness
//! enters the simulation only here (per-component ChaCha streams).

pub mod dense;
pub mod world;

pub use world::{Posts, Prepared, RunLimit, TraceBuf, simulate, simulate_posts};
