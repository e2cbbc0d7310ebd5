//! The world model of docs/model.md: agents, links, workload, faults. Randomness
//! enters the simulation only here (a stream per component, `dist::stream`).

pub mod dense;
pub mod world;

pub use world::{Posts, Prepared, RunLimit, TraceBuf, simulate, simulate_posts, simulate_ttl};
