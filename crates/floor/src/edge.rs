//! The server's edge: wire frames in, [`Input`]s out, and the texts of
//! its refusals.
//!
//! [`Server`](crate::Server) never sees JSON: a transport hands each frame
//! it reads to [`decode`] (or [`decode_bytes`]) and the [`Input`] that comes
//! back to [`Server::handle`](crate::Server::handle); each send it writes is
//! [`ServerMsg::to_json_string`](crate::ServerMsg::to_json_string). A frame
//! that does not decode is still an input ([`Input::Undecodable`], typed:
//! the [`DecodeError`] and whether it was meant as a claim), so the server
//! runs its timers and counts it as the protocol says. Every refusal the
//! server decides is typed ([`Refusal`]) and worded here
//! ([`Refusal::render`]): herdsim's codes, or under `agentchat-0.36`
//! agentchat's codes and exact texts (a server that stands in for agentchat,
//! such as `herdsim serve`, depends on them byte for byte).
//!
//! The frames: the client messages of [`crate::wire`] (`RESPONDING_TO`,
//! `MSG`), `{"type":"JOIN","channel":"#c"}` and `{"type":"LEAVE",...}`, and
//! three a server produces itself rather than reads from a client (they are
//! lines of `herdsim serve --log`): `{"type":"DISCONNECT"}`,
//! `{"type":"CONNECT"}` (a connection that has not identified) and
//! `{"type":"IDENTIFY","lurk":bool}`.

use serde_json::Value;

use crate::input::{Input, Role};
use crate::policy::ErrorStyle;
use crate::wire::{ClientMsg, DecodeError};

/// The input a frame from `from` (in `role`) stands for. Never fails: a
/// frame that does not decode is [`Input::Undecodable`].
pub fn decode(from: &str, role: Role, frame: &Value) -> Input {
    let agent = from.to_string();
    let undecodable = |error, claim| Input::Undecodable {
        from: from.to_string(),
        error,
        claim,
    };
    let ty = frame.get("type").and_then(Value::as_str);
    let join = match ty {
        Some("JOIN") => true,
        Some("LEAVE") => false,
        Some("DISCONNECT") => return Input::Disconnect { agent },
        Some("CONNECT") => return Input::Connect { agent },
        Some("IDENTIFY") => {
            return match frame.get("lurk") {
                None | Some(Value::Null) => Input::Identify { agent, lurk: false },
                Some(Value::Bool(lurk)) => Input::Identify { agent, lurk: *lurk },
                Some(_) => undecodable(DecodeError::NotBool("lurk"), false),
            };
        }
        _ => {
            return match ClientMsg::from_value(frame) {
                Ok(msg) => Input::Client {
                    from: agent,
                    role,
                    msg,
                },
                Err(e) => undecodable(e, ty == Some("RESPONDING_TO")),
            };
        }
    };
    let channel = match frame.get("channel") {
        None | Some(Value::Null) => {
            return undecodable(DecodeError::MissingField("channel"), false);
        }
        Some(Value::String(c)) => c.clone(),
        Some(_) => return undecodable(DecodeError::NotString("channel"), false),
    };
    if join {
        Input::Join { agent, channel }
    } else {
        Input::Leave { agent, channel }
    }
}

/// [`decode`] for raw bytes (what a transport reads); bytes that are not
/// JSON are [`Input::Undecodable`] with [`DecodeError::NotJson`].
pub fn decode_bytes(from: &str, role: Role, bytes: &[u8]) -> Input {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => decode(from, role, &v),
        Err(e) => Input::Undecodable {
            from: from.to_string(),
            error: DecodeError::NotJson(e.to_string()),
            claim: false,
        },
    }
}

/// The `ERROR` (code, message) answering a frame that did not decode, in
/// the policy's error style. `claim`: the frame was a RESPONDING_TO, which
/// agentchat (`validateClientMessage`, `lib/protocol.ts`) refuses naming the
/// field; everything else is `bad_message` (agentchat: `INVALID_MSG`) with
/// the [`DecodeError`]'s text.
pub fn refusal(style: ErrorStyle, error: &DecodeError, claim: bool) -> (&'static str, String) {
    if claim && style == ErrorStyle::Agentchat {
        let field = match error {
            DecodeError::MissingField(f)
            | DecodeError::NotString(f)
            | DecodeError::Empty(f)
            | DecodeError::NotInteger(f)
            | DecodeError::BadChannel { field: f, .. } => Some(*f),
            _ => None,
        };
        let message = match field {
            Some("msg_id") => Some("Missing or invalid msg_id"),
            Some("channel") => Some("Missing or invalid channel"),
            Some("started_at") => Some("Missing or invalid started_at timestamp"),
            _ => None,
        };
        if let Some(message) = message {
            return ("INVALID_MSG", message.to_string());
        }
    }
    let code = match style {
        ErrorStyle::Protocol => "bad_message",
        ErrorStyle::Agentchat => "INVALID_MSG",
    };
    (code, error.to_string())
}

/// Why the server refused an input, typed: the core decides, and
/// [`Refusal::render`] words the `ERROR` it answers with (herdsim's codes,
/// or agentchat's codes and exact texts under `agentchat-0.36`). Names are
/// as the server shows them (long ones clipped).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// A frame that did not decode; `claim`: it was a RESPONDING_TO.
    Undecodable {
        /// Why.
        error: DecodeError,
        /// It was a RESPONDING_TO.
        claim: bool,
    },
    /// agentchat: a JOIN to an invalid channel name.
    InvalidChannelName,
    /// A JOIN to an invalid channel name.
    BadChannel {
        /// The name.
        channel: String,
    },
    /// agentchat: a claim's field is missing or invalid (`msg_id`,
    /// `channel`, `started_at`).
    InvalidClaimField(&'static str),
    /// The claim's `started_at` breaks the policy's rule, worded by
    /// [`StartedAtRule::check`](crate::sim::StartedAtRule::check).
    BadStartedAt {
        /// The code.
        code: &'static str,
        /// The message.
        reason: &'static str,
    },
    /// agentchat: a connection that has not identified.
    AuthRequired,
    /// agentchat: an identity in its lurk window sends.
    LurkMode,
    /// agentchat: over the MSG rate limit.
    RateLimited,
    /// agentchat: a DM.
    DirectMessage,
    /// agentchat: a MSG to a channel that does not exist.
    ChannelNotFound {
        /// The channel.
        channel: String,
    },
    /// The sender is not a member of the channel (agentchat:
    /// `NOT_INVITED`).
    NotMember {
        /// The channel.
        channel: String,
    },
    /// The claim guard: a claim for a message not relayed in the channel.
    NotRelayed {
        /// The message id.
        msg_id: String,
        /// The channel.
        channel: String,
    },
    /// The claim guard (`clock`): a claim dated more than `skew_ms`
    /// before its message reached the server (`relayed_at`, on the
    /// clients' clock).
    EarlyClaim {
        /// The claim's `started_at`.
        started_at: crate::wire::Stamp,
        /// The tolerance.
        skew_ms: u64,
        /// The message id.
        msg_id: String,
        /// When the message reached the server, on the clients' clock.
        relayed_at: i128,
    },
    /// The claim guard: a MSG id of the server's form (`s1`, `s2`, ...).
    ServerFormId {
        /// The id.
        id: String,
    },
}

impl Refusal {
    /// The `ERROR`'s code and message in `style`.
    pub fn render(&self, style: ErrorStyle) -> (&'static str, String) {
        let agentchat = style == ErrorStyle::Agentchat;
        let pick = |ours, theirs| if agentchat { theirs } else { ours };
        match self {
            Refusal::Undecodable { error, claim } => refusal(style, error, *claim),
            Refusal::InvalidChannelName => ("INVALID_MSG", "Invalid channel name".into()),
            Refusal::BadChannel { channel } => {
                ("bad_channel", format!("bad channel name `{channel}`"))
            }
            Refusal::InvalidClaimField(field) => {
                ("INVALID_MSG", format!("Missing or invalid {field}"))
            }
            Refusal::BadStartedAt { code, reason } => (code, reason.to_string()),
            Refusal::AuthRequired => ("AUTH_REQUIRED", "Must IDENTIFY first".into()),
            Refusal::LurkMode => (
                "LURK_MODE",
                "New identity: sending unlocks after the lurk window".into(),
            ),
            Refusal::RateLimited => (
                "RATE_LIMITED",
                "Rate limit exceeded (max 1 message per second)".into(),
            ),
            Refusal::DirectMessage => ("INVALID_MSG", "Direct messages are disabled".into()),
            Refusal::ChannelNotFound { channel } => {
                ("CHANNEL_NOT_FOUND", format!("Channel {channel} not found"))
            }
            Refusal::NotMember { channel } if agentchat => {
                ("NOT_INVITED", format!("Not a member of {channel}"))
            }
            Refusal::NotMember { channel } => ("not_member", format!("not a member of {channel}")),
            Refusal::NotRelayed { msg_id, channel } => (
                pick("not_relayed", "INVALID_MSG"),
                format!(
                    "no message `{msg_id}` was relayed in {channel} (a claim must follow the message)"
                ),
            ),
            Refusal::EarlyClaim {
                started_at,
                skew_ms,
                msg_id,
                relayed_at,
            } => (
                pick("bad_started_at", "INVALID_MSG"),
                format!(
                    "started_at {started_at} is more than {skew_ms} ms before message `{msg_id}` reached the server (at {relayed_at})"
                ),
            ),
            Refusal::ServerFormId { id } => (
                pick("id_taken", "INVALID_MSG"),
                format!(
                    "message id `{id}` has the form of the ids the server gives (s1, s2, ...); send another id, or none"
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_decode_to_inputs() {
        let d = |v: Value| decode("a", Role::Agent, &v);
        let (a, g) = (String::from("a"), String::from("#g"));
        assert_eq!(
            d(json!({"type": "JOIN", "channel": "#g"})),
            Input::Join {
                agent: a.clone(),
                channel: g.clone()
            }
        );
        assert_eq!(
            d(json!({"type": "LEAVE", "channel": "#g"})),
            Input::Leave {
                agent: a.clone(),
                channel: g
            }
        );
        assert_eq!(
            d(json!({"type": "IDENTIFY", "lurk": true})),
            Input::Identify {
                agent: a.clone(),
                lurk: true
            }
        );
        assert_eq!(
            d(json!({"type": "JOIN", "channel": 5})),
            Input::Undecodable {
                from: a.clone(),
                error: DecodeError::NotString("channel"),
                claim: false
            }
        );
        let claim = d(json!({"type": "RESPONDING_TO", "channel": "#g", "started_at": 1}));
        assert_eq!(
            claim,
            Input::Undecodable {
                from: a.clone(),
                error: DecodeError::MissingField("msg_id"),
                claim: true
            }
        );
        let bytes = decode_bytes("a", Role::Agent, b"{not json");
        assert!(matches!(
            bytes,
            Input::Undecodable {
                error: DecodeError::NotJson(_),
                claim: false,
                ..
            }
        ));
    }

    /// The edge words refusals in the policy's style: agentchat's exact
    /// texts under `agentchat-0.36`, herdsim's codes otherwise.
    #[test]
    fn refusals_render_in_the_policys_style() {
        let (ours, theirs) = (ErrorStyle::Protocol, ErrorStyle::Agentchat);
        let field = Refusal::Undecodable {
            error: DecodeError::MissingField("started_at"),
            claim: true,
        };
        assert_eq!(
            field.render(theirs),
            (
                "INVALID_MSG",
                "Missing or invalid started_at timestamp".to_string()
            )
        );
        assert_eq!(
            field.render(ours),
            ("bad_message", "missing field `started_at`".to_string())
        );
        let member = Refusal::NotMember {
            channel: "#g".into(),
        };
        assert_eq!(
            member.render(theirs),
            ("NOT_INVITED", "Not a member of #g".to_string())
        );
        assert_eq!(
            member.render(ours),
            ("not_member", "not a member of #g".to_string())
        );
        assert_eq!(
            Refusal::RateLimited.render(theirs),
            (
                "RATE_LIMITED",
                "Rate limit exceeded (max 1 message per second)".to_string()
            )
        );
        let taken = Refusal::ServerFormId { id: "s1".into() };
        assert_eq!(taken.render(ours).0, "id_taken");
        assert_eq!(taken.render(theirs).0, "INVALID_MSG");
    }
}
