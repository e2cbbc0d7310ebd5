//! Server inputs in `herdsim arbitrate`'s line format, shared by
//! `arbitrate` (which reads them) and `serve` (which writes them with
//! `--log` and feeds the same values to its server): one code path, so a
//! recorded session replays to the same sends. It lives here, with the
//! replay, and `serve` imports it: the live server depends on the replay
//! format, never the other way round.
//!
//! A line is `{"at_ms": N, "agent": "id", "event": {...}, "role": "agent"|"operator"}`
//! where `event` is a client message of the wire protocol (RESPONDING_TO,
//! MSG, or anything else a client sent, which the server then rejects), or
//! `{"type":"JOIN","channel":"#c"}`, `{"type":"LEAVE","channel":"#c"}`,
//! `{"type":"DISCONNECT"}`, `{"type":"CONNECT"}` (a connection that has not
//! identified yet) and `{"type":"IDENTIFY","lurk":bool}` (the last two
//! matter only under `agentchat-0.36`; `serve` identifies a connection
//! before any of its frames reaches the floor, so it never logs them).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::floor::{self, Role, Sends, Server};

/// Feed one event to the server at `at_ms`: JOIN / LEAVE / DISCONNECT, or
/// a client message, decoded at the floor's edge ([`floor::edge::decode`]:
/// a bad one, or a JOIN or LEAVE without a string `channel`, gets an
/// ERROR), appending the sends to `out`.
pub fn apply(
    server: &mut Server,
    at_ms: u64,
    agent: &str,
    role: Role,
    event: &Value,
    out: &mut Sends,
) {
    server.handle(
        floor::Millis(at_ms),
        floor::edge::decode(agent, role, event),
        out,
    );
}

/// The `{"type":"DISCONNECT"}` event.
pub fn disconnect_event() -> Value {
    serde_json::json!({"type": "DISCONNECT"})
}

#[derive(Serialize)]
struct LogLine<'a> {
    at_ms: u64,
    agent: &'a str,
    event: &'a Value,
    role: &'static str,
}

/// Write one input line (with its newline).
pub fn write_line<W: Write>(
    out: &mut W,
    at_ms: u64,
    agent: &str,
    role: Role,
    event: &Value,
) -> io::Result<()> {
    let line = LogLine {
        at_ms,
        agent,
        event,
        role: role.as_str(),
    };
    serde_json::to_writer(&mut *out, &line).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::Config;
    use serde_json::json;

    #[test]
    fn lines_parse_back_as_arbitrate_input() {
        let mut buf = Vec::new();
        let ev = json!({"type": "JOIN", "channel": "#g"});
        let ok = write_line(&mut buf, 7, "a", Role::Operator, &ev);
        assert!(ok.is_ok());
        let text = String::from_utf8_lossy(&buf).into_owned();
        assert_eq!(
            text,
            "{\"at_ms\":7,\"agent\":\"a\",\"event\":{\"channel\":\"#g\",\"type\":\"JOIN\"},\"role\":\"operator\"}\n"
        );
        let line = crate::replay::parse_line(text.trim_end().as_bytes());
        assert_eq!(
            line.map(|l| (l.at_ms, l.role, l.event)),
            Ok((7, Role::Operator, ev))
        );
    }

    #[test]
    fn apply_join_leave_disconnect_and_bad_events() {
        let mut s = Server::new(Config::default());
        let mut out = Sends::new();
        apply(
            &mut s,
            0,
            "a",
            Role::Agent,
            &json!({"type":"JOIN","channel":"#g"}),
            &mut out,
        );
        assert!(s.is_member("a", "#g") && out.is_empty());
        apply(
            &mut s,
            1,
            "a",
            Role::Agent,
            &json!({"type":"LEAVE","channel":"#g"}),
            &mut out,
        );
        assert!(!s.is_member("a", "#g") && out.is_empty());
        apply(
            &mut s,
            2,
            "a",
            Role::Agent,
            &json!({"type":"JOIN","channel":5}),
            &mut out,
        );
        apply(&mut s, 3, "a", Role::Agent, &json!([1]), &mut out);
        apply(&mut s, 4, "a", Role::Agent, &disconnect_event(), &mut out);
        let codes: Vec<String> = out.iter().map(|(_, m)| m.to_json_string()).collect();
        assert_eq!(
            codes,
            [
                r#"{"type":"ERROR","code":"bad_message","message":"field `channel` must be a string"}"#,
                r#"{"type":"ERROR","code":"bad_message","message":"message must be a JSON object"}"#,
            ]
        );
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// Any JSON a client could send, nested: every scalar serde_json keeps
    /// (a float it cannot hold becomes null) and any Unicode text, as keys
    /// and as values.
    fn json_value() -> impl Strategy<Value = Value> {
        let scalar = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        scalar.prop_recursive(3, 24, 6, |inner| {
            let object = proptest::collection::btree_map(any::<String>(), inner.clone(), 0..4);
            prop_oneof![
                proptest::collection::vec(inner, 0..4).prop_map(Value::Array),
                object.prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every logged line parses back as `arbitrate` input with the
        /// very event that was logged, whatever the client sent.
        #[test]
        fn every_logged_event_replays(event in json_value(), at in any::<u64>()) {
            let mut buf = Vec::new();
            prop_assert!(write_line(&mut buf, at, "agent-1", Role::Agent, &event).is_ok());
            let text = String::from_utf8_lossy(&buf).into_owned();
            let line = crate::replay::parse_line(text.trim_end().as_bytes());
            prop_assert_eq!(line.map(|l| (l.at_ms, l.event)), Ok((at, event)));
        }
    }
}
