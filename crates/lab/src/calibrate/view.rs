//! The member's view of a channel, question by question: who claimed it
//! and when, who answered it and when, who was there; and each agent's
//! clock, read from its claims.
//!
//! Everything here is in the log's own clock (ms); the fit converts to
//! scenario time (`--speed`) and removes the links.

use super::read::{Format, Log, What};
use std::collections::{BTreeMap, BTreeSet};

/// The most a clock offset may wander over an agent's claims (the spread
/// of `started_at` minus the claim's arrival) for its `started_at` to be
/// read as a clock: a real clock keeps its offset to within the link's
/// jitter; herdsim's agents before the live issue stamped scenario time,
/// which runs `--speed` times faster than the server's.
pub const MAX_CLOCK_SPREAD_MS: f64 = 2000.0;

/// Below this spread (standard deviation) of `started_at` minus arrival,
/// an arrival time received with microsecond precision is a better start
/// than a whole-millisecond stamp.
pub const STAMP_RESOLUTION_MS: f64 = 1.0;

/// A claim on a question as members saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub agent: usize,
    /// When it reached the server (or the observer), log clock.
    pub t: f64,
    pub started_at: Option<f64>,
    /// Announced as a grant (FLOOR_CLAIMED) rather than relayed.
    pub granted: bool,
}

/// An answer to a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub agent: usize,
    pub t: f64,
}

/// One question (a channel message that is not a reply).
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    pub t: f64,
    pub author: String,
    pub mention: bool,
    pub claims: Vec<Claim>,
    pub answers: Vec<Answer>,
    /// Posted too close to the end of the log for its outcome to be known.
    pub open: bool,
}

impl Question {
    /// Someone claimed or answered it (the simulator's "wanted" message).
    pub fn wanted(&self) -> bool {
        !self.claims.is_empty() || !self.answers.is_empty()
    }

    /// The distinct agents that answered it: one agent's several
    /// messages (a notice, a progress line, the answer) are one answer,
    /// as in the simulator, where an agent answers a message once.
    pub fn answerers(&self) -> usize {
        let mut a: Vec<usize> = self.answers.iter().map(|x| x.agent).collect();
        a.sort_unstable();
        a.dedup();
        a.len()
    }

    /// Answered by two agents or more (a duplicate).
    pub fn duplicated(&self) -> bool {
        self.answerers() >= 2
    }

    /// Time to its first answer, log ms.
    pub fn ttfr(&self) -> Option<f64> {
        self.answers.iter().map(|a| a.t - self.t).reduce(f64::min)
    }
}

/// How claims were announced to the members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    /// Every claim relayed (RESPONDING_TO: the spec's policies).
    Relayed,
    /// Grants only (FLOOR_CLAIMED: agentchat 0.36).
    Granted,
    /// No claim at all (policy `none`, or nobody claims).
    Nothing,
}

/// An agent's clock as its claims show it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentClock {
    /// Claims with a `started_at`.
    pub n: usize,
    /// Its offset, piece by piece: (time of the piece's first claim,
    /// offset), the offset being the piece's largest `started_at` minus
    /// arrival (the claim that travelled fastest), log ms. A new piece
    /// starts where the offset jumps by more than MAX_CLOCK_SPREAD_MS (a
    /// clock set anew: an agent restarted, herdsim's agents in a new
    /// replication).
    pub pieces: Vec<(f64, f64)>,
    /// The largest range of `started_at` minus arrival within a piece, and
    /// its standard deviation about the pieces' means.
    pub spread: f64,
    pub sd: f64,
    /// `started_at` reads as a clock: at least three claims, and at least
    /// 80% of them in pieces of three or more (a clock that runs at
    /// another rate, as herdsim's agents' did when they stamped scenario
    /// time at `--speed` 20, breaks into single claims).
    pub steady: bool,
    /// The start of a claim is read from `started_at` (else from its
    /// arrival).
    pub use_stamp: bool,
}

impl AgentClock {
    /// The offset that applies to a claim that arrived at `t`.
    pub fn theta_at(&self, t: f64) -> Option<f64> {
        self.pieces
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .or(self.pieces.first())
            .map(|(_, th)| *th)
    }
}

/// The view of one channel.
#[derive(Debug, Clone)]
pub struct View {
    pub questions: Vec<Question>,
    /// Agents (anyone who claimed or answered a question), by id.
    pub agents: Vec<String>,
    /// Their display names.
    pub names: Vec<String>,
    /// Presence intervals per agent (log clock), when the log has presence
    /// frames; None: every agent counts as present throughout.
    pub present: Option<Vec<Vec<(f64, f64)>>>,
    pub announce: Announce,
    /// Both kinds of announcement were seen (a note).
    pub mixed_announce: bool,
    pub clocks: Vec<Option<AgentClock>>,
    /// Replies to replies (cascades; not fitted).
    pub cascade_replies: u64,
    /// Replies to messages not in the log.
    pub orphan_replies: u64,
    /// Claims on messages not in the log.
    pub foreign_claims: u64,
    /// The longest time from a question to its last claim or answer, log
    /// ms: a question younger than this at the end of the log is open.
    pub settle: f64,
    pub start_t: f64,
    pub end_t: f64,
}

/// The question an event about `id` at `t` refers to: the latest question
/// with that id posted no later than `t` (ids repeat when a server keeps
/// the sender's ids across runs), else the first one.
fn lookup(ids: &BTreeMap<String, Vec<usize>>, qs: &[Question], id: &str, t: f64) -> Option<usize> {
    let v = ids.get(id)?;
    v.iter()
        .rev()
        .find(|&&i| qs[i].t <= t)
        .or(v.first())
        .copied()
}

impl View {
    pub fn of(log: &Log) -> View {
        let mut questions: Vec<Question> = Vec::new();
        let mut ids: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for e in &log.events {
            if let What::Msg {
                id,
                from,
                reply_to: None,
                mention,
            } = &e.what
            {
                if log.observer.contains(from) {
                    continue;
                }
                ids.entry(id.clone()).or_default().push(questions.len());
                questions.push(Question {
                    id: id.clone(),
                    t: e.t,
                    author: from.clone(),
                    mention: *mention,
                    claims: Vec::new(),
                    answers: Vec::new(),
                    open: false,
                });
            }
        }
        // Agents: who claimed or answered a question, in name order.
        let mut actors: BTreeSet<String> = BTreeSet::new();
        let mut answer_of: BTreeMap<String, usize> = BTreeMap::new();
        let mut cascade_replies = 0;
        let mut orphan_replies = 0;
        let mut foreign_claims = 0;
        let mut granted = 0u64;
        let mut relayed = 0u64;
        // (question, agent id, time, stamp, granted) and (question, agent id, time).
        let mut claims = Vec::new();
        let mut answers = Vec::new();
        for e in &log.events {
            match &e.what {
                What::Msg {
                    id,
                    from,
                    reply_to: Some(r),
                    ..
                } => match lookup(&ids, &questions, r, e.t) {
                    Some(q) => {
                        actors.insert(from.clone());
                        answer_of.insert(id.clone(), q);
                        answers.push((q, from.clone(), e.t));
                    }
                    None if answer_of.contains_key(r) => cascade_replies += 1,
                    None => orphan_replies += 1,
                },
                What::Claim {
                    msg,
                    agent,
                    started_at,
                    granted: g,
                } => {
                    if *g {
                        granted += 1;
                    } else {
                        relayed += 1;
                    }
                    match lookup(&ids, &questions, msg, e.t) {
                        Some(q) => {
                            actors.insert(agent.clone());
                            claims.push((q, agent.clone(), e.t, *started_at, *g));
                        }
                        None => foreign_claims += 1,
                    }
                }
                _ => {}
            }
        }
        for o in &log.observer {
            actors.remove(o);
        }
        let name_of = |id: &str| log.names.get(id).cloned().unwrap_or_else(|| id.to_string());
        let mut agents: Vec<String> = actors.into_iter().collect();
        agents.sort_by(|a, b| name_of(a).cmp(&name_of(b)).then(a.cmp(b)));
        let index: BTreeMap<&str, usize> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.as_str(), i))
            .collect();
        for (q, agent, t, started_at, granted) in claims {
            if let Some(&a) = index.get(agent.as_str()) {
                questions[q].claims.push(Claim {
                    agent: a,
                    t,
                    started_at,
                    granted,
                });
            }
        }
        for (q, agent, t) in answers {
            if let Some(&a) = index.get(agent.as_str()) {
                questions[q].answers.push(Answer { agent: a, t });
            }
        }
        let settle = questions
            .iter()
            .flat_map(|q| {
                q.claims
                    .iter()
                    .map(|c| c.t)
                    .chain(q.answers.iter().map(|a| a.t))
                    .map(move |t| t - q.t)
            })
            .fold(0.0_f64, f64::max);
        for q in &mut questions {
            q.open = log.end_t - q.t < settle;
        }
        let present = presence(log, &index, agents.len());
        let announce = if granted >= relayed && granted > 0 {
            Announce::Granted
        } else if relayed > 0 {
            Announce::Relayed
        } else {
            Announce::Nothing
        };
        let names = agents.iter().map(|a| name_of(a)).collect();
        let mut view = View {
            questions,
            agents,
            names,
            present,
            announce,
            mixed_announce: granted > 0 && relayed > 0,
            clocks: Vec::new(),
            cascade_replies,
            orphan_replies,
            foreign_claims,
            settle,
            start_t: log.start_t,
            end_t: log.end_t,
        };
        // Each agent's (arrival, started_at - arrival), in one pass.
        let mut stamps: Vec<Vec<(f64, f64)>> = vec![Vec::new(); view.agents.len()];
        if log.format != Format::LiveTrace {
            for c in view.questions.iter().flat_map(|q| q.claims.iter()) {
                if let Some(s) = c.started_at {
                    stamps[c.agent].push((c.t, s - c.t));
                }
            }
        }
        view.clocks = stamps.into_iter().map(clock_of).collect();
        view
    }
}

/// An agent's clock from its claims' (arrival, `started_at` - arrival):
/// linear in its claims after sorting them.
fn clock_of(mut d: Vec<(f64, f64)>) -> Option<AgentClock> {
    if d.is_empty() {
        return None;
    }
    d.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Pieces: (first time, values), with each piece's lowest and
    // highest value kept as it grows.
    let mut pieces: Vec<(f64, Vec<f64>)> = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (t, x) in d.iter().copied() {
        let fits = !pieces.is_empty()
            && (x - lo).abs() <= MAX_CLOCK_SPREAD_MS
            && (hi - x).abs() <= MAX_CLOCK_SPREAD_MS;
        match pieces.last_mut() {
            Some((_, v)) if fits => {
                v.push(x);
                lo = lo.min(x);
                hi = hi.max(x);
            }
            _ => {
                pieces.push((t, vec![x]));
                (lo, hi) = (x, x);
            }
        }
    }
    let mut spread = 0.0_f64;
    let mut dev = Vec::new();
    let mut big = 0usize;
    for (_, v) in &pieces {
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        spread = spread.max(hi - lo);
        let m = v.iter().sum::<f64>() / v.len() as f64;
        dev.extend(v.iter().map(|x| x - m));
        if v.len() >= 3 {
            big += v.len();
        }
    }
    let sd = if dev.len() > 1 {
        (dev.iter().map(|x| x * x).sum::<f64>() / (dev.len() - 1) as f64).sqrt()
    } else {
        0.0
    };
    let n = d.len();
    Some(AgentClock {
        n,
        pieces: pieces
            .iter()
            .map(|(t, v)| (*t, v.iter().copied().fold(f64::NEG_INFINITY, f64::max)))
            .collect(),
        spread,
        sd,
        steady: n >= 3 && big as f64 >= 0.8 * n as f64,
        use_stamp: false,
    })
}

impl View {
    /// Decide, per agent, whether the start of its claims is read from
    /// `started_at`: when its clock is steady and either the times are the
    /// server's (whole ms, like the stamp) or the stamp is the more precise
    /// (the arrivals wander by more than the stamp's millisecond).
    pub fn choose_starts(&mut self, server_clock: bool) {
        for c in self.clocks.iter_mut().flatten() {
            c.use_stamp = c.steady && (server_clock || c.sd > STAMP_RESOLUTION_MS);
        }
    }

    /// When `c` started, log clock: its `started_at` less its agent's clock
    /// offset, or its arrival. Either is the true start plus about one
    /// one-way delay (the fastest uplink for the stamp, this one for the
    /// arrival).
    pub fn start_of(&self, c: &Claim) -> f64 {
        match (
            self.clocks.get(c.agent).and_then(Option::as_ref),
            c.started_at,
        ) {
            (Some(k), Some(s)) if k.use_stamp => k.theta_at(c.t).map_or(c.t, |th| s - th),
            _ => c.t,
        }
    }

    /// Whether agent `a` was in the channel at `t` (always, without
    /// presence frames).
    pub fn is_present(&self, a: usize, t: f64) -> bool {
        match &self.present {
            None => true,
            // Disjoint intervals in time order: the last one begun by t.
            Some(p) => {
                let v = &p[a];
                let i = v.partition_point(|&(s, _)| s <= t);
                i > 0 && t < v[i - 1].1
            }
        }
    }
}

/// Presence intervals from AGENT_JOINED / AGENT_LEFT and the member list
/// the observer got on joining; None when the log has no presence at all.
fn presence(log: &Log, index: &BTreeMap<&str, usize>, n: usize) -> Option<Vec<Vec<(f64, f64)>>> {
    let any = log
        .events
        .iter()
        .any(|e| matches!(e.what, What::Joined { .. } | What::Left { .. }));
    if !any {
        return None;
    }
    let mut since: Vec<Option<f64>> = vec![None; n];
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n];
    for e in &log.events {
        let (agents, join): (Vec<&String>, bool) = match &e.what {
            What::Joined { agent } => (vec![agent], true),
            What::Left { agent } => (vec![agent], false),
            What::Members { agents } => (agents.iter().collect(), true),
            _ => continue,
        };
        for a in agents {
            let Some(&i) = index.get(a.as_str()) else {
                continue;
            };
            match (join, since[i]) {
                (true, None) => since[i] = Some(e.t),
                (false, Some(s)) => {
                    out[i].push((s, e.t));
                    since[i] = None;
                }
                _ => {}
            }
        }
    }
    for (i, s) in since.iter().enumerate() {
        if let Some(s) = s {
            out[i].push((*s, f64::INFINITY));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::read;
    use std::path::Path;

    fn view(name: &str) -> (Log, View) {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/agentchat-wire")
            .join(name);
        let log = read::read(&p, None).expect("reads");
        let v = View::of(&log);
        (log, v)
    }

    #[test]
    fn the_expiry_session_question_by_question() {
        let (_, v) = view("expiry-ttl1s.jsonl.gz");
        assert_eq!(v.announce, Announce::Granted);
        assert_eq!(v.questions.len(), 40);
        assert_eq!(
            v.names,
            [
                "agent-000",
                "agent-001",
                "agent-002",
                "agent-003",
                "agent-004"
            ]
        );
        // The operator posts; the five agents claim and answer.
        assert!(v.questions.iter().all(|q| q.author != v.agents[0]));
        let grants: usize = v.questions.iter().map(|q| q.claims.len()).sum();
        assert_eq!(grants, 46);
        // Clocks at speed 1 stamped the 2023 epoch: steady, a constant offset.
        // Two pieces per agent: the replications restarted scenario time.
        for c in v.clocks.iter().flatten() {
            assert!(c.steady, "{c:?}");
            assert_eq!(c.pieces.len(), 2, "{c:?}");
            assert!(c.pieces.iter().all(|p| p.1 < -9.0e10), "{c:?}");
            assert!(c.spread < 100.0, "{c:?}");
        }
        assert!(v.present.is_some());
        // Agents are present while questions are asked.
        let q = &v.questions[3];
        assert!((0..5).all(|a| v.is_present(a, q.t)));
    }

    #[test]
    fn speed_20_stamps_are_not_a_clock() {
        let (_, v) = view("default-3reps.jsonl.gz");
        assert_eq!(v.questions.len(), 92);
        // started_at ran 20 times faster than the server's ts.
        assert!(v.clocks.iter().flatten().all(|c| !c.steady));
    }

    /// An agent's clock is read in time linear in its claims: 200 000
    /// claims in one piece (the offset steady) took minutes when each
    /// claim went over its piece again (about 2 x 10^10 comparisons); now
    /// well under a second. The deadline is 60 s, a hundred times that,
    /// so that a loaded machine cannot fail it; it fails (or hangs) only
    /// when the work is quadratic again.
    #[test]
    fn a_clock_of_many_claims_is_read_in_linear_time() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let d: Vec<(f64, f64)> = (0..200_000)
                .map(|i| (i as f64 * 30_000.0, -5.0 + (i % 7) as f64))
                .collect();
            let _ = tx.send(clock_of(d));
        });
        let c = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("read within the deadline")
            .expect("a clock");
        assert_eq!(c.n, 200_000);
        assert_eq!(c.pieces, [(0.0, 1.0)]);
        assert_eq!(c.spread, 6.0);
        assert!(c.steady);
    }
}
