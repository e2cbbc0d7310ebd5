//! The carrier and the platform in a run (`[carrier]`, docs/carriers.md):
//! the platform's send limits, what a bot cannot see, and the typing
//! indicator. Under the default (a floor server that is the room) none of
//! this does anything and nothing here draws a random number.

use super::prepared::NOT_AGENT;
use super::{ClientMsg, Ev, ServerMsg, World};
use crate::agent::{self, AgentNaming};
use crate::carrier::{Bucket, CarrierKind};
use crate::floor::wire::Stamp;
use crate::model::dense::MsgId;

/// What a typing agent has told the room (the sender's side).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TypingOut {
    /// The room shows it typing (as far as it has said).
    on: bool,
    /// Bumped at each change, so that a stale expiry or a notice that
    /// overtook a later one is ignored.
    epoch: u32,
    /// Inferences that refresh the indicator (running, not hung).
    refreshing: u32,
}

/// The platform's send limits of one agent: its messages, its reactions.
pub(super) type Limits = [Option<Bucket>; 2];

impl World<'_> {
    /// Each agent's buckets, empty when the platform limits nothing.
    pub(super) fn new_limits(&self) -> Vec<Limits> {
        let p = self.p;
        let msg = p.message_limit.and_then(Bucket::new);
        let react = p.profile.reaction_limit.and_then(Bucket::new);
        if msg.is_none() && react.is_none() {
            return Vec::new();
        }
        vec![[msg, react]; p.agents()]
    }

    /// The time at which the platform lets agent `a`'s `msg`, wanted now,
    /// go (now, unless a send limit holds it back). Which limit: a message
    /// (an answer, a post) draws on the message limit; a claim on the
    /// message limit as a room event or visible message (`replica`), on
    /// the reaction limit as a reaction (on Matrix: the message limit
    /// too); a claim through a floor server, or a typing indicator, on
    /// none.
    pub(super) fn send_at(&mut self, a: u32, msg: &ClientMsg, now: u64) -> u64 {
        let Some(limits) = self.limits.get_mut(a as usize) else {
            return now;
        };
        let which = match msg {
            ClientMsg::Msg { .. } => Some(0),
            ClientMsg::RespondingTo { .. } => match self.p.carrier {
                CarrierKind::Replica => Some(0),
                CarrierKind::Reaction if self.p.profile.reactions_share_message_limit => Some(0),
                CarrierKind::Reaction => Some(1),
                _ => None,
            },
            _ => None,
        };
        match which.and_then(|i| limits[i].as_mut()) {
            Some(b) => b.take(now),
            None => now,
        }
    }

    /// Whether the platform keeps `msg` from agent `to` (an index): a
    /// bot's message where bots see no bots' messages (Telegram: unless it
    /// @mentions `to`), a bot's claim where the carrier is invisible to
    /// other bots.
    pub(super) fn hidden_from(&self, to: u32, msg: &ServerMsg) -> bool {
        let from_agent = |from: &crate::model::dense::AgentId| {
            self.p
                .index_of
                .get(from.0 as usize)
                .is_some_and(|&i| i != NOT_AGENT)
        };
        match msg {
            ServerMsg::Msg { from, content, .. } => {
                !self.p.profile.bots_see_bots
                    && from_agent(from)
                    && !self.p.names.mentions(content, &self.p.handles[to as usize])
            }
            ServerMsg::RespondingTo { from, .. } => !self.p.claims_visible() && from_agent(from),
            _ => false,
        }
    }

    /// Agent `a` starts an inference (`hung`: it will never end): under
    /// `typing` it shows typing, refreshed while the inference runs (a
    /// hung one refreshes nothing: the indicator expires by the
    /// platform's rule).
    pub(super) fn typing_started(&mut self, a: u32, hung: bool) {
        if !self.typing_live() {
            return;
        }
        let now = self.eng.now();
        let t = &mut self.typing_out[a as usize];
        if !hung {
            t.refreshing += 1;
        }
        if !t.on {
            self.typing_say(a, true);
        }
        if self.typing_out[a as usize].refreshing == 0 {
            self.typing_expire_from(a, now);
        }
    }

    /// Agent `a` sends an answer: an indicator no inference refreshes any
    /// more stops (an explicit stop on Matrix; the message itself on
    /// Discord), sent with the answer.
    pub(super) fn typing_answered(&mut self, a: u32) {
        if !self.typing_live() {
            return;
        }
        let t = &mut self.typing_out[a as usize];
        t.refreshing = t.refreshing.saturating_sub(1);
        if t.refreshing == 0 && t.on {
            self.typing_say(a, false);
        }
    }

    /// Agent `a` crashes: nothing refreshes its indicator, which shows
    /// until the platform expires it.
    pub(super) fn typing_crashed(&mut self, a: u32) {
        if !self.typing_live() {
            return;
        }
        let now = self.eng.now();
        self.typing_out[a as usize].refreshing = 0;
        if self.typing_out[a as usize].on {
            self.typing_expire_from(a, now);
        }
    }

    /// Schedule the platform's expiry of `a`'s indicator, last refreshed
    /// at `at_us`.
    fn typing_expire_from(&mut self, a: u32, at_us: u64) {
        let Some(rule) = self.p.profile.typing else {
            return;
        };
        let end = rule.ends_at_us(at_us, self.p.typing_timeout_us);
        let epoch = self.typing_out[a as usize].epoch;
        self.eng.post_at(end, Ev::TypingEnd { typer: a, epoch });
    }

    /// The platform's expiry of `typer`'s indicator is due.
    pub(super) fn typing_end(&mut self, typer: u32, epoch: u32) {
        let t = self.typing_out[typer as usize];
        if t.epoch == epoch && t.on && t.refreshing == 0 {
            self.typing_say(typer, false);
        }
    }

    /// `a`'s indicator changes: every other agent learns it one uplink
    /// and its own downlink later (typing is ephemeral, apart from the
    /// timeline: its notices keep no FIFO order with messages; a notice
    /// older than one already seen is ignored).
    fn typing_say(&mut self, a: u32, on: bool) {
        let now = self.eng.now();
        let t = &mut self.typing_out[a as usize];
        t.on = on;
        t.epoch = t.epoch.wrapping_add(1);
        let epoch = t.epoch;
        let p = self.p;
        let up = &mut self.up[a as usize];
        let at_server = now + p.base_us + p.jitter.sample_us(&mut up.rng);
        for r in 0..p.answering as u32 {
            if r == a {
                continue;
            }
            let down = &mut self.down[r as usize];
            let at = at_server + p.base_us + p.jitter.sample_us(&mut down.rng);
            let inc = self.agents[r as usize].inc;
            self.eng.post_at(
                at,
                Ev::TypingIn {
                    agent: r,
                    inc,
                    typer: a,
                    epoch,
                    on,
                },
            );
        }
    }

    /// A typing notice reaches agent `r`.
    pub(super) fn typing_in(&mut self, r: u32, inc: u32, typer: u32, epoch: u32, on: bool) {
        let slot = &self.agents[r as usize];
        if slot.inc != inc || !slot.alive {
            return;
        }
        let seen = &mut self.typing_in[r as usize];
        match seen.iter_mut().find(|s| s.0 == typer) {
            // Epochs only grow (wrapping after 2^32 changes is harmless).
            Some(s) if epoch.wrapping_sub(s.1) as i32 > 0 => *s = (typer, epoch, on),
            Some(_) => {}
            None => seen.push((typer, epoch, on)),
        }
        self.trace_state(
            r,
            None,
            "typing_seen",
            || serde_json::json!({"typer": typer, "on": on}),
        );
    }

    /// Agent `r`'s CSMA wait (or recheck) on `m` ends: under `typing`, if
    /// it sees anyone else typing, it takes that for a claim on `m` (the
    /// indicator names no message) and so skips.
    pub(super) fn typing_check(&mut self, r: u32, m: u32) {
        if !self.typing_live() {
            return;
        }
        let Some(&(typer, _, _)) = self.typing_in[r as usize].iter().find(|s| s.2) else {
            return;
        };
        let now = self.eng.now();
        let started_at = Stamp::Int(self.agents[r as usize].actor.local_ms(now));
        let claim = ServerMsg::RespondingTo {
            msg_id: MsgId::of(m),
            from: self.p.handles[typer as usize],
            started_at,
            channel: self.p.channel_dest,
        };
        self.feed(
            r,
            agent::Input::Server {
                msg: &claim,
                depth: None,
            },
        );
    }

    /// Whether typing indicators exist in this run (the carrier is
    /// `typing` and the platform shows other bots' typing).
    fn typing_live(&self) -> bool {
        self.p.carrier == CarrierKind::Typing && !self.typing_out.is_empty()
    }
}
