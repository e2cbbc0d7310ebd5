//! One live replication: the scenario's agents, each an
//! [`crate::agent::Agent`] actor on its own WebSocket connection, and the
//! operator posting the [`crate::agent::Workload`], driven by real timers
//! at `speed` times real time.
//!
//! Two threads. The driver thread (the caller's) owns every actor, the
//! timer queue and the observations, and waits for the next frame or the
//! next timer with a precise timeout (`recv_timeout`, not the 1 ms wheel of
//! the async runtime: at `--speed 100` a millisecond of real time is 100 ms
//! of scenario time). The I/O thread runs a tokio runtime with one reader
//! and one writer task per connection (and the embedded server): readers
//! forward frames to the driver, writers send what the driver gives them.
//! The driver's clock is scenario time: `now_us` = real time since the
//! start x `speed`.

use super::conn::{self, Event, Identity, Link};
use super::observe::{Counts, Observer};
use super::{LiveError, Setup};
use crate::agent::{Agent, InferenceEnd, Input, Output, PostKind, TimerKind, Workload};
use crate::floor::{self, ClientMsg, ServerMsg};
use crate::metrics::RunResult;
use crate::metrics::run::ServerCounts;
use crate::model::Prepared;
use crate::model::dist::Dist;
use crate::model::names;
use crate::serve;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The operator's IDENTIFY name.
pub const OPERATOR: &str = "operator";

/// Real time without any frame, once the workload is over and no timer is
/// pending, after which the run ends.
pub const QUIET: Duration = Duration::from_millis(300);

/// What one live replication produced.
#[derive(Debug)]
pub struct Outcome {
    pub result: RunResult,
    pub counts: Counts,
    /// One-way link delays measured from the run's own relays (µs of scenario time).
    pub delays_us: Vec<u64>,
    /// How late the driver's timers fired (µs of real time).
    pub lateness_us: Vec<u64>,
    /// The run's trace (JSON Lines), when asked for.
    pub trace: Vec<u8>,
    /// Stopped by Ctrl-C before its end.
    pub interrupted: bool,
    /// The server it ran against.
    pub url: String,
    /// Scenario time the run lasted (µs).
    pub elapsed_us: u64,
}

/// A stable Ed25519 key per name (the same identity every run).
fn key_of(name: &str) -> [u8; 32] {
    let mut h = crate::sweep::Fnv::default();
    h.write(b"herdsim live identity ");
    h.write(name.as_bytes());
    let seed = u64::from_str_radix(&h.hex(), 16).unwrap_or(0);
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let mut k = [0u8; 32];
    for b in k.iter_mut() {
        *b = r.random();
    }
    k
}

/// The embedded server's options: the scenario's policy; its TTL and
/// rate limit divided by the speed (they are scenario durations).
pub fn embedded_options(setup: &Setup, agents: usize) -> serve::Options {
    let s = &setup.scenario;
    let scale = |ms: f64| -> u64 {
        if ms <= 0.0 {
            0
        } else {
            ((ms / setup.speed).ceil() as u64).max(1)
        }
    };
    serve::Options {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        floor: floor::Config {
            policy: setup.policy,
            ttl_ms: scale(s.server.ttl_ms),
            enabled: s.server.enabled,
            rate_limit_ms: scale(s.server.rate_limit_ms),
            sweep_phase_ms: 0,
            sweep_drift_us: 0,
            ..floor::Config::default()
        },
        limits: serve::Limits {
            // The agents' frame rate scales with the speed: no limit.
            rate_per_sec: 0,
            max_connections: agents + 16,
            ..serve::Limits::default()
        },
        log: setup.server_log.clone(),
        operator_name: OPERATOR.into(),
        server_name: "herdsim".into(),
        // Loopback, in-process: no TLS.
        tls: None,
    }
}

/// Ids on the wire versus the driver's. A keyed server names an agent by
/// its key (the actors and the trace use `agent-NNN`); a server that
/// assigns message ids of its own (agentchat does) relays the driver's
/// `mN` under another id, learnt from the message's content (`question N`,
/// `answer to mN from agent-NNN`). Frames are mapped at the boundary, both
/// ways; with `herdsim serve` (names kept, ids kept) nothing changes.
#[derive(Debug, Default)]
struct Names {
    /// Agent and operator names to wire ids, and back (keyed only).
    to_wire: BTreeMap<String, String>,
    from_wire: BTreeMap<String, String>,
    /// Message ids: the server's to the driver's, and back.
    alias_in: BTreeMap<String, String>,
    alias_out: BTreeMap<String, String>,
}

impl Names {
    fn inward(&self, s: &str) -> Option<&String> {
        self.from_wire.get(s).or_else(|| self.alias_in.get(s))
    }

    fn outward(&self, s: &str) -> Option<&String> {
        self.to_wire.get(s).or_else(|| self.alias_out.get(s))
    }

    fn is_empty(&self) -> bool {
        self.to_wire.is_empty() && self.alias_in.is_empty()
    }
}

/// Map every token of `text` (runs of `[A-Za-z0-9_-]`) through `f`.
fn map_tokens(text: &str, f: &dyn Fn(&str) -> Option<String>) -> String {
    let is_tok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut tok = String::new();
    for c in text.chars().map(Some).chain(std::iter::once(None)) {
        match c {
            Some(c) if is_tok(c) => tok.push(c),
            _ => {
                if !tok.is_empty() {
                    match f(&tok) {
                        Some(m) => out.push_str(&m),
                        None => out.push_str(&tok),
                    }
                    tok.clear();
                }
                if let Some(c) = c {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Map the strings of a frame: whole values (`"m3"`, `"@id"`) and the
/// tokens of `content`.
fn map_value(v: &mut Value, f: &dyn Fn(&str) -> Option<String>) {
    match v {
        Value::Object(obj) => {
            for (k, x) in obj.iter_mut() {
                match x {
                    Value::String(s) if k == "content" => *s = map_tokens(s, f),
                    Value::String(s) => {
                        if let Some(m) = f(s) {
                            *s = m;
                        } else if let Some(rest) = s.strip_prefix('@')
                            && let Some(m) = f(rest)
                        {
                            *s = format!("@{m}");
                        }
                    }
                    other => map_value(other, f),
                }
            }
        }
        Value::Array(xs) => xs.iter_mut().for_each(|x| map_value(x, f)),
        _ => {}
    }
}

/// Run one replication (blocking). `progress` gets the scenario time reached.
pub fn run_rep(
    setup: &Setup,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, LiveError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LiveError::Failure(format!("cannot start the async runtime: {e}")))?;
    let handle = rt.handle().clone();
    let (quit_tx, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let io = std::thread::Builder::new()
        .name("herdsim-live-io".into())
        .spawn(move || {
            rt.block_on(async {
                let _ = quit_rx.await;
            });
        })
        .map_err(|e| LiveError::Failure(format!("cannot start the I/O thread: {e}")))?;
    let result = run_on(setup, &handle, stop, progress);
    let _ = quit_tx.send(());
    let _ = io.join();
    result
}

fn run_on(
    setup: &Setup,
    handle: &tokio::runtime::Handle,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, LiveError> {
    let prepared = Prepared::with_cache(&setup.scenario, &setup.base_dir, &setup.cache)
        .map_err(|e| LiveError::BadInput(e.to_string()))?;
    match &setup.url {
        Some(url) => drive(setup, &prepared, handle, url.clone(), stop, progress),
        None => {
            let opts = embedded_options(setup, prepared.agents());
            let bound = handle
                .block_on(serve::bind(opts))
                .map_err(|e| LiveError::Failure(format!("embedded server: {e}")))?;
            let url = format!("ws://{}", bound.local_addr());
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let server = handle.spawn(bound.run(async {
                let _ = stop_rx.await;
            }));
            let driven = drive(setup, &prepared, handle, url, stop, progress);
            let _ = stop_tx.send(());
            let report = handle
                .block_on(server)
                .map_err(|e| LiveError::Failure(format!("embedded server: {e}")))?
                .map_err(|e| LiveError::Failure(format!("embedded server: {e}")))?;
            let mut out = driven?;
            let st = report.stats;
            out.result = out.finish_with(ServerCounts {
                yields: st.yields,
                expired: st.expired,
                relayed: st.relayed,
                overruled: st.overruled,
            });
            Ok(out)
        }
    }
}

impl Outcome {
    fn finish_with(&self, srv: ServerCounts) -> RunResult {
        // The server counters the clients could not see; the yields stay
        // the ones the agents received.
        let mut r = self.result.clone();
        for (name, v) in [
            ("expired_claims", srv.expired),
            ("relayed", srv.relayed),
            ("overruled", srv.overruled),
        ] {
            if let Some(i) = crate::metrics::METRICS.iter().position(|m| *m == name) {
                r.values[i] = v as f64;
            }
        }
        r
    }
}

#[derive(Debug)]
enum Timer {
    Post,
    Agent { a: usize, inc: u32, msg_id: String },
    Done { a: usize, inc: u32, msg_id: String },
    Crash { a: usize, inc: u32 },
    Reconnect { a: usize },
}

struct Driver<'a> {
    setup: &'a Setup,
    handle: &'a tokio::runtime::Handle,
    url: String,
    t0: Instant,
    last_us: u64,
    agents: Vec<Agent>,
    ids: Vec<String>,
    channels: Vec<Vec<String>>,
    idents: Vec<Identity>,
    names: Names,
    /// Connection 0 is the operator, 1..=n the agents.
    links: Vec<Option<Link>>,
    gens: Vec<u32>,
    inc: Vec<u32>,
    timers: BTreeMap<(u64, u64), Timer>,
    seq: u64,
    ends: BTreeMap<(usize, String), (u64, u64)>,
    workload: Workload,
    workload_over: bool,
    next_id: u32,
    depth: BTreeMap<String, u32>,
    /// (author, parent) -> the driver's id of the reply.
    replies: BTreeMap<(String, String), String>,
    obs: Observer,
    trace: Option<Vec<u8>>,
    restart: Dist,
    server_rng: ChaCha8Rng,
    tx: mpsc::Sender<Event>,
    reconnecting: usize,
    last_activity: Instant,
    failure: Option<String>,
}

fn stream(seed: u64, s: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(s);
    r
}

/// The IDENTIFY identities: the operator's first, then the agents' in
/// order (with a stable key each when `keyed`).
fn identities(keyed: bool, ids: &[String]) -> Vec<Identity> {
    let mut idents = vec![Identity {
        name: OPERATOR.into(),
        key: keyed.then(|| key_of(OPERATOR)),
    }];
    idents.extend(ids.iter().map(|nm| Identity {
        name: nm.clone(),
        key: keyed.then(|| key_of(nm)),
    }));
    idents
}

/// The connections of a replication, opened and joined.
struct Opened {
    /// Connection 0 is the operator, 1..=n the agents.
    links: Vec<Option<Link>>,
    /// Each agent's channels.
    channels: Vec<Vec<String>>,
    /// The id the server gave each connection (operator first).
    wire_ids: Vec<String>,
}

/// Connect and join, one after another: the operator first, then the
/// agents in order.
fn connect_all(
    p: &Prepared,
    handle: &tokio::runtime::Handle,
    url: &str,
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    idents: &[Identity],
    tx: &mpsc::Sender<Event>,
) -> Result<Opened, LiveError> {
    let n = p.agents();
    let mut links = Vec::with_capacity(n + 1);
    let mut channels = Vec::with_capacity(n);
    let op_channel = vec![p.channel().to_string()];
    let (op_link, op_id) = handle
        .block_on(conn::open(
            url,
            tls,
            &idents[0],
            &op_channel,
            0,
            0,
            tx.clone(),
        ))
        .map_err(LiveError::Failure)?;
    links.push(Some(op_link));
    let mut wire_ids = vec![op_id];
    for i in 0..n {
        let chans = p.channels(i).to_vec();
        let (link, id) = handle
            .block_on(conn::open(
                url,
                tls,
                &idents[i + 1],
                &chans,
                i + 1,
                0,
                tx.clone(),
            ))
            .map_err(LiveError::Failure)?;
        links.push(Some(link));
        wire_ids.push(id);
        channels.push(chans);
    }
    Ok(Opened {
        links,
        channels,
        wire_ids,
    })
}

/// Who is who on the wire: the names, the identities, the ids the server
/// knows them by, and the open connections.
struct Wiring {
    /// The agents' names (`agent-NNN`).
    ids: Vec<String>,
    /// The IDENTIFY identities, operator first.
    idents: Vec<Identity>,
    /// The mapping to and from the server's ids.
    names: Names,
    opened: Opened,
}

/// The name mapping of a keyed run: each name the server knows under
/// another id (operator first, then the agents). Empty unless `keyed`.
fn wire_names(keyed: bool, ids: &[String], wire_ids: &[String]) -> Names {
    let mut names = Names::default();
    if keyed {
        let mine = std::iter::once(OPERATOR.to_string()).chain(ids.iter().cloned());
        for (name, wire) in mine.zip(wire_ids.iter()) {
            if &name != wire {
                names.to_wire.insert(name.clone(), wire.clone());
                names.from_wire.insert(wire.clone(), name);
            }
        }
    }
    names
}

/// One replication against the server at `url`: connect everyone, run
/// until the end (or Ctrl-C, or a failure), and collect the outcome.
fn drive(
    setup: &Setup,
    p: &Prepared,
    handle: &tokio::runtime::Handle,
    url: String,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, LiveError> {
    let ids: Vec<String> = p.agent_ids().to_vec();
    let idents = identities(setup.keyed, &ids);
    let (tx, rx) = mpsc::channel::<Event>();
    let opened = connect_all(p, handle, &url, setup.tls.as_ref(), &idents, &tx)?;
    let names = wire_names(setup.keyed, &ids, &opened.wire_ids);
    let wiring = Wiring {
        ids,
        idents,
        names,
        opened,
    };
    let mut d = Driver::new(setup, p, handle, url, wiring, tx);
    let interrupted = d.run_loop(&rx, stop, progress)?;
    Ok(d.finish(interrupted))
}

impl<'a> Driver<'a> {
    /// The driver of freshly connected agents, its clock starting now,
    /// with the workload's first post scheduled.
    fn new(
        setup: &'a Setup,
        p: &Prepared,
        handle: &'a tokio::runtime::Handle,
        url: String,
        wiring: Wiring,
        tx: mpsc::Sender<Event>,
    ) -> Self {
        let Wiring {
            ids,
            idents,
            names,
            opened,
        } = wiring;
        let seed = setup.seed;
        let n = p.agents();
        let agents: Vec<Agent> = (0..n).map(|i| p.new_agent(i, setup.policy, seed)).collect();
        let now = Instant::now();
        let mut d = Driver {
            setup,
            handle,
            url,
            t0: now,
            last_us: 0,
            agents,
            ids,
            channels: opened.channels,
            idents,
            names,
            links: opened.links,
            gens: vec![0; n + 1],
            inc: vec![0; n],
            timers: BTreeMap::new(),
            seq: 0,
            ends: BTreeMap::new(),
            workload: p.new_workload(seed),
            workload_over: false,
            next_id: 0,
            depth: BTreeMap::new(),
            replies: BTreeMap::new(),
            obs: Observer::new(),
            trace: setup.trace.then(Vec::new),
            restart: p.restart().clone(),
            server_rng: stream(seed, 2),
            tx,
            reconnecting: 0,
            last_activity: now,
            failure: None,
        };
        match d.workload.next_post(0) {
            Some(at) => {
                d.schedule(at, Timer::Post);
            }
            None => d.workload_over = true,
        }
        d
    }

    /// Fire the due timers and handle the frames until the run is over.
    /// Ok(true): stopped by `stop` (Ctrl-C); Err: a connection failed.
    fn run_loop(
        &mut self,
        rx: &mpsc::Receiver<Event>,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<bool, LiveError> {
        let mut last_progress = Instant::now();
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(true);
            }
            if let Some(f) = self.failure.take() {
                return Err(LiveError::Failure(f));
            }
            self.fire_due();
            if self.is_over() {
                return Ok(false);
            }
            match rx.recv_timeout(self.wait()) {
                Ok(ev) => self.on_event(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(false),
            }
            if last_progress.elapsed() >= Duration::from_millis(100) {
                last_progress = Instant::now();
                progress(self.now());
            }
        }
    }

    /// The workload is over, nothing is pending and the wire has been
    /// quiet for [`QUIET`].
    fn is_over(&self) -> bool {
        self.workload_over
            && self.timers.is_empty()
            && self.reconnecting == 0
            && self.last_activity.elapsed() >= QUIET
    }

    /// How long to wait for a frame: until the next timer, at most 50 ms.
    fn wait(&self) -> Duration {
        let mut wait = Duration::from_millis(50);
        if let Some((at, _)) = self.timers.keys().next() {
            wait = wait.min(
                self.instant_of(*at)
                    .saturating_duration_since(Instant::now()),
            );
        }
        wait
    }

    /// Close every connection (the server sees them leave) and collect
    /// the metrics, the measurements and the trace.
    fn finish(mut self, interrupted: bool) -> Outcome {
        let elapsed_us = self.now();
        self.links.clear();
        let (result, counts) = self.obs.finish(None);
        Outcome {
            result,
            counts,
            delays_us: std::mem::take(&mut self.obs.delays_us),
            lateness_us: std::mem::take(&mut self.obs.lateness_us),
            trace: self.trace.take().unwrap_or_default(),
            interrupted,
            url: self.url.clone(),
            elapsed_us,
        }
    }
}

impl Driver<'_> {
    /// A client message as the server must see it.
    fn wire(&self, msg: &ClientMsg) -> String {
        if self.names.is_empty() {
            return msg.to_json_string();
        }
        let mut v = msg.to_json();
        map_value(&mut v, &|s| self.names.outward(s).cloned());
        v.to_string()
    }

    /// A server frame in the driver's names: keyed ids back to agent
    /// names, the server's message ids back to the driver's (learning new
    /// ones from the content), and a leading `@` dropped from the sender,
    /// winner and holder when it names one of ours.
    fn inward(&mut self, v: &mut Value) {
        if !self.names.is_empty() {
            let names = &self.names;
            map_value(v, &|s| names.inward(s).cloned());
        }
        if v["type"] == "MSG"
            && let Some(id) = v["id"].as_str()
            && !self.depth.contains_key(id)
            && let Some(ours) = self.learn(v["content"].as_str().unwrap_or(""))
        {
            self.names.alias_in.insert(id.to_string(), ours.clone());
            self.names.alias_out.insert(ours.clone(), id.to_string());
            v["id"] = Value::String(ours);
        }
        for k in ["from", "winner", "holder"] {
            if let Some(bare) = v[k].as_str().and_then(|s| s.strip_prefix('@'))
                && (bare == OPERATOR || self.ids.iter().any(|i| i == bare))
            {
                v[k] = Value::String(bare.to_string());
            }
        }
    }

    /// The driver's id of a message relayed under an id of the server's,
    /// from its content.
    fn learn(&self, content: &str) -> Option<String> {
        let words: Vec<&str> = content.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == "question")
            && let Some(n) = words.get(i + 1).and_then(|w| w.parse::<u32>().ok())
        {
            return Some(names::msg_id(n));
        }
        if let ["answer", "to", parent, "from", agent] = words.as_slice() {
            return self
                .replies
                .get(&(agent.to_string(), parent.to_string()))
                .cloned();
        }
        None
    }

    /// Scenario time now (µs), never going back.
    fn now(&mut self) -> u64 {
        let real = self.t0.elapsed().as_secs_f64();
        let t = (real * self.setup.speed * 1e6) as u64;
        self.last_us = self.last_us.max(t);
        self.last_us
    }

    fn instant_of(&self, at_us: u64) -> Instant {
        self.t0 + Duration::from_secs_f64(at_us as f64 / 1e6 / self.setup.speed)
    }

    fn schedule(&mut self, at_us: u64, t: Timer) -> (u64, u64) {
        self.seq += 1;
        let key = (at_us, self.seq);
        self.timers.insert(key, t);
        key
    }

    fn trace(&mut self, line: Value) {
        if let Some(buf) = self.trace.as_mut() {
            let _ = serde_json::to_writer(&mut *buf, &line);
            buf.push(b'\n');
        }
    }

    fn trace_state(&mut self, a: usize, msg_id: Option<&str>, ev: &str, extra: Value) {
        if self.trace.is_none() {
            return;
        }
        let mut line = json!({"t_us": self.last_us, "ev": ev, "agent": self.ids[a]});
        if let Some(m) = msg_id {
            line["msg_id"] = Value::String(m.to_string());
        }
        if let (Some(obj), Value::Object(more)) = (line.as_object_mut(), extra) {
            obj.extend(more);
        }
        self.trace(line);
    }

    fn new_id(&mut self) -> String {
        let m = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        names::msg_id(m)
    }

    fn fire_due(&mut self) {
        let now = self.now();
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((at, _), timer) = entry.remove_entry();
            let late = Instant::now().saturating_duration_since(self.instant_of(at));
            self.obs.lateness_us.push(late.as_micros() as u64);
            self.obs.events += 1;
            self.last_activity = Instant::now();
            self.on_timer(now, timer);
        }
    }

    fn on_timer(&mut self, now: u64, timer: Timer) {
        let mut out = Vec::new();
        match timer {
            Timer::Post => self.post(now),
            Timer::Agent { a, inc, msg_id } => {
                if self.inc[a] == inc {
                    self.agents[a].handle(now, Input::Timer { msg_id: &msg_id }, &mut out);
                    self.apply(a, now, out);
                }
            }
            Timer::Done { a, inc, msg_id } => {
                if self.inc[a] == inc {
                    self.ends.remove(&(a, msg_id.clone()));
                    let reply_id = self.new_id();
                    self.agents[a].handle(
                        now,
                        Input::InferenceDone {
                            msg_id: &msg_id,
                            reply_id: Some(&reply_id),
                        },
                        &mut out,
                    );
                    self.apply(a, now, out);
                }
            }
            Timer::Crash { a, inc } => {
                if self.inc[a] == inc {
                    self.agents[a].handle(now, Input::Crash, &mut out);
                    self.apply(a, now, out);
                }
            }
            Timer::Reconnect { a } => {
                self.reconnecting += 1;
                let conn = a + 1;
                let generation = self.gens[conn];
                let url = self.url.clone();
                let tls = self.setup.tls.clone();
                let ident = self.idents[conn].clone();
                let chans = self.channels[a].clone();
                let tx = self.tx.clone();
                self.handle.spawn(async move {
                    let ev = match conn::open(
                        &url,
                        tls.as_ref(),
                        &ident,
                        &chans,
                        conn,
                        generation,
                        tx.clone(),
                    )
                    .await
                    {
                        Ok((link, _id)) => Event::Up {
                            conn,
                            generation,
                            link,
                        },
                        Err(error) => Event::Failed { conn, error },
                    };
                    let _ = tx.send(ev);
                });
            }
        }
    }

    /// The operator posts the workload's next message.
    fn post(&mut self, now: u64) {
        let m = self.next_id;
        let id = self.new_id();
        let post = self.workload.draw(m);
        let (to, content) = (post.to, post.content);
        let kind = PostKind::of(&to, &content);
        self.obs.authored(&id, kind != PostKind::Dm, now, OPERATOR);
        let kind = kind.name();
        self.depth.insert(id.clone(), 0);
        self.trace(json!({"t_us": now, "ev": "post", "msg_id": id, "from": OPERATOR, "to": to, "kind": kind}));
        let msg = ClientMsg::Msg {
            id: Some(id),
            to,
            content,
            in_reply_to: None,
        };
        if let Some(l) = &self.links[0] {
            l.send(self.wire(&msg));
        }
        match self.workload.next_post(now) {
            Some(at) => {
                self.schedule(at, Timer::Post);
            }
            None => self.workload_over = true,
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Frame {
                conn,
                generation,
                text,
            } => {
                if self.gens.get(conn) != Some(&generation) {
                    return;
                }
                self.last_activity = Instant::now();
                self.obs.events += 1;
                let now = self.now();
                let Ok(mut v) = serde_json::from_str::<Value>(&text) else {
                    return;
                };
                self.inward(&mut v);
                let Ok(msg) = ServerMsg::from_value(&v) else {
                    return; // PONG, JOINED, ... : not the floor's
                };
                if conn == 0 {
                    self.operator_frame(now, &msg);
                } else {
                    self.agent_frame(conn - 1, now, &msg);
                }
            }
            Event::Closed { conn, generation } => {
                if self.gens.get(conn) == Some(&generation) && self.links[conn].is_some() {
                    let who = if conn == 0 {
                        OPERATOR.to_string()
                    } else {
                        self.ids[conn - 1].clone()
                    };
                    self.failure = Some(format!(
                        "{}: the server closed the connection of {who}",
                        self.url
                    ));
                }
            }
            Event::Up {
                conn,
                generation,
                link,
            } => {
                self.reconnecting = self.reconnecting.saturating_sub(1);
                if self.gens[conn] == generation {
                    self.links[conn] = Some(link);
                    self.last_activity = Instant::now();
                    let now = self.now();
                    let _ = now;
                    self.trace_state(conn - 1, None, "reconnect", json!({}));
                }
            }
            Event::Failed { conn, error } => {
                self.reconnecting = self.reconnecting.saturating_sub(1);
                let who = self
                    .ids
                    .get(conn.wrapping_sub(1))
                    .cloned()
                    .unwrap_or_default();
                self.failure = Some(format!("reconnecting {who}: {error}"));
            }
        }
    }

    fn operator_frame(&mut self, now: u64, msg: &ServerMsg) {
        if let ServerMsg::Msg {
            id,
            from,
            to,
            content,
            in_reply_to: Some(parent),
        } = msg
        {
            self.obs.relay_seen(from, "MSG", id, now);
            self.obs.reply_seen(parent, id, now);
            // A live trace has no server-side view: the reply is logged
            // as received when the operator got its relay (what the
            // metrics count), in the simulator's `server_recv` form.
            let sent = ClientMsg::Msg {
                id: Some(id.clone()),
                to: to.clone(),
                content: content.clone(),
                in_reply_to: Some(parent.clone()),
            };
            self.trace(
                json!({"t_us": now, "ev": "server_recv", "agent": from, "msg": sent.to_json()}),
            );
        }
    }

    fn agent_frame(&mut self, a: usize, now: u64, msg: &ServerMsg) {
        if self.trace.is_some() {
            let line =
                json!({"t_us": now, "ev": "recv", "agent": self.ids[a], "msg": msg.to_json()});
            self.trace(line);
        }
        let depth = match msg {
            ServerMsg::Msg {
                id,
                from,
                in_reply_to,
                ..
            } => {
                self.obs.relay_seen(from, "MSG", id, now);
                let d = match self.depth.get(id) {
                    Some(d) => *d,
                    None => in_reply_to
                        .as_ref()
                        .and_then(|p| self.depth.get(p))
                        .map_or(0, |d| d + 1),
                };
                Some(d)
            }
            ServerMsg::RespondingTo { msg_id, from, .. } => {
                self.obs.relay_seen(from, "CLAIM", msg_id, now);
                None
            }
            ServerMsg::Yield { .. } => {
                self.obs.yields += 1;
                None
            }
            _ => None,
        };
        let mut out = Vec::new();
        self.agents[a].handle(now, Input::Server { msg, depth }, &mut out);
        self.apply(a, now, out);
    }

    fn send(&mut self, a: usize, now: u64, msg: &ClientMsg) {
        if self.trace.is_some() {
            let line =
                json!({"t_us": now, "ev": "send", "agent": self.ids[a], "msg": msg.to_json()});
            self.trace(line);
        }
        if let Some(l) = &self.links[a + 1] {
            l.send(self.wire(msg));
        }
    }

    fn cancel_end(&mut self, a: usize, msg_id: &str) {
        if let Some(key) = self.ends.remove(&(a, msg_id.to_string())) {
            self.timers.remove(&key);
        }
    }

    /// Carry out what agent `a`'s actor asked for, in order.
    fn apply(&mut self, a: usize, now: u64, out: Vec<Output>) {
        let replies = finished_replies(&out);
        for o in out {
            match o {
                Output::Send(msg) => self.on_send(a, now, &msg),
                Output::Reply { msg, parent, .. } => self.on_reply(a, now, &msg, &parent),
                Output::Wants { msg_id } => self.obs.wants(&msg_id),
                Output::SetTimer {
                    msg_id,
                    at_us,
                    kind,
                } => self.on_set_timer(a, msg_id.to_string(), at_us, kind),
                Output::Infer {
                    msg_id,
                    started_at,
                    duration_us: _,
                    end,
                    ignore_yield,
                } => self.on_infer(a, msg_id.to_string(), started_at, end, ignore_yield),
                Output::Abort {
                    msg_id,
                    winner,
                    ran_us,
                } => {
                    self.cancel_end(a, &msg_id);
                    self.obs.aborted(a, &msg_id, ran_us);
                    self.trace_state(a, Some(&msg_id), "abort", json!({"winner": winner}));
                }
                Output::Done { msg_id } => self.on_done(a, &msg_id, &replies),
                Output::Skip { msg_id, reason } => self.on_skip(a, &msg_id, reason),
                Output::Idle { .. } => {}
                Output::Lost { msg_id, ran_us, .. } => {
                    self.cancel_end(a, &msg_id);
                    self.obs.lost(a, &msg_id, ran_us);
                }
                Output::Crashed => self.on_crashed(a, now),
            }
        }
    }

    /// Send a message of agent `a`, observing its claims.
    fn on_send(&mut self, a: usize, now: u64, msg: &ClientMsg) {
        if let ClientMsg::RespondingTo { msg_id, .. } = msg {
            let me = self.ids[a].clone();
            self.obs.claimed(&me, msg_id, now);
        }
        self.send(a, now, msg);
    }

    /// Send agent `a`'s reply to `parent`, recording its authorship, its
    /// depth and its id (to recognise it when relayed under another id).
    fn on_reply(&mut self, a: usize, now: u64, msg: &ClientMsg, parent: &str) {
        if let ClientMsg::Msg {
            id: Some(id), to, ..
        } = msg
        {
            let me = self.ids[a].clone();
            self.obs.authored(id, to.starts_with('#'), now, &me);
            let d = self.depth.get(parent).map_or(1, |d| d + 1);
            self.depth.insert(id.clone(), d);
            self.replies.insert((me, parent.to_string()), id.clone());
        }
        self.send(a, now, msg);
    }

    /// Set a CSMA or recheck timer of agent `a`'s current incarnation.
    fn on_set_timer(&mut self, a: usize, msg_id: String, at_us: u64, kind: TimerKind) {
        let ev = match kind {
            TimerKind::Csma => "csma",
            TimerKind::Recheck => "recheck_wait",
        };
        self.trace_state(a, Some(&msg_id), ev, json!({"until_us": at_us}));
        let inc = self.inc[a];
        self.schedule(at_us, Timer::Agent { a, inc, msg_id });
    }

    /// Start an inference of agent `a`: a timer for its end (done or
    /// crash), none when it hangs.
    fn on_infer(
        &mut self,
        a: usize,
        msg_id: String,
        started_at: i64,
        end: InferenceEnd,
        ignore_yield: bool,
    ) {
        let hung = end == InferenceEnd::Hang;
        self.obs.infer(a, &msg_id, hung);
        let inc = self.inc[a];
        let (until, crash) = match end {
            InferenceEnd::DoneAt(t) => {
                let key = self.schedule(
                    t,
                    Timer::Done {
                        a,
                        inc,
                        msg_id: msg_id.clone(),
                    },
                );
                self.ends.insert((a, msg_id.clone()), key);
                (Some(t), false)
            }
            InferenceEnd::CrashAt(t) => {
                let key = self.schedule(t, Timer::Crash { a, inc });
                self.ends.insert((a, msg_id.clone()), key);
                (None, true)
            }
            InferenceEnd::Hang => (None, false),
        };
        self.trace_state(
            a,
            Some(&msg_id),
            "infer",
            json!({"started_at": started_at, "until_us": until, "ignore_yield": ignore_yield, "hung": hung, "crash": crash}),
        );
    }

    /// Agent `a` finished with `msg_id`, with the reply it sent if any.
    fn on_done(&mut self, a: usize, msg_id: &str, replies: &BTreeMap<String, (String, u64)>) {
        let (reply, infer_us) = match replies.get(msg_id) {
            Some((id, us)) => (Some(id.clone()), *us),
            None => (None, 0),
        };
        self.obs.done(a, msg_id, infer_us, reply);
        self.trace_state(a, Some(msg_id), "done", json!({}));
    }

    /// Agent `a` decided not to answer `msg_id`.
    fn on_skip(&mut self, a: usize, msg_id: &str, reason: floor::SkipReason) {
        let reason = match reason {
            floor::SkipReason::SeenClaim => "seen_claim",
            floor::SkipReason::SeenResponse => "seen_response",
        };
        self.trace_state(a, Some(msg_id), "skip", json!({"reason": reason}));
    }

    /// Agent `a` crashed: a new incarnation and connection generation,
    /// its socket dropped, its reconnection scheduled after a restart delay.
    fn on_crashed(&mut self, a: usize, now: u64) {
        self.inc[a] = self.inc[a].wrapping_add(1);
        let conn = a + 1;
        self.gens[conn] = self.gens[conn].wrapping_add(1);
        // Dropping the link closes the socket without a close
        // frame: the server sees an abrupt disconnect.
        self.links[conn] = None;
        self.trace_state(a, None, "crash", json!({}));
        let d = self.restart.sample_us(&mut self.server_rng);
        self.schedule(now + d, Timer::Reconnect { a });
    }
}

/// The reply of each inference finished in `out` (its Done comes first),
/// by parent: (the reply's id, the inference's duration).
fn finished_replies(out: &[Output]) -> BTreeMap<String, (String, u64)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Reply {
                msg: ClientMsg::Msg { id: Some(id), .. },
                parent,
                infer_us,
            } => Some((parent.to_string(), (id.clone(), *infer_us))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_map_ids_both_ways() {
        let mut n = Names::default();
        n.from_wire
            .insert("a1b2c3d4e5f60718".into(), "agent-000".into());
        n.alias_in.insert("msg_77".into(), "m3".into());
        let mut v = serde_json::json!({"type": "MSG", "id": "msg_77", "from": "@a1b2c3d4e5f60718",
            "to": "#general", "content": "@a1b2c3d4e5f60718 answer to msg_77 from a1b2c3d4e5f60718"});
        map_value(&mut v, &|s| n.inward(s).cloned());
        assert_eq!(v["id"], "m3");
        assert_eq!(v["from"], "@agent-000");
        assert_eq!(v["to"], "#general");
        assert_eq!(v["content"], "@agent-000 answer to m3 from agent-000");
        assert_eq!(
            map_tokens("hi, @x-1!", &|s| (s == "x-1").then(|| "y".into())),
            "hi, @y!"
        );
    }
}
