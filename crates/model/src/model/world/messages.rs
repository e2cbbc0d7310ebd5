//! Messages of a run: their numbers and wire ids, and the holds that keep a
//! message open (deliveries in flight, agents busy with it, replies on the
//! way) until its outcome is known and counted.

use super::{RunLimit, World};
use crate::floor::Naming;
use crate::metrics::run::MessageOutcome;
use crate::model::dense::MsgId;

/// What the world knows of one message while it is open.
pub(super) struct MsgInfo {
    pub(super) post_us: u64,
    pub(super) depth: u32,
    /// Counts in metrics (a channel message, not a DM).
    pub(super) channel_msg: bool,
    /// A question under a scheme (an operator's channel post): it counts
    /// in the metrics whether or not an agent wanted it.
    pub(super) question: bool,
    pub(super) wanted: u32,
    pub(super) responses: u32,
    pub(super) first_us: Option<u64>,
    /// Agents that started inference on it.
    pub(super) starters: u32,
    /// Deliveries, agent activities and replies still in flight.
    pub(super) pending: u32,
    /// A selection holds its question open until it is delivered (so that
    /// the chosen agent's answer still counts for the question).
    pub(super) holds: Option<u32>,
}

impl MsgInfo {
    /// A message posted at `post_us`, at reply depth `depth`, held by
    /// `pending` until its relay (and any scripted inference) is done.
    pub(super) fn new(post_us: u64, depth: u32, channel_msg: bool, pending: u32) -> MsgInfo {
        MsgInfo {
            post_us,
            depth,
            channel_msg,
            question: false,
            wanted: 0,
            responses: 0,
            first_us: None,
            starters: 0,
            pending,
            holds: None,
        }
    }
}

impl World<'_> {
    pub(super) fn new_msg(&mut self) -> u32 {
        let m = self.next_msg;
        match m.checked_add(1) {
            Some(next) => self.next_msg = next,
            None => self.halt = Some(RunLimit::Messages),
        }
        m
    }

    /// The wire id of message number `m` (its label, or `m<number>`).
    pub(super) fn id_of(&self, m: u32) -> String {
        self.p.names.show_msg(&MsgId::of(m)).into_owned()
    }

    /// Drop one hold on message `m`; finish it when none is left.
    pub(super) fn release(&mut self, m: u32) {
        let done = match self.msgs.get_mut(&m) {
            Some(info) => {
                info.pending = info.pending.saturating_sub(1);
                info.pending == 0
            }
            None => false,
        };
        if done {
            self.finish_msg(m);
        }
    }

    pub(super) fn finish_msg(&mut self, m: u32) {
        let Some(info) = self.msgs.remove(&m) else {
            return;
        };
        if let Some(q) = info.holds {
            self.release(q);
        }
        if info.channel_msg {
            self.acc.message(MessageOutcome {
                wanted: if info.question {
                    info.wanted.max(1)
                } else {
                    info.wanted
                },
                responses: info.responses,
                ttfr_us: info.first_us.map(|f| f - info.post_us),
                starters: info.starters,
            });
        }
    }
}
