//! The server's edge: wire frames in, [`Input`]s out, and the texts of
//! the refusals of frames that do not decode.
//!
//! [`Server`](crate::Server) never sees JSON: a transport hands each frame
//! it reads to [`decode`] (or [`decode_bytes`]) and the [`Input`] that comes
//! back to [`Server::handle`](crate::Server::handle); each send it writes is
//! [`ServerMsg::to_json_string`](crate::ServerMsg::to_json_string). A frame
//! that does not decode is still an input ([`Input::Undecodable`], typed:
//! the [`DecodeError`] and whether it was meant as a claim), so the server
//! runs its timers and counts it as the protocol says, and answers with
//! the `ERROR` that [`refusal`] words: herdsim's `bad_message`, or under
//! `agentchat-0.36` agentchat's `INVALID_MSG` with its exact texts.
//!
//! The frames: the client messages of [`crate::wire`] (`RESPONDING_TO`,
//! `MSG`), `{"type":"JOIN","channel":"#c"}` and `{"type":"LEAVE",...}`, and
//! three a server produces itself rather than reads from a client (they are
//! lines of `herdsim serve --log`): `{"type":"DISCONNECT"}`,
//! `{"type":"CONNECT"}` (a connection that has not identified) and
//! `{"type":"IDENTIFY","lurk":bool}`.

use serde_json::Value;

use crate::policy::ErrorStyle;
use crate::server::{Input, Role};
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
