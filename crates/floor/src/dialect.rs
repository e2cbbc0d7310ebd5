//! The agentchat 0.36 dialect of the wire: what kind of frame a server
//! sent, turned into the wire [`crate::ServerMsg`] decodes.
//!
//! An agent that talks to a real agentchat server reads each text frame
//! with [`read`], acts on [`Kind::Msg`] and [`Kind::Floor`] frames (then
//! [`crate::ServerMsg::from_value`]) and ignores the rest. Its own id is the
//! `agent_id` of the server's WELCOME without the `@`: that is how the
//! server names it in `from`, `holder` and `winner`.
//!
//! A real agentchat server (0.36.0 to 0.36.19) differs from herdsim's own
//! wire in the shape of what it sends:
//! - a relayed MSG carries the server's id in `msg_id`, never `id` (the
//!   sender's own `id` is dropped);
//! - ids are `@` + 16 hex digits in `from`, `holder` and `winner`;
//! - a joiner is sent the channel's recent messages again, marked
//!   `replay: true`;
//! - the server posts notices (`"agent-000 came online"`) from `@server`,
//!   and announces joins and leaves (`AGENT_JOINED`, `AGENT_LEFT`);
//! - every frame carries `ts`, the server's clock.
//!
//! [`classify`] normalises a frame in place (`id` from `msg_id`, the `@`
//! of ids dropped) and says what it is. Nothing here knows which ids are
//! ours: the caller decides that next.

use serde_json::Value;

use crate::wire::ServerMsg;

/// What a server frame is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A MSG from a client (the operator, an agent or someone else).
    Msg,
    /// RESPONDING_TO, FLOOR_CLAIMED, FLOOR_RELEASED (herdsim's) or YIELD.
    Floor,
    /// An ERROR.
    Error,
    /// A frame marked `replay: true`: the server sending the channel's
    /// history again to a joiner. Never acted on.
    Replay,
    /// A MSG from the server itself (`@server`): a notice.
    Notice,
    /// AGENT_JOINED, AGENT_LEFT, JOINED, LEFT: who is in a channel.
    Presence,
    /// Anything else that is a JSON object with a `type` (WELCOME,
    /// CHALLENGE, PONG, types herdsim does not know).
    Other,
    /// Not JSON, not an object, or no string `type`.
    Malformed,
}

/// The sender of the server's own notices on agentchat.
pub const SERVER_SENDER: &str = "@server";

/// The fields that name an agent, whose leading `@` is dropped.
const AGENT_FIELDS: [&str; 3] = ["from", "holder", "winner"];

/// What `v` is; a MSG or floor frame is normalised to herdsim's wire (its
/// `id` taken from `msg_id` when it has none, the `@` of agent ids
/// dropped).
pub fn classify(v: &mut Value) -> Kind {
    let Some(obj) = v.as_object_mut() else {
        return Kind::Malformed;
    };
    if obj.get("replay").and_then(Value::as_bool) == Some(true) {
        return Kind::Replay;
    }
    let kind = match obj.get("type").and_then(Value::as_str) {
        None => return Kind::Malformed,
        Some("MSG") => {
            if obj.get("from").and_then(Value::as_str) == Some(SERVER_SENDER) {
                return Kind::Notice;
            }
            if obj.get("id").is_none_or(Value::is_null)
                && let Some(id) = obj.get("msg_id").filter(|x| x.is_string()).cloned()
            {
                obj.insert("id".into(), id);
            }
            Kind::Msg
        }
        Some("RESPONDING_TO" | "FLOOR_CLAIMED" | "FLOOR_RELEASED" | "YIELD") => Kind::Floor,
        Some("ERROR") => return Kind::Error,
        Some("AGENT_JOINED" | "AGENT_LEFT" | "JOINED" | "LEFT") => return Kind::Presence,
        Some(_) => return Kind::Other,
    };
    for k in AGENT_FIELDS {
        if let Some(Value::String(s)) = obj.get_mut(k)
            && let Some(bare) = s.strip_prefix('@')
        {
            *s = bare.to_string();
        }
    }
    kind
}

/// Parse a text frame (at most `max_bytes` long: longer is malformed
/// without being parsed) and classify it.
pub fn read(text: &str, max_bytes: usize) -> (Kind, Value) {
    if text.len() > max_bytes {
        return (Kind::Malformed, Value::Null);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(mut v) => (classify(&mut v), v),
        Err(_) => (Kind::Malformed, Value::Null),
    }
}

/// A text frame as the agent half reads it ([`crate::AgentInput::Frame`]):
/// a MSG, floor or ERROR frame ([`read`]) decoded into the wire's
/// [`ServerMsg`]; `None` for every other frame (presence, replays,
/// notices, a frame over `max_bytes`, garbage).
pub fn server_msg(text: &str, max_bytes: usize) -> Option<ServerMsg> {
    let (kind, value) = read(text, max_bytes);
    if !matches!(kind, Kind::Msg | Kind::Floor | Kind::Error) {
        return None;
    }
    ServerMsg::from_value(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Frames exactly as a real agentchat 0.36 server sent them
    /// (recorded from a real agentchat 0.36.19 server).
    const RELAYED: &str = r##"{"type":"MSG","ts":1795491300380,"from":"@bc7cd64cbeb7668a","from_name":"operator","to":"#general","content":"question 0","msg_id":"1795491300380-qcckay","verified":false}"##;
    const CLAIMED: &str = r##"{"type":"FLOOR_CLAIMED","ts":1795491300574,"msg_id":"1795491300380-qcckay","channel":"#general","holder":"@8add8b0bb401a1db","holder_name":"agent-001","started_at":1700000069202}"##;
    const REPLAY: &str = r##"{"type":"MSG","ts":1795491297060,"from":"@server","from_name":"Server","to":"#general","content":"operator came online","replay":true}"##;
    const NOTICE: &str = r##"{"type":"MSG","ts":1795491297075,"from":"@server","from_name":"Server","to":"#general","content":"agent-000 came online"}"##;

    #[test]
    fn a_relayed_msg_takes_its_id_from_msg_id_and_drops_the_at() {
        let (kind, v) = read(RELAYED, 1 << 20);
        assert_eq!(kind, Kind::Msg);
        let m = ServerMsg::from_value(&v).expect("decodes");
        assert_eq!(
            m,
            ServerMsg::Msg {
                id: "1795491300380-qcckay".into(),
                from: "bc7cd64cbeb7668a".into(),
                to: "#general".into(),
                content: "question 0".into(),
                in_reply_to: None,
            }
        );
        let (kind, v) = read(CLAIMED, 1 << 20);
        assert_eq!(kind, Kind::Floor);
        assert!(matches!(ServerMsg::from_value(&v),
            Ok(ServerMsg::FloorClaimed { holder, .. }) if holder == "8add8b0bb401a1db"));
    }

    #[test]
    fn replays_notices_presence_and_the_rest() {
        assert_eq!(read(REPLAY, 1 << 20).0, Kind::Replay);
        assert_eq!(read(NOTICE, 1 << 20).0, Kind::Notice);
        for t in ["AGENT_JOINED", "AGENT_LEFT", "JOINED", "LEFT"] {
            assert_eq!(classify(&mut json!({"type": t})), Kind::Presence);
        }
        assert_eq!(classify(&mut json!({"type": "WELCOME"})), Kind::Other);
        assert_eq!(
            classify(&mut json!({"type": "ERROR", "code": "X"})),
            Kind::Error
        );
        // A replayed question is a replay, whatever it is.
        let mut v: Value = serde_json::from_str(RELAYED).expect("json");
        v["replay"] = json!(true);
        assert_eq!(classify(&mut v), Kind::Replay);
        // `replay: false` is an ordinary frame.
        v["replay"] = json!(false);
        assert_eq!(classify(&mut v), Kind::Msg);
    }

    #[test]
    fn malformed_frames() {
        for text in ["", "null", "[1]", "{}", r#"{"type": 3}"#, "not json"] {
            assert_eq!(read(text, 1 << 20).0, Kind::Malformed, "{text}");
        }
        assert_eq!(read(RELAYED, 10).0, Kind::Malformed);
    }

    #[test]
    fn herdsims_own_wire_passes_unchanged() {
        let mut v = json!({"type": "MSG", "id": "m3", "from": "agent-001",
            "to": "#general", "content": "hi", "msg_id": "other"});
        let before = v.clone();
        assert_eq!(classify(&mut v), Kind::Msg);
        assert_eq!(v, before);
        // A release is a floor frame (the live driver and the example agent
        // act on it).
        let mut v = json!({"type": "FLOOR_RELEASED", "msg_id": "m3",
            "channel": "#general", "holder": "agent-001"});
        assert_eq!(classify(&mut v), Kind::Floor);
    }

    #[test]
    fn server_msg_decodes_what_the_agent_half_reads() {
        assert!(matches!(
            server_msg(RELAYED, 1 << 20),
            Some(ServerMsg::Msg { .. })
        ));
        assert!(matches!(
            server_msg(CLAIMED, 1 << 20),
            Some(ServerMsg::FloorClaimed { .. })
        ));
        let released = r##"{"type":"FLOOR_RELEASED","msg_id":"m","channel":"#g","holder":"a"}"##;
        assert!(matches!(
            server_msg(released, 1 << 20),
            Some(ServerMsg::FloorReleased { .. })
        ));
        let error = r#"{"type":"ERROR","code":"x","message":"y"}"#;
        assert!(matches!(
            server_msg(error, 1 << 20),
            Some(ServerMsg::Error { .. })
        ));
        for other in [REPLAY, NOTICE, r#"{"type":"JOINED"}"#, "{not json"] {
            assert_eq!(server_msg(other, 1 << 20), None, "{other}");
        }
        assert_eq!(server_msg(RELAYED, 10), None);
    }
}
