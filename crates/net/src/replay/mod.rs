//! Replay a recorded server log through [`crate::floor`]: the library side
//! of `herdsim arbitrate`, for anyone who embeds `floor` in a server and
//! wants to re-run what it recorded (`herdsim serve --log` writes this
//! format) under any policy.
//!
//! Input line: `{"at_ms": N, "agent": "id", "event": {...}, "role": "operator"?}`
//! where `event` is a client message of the wire protocol (RESPONDING_TO,
//! MSG), or `{"type":"JOIN","channel":"#c"}`, `{"type":"LEAVE","channel":"#c"}`,
//! `{"type":"DISCONNECT"}`, `{"type":"CONNECT"}` (a connection that has not
//! identified yet; agents never seen before count as identified) or
//! `{"type":"IDENTIFY","lurk":false}` (`lurk: true`: a new identity in
//! agentchat's lurk window); CONNECT and IDENTIFY matter only under
//! `agentchat-0.36`. The events are applied by [`events`] (which `serve` uses too),
//! for both the live server and this replay. Output line:
//! `{"at_ms": N, "to": "id", "msg": {...}}`, one per message the server
//! sends, in order.
//!
//! - A line that cannot be used (not JSON, not an object, `at_ms` missing or
//!   not a non-negative integer or smaller than the previous line's, `agent`
//!   missing or not an agent id, `event` missing, `role` neither `agent` nor
//!   `operator`) is reported on `err` as `line K: <reason>` and skipped.
//!   Blank lines are skipped silently.
//! - A usable line whose `event` is not a valid message is answered by the
//!   server with an `ERROR` to the sender, as a live server would.
//! - Between lines, the server's timers (expiry, `agentchat-0.36` sweeps)
//!   run at their due times, exactly as in the simulator.

pub mod events;

use std::io::{self, BufRead, Read, Write};

use serde::Serialize;
use serde_json::Value;

use crate::floor::address::is_agent_id;
use crate::floor::{Config, Input, Role, Sends, Server, ServerMsg, Stats};

/// What a replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Lines reported on `err` and skipped.
    pub bad_lines: u64,
    /// The server's counters at the end.
    pub stats: Stats,
}

impl Summary {
    /// The counters as one JSON line (`herdsim arbitrate --stats`).
    pub fn stats_line(&self) -> String {
        #[derive(Serialize)]
        struct Line {
            lines: u64,
            bad_lines: u64,
            claims_received: u64,
            yields: u64,
            expired: u64,
            overruled: u64,
            relayed: u64,
        }
        let s = &self.stats;
        let line = Line {
            lines: self.lines,
            bad_lines: self.bad_lines,
            claims_received: s.claims_received,
            yields: s.yields,
            expired: s.expired,
            overruled: s.overruled,
            relayed: s.relayed,
        };
        // Plain integers: serialising cannot fail.
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// Longest input line [`replay`] reads by default, in bytes (64 MiB: a
/// `serve --log` line holds one frame, at most `--max-frame-bytes`, 1 MiB
/// by default, which JSON escaping can grow up to six times).
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// Replay `input` through a server built from `cfg`, writing output lines
/// to `out` and bad-line reports to `err`. Only I/O errors are errors. A
/// line longer than [`MAX_LINE_BYTES`] ends the replay (see
/// [`replay_bounded`]).
pub fn replay<R: BufRead, W: Write, E: Write>(
    cfg: Config,
    input: R,
    out: &mut W,
    err: &mut E,
) -> io::Result<Summary> {
    replay_bounded(cfg, input, out, err, MAX_LINE_BYTES)
}

/// [`replay`] with lines of at most `max_line` bytes (newline excluded).
/// A longer line is reported as a bad line naming it, and the replay
/// stops there: nothing longer is ever held in memory, and an endless
/// input without newlines (`< /dev/zero`) ends.
pub fn replay_bounded<R: BufRead, W: Write, E: Write>(
    cfg: Config,
    mut input: R,
    out: &mut W,
    err: &mut E,
    max_line: u64,
) -> io::Result<Summary> {
    let mut server = Server::new(cfg);
    let mut buf = Vec::new();
    let mut sends = Sends::new();
    let mut lines = 0u64;
    let mut bad_lines = 0u64;
    let mut last_at: Option<u64> = None;
    loop {
        buf.clear();
        let read = (&mut input)
            .take(max_line.saturating_add(1))
            .read_until(b'\n', &mut buf)?;
        if read == 0 {
            break;
        }
        lines += 1;
        let content = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if content.len() as u64 > max_line {
            bad_lines += 1;
            writeln!(
                err,
                "line {lines}: longer than {max_line} bytes (--max-line-bytes): not a line of a \
                 server log; stopped reading here"
            )?;
            break;
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line = match parse_line(&buf) {
            Ok(line) => line,
            Err(reason) => {
                bad_lines += 1;
                writeln!(err, "line {lines}: {reason}")?;
                continue;
            }
        };
        if let Some(prev) = last_at
            && line.at_ms < prev
        {
            bad_lines += 1;
            writeln!(
                err,
                "line {lines}: `at_ms` {} is before the previous line's {prev} (lines must come in non-decreasing `at_ms`)",
                line.at_ms
            )?;
            continue;
        }
        last_at = Some(line.at_ms);
        // Timers due strictly before this line (those due at `at_ms` run
        // inside `handle`). Each Tick removes at least one entry, so this ends.
        while let Some(t) = server.poll_timeout() {
            if t.as_ms() >= line.at_ms {
                break;
            }
            server.handle(t, Input::Tick, &mut sends);
        }
        sends.clear();
        dispatch(&mut server, line, &mut sends);
        for (to, msg) in sends.iter() {
            write_line(out, last_at.unwrap_or(0), to, msg)?;
        }
    }
    Ok(Summary {
        lines,
        bad_lines,
        stats: server.stats().clone(),
    })
}

/// One usable input line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub at_ms: u64,
    pub agent: String,
    pub role: Role,
    pub event: Value,
}

/// Parse one input line (without its newline). `Err` is the reason shown
/// on stderr. Never panics.
pub fn parse_line(bytes: &[u8]) -> Result<Line, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut m) = v else {
        return Err("a line must be a JSON object".into());
    };
    let at_ms = match m.get("at_ms") {
        None | Some(Value::Null) => return Err("missing field `at_ms`".into()),
        Some(v) => v
            .as_u64()
            .ok_or("`at_ms` must be a non-negative integer (ms)")?,
    };
    let agent = match m.get("agent") {
        None | Some(Value::Null) => return Err("missing field `agent`".into()),
        Some(Value::String(s)) if is_agent_id(s) => s.clone(),
        Some(Value::String(_)) => {
            return Err(
                "`agent` must be an agent id (non-empty, no spaces, not starting with `#` or `@`)"
                    .into(),
            );
        }
        Some(_) => return Err("field `agent` must be a string".into()),
    };
    let role = match m.get("role") {
        None | Some(Value::Null) => Role::Agent,
        Some(Value::String(s)) if s == "agent" => Role::Agent,
        Some(Value::String(s)) if s == "operator" => Role::Operator,
        Some(_) => return Err("`role` must be \"agent\" or \"operator\"".into()),
    };
    // `"event": null` is a client frame like any other (a client may send
    // the JSON text `null`; the server answers it with an ERROR), so only
    // a missing key is an error.
    let event = match m.remove("event") {
        None => return Err("missing field `event`".into()),
        Some(e) => e,
    };
    Ok(Line {
        at_ms,
        agent,
        role,
        event,
    })
}

/// Feed one line to the server (the same code path `herdsim serve` uses).
fn dispatch(server: &mut Server, line: Line, sends: &mut Sends) {
    events::apply(
        server,
        line.at_ms,
        &line.agent,
        line.role,
        &line.event,
        sends,
    );
}

#[derive(Serialize)]
struct OutLine<'a> {
    at_ms: u64,
    to: &'a str,
    msg: &'a ServerMsg,
}

fn write_line<W: Write>(out: &mut W, at_ms: u64, to: &str, msg: &ServerMsg) -> io::Result<()> {
    let line = OutLine { at_ms, to, msg };
    serde_json::to_writer(&mut *out, &line).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::PolicyKind;

    fn replay_str(policy: PolicyKind, input: &str) -> (String, String, Summary) {
        let mut cfg = Config::for_policy(policy);
        cfg.claim_guard = crate::floor::ClaimGuard::Off;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let s = replay(cfg, input.as_bytes(), &mut out, &mut err);
        let s = s.unwrap_or(Summary {
            lines: 0,
            bad_lines: u64::MAX,
            stats: Stats::default(),
        });
        (
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
            s,
        )
    }

    #[test]
    fn parse_line_reasons() {
        let e = |s: &str| parse_line(s.as_bytes()).err().unwrap_or_default();
        assert!(e("x").starts_with("not JSON"));
        assert_eq!(e("[]"), "a line must be a JSON object");
        assert_eq!(e(r#"{"agent":"a","event":{}}"#), "missing field `at_ms`");
        assert_eq!(
            e(r#"{"at_ms":-1,"agent":"a","event":{}}"#),
            "`at_ms` must be a non-negative integer (ms)"
        );
        assert_eq!(e(r#"{"at_ms":1,"event":{}}"#), "missing field `agent`");
        assert_eq!(
            e(r#"{"at_ms":1,"agent":5,"event":{}}"#),
            "field `agent` must be a string"
        );
        assert!(
            e(r#"{"at_ms":1,"agent":"a b","event":{}}"#).starts_with("`agent` must be an agent id")
        );
        assert_eq!(e(r#"{"at_ms":1,"agent":"a"}"#), "missing field `event`");
        assert_eq!(
            e(r#"{"at_ms":1,"agent":"a","event":{},"role":"boss"}"#),
            "`role` must be \"agent\" or \"operator\""
        );
        let ok = parse_line(
            br#"{"at_ms":1,"agent":"a","event":{"type":"DISCONNECT"},"role":"operator"}"#,
        );
        assert_eq!(ok.map(|l| (l.at_ms, l.role)), Ok((1, Role::Operator)));
    }

    #[test]
    fn replay_relays_and_reports_bad_lines() {
        let input = concat!(
            r##"{"at_ms":0,"agent":"a","event":{"type":"JOIN","channel":"#g"}}"##,
            "\n",
            r##"{"at_ms":0,"agent":"b","event":{"type":"JOIN","channel":"#g"}}"##,
            "\n",
            "\n",
            "garbage\n",
            r##"{"at_ms":10,"agent":"a","event":{"type":"RESPONDING_TO","msg_id":"m","started_at":5,"channel":"#g"}}"##,
            "\n",
            r##"{"at_ms":5,"agent":"a","event":{"type":"DISCONNECT"}}"##,
            "\n",
            r##"{"at_ms":11,"agent":"b","event":{"type":"RESPONDING_TO","msg_id":"m","started_at":6,"channel":"#g"}}"##,
            "\n",
            r##"{"at_ms":12,"agent":"b","event":{"type":"JOIN"}}"##,
            "\n",
        );
        let (out, err, s) = replay_str(PolicyKind::Spec, input);
        assert_eq!(
            out,
            concat!(
                r##"{"at_ms":10,"to":"b","msg":{"type":"RESPONDING_TO","msg_id":"m","from":"a","started_at":5,"channel":"#g"}}"##,
                "\n",
                r##"{"at_ms":11,"to":"a","msg":{"type":"RESPONDING_TO","msg_id":"m","from":"b","started_at":6,"channel":"#g"}}"##,
                "\n",
                r##"{"at_ms":11,"to":"b","msg":{"type":"YIELD","msg_id":"m","winner":"a","channel":"#g"}}"##,
                "\n",
                r##"{"at_ms":12,"to":"b","msg":{"type":"ERROR","code":"bad_message","message":"missing field `channel`"}}"##,
                "\n",
            )
        );
        assert!(err.starts_with("line 4: not JSON"), "{err}");
        assert!(
            err.contains("line 6: `at_ms` 5 is before the previous line's 10"),
            "{err}"
        );
        assert_eq!((s.lines, s.bad_lines), (8, 2));
    }

    #[test]
    fn timers_run_between_lines() {
        // agentchat-0.36, TTL 45000: the claim at 1000 expires at 46000 and
        // is swept at 50000; a Tick per due time runs between lines.
        let input = concat!(
            r##"{"at_ms":0,"agent":"a","event":{"type":"JOIN","channel":"#g"}}"##,
            "\n",
            r##"{"at_ms":1000,"agent":"a","event":{"type":"RESPONDING_TO","msg_id":"m","started_at":5,"channel":"#g"}}"##,
            "\n",
            r##"{"at_ms":90000,"agent":"a","event":{"type":"DISCONNECT"}}"##,
            "\n",
        );
        let (_, _, s) = replay_str(PolicyKind::Agentchat036, input);
        assert_eq!(s.stats.expired, 1);
    }
}
