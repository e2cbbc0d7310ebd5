//! Wire protocol types: the JSON frames of RESPONDING_TO (the crate's
//! README lists them).
//!
//! Encoding: [`ClientMsg`] and [`ServerMsg`] implement [`serde::Serialize`]
//! with the fields in the order the protocol text lists them, and
//! `to_json()` gives the same object as a [`serde_json::Value`].
//!
//! Decoding is strict and never panics: [`ClientMsg::decode`] (bytes),
//! [`ClientMsg::decode_str`] and [`ClientMsg::from_value`] (and the same for
//! [`ServerMsg`]) return a [`DecodeError`] with a precise reason: not JSON,
//! not an object, a missing field, a field of the wrong JSON type, an empty
//! id, a bad channel name, an unknown `type`. Fields the protocol does not
//! know are ignored (forward compatibility), `null` counts as absent for
//! the optional fields (`id`, `in_reply_to`).
//!
//! `started_at` (documented choice): the decoder accepts any JSON number
//! and carries it as a [`Stamp`]: an integer that fits an `i64` stays an
//! integer, anything else (a float such as `1500.5`, or an integer beyond
//! `i64`) is kept as a double; `1e3` and `1000.0` are the integer 1000. A
//! string, a boolean, `null` or an object is rejected here. Which numbers a
//! server accepts is a *policy* question: `spec` and its variants require a
//! non-negative integer, as the protocol says (a float gets the same
//! `ERROR bad_message "`started_at` must be an integer"` as before
//! `Stamp` existed), while `agentchat-0.36` accepts any number but 0, as the
//! real server's `validateClientMessage` (`lib/protocol.ts`) does (see
//! [`crate::sim::StartedAtRule`]).
//!
//! Identifiers: a channel name is `#` followed by one or more of
//! `[A-Za-z0-9_-]`; an agent id is a non-empty string without whitespace or
//! control characters that does not start with `#` or `@`; a DM target is
//! `@` followed by an agent id. Ids are carried bare everywhere (the public
//! agentchat server prefixes `@` to ids in some fields; herdsim does not).

use crate::address::{is_agent_id, is_channel_name, parse_target};
use crate::naming::{Naming, Text};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::fmt;

/// A `started_at` value as carried on the wire: an integer, or (where a
/// policy accepts it) any other finite JSON number. Integral doubles that
/// fit an `i64` (`1e3`, `1000.0`, `-0.0`) are normalized to the integer, so
/// a [`Stamp::Float`] is either non-integral or beyond the `i64` range.
///
/// `Ord` is the exact numeric order (integers compared as integers); the
/// `agentchat-0.36` policy compares as IEEE doubles instead
/// ([`Stamp::as_f64`]), as JavaScript does.
#[derive(Debug, Clone, Copy)]
pub enum Stamp {
    /// A JSON integer (or an integral double normalized to one).
    Int(i64),
    /// A finite non-integral double, or one beyond the `i64` range.
    Float(f64),
}

impl Stamp {
    /// From a finite double, normalized (see the type docs). A non-finite
    /// value (which JSON cannot carry) becomes `Float` as is.
    pub fn from_f64(x: f64) -> Stamp {
        // 2^63 is exactly representable; [-2^63, 2^63) is the i64 range.
        const LIM: f64 = 9_223_372_036_854_775_808.0;
        if x.is_finite() && x.fract() == 0.0 && (-LIM..LIM).contains(&x) {
            Stamp::Int(x as i64)
        } else {
            Stamp::Float(x)
        }
    }

    /// The integer, if it is one.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Stamp::Int(i) => Some(i),
            Stamp::Float(_) => None,
        }
    }

    /// The value as an IEEE double (integers beyond 2^53 are rounded, as
    /// JavaScript's `JSON.parse` rounds them).
    pub fn as_f64(self) -> f64 {
        match self {
            Stamp::Int(i) => i as f64,
            Stamp::Float(f) => f,
        }
    }

    fn to_value(self) -> Value {
        match self {
            Stamp::Int(i) => Value::from(i),
            Stamp::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

impl From<i64> for Stamp {
    fn from(i: i64) -> Stamp {
        Stamp::Int(i)
    }
}

impl PartialEq for Stamp {
    fn eq(&self, other: &Stamp) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Stamp {}

impl PartialOrd for Stamp {
    fn partial_cmp(&self, other: &Stamp) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Stamp {
    fn cmp(&self, other: &Stamp) -> Ordering {
        match (*self, *other) {
            (Stamp::Int(a), Stamp::Int(b)) => a.cmp(&b),
            (Stamp::Float(a), Stamp::Float(b)) => a.total_cmp(&b),
            // A normalized Float is never equal to an integer: either it is
            // non-integral (|f| < 2^52, so rounding `i` cannot cross it) or
            // beyond the i64 range (then the f64 comparison is exact too).
            (Stamp::Int(a), Stamp::Float(b)) => (a as f64).total_cmp(&b).then(Ordering::Less),
            (Stamp::Float(a), Stamp::Int(b)) => a.total_cmp(&(b as f64)).then(Ordering::Greater),
        }
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_value().to_string())
    }
}

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Stamp::Int(i) => s.serialize_i64(i),
            Stamp::Float(f) => s.serialize_f64(f),
        }
    }
}

/// A message an agent (or the operator) sends to the server.
///
/// Generic over the [`Naming`] (default [`Text`]: the wire text itself;
/// only that form is encoded and decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientMsg<N: Naming = Text> {
    /// `{"type":"RESPONDING_TO","msg_id":..,"started_at":..,"channel":..}`
    ///
    /// `channel` is a channel name (`#general`) or a DM target
    /// (`@agent-b`); a DM target creates no claim (the protocol does not
    /// apply to DMs) and the server sends nothing back.
    RespondingTo {
        /// The message the agent claims.
        msg_id: N::Msg,
        /// When the agent started (its local clock, ms).
        started_at: Stamp,
        /// The channel (or DM target) of the claim.
        channel: N::Dest,
    },
    /// `{"type":"MSG","to":"#general"|"@agent-b","content":..,"in_reply_to":..,"id":..}`
    /// `id` is optional: the server assigns one when it is missing.
    Msg {
        /// The message's id, if the sender chose one.
        id: Option<N::Msg>,
        /// A channel or a DM target.
        to: N::Dest,
        /// The text.
        content: N::Content,
        /// The message this one answers, if any.
        in_reply_to: Option<N::Msg>,
    },
}

/// A message the server sends to one recipient.
///
/// Generic over the [`Naming`] (default [`Text`]: the wire text itself;
/// only that form is encoded and decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerMsg<N: Naming = Text> {
    /// Relayed claim: `{"type":"RESPONDING_TO","msg_id","from","started_at","channel"}`.
    RespondingTo {
        /// The message claimed.
        msg_id: N::Msg,
        /// The claimant.
        from: N::Agent,
        /// The claimant's `started_at`, as it sent it.
        started_at: Stamp,
        /// The claim's channel.
        channel: N::Dest,
    },
    /// `{"type":"YIELD","msg_id","winner","channel"}` (spec form). The
    /// `agentchat-0.36` form names the field `holder` and adds
    /// `holder_started_at` and `reason`; those are carried in `detail`.
    Yield {
        /// The message whose floor the recipient lost.
        msg_id: N::Msg,
        /// The agent that has the floor.
        winner: N::Agent,
        /// The claim's channel.
        channel: N::Dest,
        /// The `agentchat-0.36` form's extra fields.
        detail: Option<YieldDetail>,
    },
    /// `agentchat-0.36` only: `{"type":"FLOOR_CLAIMED","msg_id","channel","holder","started_at"}`.
    FloorClaimed {
        /// The message claimed.
        msg_id: N::Msg,
        /// The claim's channel.
        channel: N::Dest,
        /// The agent granted the floor.
        holder: N::Agent,
        /// The holder's `started_at`.
        started_at: Stamp,
    },
    /// `{"type":"FLOOR_RELEASED","msg_id","channel","holder"}`: the live
    /// claim `holder` held on `msg_id` is gone because the holder
    /// disconnected or left the channel (not on expiry, not on an answer):
    /// the floor is free. A herdsim extension of the protocol (the policies
    /// `spec`, `tombstone` and `server-time` send it; a real agentchat
    /// server does not). An agent that skipped the message for that claim
    /// decides again (see [`crate::sim::Client`]).
    FloorReleased {
        /// The message whose claim is gone.
        msg_id: N::Msg,
        /// The claim's channel.
        channel: N::Dest,
        /// The agent that held it.
        holder: N::Agent,
    },
    /// Relayed MSG: `{"type":"MSG","id","from","to","content","in_reply_to"}`
    /// (`in_reply_to` only when present).
    Msg {
        /// The message's id (the sender's, or one the server assigned).
        id: N::Msg,
        /// The sender.
        from: N::Agent,
        /// A channel or a DM target.
        to: N::Dest,
        /// The text.
        content: N::Content,
        /// The message this one answers, if any.
        in_reply_to: Option<N::Msg>,
    },
    /// `{"type":"ERROR","code":..,"message":..}`
    Error {
        /// A machine-readable code (`bad_message`, `not_relayed`, ...).
        code: String,
        /// The reason, for a person.
        message: String,
    },
}

/// Extra YIELD fields of the `agentchat-0.36` form.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct YieldDetail {
    /// The holder's `started_at`.
    pub holder_started_at: Stamp,
    /// Why the recipient yields, in agentchat's words.
    pub reason: String,
}

/// Why a message could not be decoded. `Display` gives the reason as sent
/// back to the client in an `ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are not one JSON value (serde_json's reason attached).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// Valid JSON, but not an object.
    #[error("message must be a JSON object")]
    NotObject,
    /// A required field is absent.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A field that must be a string is not.
    #[error("field `{0}` must be a string")]
    NotString(&'static str),
    /// A string field is empty.
    #[error("field `{0}` must not be empty")]
    Empty(&'static str),
    /// A field that must be a boolean is not.
    #[error("field `{0}` must be true or false")]
    NotBool(&'static str),
    /// Not a JSON integer (a string, a boolean, an object, ...). Also the
    /// reason `spec` gives for a float `started_at` (see [`Stamp`]).
    #[error("`{0}` must be an integer")]
    NotInteger(&'static str),
    /// Not `#` followed by `[A-Za-z0-9_-]+` (nor `@agent` where a DM target is allowed).
    #[error("bad channel name `{value}` in field `{field}` (expected `#` followed by letters, digits, `_` or `-`{dm})", dm = dm_hint(.dm_allowed))]
    BadChannel {
        /// The field.
        field: &'static str,
        /// What it held (clipped).
        value: String,
        /// Whether a DM target would have been accepted there.
        dm_allowed: bool,
    },
    /// Not a valid agent id.
    #[error("bad agent id `{value}` in field `{field}`")]
    BadAgentId {
        /// The field.
        field: &'static str,
        /// What it held (clipped).
        value: String,
    },
    /// A `type` this protocol does not have.
    #[error("unknown type `{0}`")]
    UnknownType(String),
}

fn dm_hint(dm_allowed: &bool) -> &'static str {
    if *dm_allowed {
        ", or `@agent` for a DM"
    } else {
        ""
    }
}

/// At most 64 characters of an arbitrary input string, for error messages.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

// ---------------------------------------------------------------- encoding

/// One JSON field value, for the single field list that both `Serialize`
/// and `to_json` use (so they cannot disagree).
enum F<'a> {
    S(&'a str),
    N(Stamp),
}

type Fields<'a> = Vec<(&'static str, F<'a>)>;

fn fields_to_value(fields: Fields<'_>) -> Value {
    let mut m = Map::new();
    for (k, v) in fields {
        let v = match v {
            F::S(s) => Value::String(s.to_string()),
            F::N(n) => n.to_value(),
        };
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

fn serialize_fields<S: Serializer>(fields: Fields<'_>, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(fields.len()))?;
    for (k, v) in fields {
        match v {
            F::S(x) => map.serialize_entry(k, x)?,
            F::N(x) => map.serialize_entry(k, &x)?,
        }
    }
    map.end()
}

impl<N: Naming> ClientMsg<N> {
    /// The wire `type` of this message.
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientMsg::RespondingTo { .. } => "RESPONDING_TO",
            ClientMsg::Msg { .. } => "MSG",
        }
    }
}

impl<N: Naming> ClientMsg<N> {
    /// The message as wire text, named as `names` names it.
    pub fn to_text(&self, names: &N) -> ClientMsg {
        match self {
            ClientMsg::RespondingTo {
                msg_id,
                started_at,
                channel,
            } => ClientMsg::RespondingTo {
                msg_id: names.show_msg(msg_id).into_owned(),
                started_at: *started_at,
                channel: names.show_dest(channel).into_owned(),
            },
            ClientMsg::Msg {
                id,
                to,
                content,
                in_reply_to,
            } => ClientMsg::Msg {
                id: id.as_ref().map(|m| names.show_msg(m).into_owned()),
                to: names.show_dest(to).into_owned(),
                content: names.show_content(content).into_owned(),
                in_reply_to: in_reply_to.as_ref().map(|m| names.show_msg(m).into_owned()),
            },
        }
    }
}

impl ClientMsg {
    fn fields(&self) -> Fields<'_> {
        let mut f: Fields<'_> = vec![("type", F::S(self.type_name()))];
        match self {
            ClientMsg::RespondingTo {
                msg_id,
                started_at,
                channel,
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("started_at", F::N(*started_at)));
                f.push(("channel", F::S(channel)));
            }
            ClientMsg::Msg {
                id,
                to,
                content,
                in_reply_to,
            } => {
                if let Some(id) = id {
                    f.push(("id", F::S(id)));
                }
                f.push(("to", F::S(to)));
                f.push(("content", F::S(content)));
                if let Some(r) = in_reply_to {
                    f.push(("in_reply_to", F::S(r)));
                }
            }
        }
        f
    }

    /// The message as a JSON object.
    pub fn to_json(&self) -> Value {
        fields_to_value(self.fields())
    }

    /// The message as one line of JSON (fields in protocol order).
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decode from raw bytes (one JSON object).
    pub fn decode(bytes: &[u8]) -> Result<ClientMsg, DecodeError> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson(e.to_string()))?;
        ClientMsg::from_value(&v)
    }

    /// Decode from a string (one JSON object).
    pub fn decode_str(s: &str) -> Result<ClientMsg, DecodeError> {
        ClientMsg::decode(s.as_bytes())
    }

    /// Decode from an already parsed JSON value.
    pub fn from_value(v: &Value) -> Result<ClientMsg, DecodeError> {
        let m = v.as_object().ok_or(DecodeError::NotObject)?;
        let ty = req_str(m, "type")?;
        match ty {
            "RESPONDING_TO" => Ok(ClientMsg::RespondingTo {
                msg_id: req_id(m, "msg_id")?,
                started_at: req_stamp(m, "started_at")?,
                channel: req_target(m, "channel")?,
            }),
            "MSG" => Ok(ClientMsg::Msg {
                id: opt_id(m, "id")?,
                to: req_target(m, "to")?,
                content: req_str(m, "content")?.to_string(),
                in_reply_to: opt_id(m, "in_reply_to")?,
            }),
            other => Err(DecodeError::UnknownType(clip(other))),
        }
    }
}

impl Serialize for ClientMsg {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_fields(self.fields(), s)
    }
}

impl fmt::Display for ClientMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

impl<N: Naming> ServerMsg<N> {
    /// The wire `type` of this message.
    pub fn type_name(&self) -> &'static str {
        match self {
            ServerMsg::RespondingTo { .. } => "RESPONDING_TO",
            ServerMsg::Yield { .. } => "YIELD",
            ServerMsg::FloorClaimed { .. } => "FLOOR_CLAIMED",
            ServerMsg::FloorReleased { .. } => "FLOOR_RELEASED",
            ServerMsg::Msg { .. } => "MSG",
            ServerMsg::Error { .. } => "ERROR",
        }
    }
}

impl<N: Naming> ServerMsg<N> {
    /// The message as wire text, named as `names` names it.
    pub fn to_text(&self, names: &N) -> ServerMsg {
        let msg = |m: &N::Msg| names.show_msg(m).into_owned();
        let agent = |a: &N::Agent| names.show_agent(a).into_owned();
        let dest = |d: &N::Dest| names.show_dest(d).into_owned();
        match self {
            ServerMsg::RespondingTo {
                msg_id,
                from,
                started_at,
                channel,
            } => ServerMsg::RespondingTo {
                msg_id: msg(msg_id),
                from: agent(from),
                started_at: *started_at,
                channel: dest(channel),
            },
            ServerMsg::Yield {
                msg_id,
                winner,
                channel,
                detail,
            } => ServerMsg::Yield {
                msg_id: msg(msg_id),
                winner: agent(winner),
                channel: dest(channel),
                detail: detail.clone(),
            },
            ServerMsg::FloorClaimed {
                msg_id,
                channel,
                holder,
                started_at,
            } => ServerMsg::FloorClaimed {
                msg_id: msg(msg_id),
                channel: dest(channel),
                holder: agent(holder),
                started_at: *started_at,
            },
            ServerMsg::FloorReleased {
                msg_id,
                channel,
                holder,
            } => ServerMsg::FloorReleased {
                msg_id: msg(msg_id),
                channel: dest(channel),
                holder: agent(holder),
            },
            ServerMsg::Msg {
                id,
                from,
                to,
                content,
                in_reply_to,
            } => ServerMsg::Msg {
                id: msg(id),
                from: agent(from),
                to: dest(to),
                content: names.show_content(content).into_owned(),
                in_reply_to: in_reply_to.as_ref().map(msg),
            },
            ServerMsg::Error { code, message } => ServerMsg::Error {
                code: code.clone(),
                message: message.clone(),
            },
        }
    }
}

impl ServerMsg {
    fn fields(&self) -> Fields<'_> {
        let mut f: Fields<'_> = vec![("type", F::S(self.type_name()))];
        match self {
            ServerMsg::RespondingTo {
                msg_id,
                from,
                started_at,
                channel,
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("from", F::S(from)));
                f.push(("started_at", F::N(*started_at)));
                f.push(("channel", F::S(channel)));
            }
            ServerMsg::Yield {
                msg_id,
                winner,
                channel,
                detail: None,
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("winner", F::S(winner)));
                f.push(("channel", F::S(channel)));
            }
            ServerMsg::Yield {
                msg_id,
                winner,
                channel,
                detail: Some(d),
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("channel", F::S(channel)));
                f.push(("holder", F::S(winner)));
                f.push(("holder_started_at", F::N(d.holder_started_at)));
                f.push(("reason", F::S(&d.reason)));
            }
            ServerMsg::FloorClaimed {
                msg_id,
                channel,
                holder,
                started_at,
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("channel", F::S(channel)));
                f.push(("holder", F::S(holder)));
                f.push(("started_at", F::N(*started_at)));
            }
            ServerMsg::FloorReleased {
                msg_id,
                channel,
                holder,
            } => {
                f.push(("msg_id", F::S(msg_id)));
                f.push(("channel", F::S(channel)));
                f.push(("holder", F::S(holder)));
            }
            ServerMsg::Msg {
                id,
                from,
                to,
                content,
                in_reply_to,
            } => {
                f.push(("id", F::S(id)));
                f.push(("from", F::S(from)));
                f.push(("to", F::S(to)));
                f.push(("content", F::S(content)));
                if let Some(r) = in_reply_to {
                    f.push(("in_reply_to", F::S(r)));
                }
            }
            ServerMsg::Error { code, message } => {
                f.push(("code", F::S(code)));
                f.push(("message", F::S(message)));
            }
        }
        f
    }

    /// The message as a JSON object.
    pub fn to_json(&self) -> Value {
        fields_to_value(self.fields())
    }

    /// The message as one line of JSON (fields in protocol order).
    pub fn to_json_string(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decode from raw bytes (one JSON object).
    pub fn decode(bytes: &[u8]) -> Result<ServerMsg, DecodeError> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson(e.to_string()))?;
        ServerMsg::from_value(&v)
    }

    /// Decode from a string (one JSON object).
    pub fn decode_str(s: &str) -> Result<ServerMsg, DecodeError> {
        ServerMsg::decode(s.as_bytes())
    }

    /// Decode from an already parsed JSON value. A YIELD with a `winner`
    /// field is the spec form; one with `holder` (and then
    /// `holder_started_at` and `reason`) is the `agentchat-0.36` form.
    pub fn from_value(v: &Value) -> Result<ServerMsg, DecodeError> {
        let m = v.as_object().ok_or(DecodeError::NotObject)?;
        let ty = req_str(m, "type")?;
        match ty {
            "RESPONDING_TO" => Ok(ServerMsg::RespondingTo {
                msg_id: req_id(m, "msg_id")?,
                from: req_agent(m, "from")?,
                started_at: req_stamp(m, "started_at")?,
                channel: req_target(m, "channel")?,
            }),
            "YIELD" => {
                let msg_id = req_id(m, "msg_id")?;
                let channel = req_channel(m, "channel")?;
                if m.get("winner").is_some_and(|w| !w.is_null()) {
                    Ok(ServerMsg::Yield {
                        msg_id,
                        winner: req_agent(m, "winner")?,
                        channel,
                        detail: None,
                    })
                } else if m.get("holder").is_some_and(|w| !w.is_null()) {
                    Ok(ServerMsg::Yield {
                        msg_id,
                        winner: req_agent(m, "holder")?,
                        channel,
                        detail: Some(YieldDetail {
                            holder_started_at: req_stamp(m, "holder_started_at")?,
                            reason: req_str(m, "reason")?.to_string(),
                        }),
                    })
                } else {
                    Err(DecodeError::MissingField("winner"))
                }
            }
            "FLOOR_CLAIMED" => Ok(ServerMsg::FloorClaimed {
                msg_id: req_id(m, "msg_id")?,
                channel: req_channel(m, "channel")?,
                holder: req_agent(m, "holder")?,
                started_at: req_stamp(m, "started_at")?,
            }),
            "FLOOR_RELEASED" => Ok(ServerMsg::FloorReleased {
                msg_id: req_id(m, "msg_id")?,
                channel: req_channel(m, "channel")?,
                holder: req_agent(m, "holder")?,
            }),
            "MSG" => Ok(ServerMsg::Msg {
                id: req_id(m, "id")?,
                from: req_agent(m, "from")?,
                to: req_target(m, "to")?,
                content: req_str(m, "content")?.to_string(),
                in_reply_to: opt_id(m, "in_reply_to")?,
            }),
            "ERROR" => Ok(ServerMsg::Error {
                code: req_str(m, "code")?.to_string(),
                message: req_str(m, "message")?.to_string(),
            }),
            other => Err(DecodeError::UnknownType(clip(other))),
        }
    }
}

impl Serialize for ServerMsg {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_fields(self.fields(), s)
    }
}

impl fmt::Display for ServerMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_string())
    }
}

// ---------------------------------------------------------------- decoding helpers

fn req_str<'a>(m: &'a Map<String, Value>, k: &'static str) -> Result<&'a str, DecodeError> {
    match m.get(k) {
        None | Some(Value::Null) => Err(DecodeError::MissingField(k)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(DecodeError::NotString(k)),
    }
}

/// A required, non-empty string (message ids).
fn req_id(m: &Map<String, Value>, k: &'static str) -> Result<String, DecodeError> {
    let s = req_str(m, k)?;
    if s.is_empty() {
        return Err(DecodeError::Empty(k));
    }
    Ok(s.to_string())
}

/// An optional, non-empty string; `null` counts as absent.
fn opt_id(m: &Map<String, Value>, k: &'static str) -> Result<Option<String>, DecodeError> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Err(DecodeError::Empty(k)),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(DecodeError::NotString(k)),
    }
}

/// Any JSON number, as a [`Stamp`].
fn req_stamp(m: &Map<String, Value>, k: &'static str) -> Result<Stamp, DecodeError> {
    match m.get(k) {
        None | Some(Value::Null) => Err(DecodeError::MissingField(k)),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Stamp::Int(i)),
            (None, Some(f)) => Ok(Stamp::from_f64(f)),
            (None, None) => Err(DecodeError::NotInteger(k)),
        },
        Some(_) => Err(DecodeError::NotInteger(k)),
    }
}

fn req_agent(m: &Map<String, Value>, k: &'static str) -> Result<String, DecodeError> {
    let s = req_str(m, k)?;
    if !is_agent_id(s) {
        return Err(DecodeError::BadAgentId {
            field: k,
            value: clip(s),
        });
    }
    Ok(s.to_string())
}

/// A channel name or a DM target.
fn req_target(m: &Map<String, Value>, k: &'static str) -> Result<String, DecodeError> {
    let s = req_str(m, k)?;
    if parse_target(s).is_none() {
        return Err(DecodeError::BadChannel {
            field: k,
            value: clip(s),
            dm_allowed: true,
        });
    }
    Ok(s.to_string())
}

/// A channel name only.
fn req_channel(m: &Map<String, Value>, k: &'static str) -> Result<String, DecodeError> {
    let s = req_str(m, k)?;
    if !is_channel_name(s) {
        return Err(DecodeError::BadChannel {
            field: k,
            value: clip(s),
            dm_allowed: false,
        });
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(msg_id: &str, started_at: i64, channel: &str) -> ClientMsg {
        ClientMsg::RespondingTo {
            msg_id: msg_id.into(),
            started_at: started_at.into(),
            channel: channel.into(),
        }
    }

    #[test]
    fn client_responding_to_roundtrip_and_exact_json() {
        let m = claim("m1", 1_700_000_000_000, "#general");
        assert_eq!(
            m.to_json_string(),
            r##"{"type":"RESPONDING_TO","msg_id":"m1","started_at":1700000000000,"channel":"#general"}"##
        );
        assert_eq!(ClientMsg::decode_str(&m.to_json_string()), Ok(m.clone()));
        assert_eq!(ClientMsg::from_value(&m.to_json()), Ok(m.clone()));
        assert_eq!(serde_json::to_value(&m).ok(), Some(m.to_json()));
    }

    #[test]
    fn client_msg_optional_fields() {
        let m = ClientMsg::decode_str(r##"{"type":"MSG","to":"#general","content":"hi"}"##);
        assert_eq!(
            m,
            Ok(ClientMsg::Msg {
                id: None,
                to: "#general".into(),
                content: "hi".into(),
                in_reply_to: None
            })
        );
        let m = ClientMsg::decode_str(
            r##"{"type":"MSG","id":null,"to":"@bob","content":"","in_reply_to":"m1","extra":1}"##,
        );
        assert_eq!(
            m,
            Ok(ClientMsg::Msg {
                id: None,
                to: "@bob".into(),
                content: "".into(),
                in_reply_to: Some("m1".into())
            })
        );
        let full = ClientMsg::Msg {
            id: Some("x".into()),
            to: "#g".into(),
            content: "c".into(),
            in_reply_to: Some("m".into()),
        };
        assert_eq!(
            full.to_json_string(),
            r##"{"type":"MSG","id":"x","to":"#g","content":"c","in_reply_to":"m"}"##
        );
        assert_eq!(ClientMsg::decode_str(&full.to_json_string()), Ok(full));
    }

    #[test]
    fn client_decode_errors_are_precise() {
        let e = |s: &str| {
            ClientMsg::decode_str(s)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string())
        };
        assert!(e("nope").starts_with("not JSON"));
        assert!(e("").starts_with("not JSON"));
        assert_eq!(e("[1]"), "message must be a JSON object");
        assert_eq!(e("{}"), "missing field `type`");
        assert_eq!(e(r#"{"type":3}"#), "field `type` must be a string");
        assert_eq!(e(r#"{"type":"FOO"}"#), "unknown type `FOO`");
        assert_eq!(
            e(r##"{"type":"RESPONDING_TO","started_at":1,"channel":"#g"}"##),
            "missing field `msg_id`"
        );
        assert_eq!(
            e(r##"{"type":"RESPONDING_TO","msg_id":7,"started_at":1,"channel":"#g"}"##),
            "field `msg_id` must be a string"
        );
        assert_eq!(
            e(r##"{"type":"RESPONDING_TO","msg_id":"","started_at":1,"channel":"#g"}"##),
            "field `msg_id` must not be empty"
        );
        assert_eq!(
            e(r##"{"type":"RESPONDING_TO","msg_id":"m","channel":"#g"}"##),
            "missing field `started_at`"
        );
        for bad in ["\"5\"", "true", "[]", "{}"] {
            assert_eq!(
                e(&format!(
                    r##"{{"type":"RESPONDING_TO","msg_id":"m","started_at":{bad},"channel":"#g"}}"##
                )),
                "`started_at` must be an integer",
                "{bad}"
            );
        }
        assert!(
            e(r#"{"type":"RESPONDING_TO","msg_id":"m","started_at":1,"channel":"general"}"#)
                .starts_with("bad channel name `general` in field `channel`")
        );
        assert_eq!(
            e(r##"{"type":"MSG","to":"#g"}"##),
            "missing field `content`"
        );
        assert!(e(r##"{"type":"MSG","to":"g","content":""}"##).starts_with("bad channel name"));
        assert_eq!(
            e(r##"{"type":"MSG","to":"#g","content":"","in_reply_to":5}"##),
            "field `in_reply_to` must be a string"
        );
    }

    #[test]
    fn started_at_of_any_sign_decodes() {
        // The policy decides about 0 and negatives, not the decoder.
        for v in [-5_i64, 0, 7, i64::MAX, i64::MIN] {
            let s = format!(
                r##"{{"type":"RESPONDING_TO","msg_id":"m","started_at":{v},"channel":"#g"}}"##
            );
            assert_eq!(ClientMsg::decode_str(&s), Ok(claim("m", v, "#g")));
        }
    }

    /// Any JSON number decodes (the policy decides): integral values that
    /// fit an i64 are integers (`1e3`, `1000.0`, `-0.0`), others stay doubles
    /// and are written back as such.
    #[test]
    fn started_at_numbers_decode_as_stamps() {
        let dec = |v: &str| match ClientMsg::decode_str(&format!(
            r##"{{"type":"RESPONDING_TO","msg_id":"m","started_at":{v},"channel":"#g"}}"##
        )) {
            Ok(ClientMsg::RespondingTo { started_at, .. }) => Some(started_at),
            _ => None,
        };
        assert_eq!(dec("1e3"), Some(Stamp::Int(1000)));
        assert_eq!(dec("1000.0"), Some(Stamp::Int(1000)));
        assert_eq!(dec("-0.0"), Some(Stamp::Int(0)));
        assert_eq!(dec("1500.5"), Some(Stamp::Float(1500.5)));
        assert_eq!(
            dec("18446744073709551615"),
            Some(Stamp::Float(1.8446744073709552e19))
        );
        assert_eq!(dec("-1e20"), Some(Stamp::Float(-1e20)));
        let fc = ServerMsg::FloorClaimed {
            msg_id: "m".into(),
            channel: "#g".into(),
            holder: "a".into(),
            started_at: Stamp::Float(1500.5),
        };
        assert_eq!(
            fc.to_json_string(),
            r##"{"type":"FLOOR_CLAIMED","msg_id":"m","channel":"#g","holder":"a","started_at":1500.5}"##
        );
        assert_eq!(fc.to_json()["started_at"], serde_json::json!(1500.5));
        // Exact order: integers as integers, doubles between them.
        assert!(Stamp::Int(9_007_199_254_740_993) > Stamp::Int(9_007_199_254_740_992));
        assert!(Stamp::Int(1500) < Stamp::Float(1500.5));
        assert!(Stamp::Float(1500.5) < Stamp::Int(1501));
        assert!(Stamp::Int(i64::MAX) < Stamp::Float(9.3e18));
        assert_eq!(Stamp::Float(1500.5).to_string(), "1500.5");
    }

    #[test]
    fn long_bad_values_are_clipped_in_errors() {
        let long = "x".repeat(1000);
        let s = json!({"type": long}).to_string();
        let msg = ClientMsg::decode_str(&s)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.len() < 100, "{msg}");
        assert_eq!(clip("ééé"), "ééé");
    }

    #[test]
    fn server_messages_exact_json_and_roundtrip() {
        let cases = [
            (
                ServerMsg::RespondingTo {
                    msg_id: "m1".into(),
                    from: "agent-a".into(),
                    started_at: 5.into(),
                    channel: "#general".into(),
                },
                r##"{"type":"RESPONDING_TO","msg_id":"m1","from":"agent-a","started_at":5,"channel":"#general"}"##,
            ),
            (
                ServerMsg::Yield {
                    msg_id: "m1".into(),
                    winner: "agent-a".into(),
                    channel: "#general".into(),
                    detail: None,
                },
                r##"{"type":"YIELD","msg_id":"m1","winner":"agent-a","channel":"#general"}"##,
            ),
            (
                ServerMsg::Yield {
                    msg_id: "m1".into(),
                    winner: "agent-a".into(),
                    channel: "#general".into(),
                    detail: Some(YieldDetail {
                        holder_started_at: 5.into(),
                        reason: "Another agent claimed first".into(),
                    }),
                },
                r##"{"type":"YIELD","msg_id":"m1","channel":"#general","holder":"agent-a","holder_started_at":5,"reason":"Another agent claimed first"}"##,
            ),
            (
                ServerMsg::FloorClaimed {
                    msg_id: "m1".into(),
                    channel: "#general".into(),
                    holder: "agent-a".into(),
                    started_at: (-3).into(),
                },
                r##"{"type":"FLOOR_CLAIMED","msg_id":"m1","channel":"#general","holder":"agent-a","started_at":-3}"##,
            ),
            (
                ServerMsg::Msg {
                    id: "s1".into(),
                    from: "agent-a".into(),
                    to: "#general".into(),
                    content: "hi \"there\"".into(),
                    in_reply_to: Some("m1".into()),
                },
                r##"{"type":"MSG","id":"s1","from":"agent-a","to":"#general","content":"hi \"there\"","in_reply_to":"m1"}"##,
            ),
            (
                ServerMsg::Msg {
                    id: "s1".into(),
                    from: "operator".into(),
                    to: "@agent-a".into(),
                    content: "".into(),
                    in_reply_to: None,
                },
                r##"{"type":"MSG","id":"s1","from":"operator","to":"@agent-a","content":""}"##,
            ),
            (
                ServerMsg::Error {
                    code: "not_member".into(),
                    message: "x".into(),
                },
                r##"{"type":"ERROR","code":"not_member","message":"x"}"##,
            ),
        ];
        for (m, want) in cases {
            assert_eq!(m.to_json_string(), want);
            assert_eq!(m.to_string(), want);
            assert_eq!(ServerMsg::decode_str(want), Ok(m.clone()));
            assert_eq!(ServerMsg::from_value(&m.to_json()), Ok(m.clone()));
            assert_eq!(serde_json::to_value(&m).ok(), Some(m.to_json()));
        }
    }

    #[test]
    fn server_decode_errors() {
        let e = |s: &str| {
            ServerMsg::decode_str(s)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string())
        };
        assert_eq!(
            e(r##"{"type":"YIELD","msg_id":"m","channel":"#g"}"##),
            "missing field `winner`"
        );
        assert_eq!(
            e(r##"{"type":"YIELD","msg_id":"m","channel":"#g","holder":"a","reason":"r"}"##),
            "missing field `holder_started_at`"
        );
        assert!(
            e(r#"{"type":"YIELD","msg_id":"m","channel":"@g","winner":"a"}"#)
                .starts_with("bad channel name `@g`")
        );
        assert_eq!(
            e(
                r##"{"type":"RESPONDING_TO","msg_id":"m","from":"a b","started_at":1,"channel":"#g"}"##
            ),
            "bad agent id `a b` in field `from`"
        );
        assert_eq!(e(r#"{"type":"NOPE"}"#), "unknown type `NOPE`");
    }

    /// A bad channel's error names what was expected: a DM target too
    /// where one is allowed (a MSG's `to`), a channel only where not (a
    /// YIELD's `channel`).
    #[test]
    fn bad_channel_errors_say_whether_a_dm_is_allowed() {
        let client = ClientMsg::decode_str(r#"{"type":"MSG","to":"g","content":""}"#);
        assert_eq!(
            client.map_err(|e| e.to_string()),
            Err(
                "bad channel name `g` in field `to` (expected `#` followed by letters, \
                 digits, `_` or `-`, or `@agent` for a DM)"
                    .to_string()
            )
        );
        let server =
            ServerMsg::decode_str(r#"{"type":"YIELD","msg_id":"m","channel":"@g","winner":"a"}"#);
        assert_eq!(
            server.map_err(|e| e.to_string()),
            Err(
                "bad channel name `@g` in field `channel` (expected `#` followed by letters, \
                 digits, `_` or `-`)"
                    .to_string()
            )
        );
    }

    /// An optional id (`id`, `in_reply_to`) may be absent or `null`, but
    /// not empty.
    #[test]
    fn empty_optional_ids_are_refused() {
        for field in ["id", "in_reply_to"] {
            let s = format!(r##"{{"type":"MSG","to":"#g","content":"","{field}":""}}"##);
            assert_eq!(
                ClientMsg::decode_str(&s),
                Err(DecodeError::Empty(field)),
                "{field}"
            );
        }
        let relayed =
            r##"{"type":"MSG","id":"s1","from":"a","to":"#g","content":"","in_reply_to":""}"##;
        assert_eq!(
            ServerMsg::decode_str(relayed),
            Err(DecodeError::Empty("in_reply_to"))
        );
    }

    /// A stamp is an integer or not, and equal only to the same value
    /// (an integer and the double of the same value are one stamp).
    #[test]
    fn stamps_say_whether_they_are_integers_and_compare_by_value() {
        assert_eq!(Stamp::Int(7).as_i64(), Some(7));
        assert_eq!(Stamp::Int(-3).as_i64(), Some(-3));
        assert_eq!(Stamp::Float(1.5).as_i64(), None);
        assert_eq!(Stamp::from_f64(2.0).as_i64(), Some(2));
        assert_ne!(Stamp::Int(1), Stamp::Int(2));
        assert_ne!(Stamp::Int(1), Stamp::Float(1.5));
        assert_eq!(Stamp::Int(2), Stamp::Int(2));
        assert_eq!(Stamp::Float(2.5), Stamp::Float(2.5));
    }

    /// A client message prints as its wire form.
    #[test]
    fn a_client_message_displays_as_its_json() {
        let m = claim("m1", 5, "#general");
        let shown = m.to_string();
        assert_eq!(shown, m.to_json_string());
        assert_eq!(ClientMsg::decode_str(&shown), Ok(m));
    }
}
