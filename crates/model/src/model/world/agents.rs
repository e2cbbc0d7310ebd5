//! The agents' side: feeding each [`Agent`] actor what reaches it, and
//! carrying out what it decides (sends go up its link, timers and ends of
//! inference become events, decisions are counted and traced).
//!
//! [`Agent`]: crate::agent::Agent

use super::{ClientMsg, Ev, Inference, Input, ServerMsg, World};
use crate::agent::{self, InferenceEnd, TimerKind};
use crate::floor::Naming;
use crate::model::dense::{Dense, MsgId};
use std::sync::Arc;

type Output = agent::Output<Dense>;

/// A delivery's hold on the message it relays (see [`super::relays::Payload`]).
#[derive(Clone, Copy)]
pub(super) struct Hold {
    /// The number of the message relayed, if the world knows it.
    pub(super) relay: Option<u32>,
    /// That message's depth.
    pub(super) depth: Option<u32>,
    /// Whether the hold is dropped after this delivery (its own hold, or
    /// the last arrival of its cursor's payload).
    pub(super) release: bool,
}

impl World<'_> {
    /// Agent `a` joins its group's channels (at the start, and back from a
    /// crash).
    pub(super) fn join(&mut self, a: u32) {
        let g = self.agents[a as usize].group;
        let agent = self.p.handles[a as usize];
        for i in 0..self.p.groups[g].channel_dests.len() {
            let channel = self.p.groups[g].channel_dests[i];
            self.server_input(Input::Join { agent, channel });
        }
    }

    /// Feed agent `a` one input now and carry out what it decides.
    pub(super) fn feed(&mut self, a: u32, input: agent::Input<'_, Dense>) {
        let now = self.eng.now();
        self.agents[a as usize]
            .actor
            .handle(now, input, &mut self.outputs);
        // Most deliveries change nothing: the carrying out, with its large
        // frame, is a call of its own.
        if !self.outputs.is_empty() {
            self.carry_out_all(a);
        }
    }

    /// Carry out every decision of agent `a` in `self.outputs`.
    #[inline(never)]
    fn carry_out_all(&mut self, a: u32) {
        let mut outputs = std::mem::take(&mut self.outputs);
        // In order from the back of the reversed list: no `Drain` to drop
        // (most lists hold one to three outputs).
        if outputs.len() > 1 {
            outputs.reverse();
        }
        while let Some(o) = outputs.pop() {
            self.carry_out(a, o);
        }
        self.outputs = outputs; // emptied, its room kept
    }

    /// A server message reaches agent `a` (of incarnation `inc`), with the
    /// hold it keeps on the message it relays. Inlined at its one call
    /// site, in the event loop (a call costs 3% of the default scenario's
    /// instructions).
    #[inline(always)]
    pub(super) fn agent_in(&mut self, now: u64, a: u32, inc: u32, msg: Arc<ServerMsg>, hold: Hold) {
        let release = hold.relay.filter(|_| hold.release);
        let slot = &self.agents[a as usize];
        if slot.inc != inc || !slot.alive {
            if let Some(m) = release {
                self.release(m);
            }
            return;
        }
        if self.trace.is_some() {
            let msg = msg.to_text(&self.p.names).to_json();
            let line = serde_json::json!({
                "t_us": now, "ev": "recv", "agent": self.p.ids[a as usize], "msg": msg,
            });
            self.trace_line(line);
        }
        // A relayed message the world still knows may be answered.
        let depth = hold.depth;
        self.feed(a, agent::Input::Server { msg: &msg, depth });
        if let Some(m) = release {
            self.release(m); // this delivery's hold, or its payload's
        }
    }

    /// The inference of agent `a` on message `m` completes.
    pub(super) fn infer_done(&mut self, a: u32, m: u32) {
        let id = MsgId::of(m);
        if !self.agents[a as usize].actor.is_running(&id) {
            return;
        }
        let counted = self.take_inference(a, m).is_some_and(|r| r.counted);
        let reply = self.new_msg();
        self.reply_counted = counted;
        let input = agent::Input::InferenceDone {
            msg_id: &id,
            reply_id: Some(MsgId::of(reply)),
        };
        self.feed(a, input);
    }

    /// Agent `a`'s process dies now; the server notices after `detect_us`.
    pub(super) fn crash(&mut self, a: u32, detect_us: u64) {
        let slot = &mut self.agents[a as usize];
        // Compared for equality only: wrapping after 2^32 crashes is harmless.
        slot.inc = slot.inc.wrapping_add(1);
        slot.alive = false;
        self.typing_crashed(a);
        self.feed(a, agent::Input::Crash);
        self.eng.post_in(detect_us, Ev::DisconnectSeen { agent: a });
    }

    /// Forget the scheduled end of agent `a`'s inference on `m`.
    fn take_inference(&mut self, a: u32, m: u32) -> Option<Inference> {
        let running = &mut self.agents[a as usize].running;
        let i = running.iter().position(|r| r.msg == m)?;
        Some(running.swap_remove(i))
    }

    /// Carry out one decision of agent `a`.
    fn carry_out(&mut self, a: u32, o: Output) {
        match o {
            Output::Send(msg) => {
                if matches!(msg, ClientMsg::RespondingTo { .. }) {
                    self.acc.claims += 1;
                    if self.p.carrier == crate::carrier::CarrierKind::Typing {
                        // The claim is the typing indicator the inference
                        // that starts with it shows (`typing_started`).
                        return;
                    }
                }
                self.send_up(a, msg, None);
            }
            Output::Reply {
                msg,
                parent,
                infer_us,
            } => self.send_reply(a, msg, parent, infer_us),
            Output::Wants { msg_id } => self.wants(msg_id),
            Output::Again { msg_id } => {
                let m = msg_id.number();
                if let Some(info) = m.and_then(|m| self.msgs.get_mut(&m)) {
                    info.pending += 1;
                }
                self.trace_state(a, m, "again", || serde_json::json!({}));
            }
            Output::SetTimer {
                msg_id,
                at_us,
                kind,
            } => self.set_timer(a, msg_id, at_us, kind),
            Output::Infer {
                msg_id,
                started_at,
                duration_us,
                end,
                ignore_yield,
            } => self.start_inference(a, msg_id, started_at, duration_us, end, ignore_yield),
            Output::Abort {
                msg_id,
                winner,
                ran_us,
            } => {
                let Some(m) = msg_id.number() else {
                    return;
                };
                self.end_inference(a, m, Some(ran_us));
                let names = &self.p.names;
                self.trace_state(
                    a,
                    Some(m),
                    "abort",
                    || serde_json::json!({"winner": names.show_agent(&winner)}),
                );
            }
            Output::Done { msg_id } => {
                let m = msg_id.number();
                self.trace_state(a, m, "done", || serde_json::json!({}));
            }
            Output::Skip { msg_id, reason } => {
                let reason = reason.as_str();
                let m = msg_id.number();
                self.trace_state(a, m, "skip", || serde_json::json!({"reason": reason}));
            }
            Output::Idle { msg_id } => {
                if let Some(m) = msg_id.number() {
                    let slot = &mut self.agents[a as usize];
                    if !slot.alive && self.policy.rules().announce_release {
                        // A crash: held open until the disconnect is seen.
                        slot.held_till_seen.push(m);
                    } else {
                        self.release(m);
                    }
                }
            }
            Output::Lost {
                msg_id,
                ran_us,
                hung,
            } => {
                if let Some(m) = msg_id.number() {
                    // A hung inference was counted as wasted when it began.
                    self.end_inference(a, m, if hung { None } else { Some(ran_us) });
                }
            }
            Output::Crashed => self.trace_state(a, None, "crash", || serde_json::json!({})),
        }
    }

    /// Agent `a` sends its reply to `parent`. The reply carries its
    /// inference time for the wasted-time count; it keeps the parent open
    /// until it reaches the server (or is lost).
    fn send_reply(&mut self, a: u32, msg: ClientMsg, parent: MsgId, infer_us: u64) {
        if let Some(info) = parent.number().and_then(|m| self.msgs.get_mut(&m)) {
            info.pending += 1;
        }
        let dur = self.reply_counted.then_some(infer_us);
        self.typing_answered(a);
        self.send_up(a, msg, dur);
    }

    /// An agent decided to answer `msg_id`: it holds the message open.
    fn wants(&mut self, msg_id: MsgId) {
        if let Some(info) = msg_id.number().and_then(|m| self.msgs.get_mut(&m)) {
            info.wanted += 1;
            info.pending += 1;
        }
    }

    /// A CSMA timer or a recheck wake for agent `a`.
    fn set_timer(&mut self, a: u32, msg_id: MsgId, at_us: u64, kind: TimerKind) {
        let Some(m) = msg_id.number() else {
            return;
        };
        let inc = self.agents[a as usize].inc;
        self.eng.post_at(
            at_us,
            Ev::Timer {
                agent: a,
                inc,
                msg: m,
            },
        );
        let ev = match kind {
            TimerKind::Csma => "csma",
            TimerKind::Recheck => "recheck_wait",
            TimerKind::Fallback => "fallback_wait",
        };
        self.trace_state(a, Some(m), ev, || serde_json::json!({"until_us": at_us}));
    }

    /// Agent `a` starts an inference on `msg_id`: schedule its end, count it.
    fn start_inference(
        &mut self,
        a: u32,
        msg_id: MsgId,
        started_at: i64,
        dur: u64,
        end: InferenceEnd,
        ignore: bool,
    ) {
        let Some(m) = msg_id.number() else {
            return;
        };
        let now = self.eng.now();
        if a as usize >= self.p.answering {
            return self.start_selection(a, m, dur, end);
        }
        let counted = match self.msgs.get_mut(&m) {
            Some(info) => {
                info.starters += 1;
                info.channel_msg
            }
            None => false,
        };
        let key = match end {
            InferenceEnd::Hang => None,
            InferenceEnd::CrashAt(at) => Some(self.eng.schedule_at(at, Ev::Crash { agent: a })),
            InferenceEnd::DoneAt(at) => {
                Some(self.eng.schedule_at(at, Ev::InferDone { agent: a, msg: m }))
            }
        };
        let hung = end == InferenceEnd::Hang;
        let crash = matches!(end, InferenceEnd::CrashAt(_));
        self.typing_started(a, hung);
        self.agents[a as usize].running.push(Inference {
            msg: m,
            key,
            counted,
            selection: false,
        });
        if counted {
            self.acc.started();
            if hung {
                self.acc.wasted(0);
            }
        }
        let until = if hung { None } else { Some(now + dur) };
        self.trace_state(
            a,
            Some(m),
            "infer",
            || serde_json::json!({"started_at": started_at, "until_us": until, "ignore_yield": ignore, "hung": hung, "crash": crash}),
        );
    }

    /// The selector starts a selection on question `m`: no starter of the
    /// question (a selection is no answer), but an inference in the bill,
    /// billed now for the time it will run (to its end, its crash, or 0 s
    /// for a hang, as an agent's hung inference), so that its end is not
    /// counted again. A hung or crashed selection is wasted inference (its
    /// count, and a crashed one's time to the crash), as an agent's; a
    /// completed one is not, posted or not (docs/metrics.md).
    fn start_selection(&mut self, a: u32, m: u32, dur: u64, end: InferenceEnd) {
        let now = self.eng.now();
        let (key, billed) = match end {
            InferenceEnd::Hang => (None, 0),
            InferenceEnd::CrashAt(at) => (
                Some(self.eng.schedule_at(at, Ev::Crash { agent: a })),
                at.saturating_sub(now),
            ),
            InferenceEnd::DoneAt(at) => (
                Some(self.eng.schedule_at(at, Ev::InferDone { agent: a, msg: m })),
                dur,
            ),
        };
        let channel = self.msgs.get(&m).is_some_and(|i| i.channel_msg);
        self.agents[a as usize].running.push(Inference {
            msg: m,
            key,
            counted: false,
            selection: channel,
        });
        if channel {
            self.acc.started();
            self.acc.billed(billed);
            // A hung selection is wasted (a call of 0 s), as an agent's
            // hung inference; a crashed one when the crash comes.
            if end == InferenceEnd::Hang {
                self.acc.wasted_billed(0);
            }
        }
        let until = key.map(|_| now + dur);
        self.trace_state(
            a,
            Some(m),
            "select",
            || serde_json::json!({"until_us": until, "hung": end == InferenceEnd::Hang}),
        );
    }

    /// An inference of agent `a` on `m` stopped early (abort, crash):
    /// cancel its end; `wasted`: the time it ran, if that counts as waste.
    fn end_inference(&mut self, a: u32, m: u32, wasted: Option<u64>) {
        let Some(r) = self.take_inference(a, m) else {
            return;
        };
        if let Some(k) = r.key {
            self.eng.cancel(k);
        }
        match wasted {
            Some(ran) if r.counted => self.acc.wasted(ran),
            // A selection's time was billed when it started.
            Some(ran) if r.selection => self.acc.wasted_billed(ran),
            _ => {}
        }
    }
}
