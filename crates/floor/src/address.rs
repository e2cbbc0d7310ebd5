//! Addresses as text: the syntax of channel names (`#general`), agent ids
//! and DM targets (`@agent-b`), which the wire decoder checks, and who a
//! message @mentions, the rule the agent half ([`crate::Agent`]) and
//! herdsim's simulator share.
//!
//! A mention is a whitespace-separated word `@name`; `name` ends at the
//! first character that is not an ASCII letter or digit, `-` or `_` (so
//! `@alice,` and `@alice?` mention `alice`, and `bob@example.com` mentions
//! nobody).

/// A parsed destination: a channel or a DM peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target<'a> {
    /// `#name` (the whole string, `#` included).
    Channel(&'a str),
    /// `@id`: the agent id, without `@`.
    Dm(&'a str),
}

/// `#` followed by one or more of `[A-Za-z0-9_-]`.
pub fn is_channel_name(s: &str) -> bool {
    match s.strip_prefix('#') {
        Some(name) => {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
        None => false,
    }
}

/// Non-empty, no whitespace or control characters, not starting with `#` or `@`.
pub fn is_agent_id(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('#')
        && !s.starts_with('@')
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Parse a channel name or a DM target (`@id`).
pub fn parse_target(s: &str) -> Option<Target<'_>> {
    if is_channel_name(s) {
        Some(Target::Channel(s))
    } else {
        match s.strip_prefix('@') {
            Some(id) if is_agent_id(id) => Some(Target::Dm(id)),
            _ => None,
        }
    }
}

/// The words of `content` that are mentions, each without its `@` and
/// trimmed of trailing characters that cannot end a name.
fn mention_words(content: &str) -> impl Iterator<Item = &str> {
    content
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('@'))
        .map(|rest| {
            rest.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_')
        })
}

/// Whether `name` can be a mentioned name: it starts with an ASCII letter
/// or digit (`@ ` and `@,` mention nobody).
fn is_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphanumeric())
}

/// Does `content` @mention `id` (as a whole word)?
pub fn mentions(content: &str, id: &str) -> bool {
    // Most messages mention nobody: a quick scan first (this runs for
    // every delivery of a channel message).
    has_at(content.as_bytes()) && mention_words(content).any(|name| name == id)
}

/// Does `content` @mention anybody (a word `@name`)?
pub fn mentions_anyone(content: &str) -> bool {
    has_at(content.as_bytes()) && mention_words(content).any(is_name)
}

/// The words that address a whole room rather than one member: a message
/// `@everyone` (or `@here`, `@channel`, `@room`, `@all`) is addressed to
/// nobody in particular.
pub const BROADCAST: [&str; 5] = ["everyone", "here", "channel", "room", "all"];

/// The names `content` @mentions (a name starts with an ASCII letter or
/// digit), in order (with repeats), broadcast words ([`BROADCAST`])
/// included.
pub fn mentioned(content: &str) -> impl Iterator<Item = &str> {
    mention_words(content).filter(|name| is_name(name))
}

/// Whether `content` is addressed to someone other than `me`: it
/// @mentions a name that is not a broadcast word, and does not mention
/// `me`. Such a message is left to the agents it names (see
/// [`crate::Agent`]).
pub fn addressed_to_others(content: &str, me: &str) -> bool {
    let mut others = false;
    for name in mentioned(content) {
        if name == me {
            return false;
        }
        others |= !BROADCAST.contains(&name);
    }
    others
}

/// Whether `bytes` contain an `@`, eight bytes at a time (the classic
/// "has a zero byte" test on the bytes XOR `@`): chat messages are short,
/// and a library scan's set-up costs more than the scan here.
pub(crate) fn has_at(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const ATS: u64 = ONES * b'@' as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ ATS;
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return true;
        }
    }
    chunks.remainder().contains(&b'@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names() {
        for ok in ["#general", "#a", "#A-b_9"] {
            assert!(is_channel_name(ok), "{ok}");
        }
        for bad in ["", "#", "general", "# x", "#a.b", "#é", "@a", "##a"] {
            assert!(!is_channel_name(bad), "{bad}");
        }
        assert_eq!(parse_target("#g"), Some(Target::Channel("#g")));
        assert_eq!(parse_target("@agent-b"), Some(Target::Dm("agent-b")));
        assert_eq!(parse_target("@"), None);
        assert_eq!(parse_target("@a b"), None);
        assert_eq!(parse_target("@#x"), None);
    }

    #[test]
    fn a_mention_is_a_whole_word() {
        assert!(mentions("@alice what is the TTL?", "alice"));
        assert!(mentions("ask @alice, please", "alice"));
        assert!(!mentions("ask @alicia", "alice"));
        assert!(!mentions("mail bob@alice.org", "alice"));
        assert!(mentions_anyone("hey @bob"));
        assert!(!mentions_anyone("an @ sign"));
        assert!(!mentions_anyone("no mention"));
    }

    #[test]
    fn a_message_naming_others_is_theirs() {
        assert!(addressed_to_others("@bob what now?", "alice"));
        assert!(!addressed_to_others("@bob and @alice, what now?", "alice"));
        assert!(!addressed_to_others("@everyone what now?", "alice"));
        assert!(!addressed_to_others("what now?", "alice"));
        assert!(!addressed_to_others("mail bob@example.org", "alice"));
        assert_eq!(
            mentioned("@a, @b! @ @c.").collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn at_scan_matches_contains() {
        let alphabet = [b'a', b'@', b' ', 0x80, 0xff, 0x3f, 0x41, 0xc0, 0x40];
        for len in 0..40usize {
            for k in 0..alphabet.len() * 7 {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| {
                        let pick = (i * 31 + k * 7 + len) % alphabet.len();
                        if alphabet[pick] == b'@' && (i + k) % 3 != 0 {
                            b'x'
                        } else {
                            alphabet[pick]
                        }
                    })
                    .collect();
                assert_eq!(has_at(&bytes), bytes.contains(&b'@'), "{bytes:?}");
            }
            let mut one = vec![b'z'; len];
            for p in 0..len {
                one[p] = b'@';
                assert!(has_at(&one));
                one[p] = b'A'; // 0x41: one bit away from `@`
                assert!(!has_at(&one));
                one[p] = b'z';
            }
        }
    }
}
