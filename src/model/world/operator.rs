//! The operator's side: its random posts (drawn by the [`Workload`]
//! actor), and the scenario's script (posts, inferences and disconnects at
//! given times, for replaying an incident).
//!
//! [`Workload`]: crate::agent::Workload

use super::prepared::us;
use super::{Ev, MsgInfo, OPERATOR, World};
use crate::agent::{self, PostKind};
use crate::floor::{ClientMsg, Input, Role};
use crate::names;

impl World<'_> {
    /// Schedule the operator's next post, if the workload has one.
    pub(super) fn schedule_next_post(&mut self) {
        if let Some(at) = self.workload.next_post(self.eng.now()) {
            self.eng.schedule_at(at, Ev::Post);
        }
    }

    pub(super) fn post(&mut self, now: u64) {
        let m = self.new_msg();
        let post = self.workload.draw(m);
        self.post_msg(now, m, post.to, post.content);
        self.schedule_next_post();
    }

    /// The operator's message `m` reaches the server now.
    pub(super) fn post_msg(&mut self, now: u64, m: u32, to: String, content: String) {
        let kind = PostKind::of(&to, &content);
        // Held until the relay is dispatched, and by scripted inferences.
        let pending = 1 + self.script_holds.get(&m).copied().unwrap_or(0);
        let info = MsgInfo::new(now, 0, kind != PostKind::Dm, pending);
        self.msgs.insert(m, info);
        let id = self.id_of(m);
        if self.trace.is_some() {
            self.trace_line(serde_json::json!({
                "t_us": now, "ev": "post", "msg_id": id, "from": OPERATOR, "to": to, "kind": kind.name(),
            }));
        }
        let msg = ClientMsg::Msg {
            id: Some(id),
            to,
            content,
            in_reply_to: None,
        };
        let refused_before = self.server.stats().refused_msgs;
        self.server_input(Input::Client {
            from: OPERATOR.into(),
            role: Role::Operator,
            msg,
        });
        self.posts.posted += 1;
        if self.server.stats().refused_msgs > refused_before {
            self.posts.refused += 1;
        }
        self.release(m);
    }

    /// Number the scripted posts and schedule every scripted event.
    pub(super) fn schedule_script(&mut self) {
        let p = self.p;
        for e in &p.script {
            if let Some(post) = &e.post {
                let m = self.new_msg();
                self.labels.insert(post.id.clone(), m);
                self.label_of.insert(m, post.id.clone());
            }
        }
        for e in &self.p.script {
            if let Some(m) = e.infer.as_ref().and_then(|i| self.labels.get(&i.msg)) {
                *self.script_holds.entry(*m).or_insert(0) += 1;
            }
        }
        for i in 0..self.p.script.len() {
            let at = us(self.p.script[i].at_ms);
            self.eng.schedule_at(at, Ev::Script { i });
        }
    }

    /// Scripted event number `i` happens now.
    pub(super) fn script(&mut self, now: u64, i: usize) {
        let p = self.p;
        let e = &p.script[i];
        if let Some(post) = &e.post {
            let Some(&m) = self.labels.get(&post.id) else {
                return;
            };
            let to = post.to.clone().unwrap_or_else(|| self.p.channel.clone());
            let content = post.content.clone();
            if post.from == OPERATOR {
                self.post_msg(now, m, to, content);
            } else if let Some(a) = names::parse_agent(&post.from, self.agents.len()) {
                let id = self.id_of(m);
                let msg = ClientMsg::Msg {
                    id: Some(id),
                    to,
                    content,
                    in_reply_to: None,
                };
                self.send_up(a, msg, None);
            }
        } else if let Some(inf) = &e.infer {
            self.script_infer(now, inf);
        } else if let Some(agent) = &e.disconnect
            && let Some(a) = names::parse_agent(agent, self.agents.len())
            && self.agents[a as usize].alive
        {
            self.crash(a, 0);
        }
    }

    /// A scripted inference starts now.
    fn script_infer(&mut self, now: u64, inf: &crate::scenario::ScriptInfer) {
        let (Some(a), Some(&m)) = (
            names::parse_agent(&inf.agent, self.agents.len()),
            self.labels.get(&inf.msg),
        ) else {
            return;
        };
        if !self.agents[a as usize].alive {
            self.release(m);
            return;
        }
        let reply_to = self
            .p
            .script
            .iter()
            .filter_map(|o| o.post.as_ref())
            .find(|p| p.id == inf.msg)
            .and_then(|p| p.to.clone())
            .unwrap_or_else(|| self.p.channel.clone());
        let started_at = inf
            .started_at
            .unwrap_or_else(|| self.agents[a as usize].actor.local_ms(now));
        let id = self.id_of(m);
        self.feed(
            a,
            agent::Input::StartNow {
                msg_id: &id,
                reply_to: &reply_to,
                started_at,
                duration_us: us(inf.duration_ms),
                ignore_yield: inf.ignore_yield,
            },
        );
        self.release(m); // this event's hold
    }
}
