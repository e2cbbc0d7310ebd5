//! `herdsim-floor`: the RESPONDING_TO / YIELD floor-control logic, sans-IO.
//!
//! This crate is the *real* arbitration logic a production chat server (and
//! a real agent) could embed. It knows nothing of the simulator: it takes
//! messages plus the current time and returns the messages to send. No
//! clocks, no sockets, no threads, no randomness. It depends on no other part
//! of herdsim (herdsim re-exports it as `herdsim::floor`).
//!
//! - [`naming`]: how agents, channels and messages are named: wire text
//!   ([`Text`], the default) or the embedder's own handles (small integers
//!   in the simulator); the state machines are generic over it.
//! - [`wire`]: the JSON wire protocol (RESPONDING_TO, YIELD, MSG,
//!   FLOOR_CLAIMED, ERROR) with strict, panic-free decoding.
//! - [`dialect`]: a real agentchat server's frames (`msg_id`, `@` ids,
//!   replays, notices) read into that wire, for an agent on a real server.
//! - [`policy`]: the named arbitration policies (`none`, `spec`,
//!   `agentchat-0.36`, `tombstone`, `server-time`).
//! - [`server`]: the server side: channel membership, the claim table, relay.
//! - [`edge`]: the server's edge: wire frames to [`Input`]s, and the texts
//!   of its typed refusals ([`edge::Refusal`]; agentchat's, under its policy).
//! - [`relay_memory`]: what the claim guard remembers of the relays.
//! - [`client`]: the agent side: CSMA wait, claim, infer, abort, reply.
//! - [`ttl_audit`]: what a run's decisions asked of the claim TTL.
//!
//! # The loop
//!
//! Both halves take an input and the time and append what to do; the
//! embedder owns the clock, the timers, the randomness and the sockets.
//!
//! The server has one way in and one way out: [`Server::handle`] takes the
//! time and one [`Input`] (a client frame, decoded at the edge by
//! [`edge::decode`]; a join, a leave, a disconnect; or [`Input::Tick`] when
//! [`Server::poll_timeout`] is due, for claim expiry) and appends to a
//! [`Sends`]: each payload once, and who gets it. A transport's loop:
//!
//! ```
//! use herdsim_floor::{Config, Input, Role, Sends, Server, edge};
//!
//! let mut server = Server::new(Config::default());
//! let mut sends = Sends::new();
//! // A frame arrives from a connection: decode it at the edge, handle it.
//! let mut on_frame = |now_ms, from: &str, frame: &[u8], sends: &mut Sends| {
//!     server.handle(now_ms, edge::decode_bytes(from, Role::Agent, frame), sends);
//! };
//! on_frame(0, "alice", br##"{"type":"JOIN","channel":"#general"}"##, &mut sends);
//! on_frame(5, "alice", b"{not json", &mut sends);
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
//! The herdsim repository's `floor_server` example puts that loop behind a
//! WebSocket. An agent feeds every
//! question it wants to answer to [`Client::on_message`], every frame from
//! the server to [`Client::on_server_msg`], every timer to
//! [`Client::on_timer`] and every finished inference to
//! [`Client::on_inference_done`], and carries out the [`Action`]s: wait
//! (the CSMA delay the client drew in its window, from the caller's
//! randomness: a [`CsmaDraw`]), send this claim, start or abort the
//! inference, post the reply.
//!
//! Two agents and a question under `spec` (the earliest starter keeps the
//! floor): alice's CSMA wait ends first, so she claims and starts; the
//! server relays her claim to bob, whose wait ends later, and he skips.
//!
//! ```
//! use herdsim_floor::{
//!     Action, Client, ClientConfig, ClientMsg, Config, CsmaWindow, Input, PolicyKind, Role,
//!     Sends, Server, ServerMsg, SkipReason,
//! };
//!
//! let mut server = Server::new(Config::default()); // spec, claims live 45 s
//! let mut out = Sends::new();
//! for who in ["operator", "alice", "bob"] {
//!     let join = Input::Join { agent: who.into(), channel: "#general".into() };
//!     server.handle(0, join, &mut out);
//! }
//! let client = |id: &str| {
//!     Client::new(ClientConfig {
//!         id: id.into(),
//!         policy: PolicyKind::Spec,
//!         ttl_ms: 45_000,
//!         recheck_on_expiry: false,
//!         max_rechecks: 0,
//!         csma: CsmaWindow { min_ms: 0, max_ms: 2_000 },
//!     })
//! };
//! let (mut alice, mut bob) = (client("alice"), client("bob"));
//!
//! // t = 10 ms: the operator asks; the server relays the question.
//! let ask = ClientMsg::Msg {
//!     id: Some("q1".into()),
//!     to: "#general".into(),
//!     content: "what is the claim TTL?".into(),
//!     in_reply_to: None,
//! };
//! server.handle(10, Input::Client { from: "operator".into(), role: Role::Operator, msg: ask }, &mut out);
//! assert!(out.iter().any(|(to, msg)| to == "bob" && matches!(msg, ServerMsg::Msg { .. })));
//!
//! // Both want to answer: each client draws a CSMA wait in its window from
//! // its agent's randomness (here fixed uniform draws: 0.495 and 1.0).
//! let (mut a, mut b) = (Vec::new(), Vec::new());
//! alice.on_message(10, "q1", "#general", false, &mut || 0.495, &mut a);
//! bob.on_message(10, "q1", "#general", false, &mut || 1.0, &mut b);
//! assert_eq!(a, [Action::Wait { msg_id: "q1".into(), delay_us: 990_000 }]);
//! assert_eq!(b, [Action::Wait { msg_id: "q1".into(), delay_us: 2_000_000 }]);
//!
//! // t = 1 s: alice's wait ends; she claims the floor and starts inferring.
//! // (A call that may start a new wait takes the draw too.)
//! let mut draw = || 0.5;
//! a.clear();
//! alice.on_timer(1_000, "q1", &mut draw, &mut a);
//! let Action::Send(claim) = a[0].clone() else { panic!("a claim first") };
//! assert_eq!(a[1], Action::StartInference { msg_id: "q1".into(), started_at: 1_000 });
//!
//! // The server takes the claim and relays it to the channel.
//! out.clear();
//! server.handle(1_002, Input::Client { from: "alice".into(), role: Role::Agent, msg: claim }, &mut out);
//! for (_, msg) in out.iter().filter(|(to, _)| *to == "bob") {
//!     bob.on_server_msg(1_004, msg, &mut b);
//! }
//!
//! // t = 2.01 s: bob's wait ends; the claim is live, so he skips.
//! b.clear();
//! bob.on_timer(2_010, "q1", &mut draw, &mut b);
//! assert_eq!(b, [Action::Skip { msg_id: "q1".into(), reason: SkipReason::SeenClaim }]);
//! assert_eq!(server.holder("#general", "q1").map(|(h, _)| h.as_str()), Some("alice"));
//!
//! // t = 2.2 s: alice's inference is done; she posts her answer.
//! a.clear();
//! alice.on_inference_done(2_200, "q1", Some("a1".into()), "45 s".into(), &mut a);
//! let [Action::Post(ClientMsg::Msg { in_reply_to, .. })] = &a[..] else { panic!("a reply") };
//! assert_eq!(in_reply_to.as_deref(), Some("q1"));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod dialect;
pub mod edge;
pub mod naming;
pub mod policy;
pub mod relay_memory;
pub mod server;
pub mod ttl_audit;
pub mod wire;

pub use client::{Action, Client, ClientConfig, CsmaDraw, CsmaWindow, SkipReason};
pub use naming::{Naming, Place, Text};
pub use policy::PolicyKind;
pub use server::{ClaimGuard, ClaimInfo, Config, ConfigError, Input, Role, Sends, Server, Stats};
pub use ttl_audit::TtlAudit;
pub use wire::{ClientMsg, DecodeError, ServerMsg, YieldDetail};

#[cfg(test)]
pub(crate) mod proptests;

/// The README's two loops, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
