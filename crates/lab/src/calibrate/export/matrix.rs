//! Matrix room events (the client-server API's events,
//! <https://spec.matrix.org/latest/client-server-api/>), as the API's
//! `/messages` returns them (`chunk`) or Element exports them
//! (`messages`), or a plain array: each with `type`, `event_id`,
//! `sender`, `origin_server_ts` (ms) and `content`.
//!
//! `m.room.message` events are read. The message replied to: the
//! `m.relates_to`'s `m.in_reply_to` (a reply), else for a thread
//! (`rel_type` `m.thread`) its root `event_id`; a thread's fallback
//! `m.in_reply_to` (`is_falling_back`) gives way to the root. An edit
//! (`rel_type` `m.replace`) is left out (the message counts once, at its
//! first time); a redacted event (`unsigned.redacted_because`, or one an
//! `m.room.redaction` names) is deleted and left out; `m.room.member`
//! events are joins; `m.room.encrypted` events cannot be read (export
//! them decrypted) and are counted; any other event is left out. Matrix
//! has no bot flag: a sender of `m.notice` messages (the spec's type for
//! automated clients) is a bot, and so is any in `--bots`. A message
//! mentions the user ids of its `m.mentions` and of the pills
//! (`https://matrix.to/#/@user:server` links) in its `formatted_body`.

use super::Reading;
use super::raw::{Content, RawMsg};

/// An event of Matrix's into the reading.
pub(super) fn add(m: RawMsg, r: &mut Reading) -> Result<(), String> {
    let content = match m.content {
        Content::Matrix(c) => c,
        Content::Other | Content::Text(_) => Default::default(),
    };
    match m.kind.as_deref() {
        Some("m.room.message") => {}
        Some("m.room.member") => {
            r.counts.joins += 1;
            return Ok(());
        }
        Some("m.room.redaction") => {
            r.counts.system += 1;
            if let Some(x) = m.redacts.or(content.redacts) {
                r.redact(x);
            }
            return Ok(());
        }
        Some("m.room.encrypted") => {
            r.counts.encrypted += 1;
            return Ok(());
        }
        Some(_) => {
            r.counts.system += 1;
            return Ok(());
        }
        None => return Err("a Matrix event without a `type`".into()),
    }
    if m.unsigned.is_some_and(|u| u.redacted_because.is_some()) {
        r.counts.deleted += 1;
        return Ok(());
    }
    let rel = content.relates.unwrap_or_default();
    if rel.rel_type.as_deref() == Some("m.replace") {
        r.counts.edits += 1;
        return Ok(());
    }
    let id = m.event_id.ok_or("a Matrix event without an `event_id`")?;
    let sender = m.sender.ok_or("a Matrix event without a `sender`")?;
    let t = m
        .origin_server_ts
        .ok_or("a Matrix event without an `origin_server_ts`")?;
    if !(t.is_finite() && t.abs() < 1e15) {
        return Err(format!(
            "a Matrix event whose `origin_server_ts` {t} is not a time"
        ));
    }
    let t_us = (t * 1000.0).round() as i64;
    let reply = rel.in_reply_to.and_then(|x| x.event_id);
    let thread = (rel.rel_type.as_deref() == Some("m.thread"))
        .then_some(rel.event_id)
        .flatten();
    let parent = match (reply, thread) {
        (Some(_), Some(root)) if rel.is_falling_back == Some(true) => Some(root),
        (Some(x), _) => Some(x),
        (None, root) => root,
    }
    .filter(|p| *p != id);
    let notice = content.msgtype.as_deref() == Some("m.notice");
    // Who it mentions: `m.mentions`' user ids, and the pills (matrix.to
    // links) of its HTML body.
    let mut mentions = content.formatted_body.map(|b| b.0).unwrap_or_default();
    for x in content.mentions.into_iter().flat_map(|m| m.user_ids) {
        if mentions.len() < super::raw::MAX_MENTIONS && !mentions.contains(&x) {
            mentions.push(x);
        }
    }
    r.message(id, t_us, &sender, None, false, notice, parent, mentions)
}
