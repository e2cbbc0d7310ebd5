//! Names on the wire: agent ids and message ids.
//!
//! Agent ids are `agent-` plus the zero-padded 0-based index, at least three
//! digits wide and wide enough for the largest index, so lexicographic
//! order is index order (docs/model.md, modelling choice 9). Message ids are `m`
//! plus a run-wide counter; operator posts and agent replies share it.

/// The id of agent `i` of `n`.
pub fn agent_id(i: usize, n: usize) -> String {
    let width = n.saturating_sub(1).to_string().len().max(3);
    format!("agent-{i:0width$}")
}

/// Parse an agent id back to its index, if it names one of `n` agents.
pub fn parse_agent(name: &str, n: usize) -> Option<u32> {
    let i = digits(name.strip_prefix("agent-")?)?;
    (i < n as u64).then_some(i as u32)
}

/// A non-empty run of ASCII digits (leading zeros allowed) as a number
/// that fits a `u32`, like `str::parse::<u32>` without a sign, in one pass
/// (this runs for every simulated delivery).
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        // `v <= u32::MAX` here, so `v * 10 + 9` fits a u64: the wrapping
        // operations never wrap, and skip the release build's overflow
        // check on every digit.
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        if v > u64::from(u32::MAX) {
            return None;
        }
    }
    Some(v)
}

/// The wire id of message number `m`.
pub fn msg_id(m: u32) -> String {
    IdBuf::new(m).as_str().to_string()
}

/// The wire id of a message number, formatted on the stack (no
/// allocation: the simulator needs one for every timer and inference end).
#[derive(Clone, Copy)]
pub struct IdBuf {
    len: u8,
    bytes: [u8; 11],
}

impl IdBuf {
    pub fn new(m: u32) -> IdBuf {
        let mut bytes = [0u8; 11];
        let mut digits = [0u8; 10];
        let mut n = m;
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let d = &digits[i..];
        bytes[0] = b'm';
        bytes[1..=d.len()].copy_from_slice(d);
        IdBuf {
            len: (d.len() + 1) as u8,
            bytes,
        }
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and `m` are ever written.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

/// Parse a message id back to its number.
pub fn parse_msg(id: &str) -> Option<u32> {
    digits(id.strip_prefix('m')?).map(|v| v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_in_index_order() {
        let ids: Vec<String> = (0..1000).map(|i| agent_id(i, 1000)).collect();
        assert_eq!(ids[7], "agent-007");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(agent_id(12, 5000), "agent-0012");
    }

    #[test]
    fn round_trips() {
        assert_eq!(parse_agent("agent-007", 10), Some(7));
        assert_eq!(parse_agent("agent-007", 5), None);
        assert_eq!(parse_agent("operator", 5), None);
        assert_eq!(parse_msg(&msg_id(42)), Some(42));
        for m in [0, 7, 10, 99, 123_456, u32::MAX] {
            assert_eq!(IdBuf::new(m).as_str(), msg_id(m));
        }
        assert_eq!(msg_id(0), "m0");
        assert_eq!(msg_id(u32::MAX), format!("m{}", u32::MAX));
        assert_eq!(msg_id(1_000_000), "m1000000");
        assert_eq!(parse_msg("x1"), None);
        assert_eq!(parse_msg("m"), None);
        assert_eq!(parse_msg("m+1"), None);
        assert_eq!(parse_msg("m1a"), None);
        assert_eq!(parse_msg("m4294967296"), None);
        assert_eq!(parse_msg("m00000000000042"), Some(42));
        assert_eq!(parse_agent("agent-", 5), None);
        assert_eq!(parse_agent("agent-99999999999", 5), None);
    }

    #[test]
    fn parsers_agree_with_str_parse() {
        for s in [
            "0",
            "7",
            "007",
            "42",
            "4294967295",
            "4294967296",
            "99999999999",
            "",
            "-1",
            "+1",
            "1 ",
            " 1",
            "1_0",
            "\u{661}",
        ] {
            let want = s
                .parse::<u32>()
                .ok()
                .filter(|_| s.bytes().all(|b| b.is_ascii_digit()));
            assert_eq!(parse_msg(&format!("m{s}")), want, "m{s}");
            let n = usize::MAX;
            assert_eq!(parse_agent(&format!("agent-{s}"), n), want, "agent-{s}");
        }
    }
}
