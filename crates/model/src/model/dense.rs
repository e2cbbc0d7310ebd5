//! The simulator's naming ([`Dense`]): every agent, destination and
//! message of a run is a small integer, interned once when the scenario is
//! prepared, so the floor's server and clients and the agents compare and
//! copy integers instead of strings. Text exists only where a run writes
//! it: the trace ([`Naming::show_agent`] and the others give the exact wire
//! text, so a trace is the same as with names as text).
//!
//! - An agent ([`AgentId`]) is its rank in the byte order of every agent
//!   name the run can meet (its agents, `operator`, and DM peers a script
//!   names), so comparing two ids compares their names, as the floor
//!   requires.
//! - A destination ([`DestId`]) is an entry of the run's table of channels
//!   and DM targets (`@agent-000` for every agent), each with what it is.
//! - A message ([`MsgId`]) is the run's message number (operator posts and
//!   replies share one counter; scripted posts are numbered first, in
//!   script order, and shown by their label); ids at and above 2^32 are
//!   ones no message of the run has: server-assigned (`s1`, ...) and the
//!   ids a floor squatter makes up (`m` and a number).

use crate::agent::{self, AgentNaming};
use crate::floor::{Naming, Place, address};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// An agent of a run, by the rank of its name.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct AgentId(pub u32);

/// A channel or DM target of a run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct DestId(pub u32);

/// A message id of a run: a message number below 2^32 (see the module
/// docs for the rest).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct MsgId(pub u64);

/// Server-assigned ids `s<n>`: `SERVER + n`.
const SERVER: u64 = 1 << 32;
/// Made-up ids `m<n>` that no message of the run has: `PHANTOM + n`.
const PHANTOM: u64 = 2 << 32;

impl MsgId {
    /// The id of message number `m`.
    pub fn of(m: u32) -> MsgId {
        MsgId(u64::from(m))
    }

    /// The message number, if the id is one of the run's messages.
    pub fn number(self) -> Option<u32> {
        u32::try_from(self.0).ok()
    }
}

/// A message's content.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Content {
    /// `question <n>`, preceded by `@<agent> ` when it @mentions one.
    Question { n: u32, mention: Option<AgentId> },
    /// `answer to <msg> from <agent>`.
    Answer { msg: MsgId, from: AgentId },
    /// The selector's `@<pick> please answer <msg>`.
    Selection { msg: MsgId, pick: AgentId },
    /// Any other text (a scripted post).
    Text(Arc<str>),
}

#[derive(Debug)]
struct DestEntry {
    text: String,
    place: Place<AgentId>,
}

#[derive(Debug, Default)]
struct Table {
    /// Agent names by [`AgentId`] (sorted).
    agents: Vec<String>,
    /// Destinations by [`DestId`].
    dests: Vec<DestEntry>,
    /// Destination text -> id.
    dest_of: BTreeMap<String, DestId>,
    /// The DM target `@name` of every agent, by [`AgentId`].
    dm_of: Vec<DestId>,
    /// Labels of scripted posts, by message number.
    labels: BTreeMap<u32, String>,
    /// The agent named `@server`, if any (its MSGs are always answered).
    server: Option<AgentId>,
    /// Whether a label has an `@` (only then can an answer's text, which
    /// quotes the message's id, @mention anybody).
    label_at: bool,
}

/// The simulator's naming. See the module docs. Cloning shares the table.
#[derive(Clone)]
pub struct Dense(Arc<Table>);

impl fmt::Debug for Dense {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dense")
            .field("agents", &self.0.agents.len())
            .field("dests", &self.0.dests.len())
            .finish_non_exhaustive()
    }
}

/// Two namings are equal when they share one table.
impl PartialEq for Dense {
    fn eq(&self, other: &Dense) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Dense {}

/// What a run's names are built from.
#[derive(Debug, Default)]
pub struct DenseBuilder {
    agents: Vec<String>,
    dests: Vec<String>,
    labels: BTreeMap<u32, String>,
}

impl DenseBuilder {
    /// An agent name the run may meet.
    pub fn agent(&mut self, name: &str) -> &mut Self {
        self.agents.push(name.to_string());
        self
    }

    /// A destination (channel or DM target) the run may send to.
    pub fn dest(&mut self, text: &str) -> &mut Self {
        self.dests.push(text.to_string());
        self
    }

    /// Message number `m` is shown as `label`.
    pub fn label(&mut self, m: u32, label: &str) -> &mut Self {
        self.labels.insert(m, label.to_string());
        self
    }

    /// The naming: every agent (and every DM peer a destination names)
    /// ranked by name, every agent's DM target added.
    pub fn build(&self) -> Dense {
        let mut agents = self.agents.clone();
        for d in &self.dests {
            if let Some(address::Target::Dm(peer)) = address::parse_target(d) {
                agents.push(peer.to_string());
            }
        }
        agents.sort();
        agents.dedup();
        let mut t = Table {
            label_at: self.labels.values().any(|l| l.contains('@')),
            server: agents
                .iter()
                .position(|a| a == "@server")
                .map(|i| AgentId(i as u32)),
            agents,
            labels: self.labels.clone(),
            ..Table::default()
        };
        let dms: Vec<String> = t.agents.iter().map(|a| format!("@{a}")).collect();
        for d in self.dests.iter().chain(&dms) {
            intern(&mut t, d);
        }
        t.dm_of = dms.iter().map(|d| t.dest_of[d]).collect();
        Dense(Arc::new(t))
    }
}

fn intern(t: &mut Table, text: &str) -> DestId {
    if let Some(&d) = t.dest_of.get(text) {
        return d;
    }
    let place = match address::parse_target(text) {
        Some(address::Target::Channel(_)) => Place::Channel,
        Some(address::Target::Dm(peer)) => {
            match t.agents.binary_search_by(|a| a.as_str().cmp(peer)) {
                Ok(i) => Place::Dm(AgentId(i as u32)),
                Err(_) => Place::Invalid,
            }
        }
        _ => Place::Invalid,
    };
    let id = DestId(t.dests.len() as u32);
    t.dests.push(DestEntry {
        text: text.to_string(),
        place,
    });
    t.dest_of.insert(text.to_string(), id);
    id
}

impl Dense {
    /// Whether `content`, as text, @mentions agent `me`.
    #[inline(never)]
    fn mentions_in_text(&self, content: &Content, me: &AgentId) -> bool {
        agent::mentions(&self.content_text(content), &self.0.agents[me.0 as usize])
    }

    /// The id of agent `name`, if the run has it.
    pub fn agent(&self, name: &str) -> Option<AgentId> {
        self.0
            .agents
            .binary_search_by(|a| a.as_str().cmp(name))
            .ok()
            .map(|i| AgentId(i as u32))
    }

    /// The id of destination `text`, if the run has it.
    pub fn dest(&self, text: &str) -> Option<DestId> {
        self.0.dest_of.get(text).copied()
    }

    /// The DM target of agent `a` (`@name`).
    pub fn dm_to_agent(&self, a: AgentId) -> DestId {
        self.0.dm_of[a.0 as usize]
    }

    /// The number of agent names.
    pub fn agents(&self) -> usize {
        self.0.agents.len()
    }

    fn content_text<'a>(&'a self, content: &'a Content) -> Cow<'a, str> {
        match content {
            Content::Question { n, mention: None } => Cow::Owned(format!("question {n}")),
            Content::Question {
                n,
                mention: Some(a),
            } => Cow::Owned(format!("@{} question {n}", self.0.agents[a.0 as usize])),
            Content::Answer { msg, from } => Cow::Owned(format!(
                "answer to {} from {}",
                self.show_msg(msg),
                self.0.agents[from.0 as usize]
            )),
            Content::Selection { msg, pick } => Cow::Owned(format!(
                "@{} please answer {}",
                self.0.agents[pick.0 as usize],
                self.show_msg(msg)
            )),
            Content::Text(s) => Cow::Borrowed(s),
        }
    }

    fn dest_entry(&self, d: DestId) -> &DestEntry {
        &self.0.dests[d.0 as usize]
    }
}

impl Naming for Dense {
    type Agent = AgentId;
    type Dest = DestId;
    type Msg = MsgId;
    type Content = Content;

    fn place(&self, d: &DestId) -> Place<AgentId> {
        self.dest_entry(*d).place
    }

    fn starts_dm(&self, d: &DestId) -> bool {
        self.dest_entry(*d).text.starts_with('@')
    }

    fn name_len(&self, d: &DestId) -> usize {
        self.dest_entry(*d).text.len().saturating_sub(1)
    }

    fn msg_is_empty(&self, _: &MsgId) -> bool {
        false
    }

    fn server_msg_id(&self, n: u64) -> MsgId {
        MsgId(SERVER.saturating_add(n))
    }

    fn dest_named(&self, name: &str) -> Option<DestId> {
        self.dest(name)
    }

    fn show_agent<'a>(&'a self, a: &'a AgentId) -> Cow<'a, str> {
        Cow::Borrowed(&self.0.agents[a.0 as usize])
    }

    fn show_dest<'a>(&'a self, d: &'a DestId) -> Cow<'a, str> {
        Cow::Borrowed(&self.dest_entry(*d).text)
    }

    fn show_content<'a>(&'a self, c: &'a Content) -> Cow<'a, str> {
        self.content_text(c)
    }

    fn show_msg<'a>(&'a self, m: &'a MsgId) -> Cow<'a, str> {
        match m.number() {
            Some(n) => match self.0.labels.get(&n) {
                Some(label) => Cow::Borrowed(label),
                None => Cow::Owned(crate::names::msg_id(n)),
            },
            None if m.0 >= PHANTOM => Cow::Owned(format!("m{}", m.0 - PHANTOM)),
            None => Cow::Owned(format!("s{}", m.0 - SERVER)),
        }
    }
}

impl AgentNaming for Dense {
    /// Asked for every delivery of a channel message: the numbered kinds
    /// are answered inline, text in a call of its own.
    #[inline]
    fn mentions(&self, content: &Content, me: &AgentId) -> bool {
        match content {
            Content::Question { mention, .. } => *mention == Some(*me),
            Content::Selection { pick, .. } => pick == me,
            // Agent names never start with `@`; a numbered message's id has
            // no `@`; a label might.
            Content::Answer { .. } if !self.0.label_at => false,
            _ => self.mentions_in_text(content, me),
        }
    }

    fn mentions_anyone(&self, content: &Content) -> bool {
        match content {
            Content::Question { mention, .. } => mention.is_some(),
            Content::Selection { .. } => true,
            Content::Answer { .. } if !self.0.label_at => false,
            _ => agent::mentions_anyone(&self.content_text(content)),
        }
    }

    fn answer(&self, msg: &MsgId, me: &AgentId) -> Content {
        Content::Answer {
            msg: *msg,
            from: *me,
        }
    }

    fn is_server(&self, from: &AgentId) -> bool {
        self.0.server == Some(*from)
    }

    fn dm_to(&self, peer: &AgentId) -> DestId {
        self.0.dm_of[peer.0 as usize]
    }

    fn is_dm_to(&self, to: &DestId, me: &AgentId) -> bool {
        // Destinations are interned by text: equal ids, equal text.
        *to == self.0.dm_of[me.0 as usize]
    }

    fn msg_after(&self, m: &MsgId, k: u64) -> Option<MsgId> {
        match m.number() {
            // `m<n>` -> `m<n + k>`: a message of the run unless that number
            // is shown by a label.
            Some(n) if !self.0.labels.contains_key(&n) => {
                let next = u64::from(n).saturating_add(k);
                let labelled = u32::try_from(next).is_ok_and(|x| self.0.labels.contains_key(&x));
                Some(if next < SERVER && !labelled {
                    MsgId(next)
                } else {
                    MsgId(PHANTOM.saturating_add(next))
                })
            }
            // A label: what follows it is no id of this naming.
            Some(_) => None,
            None if m.0 >= PHANTOM => Some(MsgId(m.0.saturating_add(k))),
            None => Some(MsgId(m.0.saturating_add(k).min(PHANTOM - 1))),
        }
    }

    fn select(&self, msg: &MsgId, chosen: &AgentId) -> Content {
        Content::Selection {
            msg: *msg,
            pick: *chosen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Dense {
        let mut b = DenseBuilder::default();
        b.agent("operator").agent("agent-001").agent("agent-000");
        b.dest("#general").dest("@bob").dest("not a target");
        b.label(0, "q1").label(1, "@odd").label(9, "x9");
        b.build()
    }

    #[test]
    fn agent_ids_order_as_their_names() {
        let n = names();
        let ids: Vec<AgentId> = ["agent-000", "agent-001", "bob", "operator"]
            .iter()
            .map(|a| n.agent(a).expect("interned"))
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        for (a, id) in ["agent-000", "agent-001", "bob", "operator"]
            .iter()
            .zip(&ids)
        {
            assert_eq!(n.show_agent(id), *a);
        }
        assert_eq!(n.agent("nobody"), None);
    }

    #[test]
    fn destinations_say_what_they_are_and_how_they_are_written() {
        let n = names();
        let g = n.dest("#general").expect("interned");
        assert_eq!(n.place(&g), Place::Channel);
        assert_eq!((n.name_len(&g), n.starts_dm(&g)), (7, false));
        let bob = n.agent("bob").expect("a DM peer is an agent");
        let dm = n.dest("@bob").expect("interned");
        assert_eq!(n.place(&dm), Place::Dm(bob));
        assert!(n.starts_dm(&dm) && n.is_dm_to(&dm, &bob));
        assert_eq!(n.dm_to(&bob), dm);
        // Every agent has its DM target, interned once.
        let a0 = n.agent("agent-000").expect("interned");
        assert_eq!(n.show_dest(&n.dm_to(&a0)), "@agent-000");
        assert!(!n.is_dm_to(&dm, &a0));
        let bad = n.dest("not a target").expect("interned");
        assert_eq!(n.place(&bad), Place::Invalid);
        assert_eq!(n.show_dest(&bad), "not a target");
        assert_eq!(n.dest_named("#general"), Some(g));
        assert_eq!(n.dest_named("#other"), None);
    }

    #[test]
    fn message_ids_are_numbers_labels_or_made_up() {
        let n = names();
        assert_eq!(n.show_msg(&MsgId::of(0)), "q1");
        assert_eq!(n.show_msg(&MsgId::of(7)), "m7");
        assert_eq!(n.show_msg(&n.server_msg_id(3)), "s3");
        assert_eq!(MsgId::of(7).number(), Some(7));
        assert_eq!(n.server_msg_id(3).number(), None);
        assert!(!n.msg_is_empty(&MsgId::of(0)));
        // A squatter's next ids: `m7` -> `m8`; `m0` is shown as the label
        // `q1`, so what follows it is no id of this naming.
        assert_eq!(n.msg_after(&MsgId::of(7), 1), Some(MsgId::of(8)));
        assert_eq!(n.msg_after(&MsgId::of(0), 1), None);
        // `m9` is no message of the run (message 9 is shown as `x9`): a
        // made-up id, shown as such.
        let m9 = n
            .msg_after(&MsgId::of(7), 2)
            .expect("a number follows a number");
        assert_eq!(
            (m9.number(), n.show_msg(&m9).into_owned()),
            (None, "m9".to_string())
        );
        let phantom = n.msg_after(&MsgId::of(3), u64::from(u32::MAX));
        let phantom = phantom.expect("a number follows a number");
        assert_eq!(phantom.number(), None);
        assert_eq!(
            n.show_msg(&phantom),
            format!("m{}", 3 + u64::from(u32::MAX))
        );
        let s4 = n.msg_after(&n.server_msg_id(3), 1).expect("s3 -> s4");
        assert_eq!(n.show_msg(&s4), "s4");
    }

    #[test]
    fn contents_read_as_their_text() {
        let n = names();
        let (a0, a1) = (
            n.agent("agent-000").expect("interned"),
            n.agent("agent-001").expect("interned"),
        );
        let q = Content::Question {
            n: 5,
            mention: Some(a1),
        };
        assert_eq!(n.show_content(&q), "@agent-001 question 5");
        assert!(n.mentions(&q, &a1) && !n.mentions(&q, &a0));
        let plain = Content::Question {
            n: 5,
            mention: None,
        };
        assert_eq!(n.show_content(&plain), "question 5");
        let ans = n.answer(&MsgId::of(7), &a0);
        assert_eq!(n.show_content(&ans), "answer to m7 from agent-000");
        assert!(!n.mentions(&ans, &a0));
        // A label with an `@` quoted in an answer mentions that agent, as
        // the text would.
        let odd = n.agent("bob").expect("interned");
        let quoting = n.answer(&MsgId::of(1), &a0);
        assert_eq!(n.show_content(&quoting), "answer to @odd from agent-000");
        assert!(!n.mentions(&quoting, &odd));
        let text = Content::Text(Arc::from("ping @bob, please"));
        assert!(n.mentions(&text, &odd) && !n.mentions(&text, &a0));
        assert!(!n.is_server(&a0));
    }
}
