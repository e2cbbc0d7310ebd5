//! `herdsim live` as a library call: check the input, run the live
//! replications, write the results (and with `compare`, simulate the same
//! scenario with the measured link delays and compare).

use super::ledger::{self, Ledger};
use super::{LiveError, Outcome, Setup, compare, keys, observe::Observer};
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::metrics::{Job, Row};
use crate::model::{Posts, Prepared, simulate_posts};
use crate::report::{self, table, write_atomic};
use crate::scenario::{Loaded, Scenario};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What `herdsim live` runs without a scenario file: the built-in default
/// scenario reduced to a demonstration of well under a minute at the
/// default speed (the user's --set and --reps still apply after these).
/// Its policy is `spec` (the protocol at work) unless `--policy` says
/// otherwise.
pub const DEMO_SETS: [&str; 2] = ["workload.count=20", "reps=3"];

/// A run expected to take longer than this (real time) says so first.
const LONG_RUN: Duration = Duration::from_secs(180);

/// What `herdsim live` was asked.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub scenario: Option<PathBuf>,
    pub sets: Vec<String>,
    pub seed: Option<u64>,
    pub reps: Option<u32>,
    pub policy: Option<String>,
    pub url: Option<String>,
    /// A PEM file of CA certificates trusted (besides Mozilla's roots) for
    /// a `wss://` URL.
    pub ca_cert: Option<PathBuf>,
    pub speed: f64,
    pub out: PathBuf,
    pub keyed: bool,
    /// The `--keyed` secret's file (default: [`keys::default_path`]).
    pub key_file: Option<PathBuf>,
    /// Real seconds a replication may last before it fails (default: from
    /// the workload, see [`default_deadline`]).
    pub deadline: Option<f64>,
    pub compare: bool,
    pub quiet: bool,
    pub server_log: Option<PathBuf>,
}

/// What a finished (or interrupted) session produced.
#[derive(Debug)]
pub struct Finished {
    /// The text for stdout.
    pub stdout: String,
    /// Stopped by a signal; the files hold what was measured until then.
    pub interrupted: bool,
    /// The results folder.
    pub dir: PathBuf,
    /// Replications finished (the last one partial when interrupted).
    pub reps_done: usize,
    pub reps_planned: u32,
    /// Some metric or count disagreed (with `compare`).
    pub disagree: bool,
    /// What the wire held that a user must know (refusals, counts that
    /// differ from the workload), for stderr.
    pub warnings: Vec<String>,
    /// `compare` failed after the live run: the live results are written
    /// and `stdout` holds their table; this is the error to report.
    pub failed: Option<LiveError>,
}

/// A checked session, ready to run.
pub struct Checked {
    loaded: Loaded,
    setup: Setup,
    name: String,
    master: u64,
    reps: u32,
    dir: PathBuf,
    opts: Options,
    /// Notes for stderr (what the live run does not use, how long it takes,
    /// what the server will refuse), printed before it starts.
    pub notes: Vec<String>,
}

fn bad(m: impl Into<String>) -> LiveError {
    LiveError::BadInput(m.into())
}

/// Check everything before anything runs or is written.
pub fn check(opts: Options) -> Result<Checked, LiveError> {
    let tls = check_flags(&opts)?;
    let mut loaded = load(&opts)?;
    let base = loaded.base()?;
    let mut notes = super::check_scenario(&loaded, &base)?;
    let policy = policy_of(&opts, &loaded, &base)?;
    if opts.scenario.is_none() {
        notes.insert(0, super::demo::note(&base, policy));
    }
    if opts.url.is_some() {
        notes.extend(real_time_server(&mut loaded, &base, policy, opts.speed)?);
    }
    let base = loaded.base()?;
    // Every distribution must prepare (empirical files readable).
    let prepared = Prepared::with_cache(&base, &loaded.base_dir, &loaded.data)
        .map_err(|e| bad(format!("{}: {e}", loaded.file)))?;
    let dir = check_paths(&opts, &base)?;
    let keys = match opts.keyed {
        false => None,
        true => Some(load_keys(&opts)?),
    };
    let deadline = match opts.deadline {
        Some(secs) if secs.is_finite() && secs > 0.0 => Duration::from_secs_f64(secs.min(1e9)),
        Some(secs) => {
            return Err(bad(format!(
                "--deadline {secs}: must be a number of seconds above 0"
            )));
        }
        None => default_deadline(&base, opts.speed),
    };
    notes.extend(operator_limit_note(&prepared, &base, policy, &opts));
    notes.extend(duration_note(&base, opts.speed));
    let setup = Setup {
        scenario: base.clone(),
        base_dir: loaded.base_dir.clone(),
        cache: loaded.data.clone(),
        policy,
        speed: opts.speed,
        seed: 0,
        url: opts.url.clone(),
        tls,
        keys,
        deadline,
        trace: true,
        server_log: opts.server_log.clone(),
    };
    Ok(Checked {
        name: base.name.clone(),
        master: base.seed,
        reps: base.reps,
        loaded,
        setup,
        dir,
        opts,
        notes,
    })
}

/// The `--keyed` secret: `--key-file`, else the default file (made on
/// first use).
fn load_keys(opts: &Options) -> Result<keys::Secret, LiveError> {
    let path = match opts.key_file.clone().or_else(keys::default_path) {
        Some(p) => p,
        None => {
            return Err(bad(
                "--keyed: no place for the key file (neither HOME nor XDG_DATA_HOME nor \
                 HERDSIM_KEY_FILE is set); give one with --key-file FILE",
            ));
        }
    };
    keys::load_or_create(&path).map_err(|e| bad(format!("--key-file {e}")))
}

/// A server we do not run keeps its timers in real time. The scenario's
/// server settings are taken as that server's (set them to what it runs
/// with); at `--speed` S they last S times longer in scenario time, for the
/// agents' belief of the TTL and for the simulation `--compare` runs, so
/// they are scaled here. The real agentchat server also rate-limits the
/// operator like any connection. Returns the note for stderr.
fn real_time_server(
    loaded: &mut Loaded,
    base: &Scenario,
    policy: PolicyKind,
    speed: f64,
) -> Result<Vec<String>, LiveError> {
    let sv = &base.server;
    let mut sets = Vec::new();
    if speed != 1.0 {
        for (key, ms) in [
            ("server.ttl_ms", sv.ttl_ms),
            ("server.rate_limit_ms", sv.rate_limit_ms),
            ("server.sweep_every_ms", sv.sweep_every_ms),
            ("server.sweep_drift_ms", sv.sweep_drift_ms),
        ] {
            sets.push(format!("{key}={}", ms * speed));
        }
    }
    let origin = format!("--url at --speed {speed}");
    for s in &sets {
        loaded.apply_as(s, &origin)?;
    }
    let mut notes = Vec::new();
    if speed != 1.0 {
        notes.push(real_time_note(sv, policy, speed));
    }
    Ok(notes)
}

/// The `--url` note: why the server's settings become longer (or
/// shorter) in scenario time, in plain words.
fn real_time_note(sv: &crate::scenario::ServerSpec, policy: PolicyKind, speed: f64) -> String {
    let scaled = |ms: f64| format!("{ms} ms of real time = {} ms of scenario time", ms * speed);
    let sweep = if policy == PolicyKind::Agentchat036 {
        format!(", expiry sweep every {}", scaled(sv.sweep_every_ms))
    } else {
        String::new()
    };
    format!(
        "the server at --url runs on real time, not on the scenario's clock: this run takes the \
         scenario's [server] settings as that server's own (set them to what it runs with). At \
         --speed {speed} one ms of real time is {speed} ms of scenario time, so the server's \
         timers last {speed} times longer for the agents: claim TTL {}, rate limit {}{sweep}. \
         The agents wait for that TTL, and --compare simulates it so",
        scaled(sv.ttl_ms),
        scaled(sv.rate_limit_ms),
    )
}

/// The posts of one replication's workload that the server will refuse
/// for the operator's rate limit (`limit_us` of scenario time between
/// accepted posts), drawn as the run will draw them: (refused, posts, the
/// shortest gap between two consecutive posts in scenario ms).
fn refused_posts(p: &Prepared, limit_us: u64, seed: u64) -> (u64, u64, f64) {
    let mut w = p.new_workload(seed);
    let (mut refused, mut posts) = (0u64, 0u64);
    let (mut prev, mut accepted) = (None::<u64>, None::<u64>);
    let mut min_gap = f64::INFINITY;
    let mut now = 0;
    while let Some(at) = w.next_post(now) {
        w.draw(u32::try_from(posts).unwrap_or(u32::MAX));
        posts += 1;
        now = at;
        if let Some(p) = prev {
            min_gap = min_gap.min((at - p) as f64 / 1000.0);
        }
        prev = Some(at);
        match accepted {
            Some(l) if at - l < limit_us => refused += 1,
            _ => accepted = Some(at),
        }
        if posts >= 1_000_000 {
            break;
        }
    }
    (refused, posts, min_gap)
}

/// Before the run: how many posts an agentchat server will refuse for the
/// operator's rate limit, and (for a server in real time) the speed that
/// would avoid it. The embedded server limits the operator only with
/// `server.rate_limit_operator`; a real agentchat server (`--url`) always.
fn operator_limit_note(
    p: &Prepared,
    s: &Scenario,
    policy: PolicyKind,
    opts: &Options,
) -> Option<String> {
    let sv = &s.server;
    let limited = sv.rate_limit_operator || opts.url.is_some();
    if policy != PolicyKind::Agentchat036 || !limited || sv.rate_limit_ms <= 0.0 {
        return None;
    }
    let limit_us = (sv.rate_limit_ms * 1000.0) as u64;
    let (mut refused, mut posts, mut min_gap) = (0, 0, f64::INFINITY);
    for seed in super::seeds(s.seed, s.reps) {
        let (r, n, g) = refused_posts(p, limit_us, seed);
        refused += r;
        posts += n;
        min_gap = min_gap.min(g);
    }
    if refused == 0 {
        return None;
    }
    // Against a server in real time the limit was scaled by the speed.
    let avoid = if opts.url.is_some() && min_gap.is_finite() {
        let real_ms = sv.rate_limit_ms / opts.speed;
        format!(
            "; its limit is {real_ms} ms of real time, and the closest posts are {} ms of \
             scenario time apart: --speed {} or less avoids every refusal",
            down2(min_gap),
            down2(min_gap / real_ms)
        )
    } else {
        String::new()
    };
    let sim = if sv.rate_limit_operator {
        "--compare simulates the same refusals"
    } else {
        "set server.rate_limit_operator = true so that --compare simulates the same refusals \
         (a real agentchat server limits every connection, the operator's too)"
    };
    Some(format!(
        "an agentchat server will refuse {refused} of the workload's {posts} posts for the \
         operator's rate limit (one MSG per {} ms of scenario time): those questions reach no \
         agent; {sim}{avoid}",
        sv.rate_limit_ms
    ))
}

/// The real time a replication may take before it fails: twice its
/// workload and grace, plus a minute.
pub fn default_deadline(s: &Scenario, speed: f64) -> Duration {
    let d = super::driver::real_of(expected_us(s), speed)
        .saturating_add(super::driver::grace(s.server.ttl_ms, speed));
    d.saturating_mul(2).saturating_add(Duration::from_secs(60))
}

/// Before a long run: how long it will take.
fn duration_note(s: &Scenario, speed: f64) -> Option<String> {
    let per = super::driver::real_of(expected_us(s), speed);
    let total = per.saturating_mul(s.reps);
    (total > LONG_RUN).then(|| {
        format!(
            "this run takes about {} of real time ({} replications of about {}; --speed {speed}); \
             Ctrl-C keeps what was measured",
            show_duration(total),
            s.reps,
            show_duration(per)
        )
    })
}

/// `x` rounded down to two significant digits (a bound to stay under).
fn down2(x: f64) -> String {
    if !(x.is_finite() && x > 0.0) {
        return crate::dist::show(x);
    }
    let e = x.log10().floor() as i32 - 1;
    let unit = 10f64.powi(e);
    let v = (x / unit).floor() * unit;
    format!("{:.*}", usize::try_from(-e).unwrap_or(0), v)
}

/// `1h 05m`, `12m 30s`, `45s`.
fn show_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The flags that need no scenario: `--speed`, `--url`, `--ca-cert`
/// only with a `wss://` URL (its file read here: the TLS configuration),
/// and `--server-log` only with the embedded server.
fn check_flags(opts: &Options) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>, LiveError> {
    if !(opts.speed.is_finite() && (super::MIN_SPEED..=super::MAX_SPEED).contains(&opts.speed)) {
        return Err(bad(format!(
            "--speed {}: must be a number from {} to {}",
            opts.speed,
            super::MIN_SPEED,
            super::MAX_SPEED
        )));
    }
    if opts.key_file.is_some() && !opts.keyed {
        return Err(bad("--key-file: only with --keyed"));
    }
    let tls_url = match &opts.url {
        Some(u) if u.starts_with("wss://") => true,
        Some(u) if u.starts_with("ws://") => false,
        Some(u) => return Err(bad(format!("--url {u}: must start with ws:// or wss://"))),
        None => false,
    };
    if opts.url.is_some() && opts.server_log.is_some() {
        return Err(bad(
            "--server-log: only the embedded server writes a log (drop --url or --server-log)",
        ));
    }
    if opts.ca_cert.is_some() && !tls_url {
        return Err(bad(
            "--ca-cert: only for a wss:// server (--url wss://HOST[:PORT]); ws:// and the \
             embedded server use no TLS",
        ));
    }
    if !tls_url {
        return Ok(None);
    }
    crate::tls::client_config(opts.ca_cert.as_deref())
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The scenario (the file or the built-in default) with the `--set`,
/// `--seed` and `--reps` overrides applied.
fn load(opts: &Options) -> Result<Loaded, LiveError> {
    // Without a file, the demonstration's reductions come first; the
    // user's --set, --seed and --reps after them (a value of the file that
    // one of them replaces is not validated).
    let mut overrides: Vec<(String, String)> = Vec::new();
    if opts.scenario.is_none() {
        for s in DEMO_SETS {
            overrides.push((s.to_string(), "the demonstration".to_string()));
        }
    }
    for s in &opts.sets {
        overrides.push((s.clone(), format!("--set {s}")));
    }
    if let Some(seed) = opts.seed {
        overrides.push((format!("seed={seed}"), format!("--seed {seed}")));
    }
    if let Some(reps) = opts.reps {
        overrides.push((format!("reps={reps}"), format!("--reps {reps}")));
    }
    Ok(Loaded::load_with(opts.scenario.as_deref(), &overrides)?)
}

/// The policy: `--policy`, else the scenario's first.
fn policy_of(
    opts: &Options,
    loaded: &Loaded,
    base: &crate::scenario::Scenario,
) -> Result<PolicyKind, LiveError> {
    match &opts.policy {
        Some(p) => p
            .parse::<PolicyKind>()
            .map_err(|e| bad(format!("--policy {p}: {e}"))),
        // The demonstration shows the protocol working.
        None if opts.scenario.is_none() => Ok(PolicyKind::Spec),
        None => base
            .policy_kinds()
            .first()
            .copied()
            .ok_or_else(|| bad(format!("{}: `policies` is empty", loaded.file))),
    }
}

/// The results folder (`--out`/`<name>-live`), which must be a folder if
/// it exists, and a `--server-log` that is not a folder.
fn check_paths(opts: &Options, base: &crate::scenario::Scenario) -> Result<PathBuf, LiveError> {
    let dir = opts.out.join(format!("{}-live", base.name));
    if dir.exists() && !dir.is_dir() {
        return Err(bad(format!(
            "{}: exists and is not a folder",
            dir.display()
        )));
    }
    if let Some(log) = &opts.server_log
        && log.is_dir()
    {
        return Err(bad(format!("--server-log {}: is a folder", log.display())));
    }
    Ok(dir)
}

/// Expected posts of one replication (at least 1), for the progress bar.
fn expected_posts(s: &Scenario) -> u64 {
    let w = &s.workload;
    let n = match w.duration_ms {
        Some(d) => d / w.mean_gap_ms.max(1e-9),
        None => w.count as f64,
    };
    n.clamp(1.0, 1e12) as u64
}

/// Expected scenario duration of one replication's workload (µs).
fn expected_us(s: &Scenario) -> u64 {
    let w = &s.workload;
    let ms = match w.duration_ms {
        Some(d) => d,
        None => w.count as f64 * w.mean_gap_ms,
    };
    (ms * 1000.0).max(1.0) as u64
}

fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    let target = if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {elapsed_precise} {wide_bar} {msg}, ETA {eta}")
    {
        bar.set_style(style);
    }
    bar
}

fn failure(e: impl std::fmt::Display) -> LiveError {
    LiveError::Failure(e.to_string())
}

fn encode(e: impl Into<anyhow::Error>) -> LiveError {
    LiveError::Encode(e.into())
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> LiveError {
    let path = path.to_path_buf();
    move |source| LiveError::Io { path, source }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), LiveError> {
    write_atomic(path, bytes).map_err(io_at(path))
}

impl Checked {
    /// The results folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Run, write every file, return the stdout text. `bar_hook` receives
    /// the progress bar (to keep it tidy while a signal message prints).
    pub fn run(
        self,
        stop: &AtomicBool,
        bar_hook: &dyn Fn(&ProgressBar),
    ) -> Result<Finished, LiveError> {
        // The folder first: an unwritable --out fails before minutes of live run.
        let existed = self.dir.exists();
        std::fs::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
        let rows = match self.run_live(stop, bar_hook) {
            Ok(rows) => rows,
            Err(e) => {
                // Nothing was measured (no connection): leave no empty
                // results folder behind. `remove_dir` removes only an
                // empty folder, and only one this run created.
                if !existed {
                    let _ = std::fs::remove_dir(&self.dir);
                }
                return Err(e);
            }
        };
        let interrupted = rows.iter().any(|(_, o)| o.interrupted);
        let ledger = Ledger::total(rows.iter().map(|(_, o)| &o.ledger));
        let mut warnings = ledger.warnings();
        if ledger.measured_nothing() {
            // Never a row of zeros: the counts that say why, and an error.
            write(&self.dir.join("live.csv"), &self.live_csv(&rows)?)?;
            return Err(failure(format!(
                "nothing was measured: {}; {} has the counts of what the server sent",
                warnings.join("; "),
                self.dir.join("live.csv").display()
            )));
        }
        let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();
        let summary = report::summarise(&plain, &no_params);
        write_tables(&self.dir, &self.name, &plain, &summary)?;
        write(&self.dir.join("live.csv"), &self.live_csv(&rows)?)?;
        if let Some((_, o)) = rows.first() {
            write(&self.dir.join("trace.jsonl"), &o.trace)?;
        }
        let delays: Vec<u64> = rows
            .iter()
            .flat_map(|(_, o)| o.delays_us.iter().copied())
            .collect();
        let delays_path = self.dir.join("link_delays.csv");
        write(&delays_path, &delays_csv(&delays))?;
        warnings.extend(self.end_notes(&rows));
        warnings.extend(self.delay_warning(&delays));
        warnings.extend(ledger.foreign_note());
        let mut stdout = self.headline(&rows);
        stdout.push_str(&table::render(&[], &summary));
        stdout.push_str(&delay_line(&delays));
        let mut disagree = false;
        let mut failed = None;
        if self.opts.compare && !interrupted {
            match self.compare_with_sim(&rows, &delays, &delays_path) {
                Ok((text, differ)) => {
                    stdout.push_str(&text);
                    disagree = differ;
                }
                // The live results stand: written above, printed below.
                Err(e) => failed = Some(self.compare_failed(e)),
            }
        }
        if self.opts.scenario.is_none() && !interrupted {
            let seeds = super::seeds(self.master, rows.len() as u32);
            let live = super::results(&rows);
            match super::demo::epilogue(&self.loaded, self.setup.policy, &seeds, &live) {
                Ok(text) => stdout.push_str(&text),
                Err(e) => warnings.push(format!("the demonstration's contrast: {e}")),
            }
        }
        stdout.push_str(&format!("results in {}\n", self.dir.display()));
        Ok(Finished {
            stdout,
            interrupted,
            dir: self.dir.clone(),
            reps_done: rows.len(),
            reps_planned: self.reps,
            disagree,
            warnings,
            failed,
        })
    }

    /// A `--compare` that failed after the live run: the error says that
    /// the live results were kept (same exit status as the error's).
    fn compare_failed(&self, e: LiveError) -> LiveError {
        LiveError::Compare {
            dir: self.dir.clone(),
            source: Box::new(e),
        }
    }

    /// Replications that ended at the grace or cut their trace.
    fn end_notes(&self, rows: &[(Row, Outcome)]) -> Vec<String> {
        let mut notes = Vec::new();
        for (r, o) in rows {
            if o.ended == super::driver::Ended::Grace {
                notes.push(format!(
                    "replication {} ended at its grace ({} claim TTLs, at least {} s of scenario \
                     time, after the last post) with {} timers still pending: its messages are \
                     counted as they stood",
                    r.job.rep,
                    super::driver::GRACE_TTLS,
                    super::driver::MIN_GRACE_MS / 1000,
                    o.pending_at_end
                ));
            }
            if o.trace_cut {
                notes.push(format!(
                    "the trace stopped at {} MiB (trace.jsonl holds its beginning)",
                    super::driver::MAX_TRACE_BYTES >> 20
                ));
            }
        }
        notes
    }

    /// The measured link delay far above the scenario's: at this speed the
    /// real link is a distortion of the scenario (the comparison uses the
    /// measured delays, the scenario's question is then another one).
    fn delay_warning(&self, delays: &[u64]) -> Option<String> {
        let n = &self.setup.scenario.network;
        let scenario_ms = n.base_ms + n.jitter.mean_ms().unwrap_or(0.0);
        let measured = Observer::delay_quantile_ms(delays, 0.5);
        if !(measured.is_finite() && measured > 2.0 * scenario_ms.max(1.0)) {
            return None;
        }
        // The real delay is measured / speed real ms; at speed v it is
        // measured / speed * v of scenario time.
        let fit = self.setup.speed * scenario_ms.max(1.0) / measured;
        Some(format!(
            "the measured one-way link delay (median {measured:.1} ms of scenario time at \
             --speed {}) is far above the scenario's (about {scenario_ms:.1} ms): the real link \
             stretched by the speed dominates; --speed {} or less keeps it at the scenario's",
            self.setup.speed,
            down2(fit)
        ))
    }

    /// The live replications, one after another, behind a progress bar.
    fn run_live(
        &self,
        stop: &AtomicBool,
        bar_hook: &dyn Fn(&ProgressBar),
    ) -> Result<Vec<(Row, Outcome)>, LiveError> {
        // The bar counts posts: it moves with every message.
        let per_rep = expected_posts(&self.setup.scenario);
        let bar = progress_bar(per_rep * u64::from(self.reps), self.opts.quiet);
        bar_hook(&bar);
        let reps = self.reps;
        let mut prog = |rep: u32, posts: u64| {
            bar.set_position(u64::from(rep) * per_rep + posts.min(per_rep));
            bar.set_message(format!("live rep {}/{reps}, {posts} posts", rep + 1));
        };
        let rows = super::run_reps(&self.setup, self.master, self.reps, stop, &mut prog)?;
        bar.finish_and_clear();
        Ok(rows)
    }

    /// The first line of stdout: what ran against which server.
    fn headline(&self, rows: &[(Row, Outcome)]) -> String {
        format!(
            "live: {} under {} at speed {} against {}{}\n",
            self.name,
            self.setup.policy.name(),
            self.setup.speed,
            rows.first()
                .map_or("(no connection)".to_string(), |(_, o)| o.url.clone()),
            if self.setup.url.is_none() {
                " (embedded herdsim serve)"
            } else {
                ""
            }
        )
    }

    /// `--compare`: simulate with the measured delays, write `sim/`,
    /// `compare.csv` and `compare.png`; the comparison's text for stdout,
    /// and whether some metric disagreed.
    fn compare_with_sim(
        &self,
        rows: &[(Row, Outcome)],
        delays: &[u64],
        delays_path: &Path,
    ) -> Result<(String, bool), LiveError> {
        if delays.is_empty() {
            return Err(failure(
                "--compare: no link delay was measured (no message was relayed)",
            ));
        }
        let live: Vec<RunResult> = super::results(rows);
        let reps = rows.len() as u32;
        let (sim, posts): (Vec<RunResult>, Vec<Posts>) = self
            .simulate(delays_path, reps, self.setup.policy)?
            .into_iter()
            .unzip();
        let lines = compare::compare(&live, &sim);
        let ledger = Ledger::total(rows.iter().map(|(_, o)| &o.ledger));
        let questions = live
            .iter()
            .filter_map(|r| r.get("messages"))
            .map(|m| m as u64)
            .sum();
        let counted = [ledger.posts, ledger.refused, ledger.accepted, questions];
        let counts = compare::counts(counted, &posts, &sim);
        let disagree = lines.iter().any(|l| !l.agree) || counts.iter().any(|c| !c.agree());
        let sim_rows = self.sim_rows(&sim);
        let sim_dir = self.dir.join("sim");
        std::fs::create_dir_all(&sim_dir).map_err(io_at(&sim_dir))?;
        let sim_summary = report::summarise(&sim_rows, &no_params);
        write_tables(&sim_dir, &self.name, &sim_rows, &sim_summary)?;
        let policy = self.setup.policy.name();
        let mut csv = compare::csv(&self.name, policy, &lines).map_err(encode)?;
        csv.extend(compare::counts_csv(&self.name, policy, &counts).map_err(encode)?);
        write(&self.dir.join("compare.csv"), &csv)?;
        let title = format!(
            "{}: live ({} at speed {}) vs simulated, {} replications",
            self.name,
            self.setup.policy.name(),
            self.setup.speed,
            rows.len()
        );
        report::versus::figure(&self.dir.join("compare.png"), &title, &lines).map_err(failure)?;
        let mut text =
            String::from("\nlive versus simulated (same seeds, measured link delays):\n");
        text.push_str(&compare::table(&lines));
        text.push('\n');
        text.push_str(&compare::counts_table(&counts));
        let alike = self.alike_policies(&live, delays_path, reps)?;
        let me = self.setup.policy.name();
        if alike.is_empty() {
            // Only this policy fits (or none does): nothing to add.
        } else if disagree {
            text.push_str(&format!(
                "\nevery metric agrees with a simulation of {} instead: the server \
                 arbitrates like that, not like {me}\n",
                alike.join(", ")
            ));
        } else {
            text.push('\n');
            text.push_str(&compare::alike_advice(&self.name, me, &alike));
        }
        Ok((text, disagree))
    }

    /// The other policies whose simulation every metric of the live run
    /// agrees with as well (the scenario cannot tell them apart).
    fn alike_policies(
        &self,
        live: &[RunResult],
        delays: &Path,
        reps: u32,
    ) -> Result<Vec<&'static str>, LiveError> {
        let mut alike = Vec::new();
        for policy in PolicyKind::ALL {
            if policy == self.setup.policy {
                continue;
            }
            let sim: Vec<RunResult> = self
                .simulate(delays, reps, policy)?
                .into_iter()
                .map(|(r, _)| r)
                .collect();
            if compare::compare(live, &sim).iter().all(|l| l.agree) {
                alike.push(policy.name());
            }
        }
        Ok(alike)
    }

    /// The simulated results as rows, with the seeds of the live
    /// replications.
    fn sim_rows(&self, sim: &[RunResult]) -> Vec<Row> {
        sim.iter()
            .enumerate()
            .map(|(r, res)| Row {
                job: Job {
                    point: 0,
                    policy: self.setup.policy,
                    rep: r as u32,
                    seed: super::seeds(self.master, r as u32 + 1)[r],
                },
                result: res.clone(),
            })
            .collect()
    }

    /// The simulator on the same scenario, its network replaced by the
    /// measured one-way delays (an empirical distribution), same seeds.
    fn simulate(
        &self,
        delays: &Path,
        reps: u32,
        policy: PolicyKind,
    ) -> Result<Vec<(RunResult, Posts)>, LiveError> {
        let mut loaded = self.loaded.clone();
        // A relative path in a `--set` is resolved against the scenario's
        // folder, not the working directory that `--out` is relative to.
        let delays = &std::path::absolute(delays).map_err(io_at(delays))?;
        let path = toml::Value::String(delays.display().to_string()).to_string();
        for set in [
            "network.base_ms=0".to_string(),
            format!("network.jitter={{kind=\"empirical\", path={path}}}"),
            "network.fifo=true".to_string(),
            "server.processing={kind=\"fixed\", ms=0}".to_string(),
            "server.disconnect_detect={kind=\"fixed\", ms=0}".to_string(),
        ] {
            loaded.apply_set(&set)?;
        }
        let s = loaded.base()?;
        let p = Prepared::with_cache(&s, &loaded.base_dir, &loaded.data)
            .map_err(|e| bad(format!("{}: {e}", delays.display())))?;
        super::seeds(self.master, reps)
            .into_iter()
            .map(|seed| {
                simulate_posts(&p, policy, seed, None)
                    .map_err(|e| bad(format!("{}: {e}", self.loaded.file)))
            })
            .collect()
    }

    fn live_csv(&self, rows: &[(Row, Outcome)]) -> Result<Vec<u8>, LiveError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let head = [
            "scenario",
            "policy",
            "rep",
            "seed",
            "live",
            "url",
            "speed",
            "keyed",
            "interrupted",
            "elapsed_ms",
            "link_delay_samples",
            "link_delay_p50_ms",
            "link_delay_p95_ms",
            "link_delay_p99_ms",
            "timer_late_p50_real_ms",
            "timer_late_p99_real_ms",
            "ended",
            "pending_at_end",
            "trace_cut",
        ];
        let head: Vec<&str> = head.into_iter().chain(ledger::COLUMNS).collect();
        w.write_record(&head).map_err(encode)?;
        for (r, o) in rows {
            let q = |xs: &[u64], p: f64| report::num(Observer::delay_quantile_ms(xs, p));
            let mut rec = vec![
                self.name.clone(),
                self.setup.policy.name().to_string(),
                r.job.rep.to_string(),
                r.job.seed.to_string(),
                "true".into(),
                o.url.clone(),
                report::num(self.setup.speed),
                self.setup.keys.is_some().to_string(),
                o.interrupted.to_string(),
                report::num(o.elapsed_us as f64 / 1000.0),
                o.delays_us.len().to_string(),
                q(&o.delays_us, 0.5),
                q(&o.delays_us, 0.95),
                q(&o.delays_us, 0.99),
                q(&o.lateness_us, 0.5),
                q(&o.lateness_us, 0.99),
                o.ended.name().to_string(),
                o.pending_at_end.to_string(),
                o.trace_cut.to_string(),
            ];
            rec.extend(o.ledger.row());
            w.write_record(&rec).map_err(encode)?;
        }
        w.into_inner().map_err(|e| failure(e.to_string()))
    }
}

fn show(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{x:.1}")
    }
}

fn delays_csv(delays_us: &[u64]) -> Vec<u8> {
    let mut s = String::from("delay_ms\n");
    for d in delays_us {
        s.push_str(&report::num(*d as f64 / 1000.0));
        s.push('\n');
    }
    s.into_bytes()
}

/// No swept parameters: a live session is one point.
fn no_params(_: usize) -> Vec<(String, String)> {
    Vec::new()
}

/// Write `summary.csv` and `runs.csv` into `dir`.
fn write_tables(
    dir: &Path,
    name: &str,
    rows: &[Row],
    summary: &[report::SummaryRow],
) -> Result<(), LiveError> {
    write(
        &dir.join("summary.csv"),
        &report::summary_csv(name, &[], summary).map_err(encode)?,
    )?;
    write(
        &dir.join("runs.csv"),
        &report::runs_csv(name, &[], rows, &no_params).map_err(encode)?,
    )
}

/// The stdout line of the measured link delays' quantiles.
fn delay_line(delays: &[u64]) -> String {
    format!(
        "link delay (one way, scenario ms): p50 {} p95 {} p99 {} from {} samples\n",
        show(Observer::delay_quantile_ms(delays, 0.5)),
        show(Observer::delay_quantile_ms(delays, 0.95)),
        show(Observer::delay_quantile_ms(delays, 0.99)),
        delays.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_durations_read_well() {
        assert_eq!(down2(0.651_337), "0.65");
        assert_eq!(down2(20.0), "20");
        assert_eq!(down2(1234.0), "1200");
        assert_eq!(down2(0.0), "0");
        assert_eq!(show_duration(Duration::from_secs(45)), "45s");
        assert_eq!(show_duration(Duration::from_secs(750)), "12m 30s");
        assert_eq!(show_duration(Duration::from_secs(3900)), "1h 05m");
    }

    /// The operator's refusals are predicted as the server makes them: a
    /// post less than the limit after the last *accepted* one is refused.
    #[test]
    fn refusals_are_predicted_from_the_drawn_workload() {
        let mut l = Loaded::from_text(
            "t.toml",
            "[workload]\narrivals = \"fixed\"\nmean_gap_ms = 600\ncount = 10\n",
            Path::new("."),
        )
        .expect("scenario");
        l.apply_set("reps=1").expect("set");
        let s = l.base().expect("base");
        let p = Prepared::new(&s, Path::new(".")).expect("prepared");
        // Posts at 600, 1200, ...: every second one within 1000 ms.
        assert_eq!(refused_posts(&p, 1_000_000, 1), (5, 10, 600.0));
        assert_eq!(refused_posts(&p, 500_000, 1), (0, 10, 600.0));
    }
}
