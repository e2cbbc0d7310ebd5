//! Every frame from the server: read, counted in the [`Ledger`], and,
//! when it is about our own traffic, handed to the actors and the
//! observer. Traffic we did not cause (others' messages, floor frames about
//! messages that are not ours, replayed history, server notices, malformed
//! frames) is counted and goes no further: it never enters a metric.
//!
//! [`Ledger`]: crate::live::ledger::Ledger

use super::super::conn::{self, Event};
use super::super::wire::{self, Kind};
use super::{Driver, OPERATOR};
use crate::agent::Input;
use crate::floor::{ClientMsg, ServerMsg};
use serde_json::json;
use std::time::Instant;

impl Driver<'_> {
    pub(super) fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Frame {
                conn,
                generation,
                text,
            } => {
                if self.gens.get(conn) == Some(&generation) {
                    self.on_frame(conn, &text);
                }
            }
            Event::Closed {
                conn,
                generation,
                why,
            } => {
                if self.gens.get(conn) == Some(&generation) && self.links[conn].is_some() {
                    let who = self.name_of(conn);
                    self.failure = Some(format!(
                        "{}: the connection of {who} ended: {why}",
                        self.url
                    ));
                }
            }
            Event::Up {
                conn,
                generation,
                link,
            } => {
                self.reconnecting = self.reconnecting.saturating_sub(1);
                if self.gens[conn] == generation {
                    self.links[conn] = Some(link);
                    self.last_own = Instant::now();
                    self.trace_state(conn - 1, None, "reconnect", json!({}));
                }
            }
            Event::Failed { conn, error } => {
                self.reconnecting = self.reconnecting.saturating_sub(1);
                let who = self.name_of(conn);
                self.failure = Some(format!("reconnecting {who}: {error}"));
            }
        }
    }

    /// The name behind connection `conn` (0: the operator).
    fn name_of(&self, conn: usize) -> String {
        match conn {
            0 => OPERATOR.to_string(),
            c => self.ids.get(c - 1).cloned().unwrap_or_default(),
        }
    }

    /// One frame received on connection `conn`.
    fn on_frame(&mut self, conn: usize, text: &str) {
        self.ledger.frames += 1;
        let (kind, mut v) = wire::read(text, conn::MAX_FRAME_BYTES);
        let l = &mut self.ledger;
        match kind {
            Kind::Replay => l.replays += 1,
            Kind::Notice => l.notices += 1,
            Kind::Presence => l.presence += 1,
            Kind::Malformed => l.malformed += 1,
            Kind::Msg | Kind::Floor | Kind::Error => {
                self.inward(&mut v);
                match ServerMsg::from_value(&v) {
                    Ok(msg) if self.is_ours(conn, &msg) => {
                        self.obs.events += 1;
                        let now = self.now();
                        if conn == 0 {
                            self.operator_frame(now, &msg);
                        } else {
                            self.agent_frame(conn - 1, now, &msg);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => self.ledger.malformed += 1,
                }
            }
            // `Other`, and any kind the dialect learns later.
            _ => l.other += 1,
        }
    }

    /// Whether `msg` (on connection `conn`) is about our own traffic;
    /// counted in the ledger either way.
    fn is_ours(&mut self, conn: usize, msg: &ServerMsg) -> bool {
        match msg {
            ServerMsg::Error { code, .. } => {
                // An ERROR is the server's answer to something we sent.
                if conn == 0 {
                    self.ledger.refusal(code);
                } else {
                    self.ledger.agent_error(code);
                }
                true
            }
            ServerMsg::Msg { id, from, .. } => {
                let ours = if from == OPERATOR {
                    // Our operator's id on a server we do not control: a
                    // post we made, or nothing to believe.
                    self.posts.contains(id)
                } else {
                    self.ours.contains(from)
                };
                if !ours {
                    self.ledger.foreign_msgs += 1;
                    return false;
                }
                if self.posts.contains(id) && self.accepted.insert(id.clone()) {
                    self.ledger.accepted += 1;
                    let line = json!({"t_us": self.last_us, "ev": "relayed", "msg_id": id});
                    self.trace(line);
                }
                true
            }
            ServerMsg::RespondingTo { msg_id, .. }
            | ServerMsg::FloorClaimed { msg_id, .. }
            | ServerMsg::FloorReleased { msg_id, .. }
            | ServerMsg::Yield { msg_id, .. } => {
                if !self.depth.contains_key(msg_id) {
                    self.ledger.foreign_floor += 1;
                    return false;
                }
                match (msg, conn) {
                    (ServerMsg::Yield { .. }, c) if c > 0 => self.ledger.yields_received += 1,
                    (ServerMsg::RespondingTo { .. } | ServerMsg::FloorClaimed { .. }, 0) => {
                        self.ledger.announced_claims += 1;
                    }
                    _ => {}
                }
                true
            }
            // A server message this driver does not know: not ours.
            _ => false,
        }
    }

    /// What the operator sees: the replies to our messages (what the
    /// metrics count) and the claims announced on them.
    fn operator_frame(&mut self, now: u64, msg: &ServerMsg) {
        if let ServerMsg::Msg {
            id,
            from,
            to,
            content,
            in_reply_to: Some(parent),
        } = msg
        {
            if self.depth.contains_key(parent) {
                self.ledger.answers += 1;
                // An answer is progress (a repeat of one changes nothing).
                if self.obs.reply_is_new(parent, id) {
                    self.last_own = Instant::now();
                }
            }
            self.obs.relay_seen(from, "MSG", id, now);
            self.obs.reply_seen(parent, id, now);
            // A live trace has no server-side view: the reply is logged
            // as received when the operator got its relay (what the
            // metrics count), in the simulator's `server_recv` form.
            let sent = ClientMsg::Msg {
                id: Some(id.clone()),
                to: to.clone(),
                content: content.clone(),
                in_reply_to: Some(parent.clone()),
            };
            self.trace(
                json!({"t_us": now, "ev": "server_recv", "agent": from, "msg": sent.to_json()}),
            );
        }
    }

    /// What agent `a` receives goes to its actor.
    fn agent_frame(&mut self, a: usize, now: u64, msg: &ServerMsg) {
        if self.trace.is_some() {
            let line =
                json!({"t_us": now, "ev": "recv", "agent": self.ids[a], "msg": msg.to_json()});
            self.trace(line);
        }
        let depth = match msg {
            ServerMsg::Msg {
                id,
                from,
                in_reply_to,
                ..
            } => {
                self.obs.relay_seen(from, "MSG", id, now);
                let d = match self.depth.get(id) {
                    Some(d) => *d,
                    None => in_reply_to
                        .as_ref()
                        .and_then(|p| self.depth.get(p))
                        .map_or(0, |d| d + 1),
                };
                Some(d)
            }
            ServerMsg::RespondingTo { msg_id, from, .. } => {
                self.obs.relay_seen(from, "CLAIM", msg_id, now);
                None
            }
            ServerMsg::Yield { msg_id, .. } => {
                // The metric counts the YIELDs answering our claims.
                let me = &self.ids[a];
                if self.obs.has_claimed(me, msg_id) {
                    self.obs.yields += 1;
                }
                None
            }
            _ => None,
        };
        let mut out = Vec::new();
        self.agents[a].handle(now, Input::Server { msg, depth }, &mut out);
        // Our own traffic goes on while frames make the agents act; a frame
        // that changes nothing (a repeat, a YIELD for no claim) does not
        // keep the run alive.
        if !out.is_empty() {
            self.last_own = Instant::now();
        }
        self.apply(a, now, out);
    }
}
