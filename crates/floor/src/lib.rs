//! `herdsim-floor`: the RESPONDING_TO / YIELD floor-control logic, sans-IO.
//!
//! This crate is the *real* arbitration logic a production chat server (and
//! a real agent) could embed. It knows nothing of the simulator: it takes
//! messages plus the current time and returns the messages to send. No
//! clocks, no sockets, no threads, no randomness. It depends on no other part
//! of herdsim (herdsim re-exports it as `herdsim::floor`).
//!
//! The items an embedder needs are at the crate root, each by one path:
//! [`Server`] and its [`Config`] (with [`ClaimGuard`] and [`PolicyKind`]),
//! [`Input`] and [`Role`], [`Sends`], [`Stats`]; [`Agent`] and its
//! [`ClientConfig`] (with [`CsmaWindow`]), [`AgentInput`], [`AgentOutput`],
//! [`SkipReason`]; the wire's [`ClientMsg`] and [`ServerMsg`]; the one time
//! type [`Millis`]; the protocol's defaults ([`DEFAULT_TTL_MS`],
//! [`DEFAULT_CSMA_MIN_MS`], [`DEFAULT_CSMA_MAX_MS`]); and [`Naming`], how
//! agents, channels and messages are named (wire [`Text`] by default, or
//! the embedder's own handles). Five modules hold the rest:
//!
//! - [`wire`]: the JSON wire protocol (RESPONDING_TO, YIELD, MSG,
//!   FLOOR_CLAIMED, FLOOR_RELEASED, ERROR) with strict, panic-free decoding.
//! - [`edge`]: the server's edge: wire frames to [`Input`]s, and the texts
//!   of its typed refusals ([`edge::Refusal`]; agentchat's, under its policy).
//! - [`address`]: agent ids, channel names, and who a message @mentions.
//! - [`dialect`]: a real agentchat server's frames (`msg_id`, `@` ids,
//!   replays, notices) read into that wire, for an agent on a real server.
//! - [`sim`]: what herdsim's simulator and its agentchat emulation use
//!   beyond this: the decision core under [`Agent`] for a caller that keeps
//!   its own timers, the policies' rules, agentchat's constants. An
//!   embedder needs none of it.
//!
//! # The two loops
//!
//! Both halves take an input and the time ([`Millis`], the embedder's
//! clock) and give back what to do; the embedder owns the clock, the
//! sockets and the randomness.
//!
//! The server has one way in and one way out: [`Server::handle`] takes the
//! time and one [`Input`] (a client frame, decoded at the edge by
//! [`edge::decode`]; a join, a leave, a disconnect; or [`Input::Tick`] when
//! [`Server::poll_timeout`] is due, for claim expiry) and appends to a
//! [`Sends`]: each payload once, and who gets it. A transport's loop:
//!
//! ```
//! use herdsim_floor::{Config, Input, Millis, Role, Sends, Server, edge};
//!
//! let mut server = Server::new(Config::default());
//! let mut sends = Sends::new();
//! // A frame arrives from a connection: decode it at the edge, handle it.
//! let mut on_frame = |now, from: &str, frame: &[u8], sends: &mut Sends| {
//!     server.handle(now, edge::decode_bytes(from, Role::Agent, frame), sends);
//! };
//! on_frame(Millis(0), "alice", br##"{"type":"JOIN","channel":"#general"}"##, &mut sends);
//! on_frame(Millis(5), "alice", b"{not json", &mut sends);
//! // Write each send to its recipient, encoding each payload once.
//! let written: Vec<(String, String)> =
//!     sends.iter().map(|(to, msg)| (to.clone(), msg.to_json_string())).collect();
//! assert_eq!(written.len(), 1);
//! assert!(written[0].1.starts_with(r#"{"type":"ERROR","code":"bad_message""#));
//! sends.clear();
//! // When no frame comes before `server.poll_timeout()`, the transport
//! // hands the server `Input::Tick` at that time (claims expire).
//! ```
//!
//! The agent half has one way in too: [`Agent::handle_input`] takes the
//! time and one [`AgentInput`] (every frame from the server; a message the
//! agent would like to answer; a finished inference; the timeout), and one
//! way out: [`Agent::poll_output`] until `None`, then
//! [`Agent::poll_timeout`], the one timer the embedder keeps. The CSMA
//! wait's randomness is handed over once, at [`Agent::new`].
//!
//! Two agents and a question under `spec` (the earliest starter keeps the
//! floor): alice's CSMA wait ends first, so she claims and starts; the
//! server relays her claim to bob, whose wait ends later, and he skips.
//!
//! ```
//! use herdsim_floor::{
//!     Agent, AgentInput, AgentOutput, ClientConfig, ClientMsg, Config, CsmaWindow, Input,
//!     Millis, Role, Sends, Server, ServerMsg, SkipReason,
//! };
//!
//! let mut server = Server::new(Config::default()); // spec, claims live 45 s
//! let mut out = Sends::new();
//! for who in ["operator", "alice", "bob"] {
//!     let join = Input::Join { agent: who.into(), channel: "#general".into() };
//!     server.handle(Millis(0), join, &mut out);
//! }
//! // Each agent's CSMA draws (uniform in [0, 1)) come from its own
//! // randomness; fixed here: alice waits 0.99 s, bob 2 s.
//! let window = CsmaWindow { min_ms: 0, max_ms: 2_000 };
//! let config = |id: &str| {
//!     let mut c = ClientConfig::new(id); // the protocol's defaults
//!     c.csma = window;
//!     c
//! };
//! let mut alice = Agent::new(config("alice"), || 0.495);
//! let mut bob = Agent::new(config("bob"), || 1.0);
//!
//! // t = 10 ms: the operator asks; the server relays the question; both
//! // agents would like to answer it.
//! let ask = ClientMsg::Msg {
//!     id: Some("q1".into()),
//!     to: "#general".into(),
//!     content: "what is the claim TTL?".into(),
//!     in_reply_to: None,
//! };
//! server.handle(Millis(10), Input::Client { from: "operator".into(), role: Role::Operator, msg: ask }, &mut out);
//! let question = out.iter().find(|(to, _)| *to == "bob").map(|(_, m)| m.clone()).unwrap();
//! alice.handle_input(Millis(12), AgentInput::Frame(&question));
//! alice.handle_input(Millis(12), AgentInput::Answer(&question));
//! bob.handle_input(Millis(12), AgentInput::Frame(&question));
//! bob.handle_input(Millis(12), AgentInput::Answer(&question));
//! assert_eq!((alice.poll_timeout(), bob.poll_timeout()), (Some(Millis(1_002)), Some(Millis(2_012))));
//!
//! // t = 1.002 s: alice's wait ends; she claims the floor and starts inferring.
//! alice.handle_input(Millis(1_002), AgentInput::Timeout);
//! let Some(AgentOutput::Transmit(claim)) = alice.poll_output() else { panic!("a claim first") };
//! assert!(matches!(alice.poll_output(), Some(AgentOutput::StartInference { .. })));
//!
//! // The server takes the claim and relays it to the channel.
//! out.clear();
//! server.handle(Millis(1_004), Input::Client { from: "alice".into(), role: Role::Agent, msg: claim }, &mut out);
//! for (_, msg) in out.iter().filter(|(to, _)| *to == "bob") {
//!     bob.handle_input(Millis(1_006), AgentInput::Frame(msg));
//! }
//!
//! // t = 2.012 s: bob's wait ends; the claim is live, so he skips.
//! bob.handle_input(Millis(2_012), AgentInput::Timeout);
//! assert_eq!(bob.poll_output(), Some(AgentOutput::Skipped { msg_id: "q1".into(), reason: SkipReason::SeenClaim }));
//! assert_eq!(server.holder("#general", "q1").map(|(h, _)| h.as_str()), Some("alice"));
//!
//! // t = 2.2 s: alice's inference is done; she posts her answer.
//! alice.handle_input(Millis(2_200), AgentInput::InferenceDone { msg_id: "q1", reply_id: Some("a1"), content: "45 s" });
//! let Some(AgentOutput::Transmit(ClientMsg::Msg { in_reply_to, .. })) = alice.poll_output() else { panic!("a reply") };
//! assert_eq!(in_reply_to.as_deref(), Some("q1"));
//! ```
//!
//! The herdsim repository's `floor_server` and `floor_agent` examples put
//! these loops behind WebSockets.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod agent;
mod client;
mod input;
mod naming;
mod policy;
mod relay_memory;
mod server;
mod time;
mod ttl_audit;

pub mod address;
pub mod dialect;
pub mod edge;
pub mod sim;
pub mod wire;

pub use agent::{Agent, AgentInput, AgentOutput};
pub use client::{
    ClientConfig, CsmaDraw, CsmaWindow, DEFAULT_CSMA_MAX_MS, DEFAULT_CSMA_MIN_MS, SkipReason,
};
pub use input::{Input, Role};
pub use naming::{Naming, Place, Text};
pub use policy::{DEFAULT_TTL_MS, PolicyKind};
pub use server::{
    ClaimGuard, ClaimInfo, Config, ConfigError, DEFAULT_CLAIM_SKEW_MS, Sends, Server, Stats,
};
pub use time::Millis;
pub use wire::{ClientMsg, DecodeError, ServerMsg, YieldDetail};

#[cfg(test)]
pub(crate) mod proptests;

/// The README's two loops, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
