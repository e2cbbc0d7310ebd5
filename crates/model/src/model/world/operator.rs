//! The operator's side: its random posts (drawn by the [`Workload`]
//! actor), and the scenario's script (posts, inferences and disconnects at
//! given times, for replaying an incident).
//!
//! [`Workload`]: crate::agent::Workload

use super::prepared::us;
use super::{ClientMsg, Ev, Input, MsgInfo, OPERATOR, World};
use crate::agent::{self, Pick, PostKind, Scheme};
use crate::floor::{Naming, Role};
use crate::model::dense::{Content, DestId, MsgId};
use crate::names;
use std::sync::Arc;

impl World<'_> {
    /// Schedule the operator's next post, if the workload has one.
    pub(super) fn schedule_next_post(&mut self) {
        if let Some(at) = self.workload.next_post(self.eng.now()) {
            self.eng.post_at(at, Ev::Post);
        }
    }

    pub(super) fn post(&mut self, now: u64) {
        let m = self.new_msg();
        let p = self.p;
        let question = |mention| Content::Question { n: m, mention };
        let (to, content, kind) = match self.workload.pick() {
            Pick::Dm(k) => (
                p.names.dm_to_agent(p.handles[k]),
                question(None),
                PostKind::Dm,
            ),
            Pick::Mention(k) => (
                p.channel_dest,
                question(Some(p.handles[k])),
                PostKind::Mention,
            ),
            Pick::Channel => (p.channel_dest, question(None), PostKind::Channel),
        };
        self.post_msg(now, m, to, content, kind);
        self.schedule_next_post();
    }

    /// The operator's message `m` (of kind `kind`) reaches the server now.
    pub(super) fn post_msg(
        &mut self,
        now: u64,
        m: u32,
        to: DestId,
        content: Content,
        kind: PostKind,
    ) {
        // Held until the relay is dispatched, and by scripted inferences.
        let pending = 1 + self.script_holds.get(&m).copied().unwrap_or(0);
        let mut info = MsgInfo::new(now, 0, kind != PostKind::Dm, pending);
        // Under a scheme or a cooldown every operator post to the channel
        // is a question, wanted or not: one that nobody answers (unmentioned
        // under `mentions`, its owner down, every agent cooling down) counts
        // as unanswered rather than vanishing from the denominator.
        info.question =
            info.channel_msg && (self.p.scheme != Scheme::Open || self.p.cooldown_us > 0);
        self.msgs.insert(m, info);
        if self.trace.is_some() {
            let (id, to) = (self.id_of(m), self.p.names.show_dest(&to));
            let line = serde_json::json!({
                "t_us": now, "ev": "post", "msg_id": id, "from": OPERATOR, "to": to, "kind": kind.name(),
            });
            self.trace_line(line);
        }
        let msg = ClientMsg::Msg {
            id: Some(MsgId::of(m)),
            to,
            content,
            in_reply_to: None,
        };
        let refused_before = self.server.stats().refused_msgs;
        self.server_input(Input::Client {
            from: self.p.operator,
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
                // Numbered first, in script order, as `Prepared` labels them.
                let m = self.new_msg();
                self.labels.insert(post.id.clone(), m);
            }
        }
        for e in &self.p.script {
            if let Some(m) = e.infer.as_ref().and_then(|i| self.labels.get(&i.msg)) {
                *self.script_holds.entry(*m).or_insert(0) += 1;
            }
        }
        for i in 0..self.p.script.len() {
            let at = us(self.p.script[i].at_ms);
            self.eng.post_at(at, Ev::Script { i });
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
            let to_text = post.to.as_deref().unwrap_or(&p.channel);
            let Some(to) = p.names.dest(to_text) else {
                return; // every scripted destination is interned
            };
            let kind = PostKind::of(to_text, &post.content);
            let content = Content::Text(Arc::from(post.content.as_str()));
            if post.from == OPERATOR {
                self.post_msg(now, m, to, content, kind);
            } else if let Some(a) = names::parse_agent(&post.from, self.agents.len()) {
                let msg = ClientMsg::Msg {
                    id: Some(MsgId::of(m)),
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
        let p = self.p;
        let reply_to = p
            .script
            .iter()
            .filter_map(|o| o.post.as_ref())
            .find(|post| post.id == inf.msg)
            .and_then(|post| post.to.as_deref())
            .unwrap_or(&p.channel);
        let Some(reply_to) = p.names.dest(reply_to) else {
            self.release(m);
            return; // every scripted destination is interned
        };
        let started_at = inf
            .started_at
            .unwrap_or_else(|| self.agents[a as usize].actor.local_ms(now));
        let id = MsgId::of(m);
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
