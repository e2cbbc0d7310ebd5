//! The server's frames as `live` reads them: the agentchat 0.36 dialect,
//! which the floor crate keeps at its edge (`herdsim_floor::dialect`), so
//! that an agent embedding the floor reads a real server as `live` does.

pub use crate::floor::dialect::*;
