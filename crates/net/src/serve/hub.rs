//! The hub: the one task that owns the `floor::Server`. Inputs arrive in
//! one queue, so the floor sees them in one order, each stamped with the
//! server time at which the hub handles it; that order and those stamps
//! are what `--log` records.
//!
//! Before an input reaches the floor (and the log), the hub applies the
//! session layer's per-connection bounds that need the floor's state
//! (channels and claims per connection, channels in all, the claim guard);
//! an input refused there gets an ERROR and is not logged, like a frame
//! over the rate limit. It also bounds what it queues for each connection
//! (messages and bytes) and, over the whole-server memory ceiling, drops
//! the connection that holds the most.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use super::budget::{Inbound, Payload, Queued, Usage};
use crate::floor::{ClientMsg, Input, Millis, Role, Sends, Server, Stats};
use crate::replay::events;
use crate::term::note;

/// Connection number, unique for the life of the server.
pub(crate) type ConnId = u64;

/// What a connection task tells the hub.
#[derive(Debug)]
pub(crate) enum Event {
    /// The connection identified as `id`. The reply says whether the id is
    /// granted; `keyed` ids displace a connection that holds the same id,
    /// key-less ones are refused when the id is in use.
    Register {
        conn: ConnId,
        id: String,
        role: Role,
        keyed: bool,
        tx: mpsc::Sender<Queued>,
        usage: Arc<Usage>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// A client frame for the floor (already parsed JSON), counted until
    /// handled.
    Input {
        conn: ConnId,
        event: Value,
        _inbound: Inbound,
    },
    /// The connection is gone.
    Gone { conn: ConnId },
}

/// Why `--log` stopped early.
#[derive(Debug)]
pub(crate) enum LogStop {
    /// A write failed.
    Error(io::Error),
    /// The next line would have passed `Limits::log_max_bytes`.
    Full { at_ms: u64 },
}

/// What the hub hands back when it ends.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub stats: Stats,
    pub inputs: u64,
    pub log_stop: Option<LogStop>,
    /// Connections dropped because they did not read (queue full).
    pub slow: u64,
    /// Connections dropped by the memory ceiling.
    pub shed: u64,
    /// Inputs refused by the hub's bounds (not logged).
    pub refused_inputs: u64,
}

#[derive(Debug)]
struct Session {
    conn: ConnId,
    role: Role,
    tx: mpsc::Sender<Queued>,
    usage: Arc<Usage>,
}

pub(crate) struct Hub {
    server: Server,
    shared: Arc<Shared>,
    log: Option<BufWriter<File>>,
    log_bytes: u64,
    log_stop: Option<LogStop>,
    line: Vec<u8>,
    /// agent id -> its connection.
    sessions: BTreeMap<String, Session>,
    /// connection -> agent id.
    ids: BTreeMap<ConnId, String>,
    sends: Sends,
    /// Each payload of `sends` encoded, once.
    encoded: Vec<Option<Arc<Payload>>>,
    inputs: u64,
    /// Connections dropped by the ceiling whose memory is not freed yet.
    shedding: Vec<Arc<Usage>>,
    slow: u64,
    shed: u64,
    refused_inputs: u64,
}

/// An ERROR frame of the session layer.
pub(crate) fn error_text(code: &str, message: &str) -> String {
    json!({"type": "ERROR", "code": code, "message": message}).to_string()
}

impl Hub {
    pub fn new(server: Server, shared: Arc<Shared>, log: Option<BufWriter<File>>) -> Hub {
        Hub {
            server,
            shared,
            log,
            log_bytes: 0,
            log_stop: None,
            line: Vec::new(),
            sessions: BTreeMap::new(),
            ids: BTreeMap::new(),
            sends: Sends::new(),
            encoded: Vec::new(),
            inputs: 0,
            shedding: Vec::new(),
            slow: 0,
            shed: 0,
            refused_inputs: 0,
        }
    }

    /// Server time: ms since start (monotonic).
    fn now_ms(&self) -> u64 {
        u64::try_from(self.shared.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Run until every sender of `rx` is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Event>) -> Outcome {
        loop {
            let timer = self.server.poll_timeout().map(|t| {
                tokio::time::Instant::from_std(self.shared.start + Duration::from_millis(t.as_ms()))
            });
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                () = sleep_until(timer), if timer.is_some() => {
                    let now = self.now_ms();
                    self.server.handle(Millis(now), Input::Tick, &mut self.sends);
                    self.route();
                }
            }
            self.enforce_ceiling();
            if rx.is_empty() {
                self.flush();
            }
        }
        self.flush();
        Outcome {
            stats: self.server.stats().clone(),
            inputs: self.inputs,
            log_stop: self.log_stop,
            slow: self.slow,
            shed: self.shed,
            refused_inputs: self.refused_inputs,
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Register {
                conn,
                id,
                role,
                keyed,
                tx,
                usage,
                reply,
            } => {
                let answer = self.register(conn, id, role, keyed, tx, usage);
                let _ = reply.send(answer);
            }
            Event::Input { conn, event, .. } => {
                if let Some(id) = self.ids.get(&conn).cloned() {
                    let role = self.sessions.get(&id).map_or(Role::Agent, |s| s.role);
                    self.client_input(&id, role, &event);
                }
            }
            Event::Gone { conn } => {
                if let Some(id) = self.ids.remove(&conn)
                    && let Some(s) = self.sessions.remove(&id)
                {
                    self.input(&id, s.role, &events::disconnect_event());
                }
            }
        }
    }

    fn register(
        &mut self,
        conn: ConnId,
        id: String,
        role: Role,
        keyed: bool,
        tx: mpsc::Sender<Queued>,
        usage: Arc<Usage>,
    ) -> Result<(), String> {
        if let Some(old) = self.sessions.get(&id) {
            if !keyed {
                return Err(format!("name `{id}` is in use"));
            }
            // A verified key takes its id over, as on agentchat: the old
            // connection is told, and ends as if it had disconnected.
            let (old_conn, old_role) = (old.conn, old.role);
            let text = json!({
                "type": "SESSION_DISPLACED",
                "reason": "Another connection verified this identity",
            })
            .to_string();
            let _ = old.tx.try_send(Queued::new(
                Payload::new(text, &self.shared.meter),
                &old.usage,
            ));
            self.sessions.remove(&id);
            self.ids.remove(&old_conn);
            self.input(&id, old_role, &events::disconnect_event());
        }
        self.ids.insert(conn, id.clone());
        self.sessions.insert(
            id,
            Session {
                conn,
                role,
                tx,
                usage,
            },
        );
        Ok(())
    }

    /// A client frame: the hub's bounds first, then the floor.
    fn client_input(&mut self, id: &str, role: Role, event: &Value) {
        let now = self.now_ms();
        if let Some((code, message)) = self.refusal(now, id, role, event) {
            self.refused_inputs += 1;
            self.send_text(id, error_text(code, &message));
            return;
        }
        self.input(id, role, event);
    }

    /// Why the hub refuses `event` from `id` before the floor sees it, if
    /// it does: the channel and claim bounds and the claim guard (its
    /// claims, and its ids of MSGs).
    fn refusal(
        &self,
        now: u64,
        id: &str,
        role: Role,
        event: &Value,
    ) -> Option<(&'static str, String)> {
        let limits = &self.shared.limits;
        match event.get("type").and_then(Value::as_str) {
            Some("JOIN") => {
                let channel = event.get("channel").and_then(Value::as_str)?;
                if self.server.is_member(id, channel) {
                    return None;
                }
                if self.server.channels_of(id) >= limits.max_channels_per_conn {
                    let m = format!(
                        "a connection may be in at most {} channels (--max-channels-per-connection)",
                        limits.max_channels_per_conn
                    );
                    return Some(("TOO_MANY_CHANNELS", m));
                }
                if !self.server.channel_exists(channel)
                    && self.server.channel_count() >= limits.max_channels
                {
                    let m = format!(
                        "the server has {} channels, its limit (--max-channels)",
                        limits.max_channels
                    );
                    return Some(("TOO_MANY_CHANNELS", m));
                }
                None
            }
            // The claim guard's rule for ids: a MSG under an id of the
            // server's form, or one remembered as another sender's.
            Some("MSG") => {
                let to = event.get("to").and_then(Value::as_str)?;
                let msg_id = event.get("id").and_then(Value::as_str)?;
                let refusal = self.server.msg_guard_refusal(id, to, msg_id)?;
                Some(self.server.render(&refusal))
            }
            Some("RESPONDING_TO") => {
                let Ok(ClientMsg::RespondingTo {
                    msg_id,
                    started_at,
                    channel,
                }) = ClientMsg::from_value(event)
                else {
                    return None;
                };
                if let Some(refusal) = self.server.claim_guard_refusal(
                    Millis(now),
                    role,
                    &channel,
                    &msg_id,
                    started_at,
                ) {
                    return Some(self.server.render(&refusal));
                }
                let holds = self
                    .server
                    .holder(&channel, &msg_id)
                    .is_some_and(|(h, _)| h == id);
                if !holds && self.server.claims_held(id) >= limits.max_claims_per_conn {
                    let m = format!(
                        "a connection may hold at most {} claims (--max-claims-per-connection)",
                        limits.max_claims_per_conn
                    );
                    return Some(("TOO_MANY_CLAIMS", m));
                }
                None
            }
            _ => None,
        }
    }

    /// Hand one input to the floor at the current server time, log it and
    /// route the sends (plus the session layer's JOINED / LEFT).
    fn input(&mut self, id: &str, role: Role, event: &Value) {
        let now = self.now_ms();
        self.inputs += 1;
        self.log_line(now, id, role, event);
        events::apply(&mut self.server, now, id, role, event, &mut self.sends);
        self.route();
        // JOINED / LEFT: agentchat's confirmations, not floor sends. JOINED
        // only when the floor made the agent a member.
        let ty = event.get("type").and_then(Value::as_str);
        let channel = event.get("channel").and_then(Value::as_str);
        let confirm = match (ty, channel) {
            (Some("JOIN"), Some(c)) if self.server.is_member(id, c) => {
                let agents: Vec<String> = self.server.members(c).map(|m| format!("@{m}")).collect();
                Some(json!({"type": "JOINED", "channel": c, "agents": agents}))
            }
            (Some("LEAVE"), Some(c)) => Some(json!({"type": "LEFT", "channel": c})),
            _ => None,
        };
        if let Some(msg) = confirm {
            self.send_text(id, msg.to_string());
        }
    }

    /// Write one input to `--log`, unless logging stopped; stop it (and
    /// say so on stderr) when the line would pass the size limit.
    fn log_line(&mut self, now: u64, id: &str, role: Role, event: &Value) {
        let Some(log) = self.log.as_mut() else {
            return;
        };
        if self.log_stop.is_some() {
            return;
        }
        self.line.clear();
        if let Err(e) = events::write_line(&mut self.line, now, id, role, event) {
            self.log_stop = Some(LogStop::Error(e));
            return;
        }
        let len = self.line.len() as u64;
        let limit = self.shared.limits.log_max_bytes;
        if self.log_bytes.saturating_add(len) > limit {
            note(format_args!(
                "herdsim serve: --log reached its limit of {limit} bytes (--log-max-bytes) at server time {now} ms; logging stopped there (the file holds every input before that time and replays through `herdsim arbitrate`)"
            ));
            self.log_stop = Some(LogStop::Full { at_ms: now });
            return;
        }
        match log.write_all(&self.line) {
            Ok(()) => self.log_bytes += len,
            Err(e) => self.log_stop = Some(LogStop::Error(e)),
        }
    }

    /// Deliver the floor's sends: each payload encoded once, however many
    /// recipients share it; a recipient that is not connected is skipped.
    fn route(&mut self) {
        let mut sends = std::mem::take(&mut self.sends);
        let mut encoded = std::mem::take(&mut self.encoded);
        encoded.clear();
        encoded.resize(sends.payloads().len(), None);
        for &(ref to, i) in sends.sends() {
            let (Some(msg), Some(slot)) = (
                sends.payloads().get(i as usize),
                encoded.get_mut(i as usize),
            ) else {
                continue;
            };
            let payload =
                slot.get_or_insert_with(|| Payload::new(msg.to_json_string(), &self.shared.meter));
            let payload = Arc::clone(payload);
            self.send_payload(to, payload);
        }
        encoded.clear();
        sends.clear();
        self.encoded = encoded;
        self.sends = sends;
    }

    fn send_text(&mut self, id: &str, text: String) {
        let payload = Payload::new(text, &self.shared.meter);
        self.send_payload(id, payload);
    }

    /// Queue `payload` for `id`. A connection whose queue is full (in
    /// messages or in bytes) does not read: it is dropped and the floor is
    /// told it disconnected.
    fn send_payload(&mut self, id: &str, payload: Arc<Payload>) {
        let max = self.shared.limits.max_queued_bytes;
        let full = match self.sessions.get(id) {
            Some(s) if s.usage.queued().saturating_add(payload.len()) > max => true,
            Some(s) => match s.tx.try_send(Queued::new(payload, &s.usage)) {
                Ok(()) => false,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                // The task is ending; its Gone event is on its way.
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
            None => false,
        };
        if full {
            self.slow += 1;
            self.drop_session(id);
        }
    }

    /// Drop `id`'s connection: its task closes the socket at once, and the
    /// floor sees it disconnect.
    fn drop_session(&mut self, id: &str) -> Option<Arc<Usage>> {
        let s = self.sessions.remove(id)?;
        self.ids.remove(&s.conn);
        s.usage.drop_connection();
        self.input(id, s.role, &events::disconnect_event());
        Some(s.usage)
    }

    /// Over the whole-server ceiling, drop the connection holding the most
    /// memory, then the next, until what is left (counting what dropped
    /// connections are about to free) is under it.
    fn enforce_ceiling(&mut self) {
        let ceiling = self.shared.limits.max_memory_bytes;
        self.shedding.retain(|u| u.total() > 0);
        loop {
            let freeing: usize = self.shedding.iter().map(|u| u.total()).sum();
            if self.shared.meter.get().saturating_sub(freeing) <= ceiling {
                return;
            }
            let heaviest = self
                .sessions
                .iter()
                .filter(|(_, s)| s.usage.total() > 0)
                .max_by_key(|(_, s)| s.usage.total())
                .map(|(id, _)| id.clone());
            let Some(id) = heaviest else {
                return;
            };
            let bytes = self.sessions.get(&id).map_or(0, |s| s.usage.total());
            note(format_args!(
                "herdsim serve: memory ceiling of {ceiling} bytes (--max-memory-mb) reached; dropping `{id}`, which holds {bytes} bytes"
            ));
            self.shed += 1;
            if let Some(usage) = self.drop_session(&id) {
                self.shedding.push(usage);
            }
        }
    }

    fn flush(&mut self) {
        if let Some(log) = self.log.as_mut()
            && !matches!(self.log_stop, Some(LogStop::Error(_)))
            && let Err(e) = log.flush()
        {
            self.log_stop = Some(LogStop::Error(e));
        }
    }
}

/// Sleep until `t` (never resolves for `None`; the select guard keeps it
/// from being polled then anyway).
async fn sleep_until(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
