//! The agent half as one state machine: [`Agent`]. One way in
//! ([`Agent::handle_input`]: an [`AgentInput`] and the time), one way out
//! ([`Agent::poll_output`] until `None`, then [`Agent::poll_timeout`]: the
//! next time it wants to be woken). Its timers (the CSMA waits, the
//! rechecks) are inside; the embedder keeps one timer for the whole agent.
//! The randomness of the CSMA wait is the embedder's too, handed over once
//! at [`Agent::new`] as a [`CsmaDraw`] (a closure of uniform draws).
//!
//! What the embedder does, all of it:
//! - every frame the server sends goes in as [`AgentInput::Frame`];
//! - a channel message or DM the agent would like to answer goes in as
//!   [`AgentInput::Answer`] (whether to answer at all is the agent's own
//!   business: its relevance test, its budget);
//! - when its inference finishes: [`AgentInput::InferenceDone`];
//! - when the time of [`Agent::poll_timeout`] comes: [`AgentInput::Timeout`]
//!   (any input runs the timers due by its time first);
//! - after its connection was lost and came back: [`AgentInput::Reset`];
//! - then it carries out every [`AgentOutput`]: transmit a frame, start or
//!   abort an inference.
//!
//! # Who answers what (the exemptions, decided here)
//!
//! From the message and the agent's own id, never from a flag:
//! - a **DM** (`to` is `@<id>`) is answered at once, with no CSMA wait and
//!   no claim (the protocol does not apply to DMs); the reply goes back to
//!   the sender;
//! - a message from the server itself (`@server`) likewise;
//! - a channel message that **@mentions this agent** is answered at once,
//!   without a claim, and is never aborted;
//! - a channel message that @mentions **only others** (no broadcast word:
//!   [`crate::address::BROADCAST`]) is left to them: [`AgentOutput::Skipped`]
//!   with [`SkipReason::AddressedToOthers`]. So an @mention is answered
//!   once, by the agent it names (by each agent it names, if it names
//!   several), and nobody claims it;
//! - every other channel message goes through the protocol: a CSMA wait in
//!   [`ClientConfig::csma`], then skip if a claim is believed live or an
//!   answer was seen, else claim (`RESPONDING_TO`) and infer, aborting on a
//!   YIELD or, under `spec` and `tombstone`, on a relayed claim that orders
//!   first (earlier `started_at`, ties to the smaller agent id: the
//!   server's order).
//!
//! An **operator's** message is not exempt here: "humans always get the
//! floor" is the server's side (an operator's claim takes the floor; see
//! [`crate::sim::Rules::operator_takes_floor`]), so an operator's
//! question is answered once like anyone's, and an operator's
//! `RESPONDING_TO` makes the agents skip or abort exactly as the server
//! holds it.
//!
//! A claim whose holder disconnects or leaves is announced by the server
//! as `FLOOR_RELEASED`: an agent that skipped the message for it starts a
//! new CSMA wait at once, so the question is answered again without
//! waiting for the TTL (see [`crate::sim::Client`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::address::{addressed_to_others, mentions};
use crate::client::{Action, Client, ClientConfig, CsmaDraw, SkipReason};
use crate::dialect::SERVER_SENDER;
use crate::time::Millis;
use crate::wire::{ClientMsg, ServerMsg};

/// One input to an [`Agent`], with the time, through
/// [`Agent::handle_input`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum AgentInput<'a> {
    /// A frame from the server, decoded ([`ServerMsg::decode_str`]): relayed
    /// messages, claims, YIELDs, releases. Feed every one.
    Frame(&'a ServerMsg),
    /// The agent would like to answer this relayed message (a
    /// [`ServerMsg::Msg`]; anything else is ignored, as is its own message
    /// or one it is already handling). Whether it may, and when, is the
    /// agent half's decision (see the module docs).
    Answer(&'a ServerMsg),
    /// The inference started by [`AgentOutput::StartInference`] for
    /// `msg_id` finished with `content`: the reply is transmitted (with
    /// `reply_id` as its id, if given). Nothing if it was aborted.
    InferenceDone {
        /// The message answered.
        msg_id: &'a str,
        /// The reply's own id, if the agent chooses one.
        reply_id: Option<&'a str>,
        /// The answer.
        content: &'a str,
    },
    /// The time of [`Agent::poll_timeout`] has come (any input runs the
    /// timers due by its time; this one does only that).
    Timeout,
    /// The agent's connection was lost and is back (or it restarted):
    /// every message it was handling is forgotten, with its timers.
    Reset,
}

/// One thing for the embedder to do, from [`Agent::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentOutput {
    /// Send this frame to the server (a claim, or a reply).
    Transmit(ClientMsg),
    /// Start the inference answering `msg_id`; hand its result back as
    /// [`AgentInput::InferenceDone`].
    StartInference {
        /// The message to answer.
        msg_id: String,
        /// The time it started (the claim's `started_at`).
        started_at: Millis,
        /// Answered without a claim (a DM, an @mention of this agent, a
        /// server message): never aborted.
        exempt: bool,
    },
    /// Abort the inference for `msg_id`: `winner` has the floor. Send
    /// nothing for it.
    AbortInference {
        /// The message whose inference stops.
        msg_id: String,
        /// The agent that holds the floor.
        winner: String,
    },
    /// The agent decided not to answer `msg_id`.
    Skipped {
        /// The message not answered.
        msg_id: String,
        /// Why not.
        reason: SkipReason,
    },
}

/// The agent half of the floor, timers inside. See the module docs.
#[derive(Debug, Clone)]
pub struct Agent<D: CsmaDraw> {
    client: Client,
    draw: D,
    /// msg -> the time of its one pending timer.
    timers: BTreeMap<String, Millis>,
    /// (time, msg) of every pending timer, earliest first.
    due: BTreeSet<(Millis, String)>,
    out: VecDeque<AgentOutput>,
    actions: Vec<Action>,
    now: Millis,
}

impl<D: CsmaDraw> Agent<D> {
    /// An agent configured by `cfg` ([`ClientConfig::new`] is the
    /// protocol's defaults) drawing its CSMA waits from `draw`: a closure
    /// returning uniform draws in `[0, 1)` (`move || rng.random()`), or any
    /// [`CsmaDraw`].
    pub fn new(cfg: ClientConfig, draw: D) -> Agent<D> {
        Agent {
            client: Client::new(cfg),
            draw,
            timers: BTreeMap::new(),
            due: BTreeSet::new(),
            out: VecDeque::new(),
            actions: Vec::new(),
            now: Millis::ZERO,
        }
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &ClientConfig {
        self.client.config()
    }

    /// Feed one input at time `now`. The timers due by `now` run first. A
    /// time earlier than one already seen is taken as the latest seen (the
    /// agent's clock does not go back).
    pub fn handle_input(&mut self, now: Millis, input: AgentInput<'_>) {
        let now = now.max(self.now);
        self.now = now;
        self.run_timers(now);
        let t = local(now);
        match input {
            AgentInput::Timeout => {}
            AgentInput::Frame(msg) => {
                self.client
                    .on_server_msg(t, msg, &mut self.draw, &mut self.actions);
                self.carry_out(now, false);
            }
            AgentInput::Answer(msg) => self.answer(now, msg),
            AgentInput::InferenceDone {
                msg_id,
                reply_id,
                content,
            } => {
                let reply_id = reply_id.map(str::to_string);
                self.client.on_inference_done(
                    t,
                    msg_id,
                    reply_id,
                    content.to_string(),
                    &mut self.actions,
                );
                self.carry_out(now, false);
            }
            AgentInput::Reset => {
                self.client.reset();
                self.timers.clear();
                self.due.clear();
            }
        }
    }

    /// The next thing to do, until `None`.
    pub fn poll_output(&mut self) -> Option<AgentOutput> {
        self.out.pop_front()
    }

    /// When to feed [`AgentInput::Timeout`]: the earliest pending timer, or
    /// `None` when nothing waits.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Whether the agent is handling `msg_id` (waiting, rechecking or
    /// inferring).
    pub fn is_handling(&self, msg_id: &str) -> bool {
        self.client.is_tracking(msg_id)
    }

    /// Whether an inference is running for `msg_id`.
    pub fn is_inferring(&self, msg_id: &str) -> bool {
        self.client.is_inferring(msg_id)
    }

    /// Decide on a message the agent would like to answer (see the module
    /// docs for who answers what).
    fn answer(&mut self, now: Millis, msg: &ServerMsg) {
        let ServerMsg::Msg {
            id,
            from,
            to,
            content,
            ..
        } = msg
        else {
            return;
        };
        let me = self.client.config().id.as_str();
        if from == me || self.client.is_tracking(id.as_str()) {
            return;
        }
        let dm = to.starts_with('@');
        let exempt = dm || from == SERVER_SENDER || mentions(content, me);
        if !exempt && addressed_to_others(content, me) {
            self.out.push_back(AgentOutput::Skipped {
                msg_id: id.clone(),
                reason: SkipReason::AddressedToOthers,
            });
            return;
        }
        let reply_to = if dm { format!("@{from}") } else { to.clone() };
        self.client.on_message(
            local(now),
            id.clone(),
            reply_to,
            exempt,
            &mut self.draw,
            &mut self.actions,
        );
        self.carry_out(now, exempt);
    }

    /// Run every timer due by `now`, earliest first (ties in message id
    /// order).
    fn run_timers(&mut self, now: Millis) {
        while let Some((at, _)) = self.due.first()
            && *at <= now
        {
            let Some((_, msg_id)) = self.due.pop_first() else {
                break;
            };
            self.timers.remove(&msg_id);
            self.client.on_timer(
                local(now),
                msg_id.as_str(),
                &mut self.draw,
                &mut self.actions,
            );
            self.carry_out(now, false);
        }
    }

    /// Turn the client's actions of the last call into outputs and timers.
    fn carry_out(&mut self, now: Millis, exempt: bool) {
        for action in self.actions.drain(..) {
            match action {
                Action::Wait { msg_id, delay_us } => {
                    let at = now.saturating_add(delay_us.div_ceil(1000));
                    set_timer(&mut self.timers, &mut self.due, msg_id, at);
                }
                Action::WakeAt { msg_id, at_ms } => {
                    let at = Millis(u64::try_from(at_ms).unwrap_or(0)).max(now);
                    set_timer(&mut self.timers, &mut self.due, msg_id, at);
                }
                Action::Send(msg) | Action::Post(msg) => {
                    self.out.push_back(AgentOutput::Transmit(msg));
                }
                Action::StartInference { msg_id, started_at } => {
                    self.out.push_back(AgentOutput::StartInference {
                        msg_id,
                        started_at: Millis(u64::try_from(started_at).unwrap_or(0)),
                        exempt,
                    });
                }
                Action::Abort { msg_id, winner } => {
                    self.out
                        .push_back(AgentOutput::AbortInference { msg_id, winner });
                }
                Action::Skip { msg_id, reason } => {
                    self.out.push_back(AgentOutput::Skipped { msg_id, reason });
                }
            }
        }
    }
}

/// The client's local time (ms) at `now`.
fn local(now: Millis) -> i64 {
    i64::try_from(now.0).unwrap_or(i64::MAX)
}

/// Set `msg_id`'s one timer to `at` (replacing the one it had).
fn set_timer(
    timers: &mut BTreeMap<String, Millis>,
    due: &mut BTreeSet<(Millis, String)>,
    msg_id: String,
    at: Millis,
) {
    if let Some(old) = timers.insert(msg_id.clone(), at) {
        due.remove(&(old, msg_id.clone()));
    }
    due.insert((at, msg_id));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::CsmaWindow;

    fn question(id: &str, from: &str, to: &str, content: &str) -> ServerMsg {
        ServerMsg::Msg {
            id: id.into(),
            from: from.into(),
            to: to.into(),
            content: content.into(),
            in_reply_to: None,
        }
    }

    fn drain(a: &mut Agent<impl CsmaDraw>) -> Vec<AgentOutput> {
        std::iter::from_fn(|| a.poll_output()).collect()
    }

    fn agent(id: &str, u: f64) -> Agent<impl CsmaDraw> {
        let mut cfg = ClientConfig::new(id);
        cfg.csma = CsmaWindow {
            min_ms: 1_000,
            max_ms: 3_000,
        };
        Agent::new(cfg, move || u)
    }

    #[test]
    fn a_question_waits_then_claims_at_its_timeout() {
        let mut a = agent("alice", 0.5);
        a.handle_input(
            Millis(10),
            AgentInput::Answer(&question("q", "op", "#g", "hi")),
        );
        assert_eq!(drain(&mut a), []);
        assert_eq!(a.poll_timeout(), Some(Millis(2_010)));
        a.handle_input(Millis(2_009), AgentInput::Timeout);
        assert_eq!(drain(&mut a), []);
        a.handle_input(Millis(2_010), AgentInput::Timeout);
        let out = drain(&mut a);
        assert!(
            matches!(&out[0], AgentOutput::Transmit(ClientMsg::RespondingTo { started_at, .. }) if *started_at == crate::wire::Stamp::Int(2_010))
        );
        assert_eq!(
            out[1],
            AgentOutput::StartInference {
                msg_id: "q".into(),
                started_at: Millis(2_010),
                exempt: false
            }
        );
        assert_eq!(a.poll_timeout(), None);
    }

    #[test]
    fn a_dm_and_a_mention_start_at_once_and_others_skip_a_mention() {
        let mut a = agent("alice", 0.5);
        a.handle_input(
            Millis(5),
            AgentInput::Answer(&question("d", "op", "@alice", "hi")),
        );
        a.handle_input(
            Millis(5),
            AgentInput::Answer(&question("m", "op", "#g", "@alice hi")),
        );
        a.handle_input(
            Millis(5),
            AgentInput::Answer(&question("o", "op", "#g", "@bob hi")),
        );
        let out = drain(&mut a);
        assert_eq!(
            out,
            [
                AgentOutput::StartInference {
                    msg_id: "d".into(),
                    started_at: Millis(5),
                    exempt: true
                },
                AgentOutput::StartInference {
                    msg_id: "m".into(),
                    started_at: Millis(5),
                    exempt: true
                },
                AgentOutput::Skipped {
                    msg_id: "o".into(),
                    reason: SkipReason::AddressedToOthers
                },
            ]
        );
        a.handle_input(
            Millis(9),
            AgentInput::InferenceDone {
                msg_id: "d",
                reply_id: None,
                content: "yes",
            },
        );
        let [
            AgentOutput::Transmit(ClientMsg::Msg {
                to, in_reply_to, ..
            }),
        ] = &drain(&mut a)[..]
        else {
            panic!("a reply")
        };
        assert_eq!((to.as_str(), in_reply_to.as_deref()), ("@op", Some("d")));
    }

    #[test]
    fn time_does_not_go_back_and_reset_forgets() {
        let mut a = agent("alice", 0.0);
        a.handle_input(
            Millis(5_000),
            AgentInput::Answer(&question("q", "op", "#g", "hi")),
        );
        a.handle_input(Millis(1), AgentInput::Timeout);
        assert_eq!(a.poll_timeout(), Some(Millis(6_000)));
        a.handle_input(Millis(1), AgentInput::Reset);
        assert_eq!((a.poll_timeout(), a.is_handling("q")), (None, false));
    }
}
