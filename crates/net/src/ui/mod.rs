//! `herdsim ui`: a local page to explore a scenario's settings
//! (docs/ui.md). The page ([`PAGE`], inside the binary) posts settings;
//! the server runs the scenario with them through the calls `herdsim run`
//! makes ([`api`]) and answers with the table, `summary.csv`, the
//! comparison figure as SVG and the equivalent command.
//!
//! Safe by default: it listens on loopback only; every request must name
//! this server as its Host and, when it has an Origin, come from this
//! server's page (else 403); a request's head and body are bounded in
//! bytes and time ([`http::HttpBounds`]), a run's work by
//! [`api::WorkBounds`] and its wall time; each connection is a task of its
//! own and each run works on a blocking thread, at most [`MAX_RUNS`] at
//! once, so a slow request holds up no other. It reads the scenario given
//! on the command line (and its data files) and writes nothing.

pub mod api;
pub mod http;

use crate::error::Error;
use crate::term::note;
use http::{HttpBounds, Refusal, Request};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Where `herdsim ui` listens unless told.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:6680";

/// Runs under way at once; more wait for one to end.
pub const MAX_RUNS: usize = 2;

/// Open connections at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 256;

/// The page: one HTML file, its script and style inline.
pub const PAGE: &str = include_str!("page.html");

/// What `herdsim ui` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// The scenario file (none: the built-in default).
    pub scenario: Option<PathBuf>,
    /// The folder the page may write into (this version writes nothing).
    pub out: PathBuf,
    /// The seed the page starts from (none: the scenario's).
    pub seed: Option<u64>,
    /// Say nothing on stderr but errors.
    pub quiet: bool,
}

/// Runs whose progress is kept at once (more run untracked).
pub const MAX_TRACKED: usize = 64;

struct Shared {
    src: Arc<api::Source>,
    hosts: Vec<String>,
    http: HttpBounds,
    runs: Semaphore,
    conns: Arc<Semaphore>,
    /// The progress of runs under way, by the page's name for them.
    progress: Mutex<HashMap<String, Arc<api::Progress>>>,
}

/// A run's progress, findable by its name while it lives.
struct Tracked<'a> {
    shared: &'a Shared,
    name: Option<String>,
    progress: Arc<api::Progress>,
}

impl<'a> Tracked<'a> {
    fn new(shared: &'a Shared, name: Option<&str>) -> Tracked<'a> {
        let progress = Arc::new(api::Progress::default());
        let mut kept = None;
        if let Some(n) = name.filter(|n| api::run_name_ok(n))
            && let Ok(mut map) = shared.progress.lock()
            && map.len() < MAX_TRACKED
            && !map.contains_key(n)
        {
            map.insert(n.to_string(), Arc::clone(&progress));
            kept = Some(n.to_string());
        }
        Tracked {
            shared,
            name: kept,
            progress,
        }
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        if let Some(n) = &self.name
            && let Ok(mut map) = self.shared.progress.lock()
        {
            map.remove(n);
        }
    }
}

/// The addresses a request's Host may name: the one listened on, and
/// `localhost` at its port.
fn hosts(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut h = vec![addr.to_string(), format!("localhost:{port}")];
    if addr.ip().is_unspecified() || addr.is_ipv4() {
        h.push(format!("127.0.0.1:{port}"));
    }
    h.dedup();
    h
}

/// Check the options and the scenario (bad input: exit 2), then serve
/// until SIGINT or SIGTERM. The URL is printed on stdout, one line, once
/// the socket listens.
pub fn run_foreground(opts: Options) -> Result<(), Error> {
    if !opts.listen.ip().is_loopback() {
        return Err(Error::Input(format!(
            "--listen {}: not a loopback address; herdsim ui serves this machine only \
             (127.0.0.1 or [::1], any port)",
            opts.listen
        )));
    }
    let budget = crate::sweep::memory::budget(None);
    let src = api::Source {
        scenario: opts.scenario.clone(),
        seed: opts.seed,
        budget,
        bounds: api::WorkBounds::default(),
        threads: crate::sweep::default_threads(),
    };
    // The scenario as given must load: its errors are the CLI's, exit 2.
    api::describe(&src)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::Failure(anyhow::anyhow!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let listener = TcpListener::bind(opts.listen).await.map_err(|e| {
            Error::Failure(anyhow::anyhow!("cannot listen on {}: {e}", opts.listen))
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Failure(anyhow::anyhow!("cannot read the address: {e}")))?;
        let shared = Arc::new(Shared {
            src: Arc::new(src),
            hosts: hosts(addr),
            http: HttpBounds::default(),
            runs: Semaphore::new(MAX_RUNS),
            conns: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            progress: Mutex::new(HashMap::new()),
        });
        let url = format!("http://{addr}/");
        crate::term::print_out(&format!("{url}\n"))?;
        if !opts.quiet {
            let name = opts
                .scenario
                .as_ref()
                .map_or("the built-in default scenario".to_string(), |p| {
                    p.display().to_string()
                });
            note(format_args!(
                "herdsim ui: {name} on {url} (open it in a browser); Ctrl-C to stop"
            ));
        }
        let stop = crate::serve::shutdown_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        // Out of descriptors, a reset before accept: go on.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    // Over the bound: closed at once, unanswered.
                    let Ok(permit) = Arc::clone(&shared.conns).try_acquire_owned() else {
                        drop(stream);
                        continue;
                    };
                    let shared = Arc::clone(&shared);
                    tokio::spawn(async move {
                        connection(stream, &shared).await;
                        drop(permit);
                    });
                }
            }
        }
        if !opts.quiet {
            note(format_args!("herdsim ui: stopped"));
        }
        Ok(())
    })
}

async fn connection(mut stream: TcpStream, shared: &Shared) {
    let b = shared.http;
    let reply = match http::read_request_within(&mut stream, &b).await {
        Err(r) => http::error_json(r.status, &r.message),
        Ok(req) => match http::check_origin(&req, &shared.hosts) {
            Err(r) => http::error_json(r.status, &r.message),
            Ok(()) => route(req, &mut stream, shared).await,
        },
    };
    http::send(&mut stream, &reply, &b).await;
}

async fn route(req: Request, stream: &mut TcpStream, shared: &Shared) -> Vec<u8> {
    let json =
        |v: serde_json::Value| http::response(200, "application/json", v.to_string().as_bytes());
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/") => http::response(200, "text/html; charset=utf-8", PAGE.as_bytes()),
        // Loading the scenario reads its file and data files: off the runtime.
        ("GET", "/api/scenario") => {
            let src = Arc::clone(&shared.src);
            match tokio::task::spawn_blocking(move || api::describe(&src)).await {
                Ok(Ok(v)) => json(v),
                Ok(Err(e)) => http::error_json(400, &e.to_string()),
                Err(e) => http::error_json(500, &format!("the scenario could not be read: {e}")),
            }
        }
        ("POST", "/api/run") => match run(req, stream, shared, Ask::Run).await {
            Ok(v) => json(v),
            Err(r) => http::error_json(r.status, &r.message),
        },
        ("POST", "/api/timeline") => match run(req, stream, shared, Ask::Timeline).await {
            Ok(v) => json(v),
            Err(r) => http::error_json(r.status, &r.message),
        },
        ("POST", "/api/tradeoff") => match run(req, stream, shared, Ask::Tradeoff).await {
            Ok(v) => json(v),
            Err(r) => http::error_json(r.status, &r.message),
        },
        ("POST", "/api/tune") => match run(req, stream, shared, Ask::Tune).await {
            Ok(v) => json(v),
            Err(r) => http::error_json(r.status, &r.message),
        },
        ("GET", p) if p.starts_with("/api/progress/") => {
            let name = &p["/api/progress/".len()..];
            let found = shared
                .progress
                .lock()
                .ok()
                .and_then(|m| m.get(name).cloned());
            match found {
                Some(pr) => json(serde_json::json!({
                    "ok": true,
                    "done": pr.done.load(Ordering::SeqCst),
                    "total": pr.total.load(Ordering::SeqCst),
                })),
                None => http::error_json(404, &format!("{name}: no such run under way")),
            }
        }
        (
            _,
            "/" | "/api/scenario" | "/api/run" | "/api/timeline" | "/api/tradeoff" | "/api/tune",
        ) => http::error_json(
            405,
            &format!("{} is not allowed on {}", req.method, req.path),
        ),
        _ => http::error_json(404, &format!("{}: no such page", req.path)),
    }
}

fn refusal(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

/// Wait until the peer closes its side (or the connection fails): the
/// page gave up on this request (a newer one replaced it).
async fn gone(stream: &mut TcpStream) {
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte).await {
            Ok(0) | Err(_) => return,
            // A request after this one: it is never read.
            Ok(_) => std::future::pending::<()>().await,
        }
    }
}

/// What a POST asks for.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// The table, summary.csv and figure.
    Run,
    /// One message's timeline.
    Timeline,
    /// Duplicates against TTFR p95 as the window moves.
    Tradeoff,
    /// `herdsim tune` of the settings.
    Tune,
}

async fn run(
    req: Request,
    stream: &mut TcpStream,
    shared: &Shared,
    ask: Ask,
) -> Result<serde_json::Value, Refusal> {
    let ct = req
        .header("content-type")
        .map_err(|_| refusal(400, "Content-Type given more than once"))?
        .unwrap_or_default();
    if !ct.to_ascii_lowercase().starts_with("application/json") {
        return Err(refusal(
            415,
            "a run is asked as JSON (Content-Type: application/json)",
        ));
    }
    let settings: api::Settings = serde_json::from_slice(&req.body).map_err(|e| {
        refusal(
            400,
            format!("the settings are not what the page sends: {e}"),
        )
    })?;
    // Wait for a free run, unless the page gives up first.
    let permit = tokio::select! {
        p = shared.runs.acquire() => p.map_err(|_| refusal(503, "herdsim ui is stopping"))?,
        () = gone(stream) => return Err(refusal(400, "the page gave up on this run")),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let src = Arc::clone(&shared.src);
    let tracked = Tracked::new(shared, settings.run.as_deref());
    let work = {
        let stop = Arc::clone(&stop);
        let pr = Arc::clone(&tracked.progress);
        tokio::task::spawn_blocking(move || match ask {
            Ask::Run => api::run(&src, &settings, &stop, &pr),
            Ask::Timeline => api::timeline(&src, &settings),
            Ask::Tradeoff => api::tradeoff(&src, &settings, &stop, &pr),
            Ask::Tune => api::tune(&src, &settings, &stop, &pr),
        })
    };
    tokio::pin!(work);
    let seconds = shared.src.bounds.max_seconds;
    let deadline = tokio::time::sleep(Duration::from_secs(seconds));
    tokio::pin!(deadline);
    let mut watching = true;
    let outcome = loop {
        tokio::select! {
            r = &mut work => break r,
            () = &mut deadline, if !timed_out.load(Ordering::SeqCst) => {
                timed_out.store(true, Ordering::SeqCst);
                stop.store(true, Ordering::SeqCst);
            }
            () = gone(stream), if watching => {
                watching = false;
                stop.store(true, Ordering::SeqCst);
            }
        }
    };
    drop(permit);
    drop(tracked);
    match outcome {
        Err(e) => Err(refusal(500, format!("the run failed: {e}"))),
        Ok(Err(e)) => Err(refusal(500, e.to_string())),
        Ok(Ok(api::Ran::Done(v))) => Ok(v),
        Ok(Ok(api::Ran::Refused(m))) => Err(refusal(422, m)),
        Ok(Ok(api::Ran::Stopped)) if timed_out.load(Ordering::SeqCst) => Err(refusal(
            503,
            format!(
                "the run was stopped after {seconds} s, herdsim ui's bound (docs/ui.md): ask for \
                 fewer replications, messages or agents"
            ),
        )),
        Ok(Ok(api::Ran::Stopped)) => Err(refusal(400, "the page gave up on this run")),
    }
}
