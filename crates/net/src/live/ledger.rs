//! What one live replication saw on the wire, frame by frame: the traffic
//! about its own messages (posts accepted and refused, claims announced,
//! YIELDs, answers) and everything else, which is counted here and never
//! enters a metric (docs/live.md, "Traffic live did not cause").
//!
//! These are the counts behind "never a silent zero": a run whose posts
//! were refused, whose counts differ from its workload or which relayed
//! nothing says so ([`Ledger::warnings`]) and writes them to `live.csv`.

use std::collections::BTreeMap;

/// Distinct error codes kept per replication; more are counted as `other`.
const MAX_CODES: usize = 16;
/// Longest error code kept (a longer one is cut).
const MAX_CODE_LEN: usize = 40;

/// The counts of one replication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Frames received, on every connection (after the handshake).
    pub frames: u64,
    /// The operator's posts sent.
    pub posts: u64,
    /// Of those, the ones the server relayed (seen on any connection).
    pub accepted: u64,
    /// ERRORs the operator received: its posts the server refused.
    pub refused: u64,
    /// `refused` by error code.
    pub refusal_codes: BTreeMap<String, u64>,
    /// Claims on our messages announced to the operator, as any channel
    /// member sees them (a FLOOR_CLAIMED per grant under agentchat, a
    /// relayed RESPONDING_TO per claim under the spec's policies).
    pub announced_claims: u64,
    /// YIELDs our agents received about our messages.
    pub yields_received: u64,
    /// Replies to our messages the operator received.
    pub answers: u64,
    /// ERRORs our agents received (a reply refused, ...).
    pub agent_errors: u64,
    /// `agent_errors` by code.
    pub agent_error_codes: BTreeMap<String, u64>,
    /// Frames marked `replay: true` (history resent to a joiner), skipped.
    pub replays: u64,
    /// MSGs from the server itself (`@server`), skipped.
    pub notices: u64,
    /// AGENT_JOINED, AGENT_LEFT, JOINED, LEFT.
    pub presence: u64,
    /// MSGs not from us, or from our operator about nothing it posted,
    /// skipped.
    pub foreign_msgs: u64,
    /// RESPONDING_TO, FLOOR_CLAIMED or YIELD about a message that is not
    /// ours, skipped.
    pub foreign_floor: u64,
    /// Frames that are not JSON objects with a `type`, are too long, or do
    /// not decode; skipped.
    pub malformed: u64,
    /// Frames of other types (WELCOME, CHALLENGE, PONG, unknown), skipped.
    pub other: u64,
    /// Frames dropped unread because the driver fell behind the server (a
    /// flood): the replication's figures are then not to be trusted.
    pub dropped: u64,
}

fn count(codes: &mut BTreeMap<String, u64>, code: &str) {
    let mut code: String = code.chars().take(MAX_CODE_LEN).collect();
    if !codes.contains_key(&code) && codes.len() >= MAX_CODES {
        code = "other".into();
    }
    *codes.entry(code).or_insert(0) += 1;
}

/// `RATE_LIMITED:27 LURK_MODE:3`.
fn show_codes(codes: &BTreeMap<String, u64>) -> String {
    codes
        .iter()
        .map(|(c, n)| format!("{c}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `live.csv` columns of a ledger, in order.
pub const COLUMNS: [&str; 19] = [
    "posts",
    "posts_accepted",
    "posts_refused",
    "posts_unconfirmed",
    "refusals",
    "frames",
    "announced_claims",
    "yields_received",
    "answers_seen",
    "agent_errors",
    "agent_error_codes",
    "replays_skipped",
    "notices_skipped",
    "presence_frames",
    "foreign_msgs",
    "foreign_floor",
    "malformed_frames",
    "other_frames",
    "dropped_frames",
];

impl Ledger {
    /// The operator received an ERROR: a post refused.
    pub fn refusal(&mut self, code: &str) {
        self.refused += 1;
        count(&mut self.refusal_codes, code);
    }

    /// An agent received an ERROR.
    pub fn agent_error(&mut self, code: &str) {
        self.agent_errors += 1;
        count(&mut self.agent_error_codes, code);
    }

    /// Posts neither seen relayed nor refused.
    pub fn unconfirmed(&self) -> u64 {
        self.posts.saturating_sub(self.accepted + self.refused)
    }

    /// The values of [`COLUMNS`].
    pub fn row(&self) -> Vec<String> {
        let n = |x: u64| x.to_string();
        vec![
            n(self.posts),
            n(self.accepted),
            n(self.refused),
            n(self.unconfirmed()),
            show_codes(&self.refusal_codes),
            n(self.frames),
            n(self.announced_claims),
            n(self.yields_received),
            n(self.answers),
            n(self.agent_errors),
            show_codes(&self.agent_error_codes),
            n(self.replays),
            n(self.notices),
            n(self.presence),
            n(self.foreign_msgs),
            n(self.foreign_floor),
            n(self.malformed),
            n(self.other),
            n(self.dropped),
        ]
    }

    /// The sum of several replications' ledgers.
    pub fn total<'a>(ls: impl IntoIterator<Item = &'a Ledger>) -> Ledger {
        let mut t = Ledger::default();
        for l in ls {
            for (dst, src) in [
                (&mut t.frames, l.frames),
                (&mut t.posts, l.posts),
                (&mut t.accepted, l.accepted),
                (&mut t.refused, l.refused),
                (&mut t.announced_claims, l.announced_claims),
                (&mut t.yields_received, l.yields_received),
                (&mut t.answers, l.answers),
                (&mut t.agent_errors, l.agent_errors),
                (&mut t.replays, l.replays),
                (&mut t.notices, l.notices),
                (&mut t.presence, l.presence),
                (&mut t.foreign_msgs, l.foreign_msgs),
                (&mut t.foreign_floor, l.foreign_floor),
                (&mut t.malformed, l.malformed),
                (&mut t.other, l.other),
                (&mut t.dropped, l.dropped),
            ] {
                *dst += src;
            }
            for (codes, into) in [
                (&l.refusal_codes, &mut t.refusal_codes),
                (&l.agent_error_codes, &mut t.agent_error_codes),
            ] {
                for (c, n) in codes {
                    *into.entry(c.clone()).or_insert(0) += n;
                }
            }
        }
        t
    }

    /// Nothing the run measured came back: no post was relayed.
    pub fn measured_nothing(&self) -> bool {
        self.posts > 0 && self.accepted == 0
    }

    /// What a user must know about these counts, one line each (empty when
    /// the wire held no surprise). `hint_rate` names what to do about
    /// refused posts.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.measured_nothing() {
            w.push(format!(
                "the server relayed none of the {} posts{}",
                self.posts,
                if self.refused > 0 {
                    format!(" (refused: {})", show_codes(&self.refusal_codes))
                } else {
                    String::new()
                }
            ));
        } else if self.refused > 0 {
            w.push(format!(
                "the server refused {} of {} posts ({}): those questions reached no agent and are \
                 in no metric{}",
                self.refused,
                self.posts,
                show_codes(&self.refusal_codes),
                refusal_hint(&self.refusal_codes, true)
            ));
        }
        if self.unconfirmed() > 0 {
            w.push(format!(
                "{} of {} posts were neither seen relayed nor refused",
                self.unconfirmed(),
                self.posts
            ));
        }
        if self.agent_errors > 0 {
            w.push(format!(
                "the server refused the agents {} times ({}){}",
                self.agent_errors,
                show_codes(&self.agent_error_codes),
                refusal_hint(&self.agent_error_codes, false)
            ));
        }
        if self.dropped > 0 {
            w.push(format!(
                "{} frames were dropped unread: the server sent faster than live could read; \
                 these figures are not to be trusted",
                self.dropped
            ));
        }
        w
    }

    /// Traffic live did not cause, in one line (None when there was none).
    pub fn foreign_note(&self) -> Option<String> {
        let parts: Vec<String> = [
            (self.replays, "replayed history frames"),
            (self.notices, "server notices"),
            (self.foreign_msgs, "messages of others"),
            (self.foreign_floor, "floor frames about others' messages"),
            (self.malformed, "malformed frames"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        (!parts.is_empty()).then(|| {
            format!(
                "ignored what this run did not cause: {} (live.csv has the counts)",
                parts.join(", ")
            )
        })
    }
}

/// What to do about refusals with these codes (of the operator's posts,
/// or of the agents' messages).
fn refusal_hint(codes: &BTreeMap<String, u64>, operator: bool) -> &'static str {
    if codes.contains_key("RATE_LIMITED") && operator {
        "; agentchat allows each connection one MSG per second of real time, the operator \
         included: lower --speed, or set server.rate_limit_operator = true so that the \
         simulation refuses the same posts"
    } else if codes.contains_key("RATE_LIMITED") {
        "; an agent sent two MSGs within the server's rate limit (agentchat: one per second of \
         real time); the simulation refuses them too (server.rate_limit_ms)"
    } else if codes.contains_key("LURK_MODE") {
        "; a new identity may not post for an hour on agentchat (its lurk window): run once, \
         wait, then measure (the --keyed identities are stable), or start your own server with \
         LURK_DISABLED=true"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_code_and_explained() {
        let mut l = Ledger {
            posts: 40,
            accepted: 31,
            ..Ledger::default()
        };
        for _ in 0..9 {
            l.refusal("RATE_LIMITED");
        }
        assert_eq!(l.unconfirmed(), 0);
        let w = l.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("refused 9 of 40 posts (RATE_LIMITED:9)"),
            "{w:?}"
        );
        assert!(w[0].contains("server.rate_limit_operator"), "{w:?}");
        let row = l.row();
        assert_eq!(row.len(), COLUMNS.len());
        assert_eq!(row[4], "RATE_LIMITED:9");
    }

    #[test]
    fn nothing_relayed_is_said() {
        let l = Ledger {
            posts: 3,
            ..Ledger::default()
        };
        assert!(l.measured_nothing());
        let w = l.warnings();
        assert!(w[0].contains("relayed none of the 3 posts"), "{w:?}");
        assert!(w[1].contains("3 of 3 posts were neither"), "{w:?}");
        assert!(!Ledger::default().measured_nothing());
    }

    #[test]
    fn codes_are_bounded() {
        let mut l = Ledger::default();
        for i in 0..100 {
            l.agent_error(&format!("CODE{i}{}", "x".repeat(100)));
        }
        assert_eq!(l.agent_error_codes.len(), MAX_CODES + 1);
        assert_eq!(l.agent_error_codes["other"], 100 - MAX_CODES as u64);
        assert!(l.agent_error_codes.keys().all(|c| c.len() <= MAX_CODE_LEN));
    }

    #[test]
    fn totals_add_up() {
        let mut a = Ledger {
            posts: 2,
            replays: 5,
            ..Ledger::default()
        };
        a.refusal("X");
        let t = Ledger::total([&a, &a]);
        assert_eq!((t.posts, t.replays, t.refused), (4, 10, 2));
        assert_eq!(t.refusal_codes["X"], 2);
        assert!(t.foreign_note().is_some_and(|n| n.contains("10 replayed")));
    }
}
