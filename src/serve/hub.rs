//! The hub: the one task that owns the `floor::Server`. Inputs arrive in
//! one queue, so the floor sees them in one order, each stamped with the
//! server time at which the hub handles it; that order and those stamps
//! are what `--log` records.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use super::events;
use crate::floor::{Input, Outgoing, Role, Server, Stats};

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
        tx: mpsc::Sender<String>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// A client frame for the floor (already parsed JSON).
    Input { conn: ConnId, event: Value },
    /// The connection is gone.
    Gone { conn: ConnId },
}

/// What the hub hands back when it ends.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub stats: Stats,
    pub inputs: u64,
    pub log_error: Option<io::Error>,
}

#[derive(Debug)]
struct Session {
    conn: ConnId,
    role: Role,
    tx: mpsc::Sender<String>,
}

pub(crate) struct Hub {
    server: Server,
    shared: Arc<Shared>,
    log: Option<BufWriter<File>>,
    log_error: Option<io::Error>,
    /// agent id -> its connection.
    sessions: BTreeMap<String, Session>,
    /// connection -> agent id.
    ids: BTreeMap<ConnId, String>,
    sends: Vec<Outgoing>,
    inputs: u64,
}

impl Hub {
    pub fn new(server: Server, shared: Arc<Shared>, log: Option<BufWriter<File>>) -> Hub {
        Hub {
            server,
            shared,
            log,
            log_error: None,
            sessions: BTreeMap::new(),
            ids: BTreeMap::new(),
            sends: Vec::new(),
            inputs: 0,
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
                tokio::time::Instant::from_std(self.shared.start + Duration::from_millis(t))
            });
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(ev) => self.on_event(ev),
                    None => break,
                },
                () = sleep_until(timer), if timer.is_some() => {
                    let now = self.now_ms();
                    self.server.handle(now, Input::Tick, &mut self.sends);
                    self.route();
                }
            }
            if rx.is_empty() {
                self.flush();
            }
        }
        self.flush();
        Outcome {
            stats: self.server.stats().clone(),
            inputs: self.inputs,
            log_error: self.log_error,
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
                reply,
            } => {
                let answer = self.register(conn, id, role, keyed, tx);
                let _ = reply.send(answer);
            }
            Event::Input { conn, event } => {
                if let Some(id) = self.ids.get(&conn).cloned() {
                    let role = self.sessions.get(&id).map_or(Role::Agent, |s| s.role);
                    self.input(&id, role, &event);
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
        tx: mpsc::Sender<String>,
    ) -> Result<(), String> {
        if let Some(old) = self.sessions.get(&id) {
            if !keyed {
                return Err(format!("name `{id}` is in use"));
            }
            // A verified key takes its id over, as on agentchat: the old
            // connection is told, and ends as if it had disconnected.
            let (old_conn, old_role) = (old.conn, old.role);
            let _ = old.tx.try_send(
                json!({
                    "type": "SESSION_DISPLACED",
                    "reason": "Another connection verified this identity",
                })
                .to_string(),
            );
            self.sessions.remove(&id);
            self.ids.remove(&old_conn);
            self.input(&id, old_role, &events::disconnect_event());
        }
        self.ids.insert(conn, id.clone());
        self.sessions.insert(id, Session { conn, role, tx });
        Ok(())
    }

    /// Hand one input to the floor at the current server time, log it and
    /// route the sends (plus the session layer's JOINED / LEFT).
    fn input(&mut self, id: &str, role: Role, event: &Value) {
        let now = self.now_ms();
        self.inputs += 1;
        if let Some(log) = self.log.as_mut()
            && self.log_error.is_none()
            && let Err(e) = events::write_line(log, now, id, role, event)
        {
            self.log_error = Some(e);
        }
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

    /// Deliver the floor's sends; a recipient that is not connected is
    /// skipped.
    fn route(&mut self) {
        let sends = std::mem::take(&mut self.sends);
        for o in &sends {
            self.send_text(&o.to, o.msg.to_json_string());
        }
        self.sends = sends;
        self.sends.clear();
    }

    /// Queue `text` for `id`. A connection whose queue is full does not
    /// read: it is dropped (its task closes the socket when it sees its
    /// queue closed) and the floor is told it disconnected.
    fn send_text(&mut self, id: &str, text: String) {
        let full = match self.sessions.get(id) {
            Some(s) => match s.tx.try_send(text) {
                Ok(()) => false,
                Err(mpsc::error::TrySendError::Full(_)) => true,
                // The task is ending; its Gone event is on its way.
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
            None => false,
        };
        if full && let Some(s) = self.sessions.remove(id) {
            self.ids.remove(&s.conn);
            self.input(id, s.role, &events::disconnect_event());
        }
    }

    fn flush(&mut self) {
        if let Some(log) = self.log.as_mut()
            && self.log_error.is_none()
            && let Err(e) = log.flush()
        {
            self.log_error = Some(e);
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
