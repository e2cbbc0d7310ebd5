//! What a live run observed, and the metrics computed from it
//! (docs/live.md, "Metrics"). Everything here is fed by the driver at its
//! scenario-time clock; nothing reads a clock itself.

use super::OPERATOR;
use crate::agent::Scheme;
use crate::metrics::run::{MessageOutcome, RunAccumulator, ServerCounts};
use crate::metrics::{RunResult, stats::Percentiles};
use crate::scenario::Scenario;
use std::collections::BTreeMap;

/// One message authored in the run: an operator post or an agent's reply.
#[derive(Debug, Clone)]
struct Msg {
    /// A channel message (not a DM): counts in the metrics.
    channel: bool,
    /// When its author sent it (driver µs).
    sent_us: u64,
    /// Agents that wanted to answer it (their `Wants` outputs).
    wanted: u32,
    /// A question under a scheme (an operator's channel post): it counts
    /// in the metrics whether or not an agent wanted it, as in the
    /// simulator (docs/schemes.md, "What counts as a question").
    question: bool,
    /// Agents that started an inference on it (`Infer` outputs).
    starters: u32,
    /// Replies to it the operator received, in order: (reply id, time).
    replies: Vec<(String, u64)>,
    /// A selection (the selector's post naming who answers a question):
    /// no reply to its question (docs/schemes.md).
    selection: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Running,
    Done { reply_id: Option<String> },
    Aborted,
    Lost,
    Hung,
}

#[derive(Debug, Clone)]
struct Inference {
    msg_id: String,
    ran_us: u64,
    end: End,
    /// The selector's: in the bill, but no starter, useful or wasted.
    selection: bool,
}

/// Pooled counts over the run's messages (for two-proportion tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Messages in the metrics (channel messages someone wanted to answer).
    pub messages: u64,
    pub duplicated: u64,
    pub unanswered: u64,
    pub single_starter: u64,
}

/// The observations of one live run.
#[derive(Debug, Default)]
pub struct Observer {
    /// Every operator post to the channel is a question (a scheme or a
    /// cooldown is set): see [`Observer::counting_every_post`].
    every_post: bool,
    /// Under `selector`: the selector's actor index (the driver's `a`).
    selector: Option<usize>,
    msgs: BTreeMap<String, Msg>,
    infers: Vec<Inference>,
    /// (agent, msg) -> index of its running inference in `infers`.
    running: BTreeMap<(usize, String), usize>,
    pub claims: u64,
    /// YIELD frames the agents received.
    pub yields: u64,
    /// Frames received and timers fired: the driver's events.
    pub events: u64,
    /// One-way link delays measured from the run's own relays, µs of
    /// scenario time (see [`Observer::relay_seen`]).
    pub delays_us: Vec<u64>,
    /// Sends whose relays are being timed: (sender, kind, msg id) -> time.
    sent: BTreeMap<(String, &'static str, String), u64>,
    /// How late timers fired, µs of real time.
    pub lateness_us: Vec<u64>,
}

impl Observer {
    pub fn new() -> Observer {
        Observer::default()
    }

    /// An observer that counts every operator post to the channel as a
    /// question, wanted or not, as the simulator does under a scheme or a
    /// cooldown: one that nobody answers (unmentioned under `mentions`, its
    /// owner down, every agent cooling down) is unanswered rather than
    /// out of the denominator.
    pub fn counting_every_post() -> Observer {
        Observer {
            every_post: true,
            ..Observer::default()
        }
    }

    /// The observer of a run of scenario `s`: counting every operator
    /// post under a scheme or a cooldown (the simulator's rule, with the
    /// cooldown rounded to µs as the simulator rounds it).
    pub fn for_scenario(s: &Scenario) -> Observer {
        let c = &s.schemes;
        if c.scheme != Scheme::Open || (c.cooldown_ms * 1000.0).round() > 0.0 {
            Observer::counting_every_post()
        } else {
            Observer::new()
        }
    }

    /// Under `selector`: actor `a` is the selector, whose selections are
    /// no answers and whose inferences are in the bill as the simulator
    /// counts them (`start_selection`: billed, never a starter, useful or
    /// wasted).
    pub fn with_selector(mut self, a: Option<usize>) -> Observer {
        self.selector = a;
        self
    }

    /// The author (operator or agent) sent message `id` now.
    pub fn authored(&mut self, id: &str, channel: bool, now_us: u64, author: &str) {
        self.authored_by(id, channel, now_us, author, false);
    }

    /// Agent `a` (named `author`) sent message `id` now: a selection if
    /// `a` is the selector.
    pub fn authored_by_agent(
        &mut self,
        a: usize,
        id: &str,
        channel: bool,
        now_us: u64,
        author: &str,
    ) {
        let selection = self.selector == Some(a);
        self.authored_by(id, channel, now_us, author, selection);
    }

    fn authored_by(&mut self, id: &str, channel: bool, now_us: u64, author: &str, selection: bool) {
        let question = self.every_post && channel && author == OPERATOR;
        self.msgs.insert(
            id.to_string(),
            Msg {
                channel,
                sent_us: now_us,
                wanted: 0,
                question,
                starters: 0,
                replies: Vec::new(),
                selection,
            },
        );
        self.sent
            .insert((author.to_string(), "MSG", id.to_string()), now_us);
    }

    /// An agent sent a claim for `msg_id` now.
    pub fn claimed(&mut self, agent: &str, msg_id: &str, now_us: u64) {
        self.claims += 1;
        self.sent
            .insert((agent.to_string(), "CLAIM", msg_id.to_string()), now_us);
    }

    /// Whether `agent` sent a claim for `msg_id`.
    pub fn has_claimed(&self, agent: &str, msg_id: &str) -> bool {
        self.sent
            .contains_key(&(agent.to_string(), "CLAIM", msg_id.to_string()))
    }

    /// A relay of something `from` sent arrived now: half the round trip
    /// (sender to server to receiver) is one link delay sample.
    pub fn relay_seen(&mut self, from: &str, kind: &'static str, msg_id: &str, now_us: u64) {
        if let Some(&t0) = self.sent.get(&(from.to_string(), kind, msg_id.to_string())) {
            self.delays_us.push(now_us.saturating_sub(t0) / 2);
        }
    }

    /// Agent wants to answer `msg_id`.
    pub fn wants(&mut self, msg_id: &str) {
        if let Some(m) = self.msgs.get_mut(msg_id) {
            m.wanted += 1;
        }
    }

    /// Agent `a` started an inference on `msg_id` (`hung`: it never ends).
    pub fn infer(&mut self, a: usize, msg_id: &str, hung: bool) {
        let selection = self.selector == Some(a);
        if let Some(m) = self.msgs.get_mut(msg_id)
            && !selection
        {
            m.starters += 1;
        }
        self.running
            .insert((a, msg_id.to_string()), self.infers.len());
        self.infers.push(Inference {
            msg_id: msg_id.to_string(),
            ran_us: 0,
            end: if hung { End::Hung } else { End::Running },
            selection,
        });
    }

    fn end(&mut self, a: usize, msg_id: &str, ran_us: u64, end: End) {
        if let Some(i) = self.running.remove(&(a, msg_id.to_string())) {
            let rec = &mut self.infers[i];
            if rec.end != End::Hung || end == End::Lost {
                rec.ran_us = ran_us;
                rec.end = if rec.end == End::Hung { End::Hung } else { end };
            }
        }
    }

    pub fn aborted(&mut self, a: usize, msg_id: &str, ran_us: u64) {
        self.end(a, msg_id, ran_us, End::Aborted);
    }

    pub fn lost(&mut self, a: usize, msg_id: &str, ran_us: u64) {
        self.end(a, msg_id, ran_us, End::Lost);
    }

    /// The inference finished after `infer_us` and its reply (if any) has id `reply_id`.
    pub fn done(&mut self, a: usize, msg_id: &str, infer_us: u64, reply_id: Option<String>) {
        self.end(a, msg_id, infer_us, End::Done { reply_id });
    }

    /// Whether reply `reply_id` to `parent` is not yet recorded.
    pub fn reply_is_new(&self, parent: &str, reply_id: &str) -> bool {
        self.msgs
            .get(parent)
            .is_some_and(|m| !m.replies.iter().any(|(r, _)| r == reply_id))
    }

    /// The operator received reply `reply_id` to `parent` now.
    pub fn reply_seen(&mut self, parent: &str, reply_id: &str, now_us: u64) {
        if self.msgs.get(reply_id).is_some_and(|r| r.selection) {
            return;
        }
        if let Some(m) = self.msgs.get_mut(parent)
            && !m.replies.iter().any(|(r, _)| r == reply_id)
        {
            m.replies.push((reply_id.to_string(), now_us));
        }
    }

    /// Close the run: every message as it stands.
    pub fn finish(&self, server: Option<ServerCounts>) -> (RunResult, Counts) {
        let mut acc = RunAccumulator::new();
        let mut counts = Counts::default();
        for m in self.msgs.values().filter(|m| m.channel) {
            let out = MessageOutcome {
                wanted: if m.question {
                    m.wanted.max(1)
                } else {
                    m.wanted
                },
                responses: m.replies.len() as u32,
                ttfr_us: m.replies.first().map(|(_, t)| t.saturating_sub(m.sent_us)),
                starters: m.starters,
            };
            if out.wanted > 0 {
                counts.messages += 1;
                match out.responses {
                    0 => counts.unanswered += 1,
                    1 => {}
                    _ => counts.duplicated += 1,
                }
                if out.starters == 1 {
                    counts.single_starter += 1;
                }
            }
            acc.message(out);
        }
        for inf in &self.infers {
            let Some(m) = self.msgs.get(&inf.msg_id).filter(|m| m.channel) else {
                continue;
            };
            acc.started();
            if inf.selection {
                // Billed for the time it ran: to its end or crash, 0 s if
                // hung (the simulator bills a selection so at its start).
                acc.billed(if inf.end == End::Hung { 0 } else { inf.ran_us });
                continue;
            }
            match &inf.end {
                End::Done { reply_id } => {
                    let first = m.replies.first().map(|(r, _)| r);
                    if reply_id.is_some() && first == reply_id.as_ref() {
                        acc.useful(inf.ran_us);
                    } else {
                        acc.wasted(inf.ran_us);
                    }
                }
                End::Hung => acc.wasted(0),
                End::Aborted | End::Lost => acc.wasted(inf.ran_us),
                // Still running when the run ended (interrupted): counted
                // as started, its time unknown.
                End::Running => {}
            }
        }
        acc.claims = self.claims;
        let nan = f64::NAN;
        let counts_srv = server.unwrap_or_default();
        let mut r = acc.finish(
            ServerCounts {
                yields: self.yields,
                ..counts_srv
            },
            self.events,
        );
        if server.is_none() {
            // Not observable from the clients.
            for name in ["expired_claims", "relayed", "overruled"] {
                if let Some(i) = crate::metrics::METRICS.iter().position(|m| *m == name) {
                    r.values[i] = nan;
                }
            }
        }
        (r, counts)
    }

    /// Quantile `q` (0..1) of the measured link delays, ms of scenario time.
    pub fn delay_quantile_ms(delays_us: &[u64], q: f64) -> f64 {
        if delays_us.is_empty() {
            return f64::NAN;
        }
        let mut p = Percentiles::new();
        for d in delays_us {
            p.record(*d);
        }
        p.value_at_percentile(q * 100.0) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reply_is_useful_the_rest_wasted() {
        let mut o = Observer::new();
        o.authored("m0", true, 0, "operator");
        o.wants("m0");
        o.wants("m0");
        o.infer(0, "m0", false);
        o.infer(1, "m0", false);
        o.done(0, "m0", 3000, Some("m1".into()));
        o.done(1, "m0", 1000, Some("m2".into()));
        o.reply_seen("m0", "m1", 2000);
        o.reply_seen("m0", "m2", 2500);
        let (r, c) = o.finish(None);
        assert_eq!(r.get("duplicate_rate"), Some(1.0));
        assert_eq!(r.get("wasted_inference_rate"), Some(0.25));
        // Below 2048 µs the histogram is exact.
        assert_eq!(r.get("ttfr_p50_ms"), Some(2.0));
        assert!(r.get("relayed").is_some_and(f64::is_nan));
        assert_eq!(c.duplicated, 1);
    }

    /// Under a scheme every operator post to the channel is a question:
    /// one nobody wanted is unanswered (the simulator's rule); an agent's
    /// reply nobody wanted and a DM stay out, and without a scheme the
    /// unwanted post stays out too.
    #[test]
    fn under_a_scheme_every_operator_post_is_a_question() {
        let run = |mut o: Observer| {
            o.authored("m0", true, 0, OPERATOR);
            o.authored("m1", true, 10, OPERATOR);
            o.authored("m2", false, 20, OPERATOR);
            o.authored("m3", true, 30, "agent-000");
            o.wants("m0");
            o.infer(0, "m0", false);
            o.done(0, "m0", 1000, Some("m3".into()));
            o.reply_seen("m0", "m3", 1500);
            o.finish(None)
        };
        let (r, c) = run(Observer::counting_every_post());
        assert_eq!((c.messages, c.unanswered), (2, 1), "{c:?}");
        assert_eq!(r.get("unanswered_rate"), Some(0.5));
        assert_eq!(r.get("inference_calls_per_msg"), Some(0.5));
        let (r, c) = run(Observer::new());
        assert_eq!((c.messages, c.unanswered), (1, 0), "{c:?}");
        assert_eq!(r.get("inference_calls_per_msg"), Some(1.0));
        let mut s = Scenario::default();
        assert!(!Observer::for_scenario(&s).every_post);
        s.schemes.cooldown_ms = 1.0;
        assert!(Observer::for_scenario(&s).every_post);
        s.schemes.cooldown_ms = 0.0;
        s.schemes.scheme = Scheme::Mentions;
        assert!(Observer::for_scenario(&s).every_post);
    }

    /// Under `selector` the selection (actor 5's post in reply to the
    /// question) is no answer and its inference no starter, but both
    /// inferences are in the bill: 2 calls, 1 + 3 s, for one answer.
    #[test]
    fn a_selection_is_billed_but_no_answer() {
        let mut o = Observer::counting_every_post().with_selector(Some(5));
        o.authored("m0", true, 0, OPERATOR);
        o.wants("m0");
        o.infer(5, "m0", false);
        o.done(5, "m0", 1000, Some("m1".into()));
        o.authored_by_agent(5, "m1", true, 1000, "selector");
        o.reply_seen("m0", "m1", 1500);
        o.wants("m0");
        o.infer(2, "m0", false);
        o.done(2, "m0", 3000, Some("m2".into()));
        o.authored_by_agent(2, "m2", true, 4000, "agent-002");
        o.reply_seen("m0", "m2", 4500);
        let (r, c) = o.finish(None);
        assert_eq!((c.messages, c.duplicated, c.unanswered), (1, 0, 0));
        assert_eq!(c.single_starter, 1);
        assert_eq!(r.get("responses_per_msg"), Some(1.0));
        assert_eq!(r.get("inference_calls_per_msg"), Some(2.0));
        assert_eq!(r.get("inference_s_per_msg"), Some(0.004));
        assert_eq!(r.get("wasted_inference_rate"), Some(0.0));
        // Above 2048 µs the histogram keeps 3 significant digits.
        assert!(r.get("ttfr_p50_ms").is_some_and(|v| (v - 4.5).abs() < 0.01));
    }

    #[test]
    fn aborted_and_hung_inferences_are_wasted() {
        let mut o = Observer::new();
        o.authored("m0", true, 0, "operator");
        o.wants("m0");
        o.infer(0, "m0", false);
        o.infer(1, "m0", true);
        o.aborted(0, "m0", 500);
        o.aborted(1, "m0", 999); // a hung inference obeys nothing
        let (r, c) = o.finish(Some(ServerCounts::default()));
        assert_eq!(r.get("unanswered_rate"), Some(1.0));
        assert_eq!(r.get("wasted_inference_count_rate"), Some(1.0));
        assert_eq!(r.get("inferences"), Some(2.0));
        assert_eq!(c.unanswered, 1);
    }
}
