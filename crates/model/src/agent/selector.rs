//! The selector (`schemes.scheme = "selector"`, docs/schemes.md): one
//! extra actor, a model call that picks who answers each operator post
//! that @mentions nobody. It is an [`Agent`] with its own state: it never
//! claims (no CSMA, no floor client), it infers at once on every such
//! question, and when the inference ends it posts a *selection*, a channel
//! message in reply to the question that @mentions the chosen agent,
//! drawn uniformly over the scenario's answering agents (it does not know
//! who is alive or busy). With a fallback it selects again when it has
//! seen no answer to the question `fallback_us` after its selection.

use super::{Agent, AgentNaming, Input, Output, TimerKind};
use crate::floor::{ClientMsg, ServerMsg};
use litemap::LiteMap;
use rand::RngExt;

/// What the selector holds.
#[derive(Debug, Clone)]
pub(super) struct SelectorState<N: AgentNaming> {
    /// The answering agents it picks from (uniformly).
    roster: Vec<N::Agent>,
    /// The questions it is selecting for, or watching for an answer.
    watch: LiteMap<N::Msg, Watch<N>>,
}

/// One question the selector handles.
#[derive(Debug, Clone)]
struct Watch<N: AgentNaming> {
    /// Where the question was posted (the selection goes there).
    to: N::Dest,
    /// Fallback selections left.
    left: u32,
}

impl<N: AgentNaming> Agent<N> {
    /// Make this agent the selector, picking among `roster`; its gate
    /// (with the fallback) is set by [`Agent::set_gate`].
    pub fn make_selector(&mut self, roster: Vec<N::Agent>) {
        self.sel = Some(Box::new(SelectorState {
            roster,
            watch: LiteMap::new(),
        }));
    }

    /// Whether this agent is the selector.
    pub fn is_selector(&self) -> bool {
        self.sel.is_some()
    }

    /// The selector's inputs.
    pub(super) fn selector_handle(
        &mut self,
        now: u64,
        input: Input<'_, N>,
        out: &mut Vec<Output<N>>,
    ) {
        match input {
            Input::Server { msg, depth } => {
                let ServerMsg::Msg {
                    id,
                    from,
                    to,
                    content,
                    in_reply_to,
                    ..
                } = msg
                else {
                    return;
                };
                if from == self.id() {
                    return;
                }
                if let Some(q) = in_reply_to {
                    // An answer to a question it selected for: the
                    // question needs no fallback (a running selection
                    // still posts).
                    let running = self.is_running(q);
                    if let Some(sel) = self.sel.as_mut()
                        && sel.watch.remove(q).is_some()
                        && !running
                    {
                        self.selector_settle(q, out);
                    }
                    return;
                }
                // An operator post to the channel that @mentions nobody.
                let question = depth == Some(0)
                    && !self.names.is_dm_to(to, self.id())
                    && !self.names.mentions_anyone(content);
                let Some(sel) = self.sel.as_mut() else {
                    return;
                };
                if !question || sel.watch.contains_key(id) {
                    return;
                }
                sel.watch.insert(
                    id.clone(),
                    Watch {
                        to: to.clone(),
                        left: self.gate.max_fallbacks,
                    },
                );
                out.push(Output::Wants { msg_id: id.clone() });
                self.slots.entry(id.clone()).or_default().busy = true;
                let t = self.local_ms(now);
                self.start_inference(now, id.clone(), t, out);
            }
            Input::Timer { msg_id } => {
                // The fallback: no answer seen since the last selection.
                if self.is_running(msg_id) {
                    return;
                }
                let Some(w) = self.sel.as_mut().and_then(|s| s.watch.get_mut(msg_id)) else {
                    return;
                };
                if w.left == 0 {
                    if let Some(s) = self.sel.as_mut() {
                        s.watch.remove(msg_id);
                    }
                    self.selector_settle(msg_id, out);
                    return;
                }
                w.left -= 1;
                let t = self.local_ms(now);
                self.start_inference(now, msg_id.clone(), t, out);
            }
            Input::InferenceDone { msg_id, reply_id } => {
                self.selection_done(now, msg_id, reply_id, out);
            }
            Input::Crash => {
                if let Some(sel) = self.sel.as_mut() {
                    sel.watch.clear();
                }
                self.crash(now, out);
            }
            // A scripted inference is an answering agent's.
            Input::StartNow { .. } => {}
        }
    }

    /// The selection inference on `q` ended: pick an agent, post the
    /// selection, and wait for an answer if a fallback is left.
    fn selection_done(
        &mut self,
        now: u64,
        q: &N::Msg,
        reply_id: Option<N::Msg>,
        out: &mut Vec<Output<N>>,
    ) {
        let Some(r) = self.slots.get_mut(q).and_then(|s| s.running.take()) else {
            return;
        };
        out.push(Output::Done { msg_id: q.clone() });
        let Some(sel) = self.sel.as_ref() else {
            return;
        };
        let n = sel.roster.len();
        // An answer seen while it inferred (the watch is gone): the
        // selection is not posted (its inference is billed all the same).
        let watch = sel.watch.get(q).cloned();
        if let (Some(w), true) = (&watch, n > 0) {
            let k = self.rng.random_range(0..n);
            let content = self.names.select(q, &sel.roster[k]);
            out.push(Output::Reply {
                msg: ClientMsg::Msg {
                    id: reply_id,
                    to: w.to.clone(),
                    content,
                    in_reply_to: Some(q.clone()),
                },
                parent: q.clone(),
                infer_us: r.dur_us,
            });
        }
        match watch {
            Some(w) if w.left > 0 && self.gate.fallback_us > 0 => {
                out.push(Output::SetTimer {
                    msg_id: q.clone(),
                    at_us: now.saturating_add(self.gate.fallback_us),
                    kind: TimerKind::Fallback,
                });
            }
            _ => {
                if let Some(sel) = self.sel.as_mut() {
                    sel.watch.remove(q);
                }
                self.selector_settle(q, out);
            }
        }
    }

    /// The selector is done with `q` when it neither infers on it nor
    /// watches it.
    fn selector_settle(&mut self, q: &N::Msg, out: &mut Vec<Output<N>>) {
        let watching = self.sel.as_ref().is_some_and(|s| s.watch.contains_key(q));
        let Some(slot) = self.slots.get(q) else {
            return;
        };
        if watching || slot.running.is_some() {
            return;
        }
        let busy = slot.busy;
        self.slots.remove(q);
        if busy {
            out.push(Output::Idle { msg_id: q.clone() });
        }
    }
}
