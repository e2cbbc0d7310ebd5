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
//!
//! - `connect`: who is who on the wire, and the connections opened;
//! - `names`: ids mapped across the wire edge;
//! - `inbound`: every frame from the server, read, counted in the
//!   [`Ledger`] and, when it is about our own traffic, handed to the actors;
//! - `outputs`: what the actors asked for, carried out.
//!
//! A replication ends when its own workload is done and its own traffic
//! has gone quiet, whatever anybody else says on the server: at the latest
//! a grace of three claim TTLs after the last post. A deadline of real time
//! stops a replication that goes on beyond all reason (a failure).

mod connect;
mod inbound;
mod names;
mod outputs;

use super::conn::{self, Event, Events, EventsRx, Identity, Link};
use super::ledger::Ledger;
use super::observe::{Counts, Observer};
use super::{LiveError, Setup};
use crate::agent::{Agent, Input, PostKind, Workload};
use crate::dist::Dist;
use crate::dist::{Stream, stream};
use crate::floor;
use crate::floor::ClientMsg;
use crate::metrics::RunResult;
use crate::metrics::run::ServerCounts;
use crate::model::Prepared;
use crate::names as ids;
use crate::serve;
use connect::{Wiring, connect_all, identities, wire_names};
use names::Names;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use super::OPERATOR;

/// Real time without any frame of our own traffic, once the workload is
/// over and no timer is pending, after which the run ends.
pub const QUIET: Duration = Duration::from_millis(300);

/// The grace after the last post, in claim TTLs: the replication ends then
/// at the latest, whatever is still pending or however busy the server.
pub const GRACE_TTLS: u64 = 3;

/// The shortest grace, in scenario ms (a scenario with a short TTL still
/// waits for its last inferences) and in real time (a fast one still waits
/// for its last relays).
pub const MIN_GRACE_MS: u64 = 60_000;
pub const MIN_GRACE_REAL: Duration = Duration::from_secs(2);

/// The longest grace, in real time (a TTL of days would otherwise keep a
/// run that never goes quiet going for weeks).
pub const MAX_GRACE_REAL: Duration = Duration::from_secs(600);

/// The grace of a scenario at `speed`, in real time.
pub fn grace(ttl_ms: f64, speed: f64) -> Duration {
    let ms = (ttl_ms.max(0.0) * GRACE_TTLS as f64).clamp(MIN_GRACE_MS as f64, 1e12);
    real_of((ms * 1000.0) as u64, speed).clamp(MIN_GRACE_REAL, MAX_GRACE_REAL)
}

/// The largest trace a replication keeps in memory; beyond it the trace
/// stops (and says so).
pub const MAX_TRACE_BYTES: usize = 256 << 20;

/// How a replication ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The workload was done, nothing was pending and our traffic quiet.
    Quiet,
    /// The grace after the last post ran out first.
    Grace,
    /// Ctrl-C.
    Interrupted,
}

impl Ended {
    pub fn name(self) -> &'static str {
        match self {
            Ended::Quiet => "done",
            Ended::Grace => "grace",
            Ended::Interrupted => "interrupted",
        }
    }
}

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
    /// How it ended.
    pub ended: Ended,
    /// Inferences or timers still pending when it ended.
    pub pending_at_end: usize,
    /// The trace reached [`MAX_TRACE_BYTES`] and stopped.
    pub trace_cut: bool,
    /// What the wire held.
    pub ledger: Ledger,
    /// The server it ran against.
    pub url: String,
    /// Scenario time the run lasted (µs).
    pub elapsed_us: u64,
}

/// The embedded server's options: the scenario's policy; its TTL, rate
/// limit, sweep period and claim skew divided by the speed (they are
/// scenario durations), rounded as [`crate::scenario::floor_ms`] says.
pub fn embedded_options(setup: &Setup, agents: usize) -> serve::Options {
    let mut floor = setup.scenario.floor_config(setup.policy, setup.speed);
    // The real timer has a phase and a drift of its own; serve sets the
    // clock guard's epoch when it starts (the agents stamp the wall clock).
    floor.sweep_phase_ms = 0;
    floor.sweep_drift_us = 0;
    if let floor::ClaimGuard::Clock { epoch_ms, .. } = &mut floor.claim_guard {
        *epoch_ms = 0;
    }
    serve::Options {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        floor,
        limits: serve::Limits {
            // The agents' frame rate scales with the speed: no limit, and
            // no agentchat flood close.
            rate_per_sec: 0,
            agentchat_flood_close: false,
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

/// Run one replication (blocking). `progress` gets the number of posts made.
pub fn run_rep(
    setup: &Setup,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, LiveError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| LiveError::Start {
            what: "the async runtime",
            source,
        })?;
    let handle = rt.handle().clone();
    let (quit_tx, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let io = std::thread::Builder::new()
        .name("herdsim-live-io".into())
        .spawn(move || {
            rt.block_on(async {
                let _ = quit_rx.await;
            });
        })
        .map_err(|source| LiveError::Start {
            what: "the I/O thread",
            source,
        })?;
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
                .map_err(|e| LiveError::Embedded(Box::new(e)))?;
            let url = format!("ws://{}", bound.local_addr());
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let server = handle.spawn(bound.run(async {
                let _ = stop_rx.await;
            }));
            let driven = drive(setup, &prepared, handle, url, stop, progress);
            let _ = stop_tx.send(());
            let report = handle
                .block_on(server)
                .map_err(|e| LiveError::Embedded(Box::new(e)))?
                .map_err(|e| LiveError::Embedded(Box::new(e)))?;
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
    /// Every message of ours (posts and replies), with its reply depth.
    depth: BTreeMap<String, u32>,
    /// The operator's posts, and those of them seen relayed.
    posts: BTreeSet<String>,
    accepted: BTreeSet<String>,
    /// Our names: the operator's and the agents'.
    ours: BTreeSet<String>,
    ledger: Ledger,
    obs: Observer,
    trace: Option<Vec<u8>>,
    trace_cut: bool,
    restart: Dist,
    server_rng: Stream,
    tx: Events,
    reconnecting: usize,
    /// Our last action (a send, a timer), or the last frame that made an
    /// agent act or brought a new answer.
    last_own: Instant,
    /// The grace after the workload (real time) and when it runs out.
    grace: Duration,
    end_by: Option<Instant>,
    /// The replication fails past this instant.
    deadline: Instant,
    failure: Option<String>,
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
    let idents = identities(setup.keys.as_ref(), &ids);
    let (tx, rx) = conn::events();
    let opened = connect_all(p, handle, &url, setup.tls.as_ref(), &idents, &tx)?;
    let names = wire_names(&ids, &opened.wire_ids);
    let wiring = Wiring {
        ids,
        idents,
        names,
        opened,
    };
    let mut d = Driver::new(setup, p, handle, url, wiring, tx);
    let ended = d.run_loop(&rx, stop, progress)?;
    d.ledger.dropped = rx.dropped();
    Ok(d.finish(ended))
}

/// The Unix time now, in µs (0 if the clock is before 1970).
fn unix_now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A duration of scenario time (µs) in real time at `speed`, saturating.
pub fn real_of(scenario_us: u64, speed: f64) -> Duration {
    Duration::try_from_secs_f64(scenario_us as f64 / 1e6 / speed).unwrap_or(Duration::MAX)
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
        tx: Events,
    ) -> Self {
        let Wiring {
            ids,
            idents,
            names,
            opened,
        } = wiring;
        let seed = setup.seed;
        let n = p.agents();
        let now = Instant::now();
        // The agents' stamps read the real wall clock: driver time 0 is now.
        let origin = unix_now_us();
        let agents: Vec<Agent> = (0..n)
            .map(|i| p.new_live_agent(i, setup.policy, seed, origin, setup.speed))
            .collect();
        let ours = std::iter::once(OPERATOR.to_string())
            .chain(ids.iter().cloned())
            .collect();
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
            posts: BTreeSet::new(),
            accepted: BTreeSet::new(),
            ours,
            ledger: Ledger::default(),
            obs: Observer::for_scenario(&setup.scenario)
                .with_selector((n > p.answering_agents()).then(|| p.answering_agents())),
            trace: setup.trace.then(Vec::new),
            trace_cut: false,
            restart: p.restart().clone(),
            server_rng: stream(seed, 2),
            tx,
            reconnecting: 0,
            last_own: now,
            grace: grace(setup.scenario.server.ttl_ms, setup.speed),
            end_by: None,
            deadline: now + setup.deadline,
            failure: None,
        };
        match d.workload.next_post(0) {
            Some(at) => {
                d.schedule(at, Timer::Post);
            }
            None => d.workload_done(),
        }
        d
    }

    /// Fire the due timers and handle the frames until the run is over.
    /// Err: a connection failed, or the deadline passed.
    fn run_loop(
        &mut self,
        rx: &EventsRx,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Ended, LiveError> {
        let mut last_progress = Instant::now();
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(Ended::Interrupted);
            }
            if let Some(f) = self.failure.take() {
                return Err(LiveError::Failure(f));
            }
            if Instant::now() >= self.deadline {
                return Err(LiveError::Failure(format!(
                    "the replication did not end within --deadline {} s of real time ({} of \
                     the workload's posts made, {} timers pending); raise --deadline or \
                     --speed, or shorten the workload",
                    self.setup.deadline.as_secs(),
                    self.ledger.posts,
                    self.timers.len()
                )));
            }
            self.fire_due();
            if let Some(ended) = self.is_over() {
                // Quiet only counts once everything already read is handled
                // (under a flood the driver may lag behind its sockets).
                if ended == Ended::Quiet {
                    self.drain(rx);
                    if self.is_over() != Some(Ended::Quiet) {
                        continue;
                    }
                }
                return Ok(ended);
            }
            match rx.recv_timeout(self.wait()) {
                Ok(ev) => self.on_event(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(Ended::Quiet),
            }
            if last_progress.elapsed() >= Duration::from_millis(100) {
                last_progress = Instant::now();
                progress(self.ledger.posts);
            }
        }
    }

    /// Over when the workload is over and either nothing is pending and
    /// our own traffic has been quiet for [`QUIET`], or the grace after
    /// the last post has run out (others' traffic never keeps a run going).
    fn is_over(&self) -> Option<Ended> {
        if !self.workload_over {
            return None;
        }
        if self.timers.is_empty() && self.reconnecting == 0 && self.last_own.elapsed() >= QUIET {
            return Some(Ended::Quiet);
        }
        self.end_by
            .is_some_and(|t| Instant::now() >= t)
            .then_some(Ended::Grace)
    }

    /// Handle every event already queued (a bounded number).
    fn drain(&mut self, rx: &EventsRx) {
        for _ in 0..conn::MAX_QUEUED_FRAMES {
            match rx.try_recv() {
                Some(ev) => self.on_event(ev),
                None => break,
            }
        }
    }

    /// The workload is over: the grace starts.
    fn workload_done(&mut self) {
        self.workload_over = true;
        self.end_by = Instant::now().checked_add(self.grace);
    }

    /// How long to wait for a frame: until the next timer, at most 50 ms.
    fn wait(&self) -> Duration {
        let mut wait = Duration::from_millis(50);
        if let Some(t) = self.end_by {
            wait = wait.min(t.saturating_duration_since(Instant::now()));
        }
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
    fn finish(mut self, ended: Ended) -> Outcome {
        let elapsed_us = self.now();
        self.links.clear();
        let (result, counts) = self.obs.finish(None);
        Outcome {
            result,
            counts,
            delays_us: std::mem::take(&mut self.obs.delays_us),
            lateness_us: std::mem::take(&mut self.obs.lateness_us),
            trace: self.trace.take().unwrap_or_default(),
            interrupted: ended == Ended::Interrupted,
            ended,
            pending_at_end: self.timers.len(),
            trace_cut: self.trace_cut,
            ledger: std::mem::take(&mut self.ledger),
            url: self.url.clone(),
            elapsed_us,
        }
    }
}

impl Driver<'_> {
    fn now(&mut self) -> u64 {
        let real = self.t0.elapsed().as_secs_f64();
        let t = (real * self.setup.speed * 1e6) as u64;
        self.last_us = self.last_us.max(t);
        self.last_us
    }

    fn instant_of(&self, at_us: u64) -> Instant {
        let d = real_of(at_us, self.setup.speed);
        self.t0.checked_add(d).unwrap_or(self.deadline)
    }

    fn schedule(&mut self, at_us: u64, t: Timer) -> (u64, u64) {
        self.seq += 1;
        let key = (at_us, self.seq);
        self.timers.insert(key, t);
        key
    }

    fn trace(&mut self, line: Value) {
        if let Some(buf) = self.trace.as_mut() {
            if buf.len() >= MAX_TRACE_BYTES {
                self.trace_cut = true;
                return;
            }
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
        ids::msg_id(m)
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
            self.last_own = Instant::now();
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
                            reply_id: Some(reply_id),
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
                        Err(e) => Event::Failed {
                            conn,
                            error: e.to_string(),
                        },
                    };
                    tx.send(ev);
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
        self.posts.insert(id.clone());
        self.ledger.posts += 1;
        // `relayed`: this trace writes a `relayed` line when the operator
        // sees the post relayed; a post without one was refused or lost
        // (calibrate counts only relayed posts as questions).
        self.trace(json!({"t_us": now, "ev": "post", "msg_id": id, "from": OPERATOR, "to": to, "kind": kind, "relayed": "line"}));
        let msg = ClientMsg::Msg {
            id: Some(id),
            to,
            content,
            in_reply_to: None,
        };
        let text = self.wire(&msg);
        if let Some(l) = &self.links[0] {
            l.send(text);
        }
        self.last_own = Instant::now();
        match self.workload.next_post(now) {
            Some(at) => {
                self.schedule(at, Timer::Post);
            }
            None => self.workload_done(),
        }
    }
}
