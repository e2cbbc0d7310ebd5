//! The simulator's side of the crate: what herdsim's simulator, its
//! agentchat emulation and its tools use beyond an embedder's API.
//!
//! An embedder needs nothing here: the crate root has both halves and
//! their configurations. What is here is public so that herdsim's other
//! crates drive the same code an embedder does, with no private side door:
//!
//! - [`Client`] and [`Action`]: the decision core under [`crate::Agent`],
//!   for a caller that keeps its own timers (the simulator's live on its
//!   event queue), with the fault hooks the simulator injects
//!   ([`Client::set_ignore_yield`], [`Client::start_now`]).
//! - The policies' rules ([`Rules`], [`Slot`], [`Verdict`],
//!   [`Expiry`], ...: what [`PolicyKind::rules`](crate::PolicyKind::rules)
//!   and [`PolicyKind::judge`](crate::PolicyKind::judge) give), which the
//!   simulator's independent checks and the reports read.
//! - `agentchat-0.36`'s constants (its rate limit, sweep period, frame
//!   limits, channel names) and its reading of the TTL variable
//!   ([`agentchat_ttl`], [`NEVER`]).
//! - The claim guard's memory ([`RelayMemory`]) and what a run's decisions
//!   asked of the TTL ([`TtlAudit`]).
//! - Channel and DM names as the server reads them ([`is_channel`],
//!   [`is_dm`]).
//!
//! These items may change in a minor release; the crate root's may not.

pub use crate::client::{Action, Client};
pub use crate::naming::{is_channel, is_dm};
pub use crate::policy::{
    AGENTCHAT_CHANNEL_MAX, AGENTCHAT_DEFAULT_CHANNELS, AGENTCHAT_FRAME_WINDOW_MS,
    AGENTCHAT_FRAMES_IDENTIFIED, AGENTCHAT_FRAMES_UNIDENTIFIED, AGENTCHAT_RATE_LIMIT_MS,
    AGENTCHAT_SWEEP_MS, AGENTCHAT_TTL_VAR, Announce, Channels, ClaimOrder, ENABLED_VAR, ErrorStyle,
    Expiry, FrameWindow, MsgGate, REASON_DENIED, REASON_DISPLACED, Release, RepeatClaim, Rules,
    Slot, StartedAtRule, TTL_VAR, Verdict, YieldForm,
};
pub use crate::relay_memory::{
    RELAY_MEMORY_MAX, RELAY_MEMORY_MS, RELAY_MEMORY_PER_SENDER, RelayMemory,
};
pub use crate::server::{NEVER, agentchat_ttl};
pub use crate::ttl_audit::TtlAudit;
