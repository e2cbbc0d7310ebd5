//! How the embedder names agents, destinations and messages.
//!
//! The floor's state machines ([`Server`](crate::Server),
//! [`Client`](crate::Client)) and its messages
//! ([`ClientMsg`](crate::ClientMsg),
//! [`ServerMsg`](crate::ServerMsg)) are generic over a [`Naming`]:
//! the types that stand for an agent, a destination (a channel or a DM
//! peer) and a message id, and the few questions about them the floor
//! must ask (is this a channel or a DM? how is it written in an error
//! message?). They only compare, order and copy these values otherwise.
//!
//! - [`Text`] (the default type parameter everywhere) names everything by
//!   its wire text, `String`s exactly as they travel in JSON. The codec,
//!   `serve`, `arbitrate` and `live` use it: an input read from a socket is
//!   decoded once and handed over as is.
//! - An embedder that knows its names in advance uses small integers
//!   instead, interned once (the simulator's naming is
//!   `crate::names::Dense`: agent, channel and message numbers; text only
//!   in traces). Comparing and copying an integer costs nothing; a string
//!   costs a `memcmp` and an allocation.
//!
//! Whatever the naming, the floor's decisions must be the same as under
//! [`Text`] for the same wire text. Two properties make that so, and a
//! naming must keep them:
//! - **Order**: [`Naming::Agent`]'s `Ord` is the order of the agents' wire
//!   ids (byte order): claims that tie on `started_at` are decided by it,
//!   and a relay reaches a channel's members in that order.
//! - **Text**: the `show_*` methods give the exact wire text, which error
//!   messages quote.

use std::borrow::Cow;
use std::fmt;

use crate::address::{Target, parse_target};

/// What a destination is (see [`Naming::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Place<A> {
    /// A channel (`#name`, valid).
    Channel,
    /// A DM to this agent (`@id`).
    Dm(A),
    /// Neither: not a valid channel name nor a valid DM target.
    Invalid,
}

/// The names the floor works with. See the module docs.
pub trait Naming: Clone + fmt::Debug {
    /// An agent (the operator included).
    type Agent: Clone + Eq + Ord + fmt::Debug;
    /// Where a message goes: a channel, a DM peer (`@id`), or, as read
    /// from the wire, something that is neither.
    type Dest: Clone + Eq + Ord + fmt::Debug;
    /// A message id.
    type Msg: Clone + Eq + Ord + fmt::Debug;
    /// A message's content.
    type Content: Clone + Eq + fmt::Debug;

    /// What `d` is.
    fn place(&self, d: &Self::Dest) -> Place<Self::Agent>;
    /// Whether `d` is addressed to an agent: written `@...`, valid or not
    /// (a client never claims for a reply that goes to a DM peer).
    fn starts_dm(&self, d: &Self::Dest) -> bool;
    /// The length of `d`'s name in bytes, `#` excluded (agentchat limits
    /// channel names to 31).
    fn name_len(&self, d: &Self::Dest) -> usize;
    /// Whether `m` is the empty id (which the protocol refuses).
    fn msg_is_empty(&self, m: &Self::Msg) -> bool;
    /// The id a server gives the `n`-th MSG it relays without one (`s1`,
    /// `s2`, ...).
    fn server_msg_id(&self, n: u64) -> Self::Msg;
    /// The destination named `name` (`#general`) if this naming has it
    /// (agentchat's default channels).
    fn dest_named(&self, name: &str) -> Option<Self::Dest>;
    /// An agent's wire id.
    fn show_agent<'a>(&'a self, a: &'a Self::Agent) -> Cow<'a, str>;
    /// A destination's wire text.
    fn show_dest<'a>(&'a self, d: &'a Self::Dest) -> Cow<'a, str>;
    /// A message id's wire text.
    fn show_msg<'a>(&'a self, m: &'a Self::Msg) -> Cow<'a, str>;
    /// A message content's wire text.
    fn show_content<'a>(&'a self, c: &'a Self::Content) -> Cow<'a, str>;
}

/// Names as wire text: `String`s. The default naming.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Text;

impl Naming for Text {
    type Agent = String;
    type Dest = String;
    type Msg = String;
    type Content = String;

    fn place(&self, d: &String) -> Place<String> {
        match parse_target(d) {
            Some(Target::Channel(_)) => Place::Channel,
            Some(Target::Dm(peer)) => Place::Dm(peer.to_string()),
            None => Place::Invalid,
        }
    }

    fn starts_dm(&self, d: &String) -> bool {
        d.starts_with('@')
    }

    fn name_len(&self, d: &String) -> usize {
        d.len().saturating_sub(1)
    }

    fn msg_is_empty(&self, m: &String) -> bool {
        m.is_empty()
    }

    fn server_msg_id(&self, n: u64) -> String {
        format!("s{n}")
    }

    fn dest_named(&self, name: &str) -> Option<String> {
        Some(name.to_string())
    }

    fn show_agent<'a>(&'a self, a: &'a String) -> Cow<'a, str> {
        Cow::Borrowed(a)
    }

    fn show_dest<'a>(&'a self, d: &'a String) -> Cow<'a, str> {
        Cow::Borrowed(d)
    }

    fn show_msg<'a>(&'a self, m: &'a String) -> Cow<'a, str> {
        Cow::Borrowed(m)
    }

    fn show_content<'a>(&'a self, c: &'a String) -> Cow<'a, str> {
        Cow::Borrowed(c)
    }
}

/// Whether `d` is a valid channel name (under [`Text`], `#` followed by
/// `[A-Za-z0-9_-]+`).
pub fn is_channel<N: Naming>(names: &N, d: &N::Dest) -> bool {
    matches!(names.place(d), Place::Channel)
}

/// Whether `d` is a DM target.
pub fn is_dm<N: Naming>(names: &N, d: &N::Dest) -> bool {
    matches!(names.place(d), Place::Dm(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_places() {
        let t = Text;
        assert_eq!(t.place(&"#general".to_string()), Place::Channel);
        assert_eq!(t.place(&"@bob".to_string()), Place::Dm("bob".to_string()));
        assert_eq!(t.place(&"general".to_string()), Place::Invalid);
        assert_eq!(t.place(&"@".to_string()), Place::Invalid);
        assert_eq!(t.name_len(&"#abc".to_string()), 3);
        assert!(t.msg_is_empty(&String::new()));
        assert_eq!(t.server_msg_id(3), "s3");
        assert!(is_channel(&t, &"#x".to_string()) && !is_channel(&t, &"@x".to_string()));
        assert!(is_dm(&t, &"@x".to_string()) && !is_dm(&t, &"#x".to_string()));
        // `is_channel_name` is what `place` calls a channel.
        assert!(crate::address::is_channel_name("#a-b_c1"));
    }
}
