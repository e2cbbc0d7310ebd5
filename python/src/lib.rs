//! `herdsim._herdsim`: the extension module behind the `herdsim` Python
//! package (python/herdsim). It parses nothing of its own and decides
//! nothing: each function hands its arguments to the same herdsim-lab call
//! the command line makes (`herdsim run` is [`run`], `herdsim tune`
//! [`tune`], `herdsim calibrate` [`calibrate`]), with the GIL released
//! while Rust works, and turns the library's typed errors into the
//! package's exception classes (herdsim/_errors.py).
//!
//! Long work runs on a thread of its own while the calling thread waits
//! without the GIL, waking every [`POLL`] to hand the progress to the
//! caller's callback and to check for Ctrl-C (`Python::check_signals`). On
//! Ctrl-C the run is told to stop: no further replication starts, the
//! finished ones stay in the results folder's journal (a second call with
//! `resume=True` completes the run), and the call raises the one
//! `KeyboardInterrupt` Python gave. A tuning search or a calibration,
//! which keep no journal, stops the same way and writes nothing.

#![forbid(unsafe_code)]

mod floor;

use herdsim_lab::calibrate::request as calibration;
use herdsim_lab::error::Error;
use herdsim_lab::progress::Observer;
use herdsim_lab::report::table;
use herdsim_lab::sweep::runner::{self, JournalMode, Options, Outcome};
use herdsim_lab::sweep::{self, Plan, memory};
use herdsim_lab::tune::request::{self as search, Request};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often a waiting call wakes to report progress and check for Ctrl-C.
const POLL: Duration = Duration::from_millis(50);

/// Replications done and to do, counted from the worker threads.
#[derive(Default)]
struct Counter {
    total: AtomicU64,
    done: AtomicU64,
}

impl Observer for Counter {
    fn length(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }
    fn resumed_at(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }
    fn advance(&self, units: u64) {
        self.done.fetch_add(units, Ordering::Relaxed);
    }
}

/// The package's exception for `e` (herdsim/_errors.py): a scenario that
/// does not load or validate is a `ScenarioError` (a `ValueError`) naming
/// its file, key, line and column; other bad input an `InputError` (a
/// `ValueError`); anything else a `HerdsimError`. `dict_scenario`: the
/// scenario was a Python dict, whose line and column (in the TOML it was
/// written as) mean nothing to the caller.
fn to_py(py: Python<'_>, e: &Error, dict_scenario: bool) -> PyErr {
    let errors = match py.import("herdsim._errors") {
        Ok(m) => m,
        Err(err) => return err,
    };
    let made = match e {
        Error::Scenario(s) => {
            let pos = if dict_scenario { None } else { s.pos };
            let shown = herdsim_lab::scenario::ScenarioError { pos, ..s.clone() };
            errors.getattr("ScenarioError").and_then(|c| {
                c.call1((
                    shown.to_string(),
                    s.file.clone(),
                    s.key.clone(),
                    pos.map(|p| p.0),
                    pos.map(|p| p.1),
                ))
            })
        }
        e if e.exit_code() == herdsim_lab::error::EXIT_BAD_INPUT => errors
            .getattr("InputError")
            .and_then(|c| c.call1((e.to_string(),))),
        e => errors
            .getattr("HerdsimError")
            .and_then(|c| c.call1((e.to_string(),))),
    };
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(err) => err,
    }
}

/// Run `work` on a thread of its own; meanwhile wait without the GIL,
/// calling `progress(done, total)` and checking for Ctrl-C every [`POLL`]
/// (the wait ends the moment the work does, not at the next poll).
/// On Ctrl-C (or an exception from `progress`) `stop` is set, the work is
/// waited for (it stops at the next replication), and that exception is
/// returned beside the work's own result.
fn watched<T: Send>(
    py: Python<'_>,
    counter: &Counter,
    stop: &AtomicBool,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce() -> T + Send,
) -> (T, Option<PyErr>) {
    let mut raised: Option<PyErr> = None;
    let mut last = (u64::MAX, u64::MAX);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Behind a mutex so that the wait, off the GIL, may borrow it.
    let done_rx = std::sync::Mutex::new(done_rx);
    let out = std::thread::scope(|s| {
        let handle = s.spawn(move || {
            let out = work();
            // Wakes the waiting thread at once (a closed channel does too,
            // should `work` panic).
            let _ = done_tx.send(());
            out
        });
        loop {
            let finished = py.detach(|| {
                done_rx.lock().map_or(true, |rx| {
                    !matches!(
                        rx.recv_timeout(POLL),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    )
                })
            });
            if raised.is_none() {
                let now = (
                    counter.done.load(Ordering::Relaxed),
                    counter.total.load(Ordering::Relaxed),
                );
                if let Some(cb) = progress
                    && now != last
                {
                    last = now;
                    if let Err(e) = cb.call1((now.0, now.1)) {
                        raised = Some(e);
                    }
                }
                if raised.is_none()
                    && let Err(e) = py.check_signals()
                {
                    raised = Some(e);
                }
                if raised.is_some() {
                    stop.store(true, Ordering::SeqCst);
                }
            }
            if finished {
                break handle.join();
            }
        }
    });
    match out {
        Ok(v) => (v, raised),
        // A panic in the library is a bug: propagate it as Rust would.
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `jobs=`: worker threads, 1 to [`sweep::MAX_THREADS`] (None: all cores).
fn threads(jobs: Option<usize>) -> Result<usize, Error> {
    match jobs {
        Some(j) if j == 0 || j > sweep::MAX_THREADS => Err(Error::bad(format!(
            "jobs={j}: must be from 1 to {} worker threads (None: all cores)",
            sweep::MAX_THREADS
        ))),
        Some(j) => Ok(j),
        None => Ok(sweep::default_threads()),
    }
}

/// Run a scenario (a file, or TOML text with `text`), as `herdsim run`
/// does, into `<out>/<scenario name>/`. Returns the results folder and the
/// command line's table.
#[pyfunction]
#[pyo3(signature = (scenario, text, *, reps, seed, sets, jobs, out, plot, resume, fresh, progress, base_dir))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    scenario: Option<PathBuf>,
    text: Option<String>,
    reps: Option<u32>,
    seed: Option<u64>,
    sets: Vec<String>,
    jobs: Option<usize>,
    out: PathBuf,
    plot: bool,
    resume: bool,
    fresh: bool,
    progress: Option<Bound<'_, PyAny>>,
    base_dir: Option<PathBuf>,
) -> PyResult<Py<PyTuple>> {
    let dict = text.is_some();
    let budget = memory::budget(None);
    let plan = match &text {
        Some(t) => {
            let label = scenario
                .as_deref()
                .map_or_else(|| "<dict>".to_string(), |p| p.display().to_string());
            let base = base_dir.unwrap_or_else(|| PathBuf::from("."));
            Plan::load_text(&label, t, &base, (&sets, seed, reps), budget)
        }
        None => Plan::load(scenario.as_deref(), &sets, seed, reps, budget),
    }
    .map_err(|e| to_py(py, &e, dict))?;
    let threads = threads(jobs).map_err(|e| to_py(py, &e, dict))?;
    let opts = Options {
        out,
        shard: None,
        threads,
        journal: match (resume, fresh) {
            (true, _) => JournalMode::Resume,
            (_, true) => JournalMode::Fresh,
            _ => JournalMode::Refuse,
        },
        trace: None,
        trace_policy: None,
        plot,
        budget,
    };
    let counter = Counter::default();
    let stop = AtomicBool::new(false);
    let (result, raised) = watched(py, &counter, &stop, progress.as_ref(), || {
        runner::prepare(&plan, &opts).and_then(|r| r.start(&counter, &stop))
    });
    let outcome = result.map_err(|e| to_py(py, &e, dict));
    match (outcome, raised) {
        (Ok(Outcome::Finished(done)), None) => {
            let text = table::render_width(&done.keys, &done.summary, table::WIDTH);
            Ok(PyTuple::new(
                py,
                [
                    done.dir.into_pyobject(py)?.into_any(),
                    text.into_pyobject(py)?.into_any(),
                ],
            )?
            .unbind())
        }
        // Stopped: the journal keeps what was done; `resume=True` goes on.
        (Ok(Outcome::Interrupted { journal, .. }), raised) => Err(raised.unwrap_or_else(|| {
            PyKeyboardInterrupt::new_err(format!(
                "interrupted; the journal {} keeps the finished replications: run again with \
                 resume=True",
                journal.display()
            ))
        })),
        // Ctrl-C as the last replication finished: the results are whole,
        // but the caller asked to stop.
        (Ok(Outcome::Finished(_)), Some(e)) => Err(e),
        (Err(e), _) => Err(e),
    }
}

/// Search a CSMA window and claim TTL (a scenario file, or TOML text with
/// `text`), as `herdsim tune` does, into `<out>/<scenario name>/tune/`.
/// Returns the folder, the recommendation's text (what the command line
/// prints) and why nothing was recommended (the command line's error, exit
/// 1), if nothing was.
#[pyfunction]
#[pyo3(signature = (scenario, text, *, objective, max_ttfr_p95_ms, params, sets, policy, schemes, seed, reps, max_reps, grid, jobs, out, progress, base_dir))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    scenario: Option<PathBuf>,
    text: Option<String>,
    objective: String,
    max_ttfr_p95_ms: Option<f64>,
    params: Vec<String>,
    sets: Vec<String>,
    policy: String,
    schemes: Option<String>,
    seed: Option<u64>,
    reps: Option<u32>,
    max_reps: Option<u32>,
    grid: Option<usize>,
    jobs: Option<usize>,
    out: PathBuf,
    progress: Option<Bound<'_, PyAny>>,
    base_dir: Option<PathBuf>,
) -> PyResult<Py<PyTuple>> {
    let dict = text.is_some();
    let text = text.map(|toml| search::Text {
        label: scenario
            .as_deref()
            .map_or_else(|| "<dict>".to_string(), |p| p.display().to_string()),
        toml,
        base_dir: base_dir.unwrap_or_else(|| PathBuf::from(".")),
    });
    let checked = Request {
        scenario: if dict { None } else { scenario },
        text,
        sets,
        objective,
        max_ttfr_p95_ms,
        params,
        policy,
        seed,
        reps,
        max_reps,
        grid,
        threads: threads(jobs).map_err(|e| to_py(py, &e, dict))?,
        max_memory: None,
        schemes,
    }
    .check()
    .map_err(|e| to_py(py, &e, dict))?;
    let counter = Counter::default();
    let stop = AtomicBool::new(false);
    let (result, raised) = watched(py, &counter, &stop, progress.as_ref(), || {
        search::run(&checked, &out, &counter, &stop)
    });
    // Ctrl-C (or the callback's exception) first: a search told to stop
    // fails with a message of its own, which the caller did not ask for.
    if let Some(e) = raised {
        return Err(e);
    }
    let done = result.map_err(|e| to_py(py, &e, dict))?;
    let unmet = search::unmet(&checked, &done);
    Ok(PyTuple::new(
        py,
        [
            done.dir.into_pyobject(py)?.into_any(),
            done.text.into_pyobject(py)?.into_any(),
            unmet.into_pyobject(py)?.into_any(),
        ],
    )?
    .unbind())
}

/// Fit a scenario to a frame log or a chat export, as `herdsim calibrate`
/// does, into `<out>/<name>/`. Returns the folder, the report (what the
/// command line prints), the warnings (its stderr) and the files written.
#[pyfunction]
#[pyo3(signature = (log, *, out, name, channel, format, humans, bots, unthreaded, hash_authors, since, until, speed, link_ms, ttl_ms, csma_ms, policy, reps, seed, jobs, plot, progress))]
#[allow(clippy::too_many_arguments)]
fn calibrate(
    py: Python<'_>,
    log: PathBuf,
    out: PathBuf,
    name: Option<String>,
    channel: Option<String>,
    format: Option<String>,
    humans: Vec<String>,
    bots: Vec<String>,
    unthreaded: String,
    hash_authors: bool,
    since: Option<String>,
    until: Option<String>,
    speed: f64,
    link_ms: Option<f64>,
    ttl_ms: f64,
    csma_ms: Option<String>,
    policy: Option<String>,
    reps: u32,
    seed: u64,
    jobs: Option<usize>,
    plot: bool,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<Py<PyTuple>> {
    let checked = calibration::Request {
        log,
        out,
        name,
        channel,
        format,
        humans,
        bots,
        unthreaded,
        hash_authors,
        since,
        until,
        speed,
        link_ms,
        ttl_ms,
        csma_ms,
        policy,
        reps,
        seed,
        jobs: Some(threads(jobs).map_err(|e| to_py(py, &e, false))?),
        plots: plot,
    }
    .check()
    .map_err(|e| to_py(py, &e, false))?;
    // The replications of the prediction and the what-ifs, as the command
    // line's bar counts them.
    let counter = Counter::default();
    let stop = AtomicBool::new(false);
    let (result, raised) = watched(py, &counter, &stop, progress.as_ref(), || {
        calibration::run(&checked, &counter, &stop)
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let done = result.map_err(|e| to_py(py, &e, false))?;
    Ok(PyTuple::new(
        py,
        [
            done.dir.into_pyobject(py)?.into_any(),
            done.report.into_pyobject(py)?.into_any(),
            done.warnings.into_pyobject(py)?.into_any(),
            done.written.into_pyobject(py)?.into_any(),
        ],
    )?
    .unbind())
}

/// A Python dict, written as JSON by the caller, as TOML scenario text (a
/// JSON `null` has no TOML form and is refused, naming its key).
#[pyfunction]
fn dict_to_toml(py: Python<'_>, json: &str) -> PyResult<String> {
    let bad = |m: String| to_py(py, &Error::bad(m), true);
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| bad(format!("the scenario dict: {e}")))?;
    if let Some(key) = null_key(&value, "") {
        return Err(bad(format!(
            "the scenario dict: key `{key}` is None, which a scenario has no value for; leave \
             the key out for its default"
        )));
    }
    let table: toml::Table =
        serde_json::from_value(value).map_err(|e| bad(format!("the scenario dict: {e}")))?;
    toml::to_string(&table).map_err(|e| bad(format!("the scenario dict: {e}")))
}

/// The dotted key of the first JSON `null` in `v`.
fn null_key(v: &serde_json::Value, at: &str) -> Option<String> {
    let join = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        serde_json::Value::Null => Some(at.to_string()),
        serde_json::Value::Object(m) => m.iter().find_map(|(k, v)| null_key(v, &join(k))),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| null_key(v, &join(&i.to_string()))),
        _ => None,
    }
}

/// The extension module.
#[pymodule]
fn _herdsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", herdsim_lab::VERSION)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(dict_to_toml, m)?)?;
    m.add_class::<floor::FloorAgent>()?;
    m.add_class::<floor::FloorServer>()?;
    Ok(())
}
