//! The operator as a sans-IO actor: when the next post is due and what it
//! says.

use crate::dist::Dist;
use crate::dist::Stream;
use rand::RngExt;

/// What kind of message a post is, from where it goes and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostKind {
    /// A DM to one agent (`to` is `@agent-...`); outside every metric.
    Dm,
    /// A channel message that @mentions somebody.
    Mention,
    /// A plain channel message.
    Channel,
}

impl PostKind {
    /// The kind of a message to `to` saying `content`.
    pub fn of(to: &str, content: &str) -> PostKind {
        if to.starts_with('@') {
            PostKind::Dm
        } else if content.split_whitespace().any(|w| w.starts_with('@')) {
            PostKind::Mention
        } else {
            PostKind::Channel
        }
    }

    /// Its name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            PostKind::Dm => "dm",
            PostKind::Mention => "mention",
            PostKind::Channel => "channel",
        }
    }
}

/// One operator post: where it goes and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub to: String,
    pub content: String,
}

/// What the operator's workload is: `count` posts (or, with `duration_us`,
/// as many as fit), `gap` apart, to `channel`; a post is a DM to a random
/// agent of `agents` with probability `dm_p`, else an @mention of one with
/// probability `mention_p`, else a plain channel message.
#[derive(Debug, Clone)]
pub struct WorkloadParams {
    pub gap: Dist,
    /// Posts in all (when `duration_us` is `None`).
    pub count: u64,
    /// Post until this driver time instead of counting.
    pub duration_us: Option<u64>,
    pub channel: String,
    pub dm_p: f64,
    pub mention_p: f64,
    pub agents: Vec<String>,
}

/// The operator's random workload, drawing from its own stream.
#[derive(Debug, Clone)]
pub struct Workload {
    p: WorkloadParams,
    posted: u64,
    rng: Stream,
}

impl Workload {
    /// The workload `p`, drawing from `rng`.
    pub fn new(p: WorkloadParams, rng: Stream) -> Workload {
        Workload { p, posted: 0, rng }
    }

    /// The workload's channel.
    pub fn channel(&self) -> &str {
        &self.p.channel
    }

    /// Posts scheduled so far.
    pub fn posted(&self) -> u64 {
        self.posted
    }

    /// Driver time of the next post after `now_us`, or `None` when the
    /// workload is over.
    pub fn next_post(&mut self, now_us: u64) -> Option<u64> {
        let p = &self.p;
        if p.duration_us.is_none() && self.posted >= p.count {
            return None;
        }
        let at = now_us + p.gap.sample_us(&mut self.rng);
        if let Some(d) = p.duration_us
            && at > d
        {
            return None;
        }
        self.posted += 1;
        Some(at)
    }

    /// Where post number `m` goes and what it says.
    pub fn draw(&mut self, m: u32) -> Post {
        match self.pick() {
            Pick::Dm(k) => Post {
                to: format!("@{}", self.p.agents[k]),
                content: format!("question {m}"),
            },
            Pick::Mention(k) => Post {
                to: self.p.channel.clone(),
                content: format!("@{} question {m}", self.p.agents[k]),
            },
            Pick::Channel => Post {
                to: self.p.channel.clone(),
                content: format!("question {m}"),
            },
        }
    }

    /// What the next post is, as [`Workload::draw`] draws it (the same
    /// draws): a driver that names agents its own way builds the post
    /// from this. Post `m` says `question <m>`; a DM goes to `@agent`,
    /// an @mention puts `@agent ` before the question.
    pub fn pick(&mut self) -> Pick {
        let p = &self.p;
        let r: f64 = self.rng.random();
        let n = p.agents.len() as u32;
        if n > 0 && r < p.dm_p {
            Pick::Dm(self.rng.random_range(0..n) as usize)
        } else if n > 0 && r < p.dm_p + p.mention_p {
            Pick::Mention(self.rng.random_range(0..n) as usize)
        } else {
            Pick::Channel
        }
    }
}

/// The kind of the next post and the agent it names (an index into
/// [`WorkloadParams::agents`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// A DM to this agent.
    Dm(usize),
    /// A channel message that @mentions this agent.
    Mention(usize),
    /// A plain channel message.
    Channel,
}
