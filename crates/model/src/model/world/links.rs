//! The links between agents and server: a base delay plus jitter each way
//! (plus server processing on the way up), loss, and FIFO order if the
//! scenario asks for it. Each direction of each agent has its own random
//! stream.

use super::prepared::NOT_AGENT;
use super::{ClientMsg, Ev, ServerMsg, World};
use crate::floor::Naming;
use crate::model::dense::AgentId;
use rand::RngExt;
use std::sync::Arc;

/// How many deliveries ahead a relay's loop prefetches a recipient's link.
pub(super) const PREFETCH_AHEAD: usize = 4;

impl World<'_> {
    /// Prefetch the downlink state of agent `to` (see [`super::prefetch`]).
    #[inline]
    pub(super) fn prefetch_downlink(&self, to: AgentId) {
        let Some(a) = self.p.index_of.get(to.0 as usize).map(|&a| a as usize) else {
            return;
        };
        if let (Some(slot), Some(link)) = (self.agents.get(a), self.down.get(a)) {
            super::prefetch(&slot.inc);
            super::prefetch(link);
        }
    }

    /// Send one server message, payload `p` of the server step's sends
    /// (`msg`), down agent `to`'s link. `relay_of`: the number of the
    /// relayed message, if it is a MSG the world knows.
    pub(super) fn deliver(
        &mut self,
        to: AgentId,
        msg: &Arc<ServerMsg>,
        p: u32,
        relay_of: Option<u32>,
    ) {
        let now = self.eng.now();
        if self.trace.is_some() {
            let names = &self.p.names;
            let line = serde_json::json!({
                "t_us": now, "ev": "server_send", "to": names.show_agent(&to),
                "msg": msg.to_text(names).to_json(),
            });
            self.trace_line(line);
        }
        let agent = self.p.index_of.get(to.0 as usize).copied();
        let Some(agent) = agent.filter(|&a| a != NOT_AGENT) else {
            return; // the operator (not simulated) or a name a script uses
        };
        if self.p.platform_hides && self.hidden_from(agent, msg) {
            return; // the platform shows it to no bot (docs/carriers.md)
        }
        let link = &mut self.down[agent as usize];
        if self.p.loss_p > 0.0 && link.rng.random_bool(self.p.loss_p) {
            self.acc.lost += 1;
            if self.trace.is_some() {
                let name = self.p.ids[agent as usize].clone();
                let msg = msg.to_text(&self.p.names).to_json();
                self.trace_line(serde_json::json!({
                    "t_us": now, "ev": "lost", "dir": "down", "agent": name, "msg": msg,
                }));
            }
            return;
        }
        let delay = self.p.base_us + self.p.jitter.sample_us(&mut link.rng);
        let mut at = now + delay;
        if self.p.fifo {
            at = at.max(link.last);
            link.last = at;
        }
        let inc = self.agents[agent as usize].inc;
        if self.batching {
            // Held once for all its arrivals when the cursor starts.
            self.batch.push(at, agent, inc, p, relay_of);
            return;
        }
        // Held open until this delivery arrives; `relay_of` is read from
        // the payload again on arrival.
        if let Some(m) = relay_of
            && let Some(info) = self.msgs.get_mut(&m)
        {
            info.pending += 1;
        }
        self.eng.post_at(
            at,
            Ev::AgentIn {
                agent,
                inc,
                msg: Arc::clone(msg),
            },
        );
    }

    /// Send a client message up an agent's link.
    pub(super) fn send_up(&mut self, agent: u32, msg: ClientMsg, infer_us: Option<u64>) {
        let now = self.eng.now();
        let name = &self.p.ids[agent as usize];
        if self.trace.is_some() {
            let line = serde_json::json!({
                "t_us": now, "ev": "send", "agent": name,
                "msg": msg.to_text(&self.p.names).to_json(),
            });
            self.trace_line(line);
        }
        let squatter = self.p.groups[self.agents[agent as usize].group]
            .behaviour
            .squat
            .is_some();
        let link = &mut self.up[agent as usize];
        if self.p.loss_p > 0.0 && link.rng.random_bool(self.p.loss_p) {
            self.acc.lost += 1;
            if self.trace.is_some() {
                let line = serde_json::json!({
                    "t_us": now, "ev": "lost", "dir": "up", "agent": name,
                    "msg": msg.to_text(&self.p.names).to_json(),
                });
                self.trace_line(line);
            }
            if let ClientMsg::Msg { in_reply_to, .. } = &msg {
                // A lost reply is wasted inference.
                let parent = in_reply_to.and_then(|x| x.number());
                if let (Some(d), Some(p)) = (infer_us, parent) {
                    if self.msgs.get(&p).is_some_and(|i| i.channel_msg) {
                        self.acc.wasted(d);
                    }
                    self.release(p);
                }
            }
            return;
        }
        // A squatter's server processing comes from its own link stream,
        // so that adding one draws nothing from anybody else's.
        let processing = if squatter {
            self.p.processing.sample_us(&mut link.rng)
        } else {
            self.p.processing.sample_us(&mut self.server_rng)
        };
        let delay = self.p.base_us + self.p.jitter.sample_us(&mut link.rng) + processing;
        let mut at = self.send_at(agent, &msg, now) + delay;
        let link = &mut self.up[agent as usize];
        if self.p.fifo {
            at = at.max(link.last);
            link.last = at;
        }
        let slot = match self.uplink_free.pop() {
            Some(i) => {
                self.uplink[i as usize] = Some((msg, infer_us));
                i
            }
            None => {
                // Fewer than u32::MAX messages are ever pending
                // (`Prepared::set_max_pending`).
                self.uplink.push(Some((msg, infer_us)));
                (self.uplink.len() - 1) as u32
            }
        };
        self.eng.post_at(at, Ev::ServerIn { agent, msg: slot });
    }
}
