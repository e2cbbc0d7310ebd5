//! Wire protocol types. JSON exactly as in `responding-to.md` / MODEL.md.
//!
//! TODO(helper): serde encoding/decoding with precise errors.

/// A message an agent (or the operator) sends to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMsg {
    /// `{"type":"RESPONDING_TO","msg_id":..,"started_at":..,"channel":..}`
    RespondingTo {
        msg_id: String,
        started_at: i64,
        channel: String,
    },
    /// `{"type":"MSG","to":"#general"|"@agent-b","content":..,"in_reply_to":..,"id":..}`
    /// `id` is optional: the server assigns one when it is missing.
    Msg {
        id: Option<String>,
        to: String,
        content: String,
        in_reply_to: Option<String>,
    },
}

/// A message the server sends to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// Relayed claim: `{"type":"RESPONDING_TO","msg_id","from","started_at","channel"}`.
    RespondingTo {
        msg_id: String,
        from: String,
        started_at: i64,
        channel: String,
    },
    /// `{"type":"YIELD","msg_id","winner","channel"}` (spec form). The
    /// `agentchat-0.36` form names the field `holder` and adds
    /// `holder_started_at` and `reason`; those are carried in `detail`.
    Yield {
        msg_id: String,
        winner: String,
        channel: String,
        detail: Option<YieldDetail>,
    },
    /// `agentchat-0.36` only: `{"type":"FLOOR_CLAIMED","msg_id","channel","holder","started_at"}`.
    FloorClaimed {
        msg_id: String,
        channel: String,
        holder: String,
        started_at: i64,
    },
    /// Relayed MSG: `{"type":"MSG","id","from","to","content","in_reply_to"}`.
    Msg {
        id: String,
        from: String,
        to: String,
        content: String,
        in_reply_to: Option<String>,
    },
    /// `{"type":"ERROR","code":..,"message":..}`
    Error { code: String, message: String },
}

/// Extra YIELD fields of the `agentchat-0.36` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YieldDetail {
    pub holder_started_at: i64,
    pub reason: String,
}
