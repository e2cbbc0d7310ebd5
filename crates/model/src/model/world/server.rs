//! The server side: feeding the real [`floor::Server`] (instantly: its
//! processing time is part of the uplink), waking it for its timers, and
//! counting what reaches it.

use super::links::PREFETCH_AHEAD;
use super::relays::CURSOR_MIN;
use super::{ClientMsg, Ev, Input, MsgInfo, World};
use crate::floor::{Millis, Naming, Role};

impl World<'_> {
    pub(super) fn server_now_ms(&self) -> u64 {
        self.eng.now() / 1000
    }

    /// Feed the server and deliver what it sends.
    pub(super) fn server_input(&mut self, input: Input) {
        let now_ms = self.server_now_ms();
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.server.handle(Millis(now_ms), input, &mut out);
        let (payloads, sends) = (out.payloads(), out.sends());
        self.batching = sends.len() >= CURSOR_MIN;
        if self.batching {
            self.batch.begin(payloads.len());
        }
        // A relay to N members is N sends of one payload: the relayed
        // message's number is found once per run of sends of a payload.
        let mut last: Option<(u32, Option<u32>)> = None;
        for (i, &(to, p)) in sends.iter().enumerate() {
            // The link state of a recipient a few sends ahead, fetched
            // while these are sent (a relay in a large channel goes to
            // thousands of agents).
            if self.prefetch
                && let Some(&(ahead, _)) = sends.get(i + PREFETCH_AHEAD)
            {
                self.prefetch_downlink(ahead);
            }
            if let Some(msg) = payloads.get(p as usize) {
                let relay_of = match last {
                    Some((q, r)) if q == p => r,
                    _ => {
                        let r = super::relay_of(msg);
                        last = Some((p, r));
                        r
                    }
                };
                self.deliver(to, msg, p, relay_of);
            }
        }
        if self.batching {
            self.batching = false;
            if let Some((id, first)) = self.relays.start(&mut self.batch, payloads) {
                let msgs = &mut self.msgs;
                self.relays.hold(id, |m| {
                    let info = msgs.get_mut(&m)?;
                    info.pending += 1;
                    Some(info.depth)
                });
                self.relays.schedule(first, id);
            }
        }
        self.out = out;
        self.schedule_wake();
    }

    /// Keep the one server wake-up at the server's next deadline
    /// ([`crate::floor::Server::poll_timeout`]), moving it (later as well as earlier)
    /// when the deadlines change, and dropping it when none is left: a
    /// wake fires only when a claim or marker is due. A claim released
    /// before its deadline therefore leaves no event behind, so a run in
    /// which no claim reached its deadline is the same run, event for
    /// event, under any longer TTL (what `tune` relies on, see
    /// `floor::sim::TtlAudit`).
    pub(super) fn schedule_wake(&mut self) {
        let at = self.server.poll_timeout().map(|t_ms| {
            let now = self.eng.now();
            let at = t_ms.as_ms().saturating_mul(1000);
            if at <= now {
                // Due now: wake at the next millisecond so a Tick makes progress.
                (now / 1000).saturating_add(1).saturating_mul(1000)
            } else {
                at
            }
        });
        if let Some((cur, key)) = self.wake {
            if Some(cur) == at {
                return;
            }
            self.eng.cancel(key);
            self.wake = None;
        }
        if let Some(at) = at {
            let key = self.eng.schedule_at(at, Ev::ServerWake);
            self.wake = Some((at, key));
        }
    }

    pub(super) fn server_in(
        &mut self,
        now: u64,
        agent: u32,
        msg: ClientMsg,
        infer_us: Option<u64>,
    ) {
        if self.trace.is_some() {
            let line = serde_json::json!({
                "t_us": now, "ev": "server_recv", "agent": self.p.ids[agent as usize],
                "msg": msg.to_text(&self.p.names).to_json(),
            });
            self.trace_line(line);
        }
        let mut posted = None;
        if let ClientMsg::Msg {
            id: Some(id),
            in_reply_to,
            to,
            ..
        } = &msg
        {
            let parent = in_reply_to.and_then(|x| x.number());
            if let Some(m) = id.number() {
                let to_channel = self.p.names.show_dest(to).starts_with('#');
                posted = Some((m, parent, to_channel));
            }
        }
        if let Some((m, parent, to_channel)) = posted {
            self.posted_in(now, agent, m, parent, to_channel, msg, infer_us);
            return;
        }
        let from = self.p.handles[agent as usize];
        self.server_input(Input::Client {
            from,
            role: Role::Agent,
            msg,
        });
    }

    /// A MSG of an agent (a reply, or its own scripted post) reaches the
    /// server: it becomes a message of its own (cascades), and a reply
    /// counts for its parent, as useful (the first) or wasted inference.
    #[allow(clippy::too_many_arguments)]
    fn posted_in(
        &mut self,
        now: u64,
        agent: u32,
        m: u32,
        parent: Option<u32>,
        to_channel: bool,
        msg: ClientMsg,
        infer_us: Option<u64>,
    ) {
        let depth = parent.map_or(0, |p| self.msgs.get(&p).map_or(0, |i| i.depth) + 1);
        let pending = 1 + self.script_holds.get(&m).copied().unwrap_or(0);
        self.msgs
            .insert(m, MsgInfo::new(now, depth, to_channel, pending));
        let role = Role::Agent;
        let from = self.p.handles[agent as usize];
        let refused_before = self.server.stats().refused_msgs;
        self.server_input(Input::Client { from, role, msg });
        // A MSG the server refused (agentchat-0.36: rate limit, DMs) is
        // not relayed: nobody sees it, it answers nothing, its
        // inference is wasted like a lost reply's.
        let refused = self.server.stats().refused_msgs > refused_before;
        let dur = infer_us.unwrap_or(0);
        if refused {
            self.msgs.remove(&m);
            if let Some(info) = parent.and_then(|p| self.msgs.get(&p))
                && info.channel_msg
                && infer_us.is_some()
            {
                self.acc.wasted(dur);
            }
        } else if agent as usize >= self.p.answering {
            // A selection is no answer: it holds its question open until
            // it has been delivered (released in `finish_msg`).
            if let (Some(q), Some(info)) = (parent, self.msgs.get_mut(&m)) {
                info.holds = Some(q);
                self.release(m);
                return;
            }
        } else if let Some(info) = parent.and_then(|p| self.msgs.get_mut(&p)) {
            info.responses += 1;
            let first = info.first_us.is_none();
            if first {
                info.first_us = Some(now);
            }
            if info.channel_msg && infer_us.is_some() {
                if first {
                    self.acc.useful(dur);
                } else {
                    self.acc.wasted(dur);
                }
            }
        }
        self.release(m);
        if let Some(parent) = parent {
            self.release(parent);
        }
    }
}
