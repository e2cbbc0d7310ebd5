//! `herdsim live` as a library call: check the input, run the live
//! replications, write the results (and with `compare`, simulate the same
//! scenario with the measured link delays and compare).

use super::{LiveError, Outcome, Setup, compare, observe::Observer};
use crate::floor::PolicyKind;
use crate::metrics::RunResult;
use crate::model::{Prepared, simulate};
use crate::report::{atomic, csv_out, table};
use crate::scenario::Loaded;
use crate::sweep::{Job, Row};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

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
    /// Some metric disagreed (with `compare`).
    pub disagree: bool,
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
    /// Notes for stderr (what the live run does not use).
    pub notes: Vec<String>,
}

fn bad(m: impl Into<String>) -> LiveError {
    LiveError::BadInput(m.into())
}

/// Check everything before anything runs or is written.
pub fn check(opts: Options) -> Result<Checked, LiveError> {
    let tls = check_flags(&opts)?;
    let loaded = load(&opts)?;
    let base = loaded.base()?;
    let notes = super::check_scenario(&loaded, &base)?;
    let policy = policy_of(&opts, &loaded, &base)?;
    // Every distribution must prepare (empirical files readable).
    Prepared::with_cache(&base, &loaded.base_dir, &loaded.data)
        .map_err(|e| bad(format!("{}: {e}", loaded.file)))?;
    let dir = check_paths(&opts, &base)?;
    let setup = Setup {
        scenario: base.clone(),
        base_dir: loaded.base_dir.clone(),
        cache: loaded.data.clone(),
        policy,
        speed: opts.speed,
        seed: 0,
        url: opts.url.clone(),
        tls,
        keyed: opts.keyed,
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

/// The flags that need no scenario: `--speed`, `--url`, `--ca-cert`
/// only with a `wss://` URL (its file read here: the TLS configuration),
/// and `--server-log` only with the embedded server.
fn check_flags(opts: &Options) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>, LiveError> {
    if !(opts.speed.is_finite() && opts.speed > 0.0 && opts.speed <= super::MAX_SPEED) {
        return Err(bad(format!(
            "--speed {}: must be a number above 0 and at most {}",
            opts.speed,
            super::MAX_SPEED
        )));
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
    let mut loaded = match &opts.scenario {
        Some(p) => Loaded::from_file(p),
        None => Loaded::builtin_default(),
    }?;
    for s in &opts.sets {
        loaded.apply_set(s)?;
    }
    if let Some(seed) = opts.seed {
        loaded.apply_as(&format!("seed={seed}"), &format!("--seed {seed}"))?;
    }
    if let Some(reps) = opts.reps {
        loaded.apply_as(&format!("reps={reps}"), &format!("--reps {reps}"))?;
    }
    Ok(loaded)
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

/// Expected scenario duration of one replication (µs), for the progress bar.
fn expected_us(s: &crate::scenario::Scenario) -> u64 {
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

fn write(path: &Path, bytes: &[u8]) -> Result<(), LiveError> {
    atomic::write(path, bytes).map_err(|e| failure(format!("{}: {e}", path.display())))
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
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| failure(format!("{}: {e}", self.dir.display())))?;
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
        let plain: Vec<Row> = rows.iter().map(|(r, _)| r.clone()).collect();
        let summary = csv_out::summarise(&plain, &no_params);
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
        let mut stdout = self.headline(&rows);
        stdout.push_str(&table::render(&[], &summary));
        stdout.push_str(&delay_line(&delays));
        let mut disagree = false;
        if self.opts.compare && !interrupted {
            let (text, differ) = self.compare_with_sim(&rows, &delays, &delays_path)?;
            stdout.push_str(&text);
            disagree = differ;
        }
        stdout.push_str(&format!("results in {}\n", self.dir.display()));
        Ok(Finished {
            stdout,
            interrupted,
            dir: self.dir.clone(),
            reps_done: rows.len(),
            reps_planned: self.reps,
            disagree,
        })
    }

    /// The live replications, one after another, behind a progress bar.
    fn run_live(
        &self,
        stop: &AtomicBool,
        bar_hook: &dyn Fn(&ProgressBar),
    ) -> Result<Vec<(Row, Outcome)>, LiveError> {
        let per_rep = expected_us(&self.setup.scenario) / 1000;
        let bar = progress_bar(per_rep * u64::from(self.reps), self.opts.quiet);
        bar_hook(&bar);
        let reps = self.reps;
        let mut prog = |rep: u32, us: u64| {
            bar.set_position(u64::from(rep) * per_rep + (us / 1000).min(per_rep));
            bar.set_message(format!("live rep {}/{reps}", rep + 1));
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
        let sim = self.simulate(delays_path, rows.len() as u32)?;
        let lines = compare::compare(&live, &sim);
        let disagree = lines.iter().any(|l| !l.agree);
        let sim_rows = self.sim_rows(&sim);
        let sim_dir = self.dir.join("sim");
        std::fs::create_dir_all(&sim_dir)
            .map_err(|e| failure(format!("{}: {e}", sim_dir.display())))?;
        let sim_summary = csv_out::summarise(&sim_rows, &no_params);
        write_tables(&sim_dir, &self.name, &sim_rows, &sim_summary)?;
        write(
            &self.dir.join("compare.csv"),
            &compare::csv(&self.name, self.setup.policy.name(), &lines).map_err(failure)?,
        )?;
        let title = format!(
            "{}: live ({} at speed {}) vs simulated, {} replications",
            self.name,
            self.setup.policy.name(),
            self.setup.speed,
            rows.len()
        );
        crate::report::plot::versus_figure(&self.dir.join("compare.png"), &title, &lines)
            .map_err(failure)?;
        let mut text =
            String::from("\nlive versus simulated (same seeds, measured link delays):\n");
        text.push_str(&compare::table(&lines));
        Ok((text, disagree))
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
    fn simulate(&self, delays: &Path, reps: u32) -> Result<Vec<RunResult>, LiveError> {
        let mut loaded = self.loaded.clone();
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
                simulate(&p, self.setup.policy, seed, None)
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
        ];
        w.write_record(head).map_err(failure)?;
        for (r, o) in rows {
            let q = |xs: &[u64], p: f64| csv_out::num(Observer::delay_quantile_ms(xs, p));
            w.write_record([
                self.name.clone(),
                self.setup.policy.name().to_string(),
                r.job.rep.to_string(),
                r.job.seed.to_string(),
                "true".into(),
                o.url.clone(),
                csv_out::num(self.setup.speed),
                self.setup.keyed.to_string(),
                o.interrupted.to_string(),
                csv_out::num(o.elapsed_us as f64 / 1000.0),
                o.delays_us.len().to_string(),
                q(&o.delays_us, 0.5),
                q(&o.delays_us, 0.95),
                q(&o.delays_us, 0.99),
                q(&o.lateness_us, 0.5),
                q(&o.lateness_us, 0.99),
            ])
            .map_err(failure)?;
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
        s.push_str(&csv_out::num(*d as f64 / 1000.0));
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
    summary: &[csv_out::SummaryRow],
) -> Result<(), LiveError> {
    write(
        &dir.join("summary.csv"),
        &csv_out::summary_csv(name, &[], summary).map_err(failure)?,
    )?;
    write(
        &dir.join("runs.csv"),
        &csv_out::runs_csv(name, &[], rows, &no_params).map_err(failure)?,
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
