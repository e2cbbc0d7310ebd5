//! What an agent's actor asked for, carried out: sends, timers,
//! inferences, and what the observer records of them.

use super::{Driver, Timer};
use crate::agent::{InferenceEnd, Output, TimerKind};
use crate::floor::{self, ClientMsg};
use serde_json::json;
use std::collections::BTreeMap;

impl Driver<'_> {
    fn send(&mut self, a: usize, now: u64, msg: &ClientMsg) {
        if self.trace.is_some() {
            let line =
                json!({"t_us": now, "ev": "send", "agent": self.ids[a], "msg": msg.to_json()});
            self.trace(line);
        }
        let text = self.wire(msg);
        if let Some(l) = &self.links[a + 1] {
            l.send(text);
        }
        self.last_own = std::time::Instant::now();
    }

    pub(super) fn cancel_end(&mut self, a: usize, msg_id: &str) {
        if let Some(key) = self.ends.remove(&(a, msg_id.to_string())) {
            self.timers.remove(&key);
        }
    }

    /// Carry out what agent `a`'s actor asked for, in order.
    pub(super) fn apply(&mut self, a: usize, now: u64, out: Vec<Output>) {
        let replies = finished_replies(&out);
        for o in out {
            match o {
                Output::Send(msg) => self.on_send(a, now, &msg),
                Output::Reply { msg, parent, .. } => self.on_reply(a, now, &msg, &parent),
                Output::Wants { msg_id } => self.obs.wants(&msg_id),
                Output::Again { msg_id } => self.trace_state(a, Some(&msg_id), "again", json!({})),
                Output::SetTimer {
                    msg_id,
                    at_us,
                    kind,
                } => self.on_set_timer(a, msg_id.to_string(), at_us, kind),
                Output::Infer {
                    msg_id,
                    started_at,
                    duration_us: _,
                    end,
                    ignore_yield,
                } => self.on_infer(a, msg_id.to_string(), started_at, end, ignore_yield),
                Output::Abort {
                    msg_id,
                    winner,
                    ran_us,
                } => {
                    self.cancel_end(a, &msg_id);
                    self.obs.aborted(a, &msg_id, ran_us);
                    self.trace_state(a, Some(&msg_id), "abort", json!({"winner": winner}));
                }
                Output::Done { msg_id } => self.on_done(a, &msg_id, &replies),
                Output::Skip { msg_id, reason } => self.on_skip(a, &msg_id, reason),
                Output::Idle { .. } => {}
                Output::Lost { msg_id, ran_us, .. } => {
                    self.cancel_end(a, &msg_id);
                    self.obs.lost(a, &msg_id, ran_us);
                }
                Output::Crashed => self.on_crashed(a, now),
            }
        }
    }

    /// Send a message of agent `a`, observing its claims.
    fn on_send(&mut self, a: usize, now: u64, msg: &ClientMsg) {
        if let ClientMsg::RespondingTo { msg_id, .. } = msg {
            let me = self.ids[a].clone();
            self.obs.claimed(&me, msg_id, now);
        }
        self.send(a, now, msg);
    }

    /// Send agent `a`'s reply to `parent`, recording its authorship and
    /// its depth.
    fn on_reply(&mut self, a: usize, now: u64, msg: &ClientMsg, parent: &str) {
        if let ClientMsg::Msg {
            id: Some(id), to, ..
        } = msg
        {
            let me = self.ids[a].clone();
            self.obs
                .authored_by_agent(a, id, to.starts_with('#'), now, &me);
            let d = self.depth.get(parent).map_or(1, |d| d + 1);
            self.depth.insert(id.clone(), d);
        }
        self.send(a, now, msg);
    }

    /// Set a CSMA or recheck timer of agent `a`'s current incarnation.
    fn on_set_timer(&mut self, a: usize, msg_id: String, at_us: u64, kind: TimerKind) {
        let ev = match kind {
            TimerKind::Csma => "csma",
            TimerKind::Recheck => "recheck_wait",
            TimerKind::Fallback => "fallback_wait",
        };
        self.trace_state(a, Some(&msg_id), ev, json!({"until_us": at_us}));
        let inc = self.inc[a];
        self.schedule(at_us, Timer::Agent { a, inc, msg_id });
    }

    /// Start an inference of agent `a`: a timer for its end (done or
    /// crash), none when it hangs.
    fn on_infer(
        &mut self,
        a: usize,
        msg_id: String,
        started_at: i64,
        end: InferenceEnd,
        ignore_yield: bool,
    ) {
        let hung = end == InferenceEnd::Hang;
        self.obs.infer(a, &msg_id, hung);
        let inc = self.inc[a];
        let (until, crash) = match end {
            InferenceEnd::DoneAt(t) => {
                let key = self.schedule(
                    t,
                    Timer::Done {
                        a,
                        inc,
                        msg_id: msg_id.clone(),
                    },
                );
                self.ends.insert((a, msg_id.clone()), key);
                (Some(t), false)
            }
            InferenceEnd::CrashAt(t) => {
                let key = self.schedule(t, Timer::Crash { a, inc });
                self.ends.insert((a, msg_id.clone()), key);
                (None, true)
            }
            InferenceEnd::Hang => (None, false),
        };
        self.trace_state(
            a,
            Some(&msg_id),
            "infer",
            json!({"started_at": started_at, "until_us": until, "ignore_yield": ignore_yield, "hung": hung, "crash": crash}),
        );
    }

    /// Agent `a` finished with `msg_id`, with the reply it sent if any.
    fn on_done(&mut self, a: usize, msg_id: &str, replies: &BTreeMap<String, (String, u64)>) {
        let (reply, infer_us) = match replies.get(msg_id) {
            Some((id, us)) => (Some(id.clone()), *us),
            None => (None, 0),
        };
        self.obs.done(a, msg_id, infer_us, reply);
        self.trace_state(a, Some(msg_id), "done", json!({}));
    }

    /// Agent `a` decided not to answer `msg_id`.
    fn on_skip(&mut self, a: usize, msg_id: &str, reason: floor::SkipReason) {
        let reason = reason.as_str();
        self.trace_state(a, Some(msg_id), "skip", json!({"reason": reason}));
    }

    /// Agent `a` crashed: a new incarnation and connection generation,
    /// its socket dropped, its reconnection scheduled after a restart delay.
    fn on_crashed(&mut self, a: usize, now: u64) {
        self.inc[a] = self.inc[a].wrapping_add(1);
        let conn = a + 1;
        self.gens[conn] = self.gens[conn].wrapping_add(1);
        // Dropping the link closes the socket without a close
        // frame: the server sees an abrupt disconnect.
        self.links[conn] = None;
        self.trace_state(a, None, "crash", json!({}));
        let d = self.restart.sample_us(&mut self.server_rng);
        self.schedule(now + d, Timer::Reconnect { a });
    }
}

/// The reply of each inference finished in `out` (its Done comes first),
/// by parent: (the reply's id, the inference's duration).
fn finished_replies(out: &[Output]) -> BTreeMap<String, (String, u64)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Reply {
                msg: ClientMsg::Msg { id: Some(id), .. },
                parent,
                infer_us,
            } => Some((parent.to_string(), (id.clone(), *infer_us))),
            _ => None,
        })
        .collect()
}
