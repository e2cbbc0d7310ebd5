//! What the page may ask: the scenario's controls and their values
//! ([`describe`]), and a run of the scenario with some of them changed
//! ([`Settings`] to `--set`s, [`run`]), through the library calls `herdsim
//! run` makes ([`Plan::load`], the sweep's replications, `summary.csv`,
//! the table it prints and the comparison figure, as SVG).

use crate::floor::PolicyKind;
use crate::report::{plot, table};
use crate::scenario::Scenario;
use crate::sweep::{Plan, runner};
use crate::term::interrupt::shell_quote;
use herdsim_model::agent::Scheme;
use herdsim_model::error::Error;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A control of the page: the scenario key it sets (as `--set KEY=VALUE`),
/// its label and what the page shows it as.
pub struct Control {
    pub key: &'static str,
    pub label: &'static str,
    /// `number` or `scheme`.
    pub kind: &'static str,
    pub unit: &'static str,
}

/// The page's controls, in the order of the panel and of the command's
/// `--set`s. Keys of the first agent group: a scenario of several groups
/// is changed in its first.
pub const CONTROLS: [Control; 13] = [
    Control {
        key: "agents.0.count",
        label: "agents",
        kind: "number",
        unit: "",
    },
    Control {
        key: "agents.0.csma.min_ms",
        label: "CSMA window min",
        kind: "number",
        unit: "ms",
    },
    Control {
        key: "agents.0.csma.max_ms",
        label: "CSMA window max",
        kind: "number",
        unit: "ms",
    },
    Control {
        key: "agents.0.inference.p50_ms",
        label: "inference p50",
        kind: "number",
        unit: "ms",
    },
    Control {
        key: "agents.0.inference.p99_ms",
        label: "inference p99",
        kind: "number",
        unit: "ms",
    },
    Control {
        key: "server.ttl_ms",
        label: "claim TTL",
        kind: "number",
        unit: "ms",
    },
    Control {
        key: "workload.count",
        label: "messages",
        kind: "number",
        unit: "",
    },
    Control {
        key: "schemes.scheme",
        label: "scheme",
        kind: "scheme",
        unit: "",
    },
    Control {
        key: "agents.0.respond_p",
        label: "respond p",
        kind: "number",
        unit: "",
    },
    // Faults (docs/model.md).
    Control {
        key: "agents.0.crash_p",
        label: "crash p",
        kind: "number",
        unit: "",
    },
    Control {
        key: "agents.0.hang_p",
        label: "hang p",
        kind: "number",
        unit: "",
    },
    Control {
        key: "agents.0.ignore_yield_p",
        label: "ignore YIELD p",
        kind: "number",
        unit: "",
    },
    Control {
        key: "network.loss_p",
        label: "message loss p",
        kind: "number",
        unit: "",
    },
];

/// How much work one request may ask for (docs/ui.md).
#[derive(Debug, Clone, Copy)]
pub struct WorkBounds {
    /// Agents in one replication (all groups).
    pub max_agents: u64,
    /// Replications per point and policy.
    pub max_reps: u32,
    /// Operator messages in one replication (`workload.count`, or what
    /// `workload.duration_ms` posts at `mean_gap_ms`, plus the script).
    pub max_messages: u64,
    /// Simulated time of one replication's workload, ms.
    pub max_sim_ms: f64,
    /// Sweep points.
    pub max_points: usize,
    /// Points x policies x replications x messages x agents.
    pub max_work: u64,
    /// Wall time of one run, s; it is stopped past it.
    pub max_seconds: u64,
}

impl Default for WorkBounds {
    fn default() -> Self {
        WorkBounds {
            max_agents: 200,
            max_reps: 100,
            max_messages: 20_000,
            max_sim_ms: 1e10,
            max_points: 64,
            // 40 times the default scenario (1 x 5 x 20 x 1000 x 5).
            max_work: 20_000_000,
            max_seconds: 60,
        }
    }
}

/// What the page posts: control values as typed (text, checked here and
/// then by the scenario's own validation), the policies, seed and reps.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Control key -> value; a control left out keeps the scenario's value.
    #[serde(default)]
    pub values: serde_json::Map<String, Value>,
    /// The policies to run, by name; none: the scenario's.
    #[serde(default)]
    pub policies: Option<Vec<String>>,
    pub seed: Option<Value>,
    pub reps: Option<Value>,
    /// A timeline only: the policy of the traced replication.
    #[serde(default)]
    pub policy: Option<String>,
    /// A timeline only: the message (none: the most contested).
    #[serde(default)]
    pub msg: Option<String>,
    /// The page's name for this run, for `/api/progress/NAME`.
    #[serde(default)]
    pub run: Option<String>,
    /// A tune only: across these schemes (`herdsim tune --schemes`:
    /// `all` or names separated by commas); none: the scenario's scheme.
    #[serde(default)]
    pub schemes: Option<String>,
}

/// How far a run is: replications done of those ahead.
#[derive(Debug, Default)]
pub struct Progress {
    pub done: AtomicU64,
    pub total: AtomicU64,
}

impl crate::progress::Observer for Progress {
    fn length(&self, total: u64) {
        self.total.store(total, Ordering::SeqCst);
    }
    fn advance(&self, units: u64) {
        self.done.fetch_add(units, Ordering::SeqCst);
    }
}

/// Counts what it is told is done, not what is ahead (several runs in a
/// row, their total told first).
struct Advances<'a>(&'a Progress);

impl crate::progress::Observer for Advances<'_> {
    fn advance(&self, units: u64) {
        self.0.advance(units);
    }
}

/// Whether `name` may name a run: a plain word (docs/ui.md).
pub fn run_name_ok(name: &str) -> bool {
    !name.is_empty() && plain("run", name).is_ok()
}

/// A request the page made wrong, or a scenario the settings make invalid:
/// the message, as the CLI says it.
#[derive(Debug)]
pub struct Refused(pub String);

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A value as the page may give one: a number or a bare word (no quote,
/// brace, bracket, space or control character, so it can name no file and
/// hold no table), at most 64 characters.
fn plain(key: &str, v: &str) -> Result<(), Refused> {
    let ok = v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
    if ok {
        Ok(())
    } else {
        Err(Refused(format!(
            "--set {key}={v}: the page takes a number or a plain word here (letters, digits, \
             . - + _; at most 64 characters)"
        )))
    }
}

/// `--seed` or `--reps` as the CLI parses them (a whole number).
fn whole<T: std::str::FromStr>(flag: &str, v: &Value) -> Result<Option<T>, Refused> {
    let Some(t) = text_of(v) else {
        return Err(Refused(format!("--{flag}: expected a whole number")));
    };
    if t.is_empty() {
        return Ok(None);
    }
    t.parse::<T>().map(Some).map_err(|_| {
        let why = if t.starts_with('-') {
            "must not be negative: expected a whole number"
        } else {
            "expected a whole number"
        };
        Refused(format!(
            "invalid value '{t}' for '--{flag} <{}>': {why}",
            flag.to_uppercase()
        ))
    })
}

/// Settings checked into the CLI's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `KEY=VALUE`, as `--set` takes them, in control order.
    pub sets: Vec<String>,
    pub seed: Option<u64>,
    pub reps: Option<u32>,
}

impl Settings {
    /// The `--set`s, seed and reps these settings are.
    pub fn args(&self) -> Result<Args, Refused> {
        for k in self.values.keys() {
            if !CONTROLS.iter().any(|c| c.key == k) {
                return Err(Refused(format!("`{k}` is not one of the page's controls")));
            }
        }
        let mut sets = Vec::new();
        for c in &CONTROLS {
            let Some(v) = self.values.get(c.key) else {
                continue;
            };
            let Some(v) = text_of(v) else {
                return Err(Refused(format!("{}: expected a number or a word", c.key)));
            };
            if v.is_empty() {
                continue;
            }
            plain(c.key, &v)?;
            sets.push(format!("{}={v}", c.key));
        }
        if let Some(p) = &self.policies {
            if p.len() > PolicyKind::ALL.len() {
                return Err(Refused("more policies than there are".into()));
            }
            let mut names = Vec::new();
            for name in p {
                plain("policies", name)?;
                names.push(format!("\"{name}\""));
            }
            sets.push(format!("policies=[{}]", names.join(", ")));
        }
        let seed = match &self.seed {
            Some(v) => whole::<u64>("seed", v)?,
            None => None,
        };
        let reps = match &self.reps {
            Some(v) => whole::<u32>("reps", v)?,
            None => None,
        };
        Ok(Args { sets, seed, reps })
    }
}

/// `herdsim SUBCOMMAND [SCENARIO] --set ... [--seed N]`, each word quoted
/// for a shell as a resume command is ([`shell_quote`]).
fn command_words(
    subcommand: &str,
    scenario: Option<&Path>,
    sets: &[String],
    seed: Option<u64>,
) -> Vec<String> {
    let mut words = vec!["herdsim".to_string(), subcommand.to_string()];
    if let Some(s) = scenario {
        words.push(shell_quote(&s.display().to_string()));
    }
    for s in sets {
        words.push("--set".into());
        words.push(shell_quote(s));
    }
    if let Some(seed) = seed {
        words.push(format!("--seed {seed}"));
    }
    words
}

/// The `herdsim run` command that gives the same numbers.
pub fn command(scenario: Option<&Path>, a: &Args) -> String {
    let mut words = command_words("run", scenario, &a.sets, a.seed);
    if let Some(reps) = a.reps {
        words.push(format!("--reps {reps}"));
    }
    words.join(" ")
}

/// What the server knows of its scenario.
pub struct Source {
    /// The scenario file (none: the built-in default), as given.
    pub scenario: Option<PathBuf>,
    /// `ui --seed`: the seed the page starts from.
    pub seed: Option<u64>,
    /// The memory a run may use.
    pub budget: u64,
    pub bounds: WorkBounds,
    /// Worker threads of a run.
    pub threads: usize,
}

fn lookup<'a>(t: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.');
    let mut v = t.get(parts.next()?)?;
    for p in parts {
        v = match v {
            toml::Value::Table(t) => t.get(p)?,
            toml::Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

fn shown(v: &toml::Value) -> Option<Value> {
    match v {
        toml::Value::Integer(i) => Some(json!(i.to_string())),
        toml::Value::Float(f) => Some(json!(f.to_string())),
        toml::Value::String(s) => Some(json!(s)),
        _ => None,
    }
}

/// The controls and the scenario's values for them (a control whose key
/// the scenario does not have, such as a CSMA window of another
/// distribution, is given without a value: the page disables it).
pub fn describe(src: &Source) -> Result<Value, Error> {
    let plan = Plan::load(src.scenario.as_deref(), &[], src.seed, None, src.budget)?;
    let resolved = plan.loaded.resolved_table();
    let controls: Vec<Value> = CONTROLS
        .iter()
        .map(|c| {
            let mut value = lookup(&resolved, c.key).and_then(shown);
            if value.is_none() && c.key == "schemes.scheme" {
                value = Some(json!(Scheme::default().name()));
            }
            json!({ "key": c.key, "label": c.label, "kind": c.kind, "unit": c.unit, "value": value })
        })
        .collect();
    let b = &src.bounds;
    Ok(json!({
        "name": plan.name,
        "scenario": src.scenario.as_ref().map(|p| p.display().to_string()),
        "controls": controls,
        "policies": plan.policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "all_policies": PolicyKind::ALL.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "schemes": Scheme::ALL.iter().map(|s| s.name()).collect::<Vec<_>>(),
        "seed": plan.seed.to_string(),
        "reps": plan.reps.to_string(),
        "sweep": plan.loaded.sweep_keys(),
        "calibrated": src.scenario.as_deref().and_then(calibrated),
        "bounds": {
            "agents": b.max_agents, "reps": b.max_reps, "messages": b.max_messages,
            "sim_ms": b.max_sim_ms, "points": b.max_points, "work": b.max_work,
            "seconds": b.max_seconds,
        },
    }))
}

/// What `herdsim calibrate` writes beside its `scenario.toml` that the
/// page shows as "your channel today", in this order: the channel as
/// measured (`channel.csv`, from an export), the fitted scenario's
/// prediction beside the observed (`prediction.csv`) and the what-if under
/// each scheme (`whatif.csv`).
pub const CALIBRATED: [&str; 3] = ["channel.csv", "prediction.csv", "whatif.csv"];

/// The largest of [`CALIBRATED`]'s files the page reads (bytes); a larger
/// one is named, not shown.
pub const CALIBRATED_BYTES: u64 = 64 * 1024;

/// The calibration `scenario` was written by, if any: a file named
/// `scenario.toml` whose folder holds calibrate's `estimates.csv` and at
/// least one of [`CALIBRATED`]. Each file's text as calibrate wrote it
/// (at most [`CALIBRATED_BYTES`] each), or a note of why it is not shown.
pub fn calibrated(scenario: &Path) -> Option<Value> {
    use std::io::Read;
    if scenario.file_name()? != "scenario.toml" {
        return None;
    }
    let dir = match scenario.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.join("estimates.csv").is_file() || !CALIBRATED.iter().any(|f| dir.join(f).is_file()) {
        return None;
    }
    let mut files = Vec::new();
    let mut notes = Vec::new();
    for name in CALIBRATED {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(CALIBRATED_BYTES + 1).read_to_end(&mut bytes));
        match read {
            Err(e) => notes.push(format!("{}: {e}", path.display())),
            Ok(n) if n as u64 > CALIBRATED_BYTES => notes.push(format!(
                "{}: more than {} KiB, not shown",
                path.display(),
                CALIBRATED_BYTES / 1024
            )),
            Ok(_) => match String::from_utf8(bytes) {
                Ok(csv) => files.push(json!({ "name": name, "csv": csv })),
                Err(_) => notes.push(format!("{}: not UTF-8, not shown", path.display())),
            },
        }
    }
    Some(json!({ "dir": dir.display().to_string(), "files": files, "notes": notes }))
}

/// The messages a replication of `s` posts, as far as the scenario says:
/// its count (or its duration over the mean gap) and its script.
fn messages(s: &Scenario) -> f64 {
    let w = &s.workload;
    let posted = match w.duration_ms {
        Some(d) if w.mean_gap_ms > 0.0 => d / w.mean_gap_ms,
        Some(_) => f64::INFINITY,
        None => w.count as f64,
    };
    posted + s.script.len() as f64
}

/// The bounds of `src` on `plan`: a message naming the bound and the
/// settings that break it. `Ok` is the plan's work (points x policies x
/// replications x messages x agents).
pub fn check_work(plan: &Plan, b: &WorkBounds) -> Result<f64, Refused> {
    let over = |what: String| Err(Refused(format!("{what} (docs/ui.md); ask for less")));
    if plan.points.len() > b.max_points {
        return over(format!(
            "{} sweep points: more than the {} herdsim ui runs",
            plan.points.len(),
            b.max_points
        ));
    }
    if plan.reps > b.max_reps {
        return over(format!(
            "--reps {}: more than the {} replications herdsim ui runs",
            plan.reps, b.max_reps
        ));
    }
    let mut work = 0.0f64;
    for p in &plan.points {
        let s = &p.scenario;
        let agents: u64 = s.agents.iter().map(|g| u64::from(g.count)).sum();
        if agents > b.max_agents {
            return over(format!(
                "{agents} agents: more than the {} herdsim ui simulates",
                b.max_agents
            ));
        }
        let m = messages(s);
        if m > b.max_messages as f64 {
            return over(format!(
                "about {m:.0} messages per replication: more than the {} herdsim ui simulates",
                b.max_messages
            ));
        }
        let span = match s.workload.duration_ms {
            Some(d) => d,
            None => s.workload.count as f64 * s.workload.mean_gap_ms,
        };
        if span.is_nan() || span > b.max_sim_ms {
            return over(format!(
                "a workload of about {span:.0} ms of simulated time: more than the {:.0} ms \
                 herdsim ui simulates",
                b.max_sim_ms
            ));
        }
        work += m * agents as f64 * plan.policies.len() as f64 * f64::from(plan.reps);
    }
    over_work(work, b)?;
    Ok(work)
}

/// Past the bound of work of one request.
fn over_work(work: f64, b: &WorkBounds) -> Result<(), Refused> {
    if work > b.max_work as f64 {
        return Err(Refused(format!(
            "{work:.0} agent-messages (points x policies x replications x messages x agents): \
             more than the {} herdsim ui runs at once (docs/ui.md); ask for less",
            b.max_work
        )));
    }
    Ok(())
}

/// How a run ended.
pub enum Ran {
    /// The response body.
    Done(Value),
    /// Refused: bad settings or over a bound.
    Refused(String),
    /// Stopped by `stop` before it finished.
    Stopped,
}

/// Run the scenario with `settings`, as `herdsim run` would with the
/// command [`command`] gives; stopped early once `stop` is set.
pub fn run(
    src: &Source,
    settings: &Settings,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<Ran, Error> {
    let (plan, args) = match plan_of(src, settings)? {
        Ok(p) => p,
        Err(m) => return Ok(Ran::Refused(m)),
    };
    let started = std::time::Instant::now();
    let tables = match runner::compute_observed(&plan, src.threads, src.budget, stop, progress) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(Ran::Stopped),
        Err(e) if e.exit_code() == herdsim_model::error::EXIT_BAD_INPUT => {
            return Ok(Ran::Refused(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let summary_csv = String::from_utf8_lossy(&tables.summary_csv).into_owned();
    let runs_csv = String::from_utf8_lossy(&tables.runs_csv).into_owned();
    // What `herdsim validate` prints: the scenario as run, every default filled in.
    let mut scenario_toml = plan.loaded.resolved_toml().map_err(Error::from)?;
    if !scenario_toml.ends_with('\n') {
        scenario_toml.push('\n');
    }
    let shown = Path::new(&plan.name).join("summary.csv");
    let (svg, notes) =
        match plot::comparison_svg(&tables.summary_csv, &shown, &plan.loaded.sweep_labels()) {
            Ok((svg, notes)) => (Some(svg), notes),
            Err(e) => (None, vec![format!("the figure could not be drawn: {e:#}")]),
        };
    // What `herdsim run` (the command below) writes as run.toml.
    let run_toml = runner::record_toml(&plan, svg.is_some())?;
    let warnings: Vec<String> = plan
        .loaded
        .scheme_warnings()
        .into_iter()
        .map(|w| w.to_string())
        .collect();
    Ok(Ran::Done(json!({
        "ok": true,
        "name": plan.name,
        "table": table::render_width(&tables.keys, &tables.summary, table::WIDTH),
        "summary_csv": summary_csv,
        "runs_csv": runs_csv,
        "scenario_toml": scenario_toml,
        "run_toml": run_toml,
        "svg": svg,
        "notes": notes,
        "warnings": warnings,
        "command": command(src.scenario.as_deref(), &args),
        "seed": plan.seed.to_string(),
        "reps": plan.reps.to_string(),
        "runs": plan.points.len() * plan.policies.len() * plan.reps as usize,
        "elapsed_ms": elapsed_ms,
    })))
}

/// Agent-messages (agents x messages) of the one replication a timeline
/// traces: its trace is held in memory (about 1.3 KB an agent-message:
/// 770 KB for 3 agents and 200 messages).
pub const MAX_TRACE_WORK: f64 = 20_000.0;

/// The settings as a plan, checked against the bounds: `Err` is the
/// refusal to send.
fn plan_of(src: &Source, settings: &Settings) -> Result<Result<(Plan, Args), String>, Error> {
    let args = match settings.args() {
        Ok(a) => a,
        Err(Refused(m)) => return Ok(Err(m)),
    };
    // The page's seed, else `ui --seed`, else the file's (as `run --seed`).
    let seed = args.seed.or(src.seed);
    let args = Args { seed, ..args };
    let plan = match Plan::load(
        src.scenario.as_deref(),
        &args.sets,
        seed,
        args.reps,
        src.budget,
    ) {
        Ok(p) => p,
        Err(e) if e.exit_code() == herdsim_model::error::EXIT_BAD_INPUT => {
            return Ok(Err(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    if let Err(Refused(m)) = check_work(&plan, &src.bounds) {
        return Ok(Err(m));
    }
    Ok(Ok((plan, args)))
}

/// The window maxima a trade-off runs when the scenario sweeps none.
pub const TRADEOFF_POINTS: usize = 5;

/// The keys of the first group's CSMA window maximum a sweep may name.
const MAX_KEYS: [&str; 2] = ["agents.0.csma.max_ms", "agents.csma.max_ms"];

fn number(v: Option<&toml::Value>) -> Option<f64> {
    match v? {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// The window maxima of a trade-off of `plan`: the scenario's own sweep
/// of the window when it has one, else [`TRADEOFF_POINTS`] evenly from
/// the window's min to twice its max (at least min + 1000 ms), whole ms.
fn window_maxima(plan: &Plan) -> Result<Vec<String>, Refused> {
    let mut swept: Vec<String> = Vec::new();
    for p in &plan.points {
        for (k, v) in &p.params {
            if MAX_KEYS.contains(&k.as_str()) && !swept.contains(v) {
                swept.push(v.clone());
            }
        }
    }
    if !swept.is_empty() {
        return Ok(swept);
    }
    let resolved = plan.loaded.resolved_table();
    let (Some(min), Some(max)) = (
        number(lookup(&resolved, "agents.0.csma.min_ms")),
        number(lookup(&resolved, "agents.0.csma.max_ms")),
    ) else {
        return Err(Refused(
            "the trade-off moves the CSMA window's max_ms, and the first agent group's window \
             is not `uniform` (min_ms, max_ms)"
                .into(),
        ));
    };
    let hi = (2.0 * max).max(min + 1000.0);
    let mut out: Vec<String> = Vec::new();
    for i in 0..TRADEOFF_POINTS {
        let v = min + (hi - min) * i as f64 / (TRADEOFF_POINTS - 1) as f64;
        let v = format!("{}", v.round());
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(out)
}

/// Duplicates against TTFR p95 as the window moves: the settings run at
/// several CSMA window maxima ([`window_maxima`]), each as `herdsim run`
/// with `--set agents.0.csma.max_ms=V` runs them (the same seeds, the same
/// summary.csv), the duplicate rate against the p95 time to first response
/// per policy drawn as `herdsim tune`'s trade-off figure draws its
/// candidates (`plot::pareto::pareto_svg`), and the table of the points.
/// Bounded by the work of all the runs together; stopped early once `stop`
/// is set.
pub fn tradeoff(
    src: &Source,
    settings: &Settings,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<Ran, Error> {
    use crate::report::plot::pareto::{Mark, ParetoAxis, ParetoChart, ParetoPoint, pareto_svg};
    let (plan, _) = match plan_of(src, settings)? {
        Ok(p) => p,
        Err(m) => return Ok(Ran::Refused(m)),
    };
    let maxima = match window_maxima(&plan) {
        Ok(m) => m,
        Err(Refused(m)) => return Ok(Ran::Refused(m)),
    };
    // Every run checked, and their work together bounded, before any runs.
    let mut plans = Vec::new();
    let mut work = 0.0;
    for v in &maxima {
        let mut values = settings.values.clone();
        values.insert(MAX_KEYS[0].to_string(), json!(v));
        let s = Settings {
            values,
            policies: settings.policies.clone(),
            seed: settings.seed.clone(),
            reps: settings.reps.clone(),
            policy: None,
            msg: None,
            run: None,
            schemes: None,
        };
        let (plan, args) = match plan_of(src, &s)? {
            Ok(p) => p,
            Err(m) => return Ok(Ran::Refused(format!("{}={v}: {m}", MAX_KEYS[0]))),
        };
        work += check_work(&plan, &src.bounds).map_or(f64::INFINITY, |w| w);
        plans.push((v, plan, args));
    }
    if let Err(Refused(m)) = over_work(work, &src.bounds) {
        return Ok(Ran::Refused(format!(
            "the trade-off runs {} window maxima: {m}",
            maxima.len()
        )));
    }
    let metric = |name: &str| crate::metrics::METRICS.iter().position(|m| *m == name);
    let (Some(dup), Some(p95)) = (metric("duplicate_rate"), metric("ttfr_p95_ms")) else {
        return Err(Error::Failure(anyhow::anyhow!(
            "duplicate_rate or ttfr_p95_ms is not a metric"
        )));
    };
    let mut points = Vec::new();
    let mut rows = Vec::new();
    let mut runs = Vec::new();
    let total: usize = plans
        .iter()
        .map(|(_, p, _)| p.points.len() * p.policies.len() * p.reps as usize)
        .sum();
    progress.total.store(total as u64, Ordering::SeqCst);
    for (v, plan, args) in &plans {
        let each = Advances(progress);
        let tables = match runner::compute_observed(plan, src.threads, src.budget, stop, &each) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(Ran::Stopped),
            Err(e) if e.exit_code() == herdsim_model::error::EXIT_BAD_INPUT => {
                return Ok(Ran::Refused(e.to_string()));
            }
            Err(e) => return Err(e),
        };
        for r in &tables.summary {
            let (Some(d), Some(t)) = (r.stats.get(dup), r.stats.get(p95)) else {
                continue;
            };
            let group = plan.policies.iter().position(|p| p.name() == r.policy);
            points.push(ParetoPoint {
                x_ms: (t.mean, t.ci95),
                ys: vec![(d.mean, d.ci95)],
                feasible: true,
                mark: Mark::Candidate,
                group,
            });
            let other: Vec<String> = r
                .params
                .iter()
                .filter(|(k, _)| !MAX_KEYS.contains(&k.as_str()))
                .map(|(k, x)| format!("{k}={x}"))
                .collect();
            rows.push(json!({
                "max_ms": v,
                "point": other.join(" "),
                "policy": r.policy,
                "duplicate_rate": d.mean, "duplicate_rate_ci95": d.ci95,
                "ttfr_p95_ms": t.mean, "ttfr_p95_ms_ci95": t.ci95,
            }));
        }
        runs.push(json!({
            "max_ms": v,
            "command": command(src.scenario.as_deref(), args),
            "summary_csv": String::from_utf8_lossy(&tables.summary_csv),
        }));
    }
    let chart = ParetoChart {
        title: format!("{}: as the CSMA window moves", plan.name),
        subtitle: format!(
            "max_ms = {} ms; {} replications, seed {}",
            maxima.join(", "),
            plan.reps,
            plan.seed
        ),
        budget_ms: None,
        panels: vec![ParetoAxis {
            label: "duplicate rate".into(),
            percent: true,
        }],
        points,
        chosen_label: None,
        groups: plan.policies.iter().map(|p| p.name().to_string()).collect(),
    };
    let (svg, notes) = match pareto_svg(&chart) {
        Ok(svg) => (Some(svg), Vec::new()),
        Err(e) => (None, vec![format!("the figure could not be drawn: {e:#}")]),
    };
    Ok(Ran::Done(json!({
        "ok": true,
        "maxima": maxima,
        "rows": rows,
        "runs": runs,
        "svg": svg,
        "notes": notes,
    })))
}

/// The timeline of one message of the replication `herdsim run --trace
/// FILE --trace-policy POLICY` traces, drawn as `herdsim plot --timeline
/// FILE [--msg ID]` draws it, as SVG; and those two commands.
pub fn timeline(src: &Source, settings: &Settings) -> Result<Ran, Error> {
    let (plan, args) = match plan_of(src, settings)? {
        Ok(p) => p,
        Err(m) => return Ok(Ran::Refused(m)),
    };
    let policy = match settings.policy.as_deref() {
        None => plan.policies[0],
        Some(p) => match p.parse::<PolicyKind>() {
            Ok(k) if plan.policies.contains(&k) => k,
            Ok(_) => {
                return Ok(Ran::Refused(format!(
                    "--trace-policy {p}: not a policy of this run (it runs {})",
                    plan.policy_names()
                )));
            }
            Err(e) => return Ok(Ran::Refused(format!("--trace-policy {p}: {e}"))),
        },
    };
    if let Some(m) = &settings.msg
        && let Err(Refused(e)) = plain("msg", m)
    {
        return Ok(Ran::Refused(e));
    }
    let msg = settings.msg.as_deref().filter(|m| !m.is_empty());
    if let Some(p) = plan.points.first() {
        let s = &p.scenario;
        let agents: u64 = s.agents.iter().map(|g| u64::from(g.count)).sum();
        let work = messages(s) * agents as f64;
        if work > MAX_TRACE_WORK {
            return Ok(Ran::Refused(format!(
                "a timeline traces one replication of at most {MAX_TRACE_WORK:.0} agent-messages \
                 (agents x messages), and this one has {work:.0} (docs/ui.md); ask for fewer \
                 messages or agents"
            )));
        }
    }
    let trace = match runner::trace(&plan, policy) {
        Ok(t) => t,
        Err(e) if e.exit_code() == herdsim_model::error::EXIT_BAD_INPUT => {
            return Ok(Ran::Refused(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    let shown = Path::new("timeline.jsonl");
    let (svg, id) = match plot::timeline_svg(&trace, shown, msg) {
        Ok(r) => r,
        Err(e) if plot::is_input_error(&e) => return Ok(Ran::Refused(format!("{e:#}"))),
        Err(e) => return Err(Error::Failure(e)),
    };
    let run = format!(
        "{} --trace timeline.jsonl --trace-policy {}",
        command(src.scenario.as_deref(), &args),
        policy.name()
    );
    let plot_cmd = match msg {
        Some(m) => format!("herdsim plot --timeline timeline.jsonl --msg {m}"),
        None => "herdsim plot --timeline timeline.jsonl".to_string(),
    };
    Ok(Ran::Done(json!({
        "ok": true,
        "svg": svg,
        "msg": id,
        "policy": policy.name(),
        "command": format!("{run}\n{plot_cmd}"),
    })))
}

/// The grid levels of a tune from the page (`herdsim tune --grid`).
pub const TUNE_GRID: usize = 3;

/// The replications of each candidate of a tune from the page (`herdsim
/// tune --reps`; `--max-reps` its default, four times as many).
pub const TUNE_REPS: u32 = 2;

/// The longest `schemes` a tune from the page takes (`all` or a few names).
const SCHEMES_CHARS: usize = 100;

/// The page's control a key `herdsim tune` searched sets, if any.
fn control_of(key: &str) -> Option<&'static str> {
    let key = key.replacen("agents.csma.", "agents.0.csma.", 1);
    CONTROLS.iter().map(|c| c.key).find(|c| *c == key)
}

/// `herdsim tune` of the settings with the page's small budget (`--grid
/// 3 --reps 2`, the default objective, policy and parameters: the CSMA
/// window and the claim TTL), through the call the command makes
/// (`tune::request`), writing nothing: the recommendation it prints,
/// `candidates.csv`, its trade-off figure as SVG, the values to apply to
/// the controls and the command. Bounded by the search's estimated runs;
/// stopped early once `stop` is set.
pub fn tune(
    src: &Source,
    settings: &Settings,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<Ran, Error> {
    use crate::tune::request::{self, Request};
    let args = match settings.args() {
        Ok(a) => a,
        Err(Refused(m)) => return Ok(Ran::Refused(m)),
    };
    let seed = args.seed.or(src.seed);
    let schemes = match settings.schemes.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s) if s.len() > SCHEMES_CHARS => {
            return Ok(Ran::Refused(format!(
                "--schemes: at most {SCHEMES_CHARS} characters (`all` or names separated by commas)"
            )));
        }
        Some(s) => Some(s.to_string()),
    };
    let bad = |e: Error| -> Result<Ran, Error> {
        if e.exit_code() == herdsim_model::error::EXIT_BAD_INPUT {
            Ok(Ran::Refused(e.to_string()))
        } else {
            Err(e)
        }
    };
    // The settings' own bounds first (agents, messages, time), as a run's.
    let plan = match plan_of(src, settings)? {
        Ok((p, _)) => p,
        Err(m) => return Ok(Ran::Refused(m)),
    };
    let search = match (Request {
        scenario: src.scenario.clone(),
        text: None,
        sets: args.sets.clone(),
        objective: "1,1,1".into(),
        max_ttfr_p95_ms: None,
        params: Vec::new(),
        policy: "spec".into(),
        seed,
        reps: Some(TUNE_REPS),
        max_reps: None,
        grid: Some(TUNE_GRID),
        threads: src.threads,
        max_memory: None,
        schemes: schemes.clone(),
    })
    .check()
    {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    // Across schemes, every scheme's search in turn (as `tune_schemes`
    // estimates them).
    let runs: u64 = if search.schemes.is_empty() {
        let grid = search.space.grid(search.settings.levels).len();
        crate::tune::estimated_runs(&search.space, &search.settings, grid)
    } else {
        search
            .schemes
            .iter()
            .map(|x| {
                let grid = x.space.grid(x.settings.levels).len();
                crate::tune::estimated_runs(&x.space, &x.settings, grid)
            })
            .sum()
    };
    let per_run = plan.points.first().map_or(0.0, |p| {
        let agents: u64 = p.scenario.agents.iter().map(|g| u64::from(g.count)).sum();
        messages(&p.scenario) * agents as f64
    });
    if let Err(Refused(m)) = over_work(runs as f64 * per_run, &src.bounds) {
        return Ok(Ran::Refused(format!(
            "a tune of about {runs} runs of these settings: {m}"
        )));
    }
    let done = match request::compute(&search, progress, stop) {
        Ok(d) => d,
        Err(_) if stop.load(std::sync::atomic::Ordering::SeqCst) => return Ok(Ran::Stopped),
        Err(e) => return bad(e),
    };
    let mut apply = serde_json::Map::new();
    let chosen = done
        .outcome
        .chosen
        .and_then(|i| done.outcome.candidates.get(i));
    // Across schemes: the chosen one's scheme, and its values along the
    // space searched under that scheme.
    let mut space = &search.space;
    if let Some(scheme) = chosen.and_then(|c| c.scheme) {
        apply.insert("schemes.scheme".into(), json!(scheme.name()));
        if let Some(x) = search.schemes.iter().find(|x| x.scheme == scheme) {
            space = &x.space;
        }
    }
    if let Some(values) = chosen.and_then(|c| c.values.as_ref()) {
        for (d, v) in space.dims.iter().zip(values) {
            if let Some(c) = control_of(&d.key) {
                apply.insert(c.to_string(), json!(format!("{v:.*}", d.decimals)));
            }
        }
    }
    let svg = crate::report::plot::pareto::pareto_svg(&done.chart).ok();
    let mut words = command_words("tune", src.scenario.as_deref(), &args.sets, seed);
    words.push(format!("--reps {TUNE_REPS} --grid {TUNE_GRID}"));
    if let Some(s) = &schemes {
        words.push(format!("--schemes {}", shell_quote(s)));
    }
    Ok(Ran::Done(json!({
        "ok": true,
        "text": done.text,
        "candidates_csv": String::from_utf8_lossy(&done.candidates_csv),
        "svg": svg,
        "apply": apply,
        "recommends": done.outcome.chosen.is_some(),
        "runs": done.outcome.runs,
        "command": words.join(" "),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(v: Value) -> Settings {
        serde_json::from_value(v).expect("settings")
    }

    #[test]
    fn settings_become_the_clis_sets_in_control_order() {
        let s = settings(json!({
            "values": { "server.ttl_ms": "30000", "agents.0.count": 8, "workload.count": "" },
            "policies": ["spec", "none"],
            "seed": "7",
            "reps": 3,
        }));
        let a = s.args().expect("args");
        assert_eq!(
            a.sets,
            [
                "agents.0.count=8",
                "server.ttl_ms=30000",
                "policies=[\"spec\", \"none\"]"
            ]
        );
        assert_eq!((a.seed, a.reps), (Some(7), Some(3)));
        assert_eq!(
            command(Some(Path::new("scenarios/default.toml")), &a),
            "herdsim run scenarios/default.toml --set agents.0.count=8 --set server.ttl_ms=30000 \
             --set 'policies=[\"spec\", \"none\"]' --seed 7 --reps 3"
        );
    }

    #[test]
    fn the_page_names_no_file_and_no_other_key() {
        let bad = [
            json!({ "values": { "agents.0.inference": "{kind=\"empirical\"}" } }),
            json!({ "values": { "agents.0.count": "1 2" } }),
            json!({ "values": { "agents.0.count": "'x'" } }),
            json!({ "values": { "network.base_ms": "1" } }),
            json!({ "policies": ["spec\"]"] }),
            json!({ "seed": "-1" }),
            json!({ "reps": "x" }),
        ];
        for b in bad {
            assert!(settings(b.clone()).args().is_err(), "{b}");
        }
        assert!(serde_json::from_value::<Settings>(json!({ "file": "x" })).is_err());
    }

    fn source() -> Source {
        Source {
            scenario: None,
            seed: None,
            budget: u64::MAX,
            bounds: WorkBounds::default(),
            threads: 1,
        }
    }

    #[test]
    fn a_bad_value_is_the_clis_message_and_work_is_bounded() {
        let stop = AtomicBool::new(false);
        let s = settings(json!({ "values": { "agents.0.count": "abc" } }));
        let Ok(Ran::Refused(m)) = run(&source(), &s, &stop, &Progress::default()) else {
            panic!("refused")
        };
        let cli = Plan::load(None, &["agents.0.count=abc".into()], None, None, u64::MAX)
            .err()
            .map(|e| e.to_string());
        assert_eq!(Some(m), cli);
        let s = settings(json!({ "values": { "agents.0.count": "201" } }));
        let Ok(Ran::Refused(m)) = run(&source(), &s, &stop, &Progress::default()) else {
            panic!("refused")
        };
        assert!(m.contains("201 agents") && m.contains("docs/ui.md"), "{m}");
        let s = settings(json!({ "reps": "101" }));
        assert!(
            matches!(run(&source(), &s, &stop, &Progress::default()), Ok(Ran::Refused(m)) if m.contains("--reps 101"))
        );
    }

    #[test]
    fn a_small_run_gives_the_table_the_csv_and_an_svg() {
        let s = settings(
            json!({ "values": { "workload.count": "20" }, "reps": "2", "policies": ["spec"] }),
        );
        let Ok(Ran::Done(v)) = run(&source(), &s, &AtomicBool::new(false), &Progress::default())
        else {
            panic!("runs")
        };
        assert!(
            v["svg"].as_str().is_some_and(|s| s.starts_with("<svg")),
            "{v}"
        );
        assert!(v["table"].as_str().is_some_and(|t| t.contains("spec")));
        assert!(
            v["summary_csv"]
                .as_str()
                .is_some_and(|t| t.lines().count() == 2)
        );
        let stopped = run(&source(), &s, &AtomicBool::new(true), &Progress::default());
        assert!(matches!(stopped, Ok(Ran::Stopped)));
    }

    #[test]
    fn describe_gives_the_default_scenarios_values() {
        let d = describe(&source()).expect("describes");
        let c = &d["controls"][0];
        assert_eq!(
            (c["key"].as_str(), c["value"].as_str()),
            (Some("agents.0.count"), Some("5"))
        );
        assert_eq!(d["controls"][7]["value"], "open");
        assert_eq!(d["reps"], "20");
    }
}
