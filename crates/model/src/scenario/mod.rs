//! Scenario files: parse, fill defaults, apply `--set` overrides, expand the
//! `[sweep]` grid, validate.
//!
//! A file is parsed once with spans (so errors carry line:column), resolved
//! to a [`Scenario`] with every default filled in, and turned back into a
//! TOML tree. Overrides and sweep values are applied to that resolved tree
//! by dotted key, so `--set agents.0.csma.max_ms=4000` works even when the
//! file never mentions `csma`. Each sweep point is then deserialized and
//! validated on its own.

pub mod schema;
pub mod validate;

pub use schema::{
    AgentGroup, Arrivals, CarrierSpec, ClaimGuardSpec, NetworkSpec, Scenario, SchemesSpec,
    ScriptEvent, ScriptInfer, ScriptPost, SelectorSpec, ServerSpec, SweepPhase, WorkloadSpec,
};

use crate::floor::PolicyKind;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Value;

/// The scenario built into the binary (`scenarios/default.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../../../scenarios/default.toml");

/// A bad scenario: names the file, the key and the line:column where known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub key: Option<String>,
    pub pos: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.pos {
            write!(f, ":{line}:{col}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// One sweep axis: a dotted key and the values it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<Value>,
    /// The `--set` assignment that defined it (`None`: the file).
    pub set: Option<String>,
    /// What figures call the axis instead of its key (`label`).
    pub label: Option<String>,
    /// What figures call each value, in the order of `values` (`labels`).
    pub value_labels: Option<Vec<String>>,
}

impl Axis {
    /// The axis as the resolved scenario writes it: the list of values,
    /// or `{ values, label, labels }` when it has labels.
    fn to_value(&self) -> Value {
        if self.label.is_none() && self.value_labels.is_none() {
            return Value::Array(self.values.clone());
        }
        let mut t = toml::Table::new();
        t.insert("values".into(), Value::Array(self.values.clone()));
        if let Some(l) = &self.label {
            t.insert("label".into(), Value::String(l.clone()));
        }
        if let Some(ls) = &self.value_labels {
            let ls = ls.iter().map(|l| Value::String(l.clone())).collect();
            t.insert("labels".into(), Value::Array(ls));
        }
        Value::Table(t)
    }

    /// The axis's labels for figures, each value as the CSVs write it.
    pub fn labels(&self) -> Option<AxisLabels> {
        if self.label.is_none() && self.value_labels.is_none() {
            return None;
        }
        let values = match &self.value_labels {
            Some(ls) => self
                .values
                .iter()
                .map(csv_value)
                .zip(ls.iter().cloned())
                .collect(),
            None => Vec::new(),
        };
        Some(AxisLabels {
            key: self.key.clone(),
            label: self.label.clone(),
            values,
        })
    }
}

/// The labels a scenario gives a sweep axis, for figures: the axis's
/// label and, per value (as the CSVs write it), the value's.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct AxisLabels {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// (value as in the CSVs, its label).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<(String, String)>,
}

/// A loaded scenario file: its text (for locating keys), the resolved tree
/// and the sweep axes.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// How the file is named in messages.
    pub file: String,
    /// Directory that relative paths (empirical CSVs) are resolved against.
    pub base_dir: PathBuf,
    text: String,
    /// The resolved scenario (defaults filled, overrides applied), as TOML.
    resolved: toml::Table,
    /// Sweep axes in file order (then `--set` order).
    pub sweep: Vec<Axis>,
    /// `--set` assignments applied so far, as (key, assignment), so that
    /// errors about a key a `--set` touched name the `--set`.
    sets: Vec<(String, String)>,
    /// Empirical data files, read and parsed once for the whole plan and
    /// shared by every point (the model's `Prepared::with_cache` takes it).
    pub data: crate::dist::DataCache,
}

/// One point of the sweep grid: its parameter values and its scenario.
#[derive(Debug, Clone)]
pub struct Point {
    /// Index in the grid (row-major over the sweep axes in file order).
    pub index: usize,
    /// (dotted key, value as written in CSV) for every sweep axis.
    pub params: Vec<(String, String)>,
    pub scenario: Scenario,
}

impl Loaded {
    /// Read and resolve a scenario file.
    pub fn from_file(path: &Path) -> Result<Loaded, ScenarioError> {
        let (file, text) = Loaded::read_text(path)?;
        let base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Loaded::from_text(&file, &text, &base_dir)
    }

    /// A scenario file's name (for messages) and text: a regular file
    /// ([`crate::files::read_input`]) of UTF-8 text.
    fn read_text(path: &Path) -> Result<(String, String), ScenarioError> {
        let file = path.display().to_string();
        let bytes =
            crate::files::read_input(path, crate::limits::MAX_SCENARIO_BYTES).map_err(|e| {
                ScenarioError {
                    file: file.clone(),
                    key: None,
                    pos: None,
                    message: format!("cannot read: {e}"),
                }
            })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let offset = e.utf8_error().valid_up_to();
            let prefix = String::from_utf8_lossy(&e.as_bytes()[..offset]).into_owned();
            ScenarioError {
                file: file.clone(),
                key: validate::syntax_key(&prefix, offset),
                pos: Some(line_col(&prefix, offset)),
                message: "not valid UTF-8 text".into(),
            }
        })?;
        Ok((file, text))
    }

    /// Read and resolve a scenario file (none: the built-in default) and
    /// apply `overrides`, each `(KEY=VALUE, origin)` as
    /// [`Loaded::apply_as`] does, in order. A value of the file that an
    /// override replaces is replaced before the file is validated, so a
    /// bad value there is not refused (only what is used is checked).
    pub fn load_with(
        path: Option<&Path>,
        overrides: &[(String, String)],
    ) -> Result<Loaded, ScenarioError> {
        let mut loaded = match path {
            None => Loaded::builtin_default()?,
            Some(p) => {
                let (file, text) = Loaded::read_text(p)?;
                let base_dir = p
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("."));
                Loaded::from_text_overridden(&file, &text, &base_dir, overrides)?
            }
        };
        loaded.apply_all(overrides)?;
        Ok(loaded)
    }

    /// Scenario text (not a file: a Python dict's TOML, say) with
    /// `overrides` applied as [`Loaded::load_with`] applies them; `file`
    /// names it in messages, `base_dir` is where its relative paths point.
    pub fn load_text_with(
        file: &str,
        text: &str,
        base_dir: &Path,
        overrides: &[(String, String)],
    ) -> Result<Loaded, ScenarioError> {
        let mut loaded = Loaded::from_text_overridden(file, text, base_dir, overrides)?;
        loaded.apply_all(overrides)?;
        Ok(loaded)
    }

    /// Apply `overrides`, each `(KEY=VALUE, origin)`, in order, then
    /// validate the result once: a value is judged with every override in
    /// place (`--set workload.mean_gap_ms=1e10 --set workload.count=100` is
    /// the same as the other order), and an error about a key an override
    /// set names that override. A malformed assignment, a value of the
    /// wrong type or shape, or a bad sweep axis is still refused at once.
    pub fn apply_all(&mut self, overrides: &[(String, String)]) -> Result<(), ScenarioError> {
        let mut last = None;
        for (assignment, origin) in overrides {
            if let Some(scenario) = self.assign(assignment, origin)? {
                last = Some(scenario);
            }
        }
        match last {
            Some(scenario) => self.check_base(&scenario),
            None => Ok(()),
        }
    }

    /// [`Loaded::from_text`], unless the file is refused at a key that one
    /// of `overrides` replaces: then again with the overrides written into
    /// the file's table first (errors still located in `text`, or naming
    /// the override that gave the value).
    fn from_text_overridden(
        file: &str,
        text: &str,
        base_dir: &Path,
        overrides: &[(String, String)],
    ) -> Result<Loaded, ScenarioError> {
        let first = match Loaded::from_text(file, text, base_dir) {
            Ok(l) => return Ok(l),
            Err(e) => e,
        };
        let parsed: Vec<(String, Value, &str)> = overrides
            .iter()
            .filter_map(|(a, origin)| {
                let (k, v) = a.split_once('=')?;
                Some((k.trim().to_string(), parse_value(v.trim()), origin.as_str()))
            })
            .collect();
        let replaced_by = |key: &str| -> Option<&str> {
            parsed.iter().rev().find_map(|(k, _, origin)| {
                let swept = key.strip_prefix("sweep.");
                let hit = validate::paths_overlap(k, key)
                    || swept.is_some_and(|axis| validate::path_within(axis, k));
                hit.then_some(*origin)
            })
        };
        let Some(_) = first.key.as_deref().and_then(replaced_by) else {
            return Err(first);
        };
        let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
            return Err(first);
        };
        for (key, value, _) in &parsed {
            override_raw(&mut table, key, value.clone());
        }
        let Ok(patched) = toml::to_string(&table) else {
            return Err(first);
        };
        match Loaded::from_text(file, &patched, base_dir) {
            Ok(mut l) => {
                l.text = text.to_string();
                Ok(l)
            }
            // Located again in the file as written, or at the override.
            Err(mut e) => {
                let origin = e.key.as_deref().and_then(replaced_by);
                match origin {
                    Some(origin) => {
                        e.file = origin.to_string();
                        e.pos = None;
                    }
                    None => e.pos = e.key.as_deref().and_then(|k| validate::locate(text, k)),
                }
                Err(e)
            }
        }
    }

    /// The embedded default scenario.
    pub fn builtin_default() -> Result<Loaded, ScenarioError> {
        Loaded::from_text("<built-in default.toml>", DEFAULT_SCENARIO, Path::new("."))
    }

    /// Parse and resolve scenario text.
    pub fn from_text(file: &str, text: &str, base_dir: &Path) -> Result<Loaded, ScenarioError> {
        let err_at = |e: toml::de::Error| {
            let message = e.message().trim().to_string();
            let Some(span) = e.span() else {
                return ScenarioError {
                    file: file.to_string(),
                    key: None,
                    pos: None,
                    message,
                };
            };
            let (key, offset) = match validate::key_at(text, span.start) {
                Some(key) => match validate::refine(text, &key, &message) {
                    Some((k, off)) => (Some(k), off),
                    None => (Some(key), span.start),
                },
                // No parse tree: a syntax error.
                None => (validate::syntax_key(text, span.start), span.start),
            };
            ScenarioError {
                file: file.to_string(),
                key,
                pos: Some(line_col(text, offset)),
                message: validate::humanize(&message),
            }
        };
        if let Ok(t) = toml::from_str::<toml::Table>(text) {
            validate::shape(&t).map_err(|(key, message)| ScenarioError {
                file: file.to_string(),
                pos: validate::locate(text, &key),
                key: Some(key),
                message,
            })?;
        }
        let mut scenario: Scenario = toml::from_str(text).map_err(err_at)?;
        let sweep_value = scenario.sweep.take().map(Value::Table);
        let resolved = to_table(&scenario).map_err(|message| ScenarioError {
            file: file.to_string(),
            key: None,
            pos: None,
            message,
        })?;
        let mut loaded = Loaded {
            file: file.to_string(),
            base_dir: base_dir.to_path_buf(),
            text: text.to_string(),
            resolved,
            sweep: Vec::new(),
            sets: Vec::new(),
            data: Default::default(),
        };
        if let Some(sweep) = sweep_value {
            loaded.sweep = validate::sweep_axes(&loaded, sweep, None)?;
        }
        // Validate the unswept scenario now, so errors point at the file.
        loaded.check_base(&scenario)?;
        Ok(loaded)
    }

    /// Apply `key=value` (repeatable). The value is TOML (a number, `true`,
    /// `[1, 2]`, `{ kind = "fixed", ms = 3 }`, `"text"`), or else taken as a
    /// bare string. A key under `sweep.` sets (or replaces) that sweep axis;
    /// any other key that a sweep axis sets pins it: the axis is dropped
    /// and the value applies to every point.
    pub fn apply_set(&mut self, assignment: &str) -> Result<(), ScenarioError> {
        self.apply_as(assignment, &format!("--set {assignment}"))
    }

    /// [`Loaded::apply_set`], with errors naming `origin` (e.g. `--reps 0`)
    /// instead of `--set KEY=VALUE`.
    pub fn apply_as(&mut self, assignment: &str, origin: &str) -> Result<(), ScenarioError> {
        match self.assign(assignment, origin)? {
            Some(scenario) => self.check_base(&scenario),
            None => Ok(()),
        }
    }

    /// [`Loaded::apply_as`] but the validation of the scenario as a whole:
    /// the scenario it leaves, for the caller to check ([`Loaded::check_base`]),
    /// or `None` for a sweep axis (whose points `points()` checks).
    fn assign(
        &mut self,
        assignment: &str,
        origin: &str,
    ) -> Result<Option<Scenario>, ScenarioError> {
        let file = origin.to_string();
        let bad = |key: Option<String>, message: String| ScenarioError {
            file: file.clone(),
            key,
            pos: None,
            message,
        };
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(bad(
                None,
                "is not of the form KEY=VALUE (e.g. --set server.ttl_ms=30000)".into(),
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(bad(None, "has an empty key".into()));
        }
        if key.split('.').any(str::is_empty) {
            return Err(bad(
                Some(key.to_string()),
                format!("`{key}` is not a valid dotted key"),
            ));
        }
        let value = parse_value(raw.trim());
        if key == "sweep" {
            let axes = validate::sweep_axes(self, value, Some(origin))?;
            return self.add_axes(axes, origin).map(|()| None);
        }
        if let Some(axis) = key.strip_prefix("sweep.") {
            // The file spells an axis as a quoted TOML key
            // (`"agents.0.count" = [..]`); accept that spelling here too.
            let axis = axis
                .strip_prefix('"')
                .and_then(|a| a.strip_suffix('"'))
                .unwrap_or(axis);
            let mut t = toml::Table::new();
            t.insert(axis.to_string(), value);
            let axes = validate::sweep_axes(self, Value::Table(t), Some(origin))?;
            return self.add_axes(axes, origin).map(|()| None);
        }
        // A value inside a swept one cannot be set: the axis would overwrite it.
        if let Some(a) = self.sweep.iter().find(|a| {
            a.key != key
                && validate::path_within(key, &a.key)
                && !validate::path_within(&a.key, key)
        }) {
            return Err(bad(
                Some(key.to_string()),
                format!(
                    "lies inside the sweep axis `sweep.{}`, which sets it at every point; \
                     set `sweep.{}` instead",
                    a.key, a.key
                ),
            ));
        }
        let mut tree = Value::Table(self.resolved.clone());
        set_path(&mut tree, key, value).map_err(|m| bad(Some(key.to_string()), m))?;
        if let Value::Table(t) = &tree {
            validate::shape(t).map_err(|(k, m)| bad(Some(k), m))?;
        }
        let scenario: Scenario = tree.clone().try_into().map_err(|e: toml::de::Error| {
            bad(
                Some(key.to_string()),
                validate::humanize(e.message().trim()),
            )
        })?;
        self.sets.push((key.to_string(), origin.to_string()));
        self.resolved = to_table(&scenario).map_err(|m| bad(Some(key.to_string()), m))?;
        // Pin the axes this key sets.
        self.sweep.retain(|a| !validate::path_within(&a.key, key));
        Ok(Some(scenario))
    }

    fn add_axes(&mut self, axes: Vec<Axis>, origin: &str) -> Result<(), ScenarioError> {
        for axis in axes {
            if let Some(slot) = self.sweep.iter_mut().find(|a| a.key == axis.key) {
                *slot = axis;
                continue;
            }
            if let Some(other) = self
                .sweep
                .iter()
                .find(|a| validate::paths_overlap(&a.key, &axis.key))
            {
                return Err(ScenarioError {
                    file: origin.to_string(),
                    key: Some(format!("sweep.{}", axis.key)),
                    pos: None,
                    message: format!(
                        "overlaps the sweep axis `sweep.{}`: both would set the same value",
                        other.key
                    ),
                });
            }
            self.sweep.push(axis);
        }
        // Every point must still be valid; checked by `points()`.
        Ok(())
    }

    /// The resolved scenario without sweep values applied.
    pub fn base(&self) -> Result<Scenario, ScenarioError> {
        Value::Table(self.resolved.clone())
            .try_into()
            .map_err(|e: toml::de::Error| ScenarioError {
                file: self.file.clone(),
                key: None,
                pos: None,
                message: validate::humanize(e.message().trim()),
            })
    }

    /// The labels the scenario gives its sweep axes, axis by axis (only
    /// the axes that have any).
    pub fn sweep_labels(&self) -> Vec<AxisLabels> {
        self.sweep.iter().filter_map(Axis::labels).collect()
    }

    /// The dotted keys of the sweep axes, in grid order.
    pub fn sweep_keys(&self) -> Vec<String> {
        self.sweep.iter().map(|a| a.key.clone()).collect()
    }

    /// The resolved scenario as a TOML table, sweep included (ranges
    /// expanded to lists).
    pub fn resolved_table(&self) -> toml::Table {
        let mut t = self.resolved.clone();
        if !self.sweep.is_empty() {
            let mut s = toml::Table::new();
            for a in &self.sweep {
                s.insert(a.key.clone(), a.to_value());
            }
            t.insert("sweep".into(), Value::Table(s));
        }
        t
    }

    /// The resolved scenario as TOML text, sweep included.
    pub fn resolved_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string(&self.resolved_table()).map_err(|e| ScenarioError {
            file: self.file.clone(),
            key: None,
            pos: None,
            message: e.to_string(),
        })
    }

    /// Where a dotted key is written in the scenario file, if it is.
    pub fn locate(&self, key: &str) -> Option<(usize, usize)> {
        validate::locate(&self.text, key)
    }

    /// Number of grid points (saturating).
    pub fn point_count(&self) -> usize {
        self.sweep
            .iter()
            .fold(1usize, |n, a| n.saturating_mul(a.values.len()))
    }

    /// Every point of the sweep grid (one point when there is no sweep),
    /// each validated.
    pub fn points(&self) -> Result<Vec<Point>, ScenarioError> {
        let n = self.point_count();
        if n > MAX_POINTS {
            let key = self.sweep.last().map(|a| format!("sweep.{}", a.key));
            return Err(ScenarioError {
                file: self.file.clone(),
                pos: key.as_deref().and_then(|k| self.locate(k)),
                key,
                message: format!(
                    "the sweep grid has {n} points, more than the {MAX_POINTS} supported"
                ),
            });
        }
        let mut out = Vec::with_capacity(n);
        for index in 0..n {
            out.push(self.point(index)?);
        }
        Ok(out)
    }

    /// Point `index` of the grid (row-major; the last axis varies fastest).
    pub fn point(&self, index: usize) -> Result<Point, ScenarioError> {
        let mut tree = Value::Table(self.resolved.clone());
        let mut params = Vec::with_capacity(self.sweep.len());
        let lens: Vec<usize> = self.sweep.iter().map(|a| a.values.len()).collect();
        let picks = grid_picks(&lens, index);
        for (a, pick) in self.sweep.iter().zip(&picks) {
            let v = a.values[*pick].clone();
            params.push((a.key.clone(), csv_value(&v)));
            let shown = csv_value(&v);
            set_path(&mut tree, &a.key, v)
                .map_err(|m| self.sweep_error(a, format!("{m} (sweep value {shown})")))?;
        }
        let scenario: Scenario = tree.try_into().map_err(|e: toml::de::Error| {
            let message = validate::humanize(e.message().trim());
            // Name the axis whose value does not fit, when it is clear.
            let axis = self
                .sweep
                .iter()
                .zip(&picks)
                .find(|(a, pick)| {
                    let mut t = Value::Table(self.resolved.clone());
                    set_path(&mut t, &a.key, a.values[**pick].clone()).is_ok()
                        && t.try_into::<Scenario>().is_err()
                })
                .or_else(|| self.sweep.iter().zip(&picks).next());
            match axis {
                Some((a, pick)) => self.sweep_error(
                    a,
                    format!("{message} (sweep value {})", csv_value(&a.values[*pick])),
                ),
                None => ScenarioError {
                    file: self.file.clone(),
                    key: None,
                    pos: None,
                    message,
                },
            }
        })?;
        self.check(&scenario, &params)?;
        Ok(Point {
            index,
            params,
            scenario,
        })
    }

    fn sweep_error(&self, axis: &Axis, message: String) -> ScenarioError {
        let key = format!("sweep.{}", axis.key);
        match &axis.set {
            Some(origin) => ScenarioError {
                file: origin.clone(),
                pos: None,
                key: Some(key),
                message,
            },
            None => ScenarioError {
                file: self.file.clone(),
                pos: self.locate(&key),
                key: Some(key),
                message,
            },
        }
    }

    /// An error about `key`, named the way validation names it: the sweep
    /// axis or `--set` that set the key, else its place in the file.
    pub fn error_at(&self, key: &str, message: String) -> ScenarioError {
        if let Some(axis) = self
            .sweep
            .iter()
            .find(|a| key.starts_with("sweep.") && a.key == key["sweep.".len()..])
        {
            return self.sweep_error(axis, message);
        }
        if let Some((_, origin)) = self
            .sets
            .iter()
            .rev()
            .find(|(k, _)| validate::paths_overlap(k, key))
        {
            return ScenarioError {
                file: origin.clone(),
                pos: None,
                key: Some(key.to_string()),
                message,
            };
        }
        ScenarioError {
            file: self.file.clone(),
            pos: self.locate(key),
            key: Some(key.to_string()),
            message,
        }
    }

    /// Settings of `[schemes]` that make no sense for any scheme this run
    /// uses (the scenario's, and every value a `schemes.scheme` sweep
    /// gives): warnings, not errors, each naming the key and where it is
    /// (a sweep across schemes must still run). A key a sweep sets is left
    /// alone.
    pub fn scheme_warnings(&self) -> Vec<String> {
        use crate::agent::Scheme;
        let Ok(s) = self.base() else {
            return Vec::new();
        };
        let swept = |key: &str| {
            self.sweep
                .iter()
                .any(|a| validate::paths_overlap(&a.key, key))
        };
        let mut schemes = vec![s.schemes.scheme];
        for a in self.sweep.iter().filter(|a| a.key == "schemes.scheme") {
            schemes = a
                .values
                .iter()
                .filter_map(|v| v.as_str().and_then(Scheme::from_name))
                .collect();
        }
        let uses = |x: Scheme| schemes.contains(&x);
        let names = schemes
            .iter()
            .map(|x| x.name())
            .collect::<Vec<_>>()
            .join(", ");
        let mut out = Vec::new();
        let mut warn = |key: &str, message: String| {
            out.push(self.error_at(key, message).to_string());
        };
        if s.schemes.fallback_ms > 0.0
            && !swept("schemes.fallback_ms")
            && !uses(Scheme::Owner)
            && !uses(Scheme::Selector)
        {
            warn(
                "schemes.fallback_ms",
                format!(
                    "has no effect: a fallback exists only under `owner` and `selector`, and \
                     this run uses {names}"
                ),
            );
        }
        let selector_table = toml::from_str::<toml::Table>(&self.text)
            .ok()
            .and_then(|t| t.get("schemes")?.as_table()?.get("selector").cloned())
            .is_some();
        if selector_table && !uses(Scheme::Selector) {
            warn(
                "schemes.selector",
                format!(
                    "has no effect: the selector exists only under `selector`, and this run \
                     uses {names}"
                ),
            );
        }
        if uses(Scheme::Mentions)
            && s.workload.mention_p == 0.0
            && s.schemes.default_agent.is_empty()
            && !swept("workload.mention_p")
            && !swept("schemes.default_agent")
        {
            warn(
                "schemes.scheme",
                "under `mentions` nothing is answered: `workload.mention_p` is 0 and no \
                 `schemes.default_agent` is set"
                    .into(),
            );
        }
        out
    }

    /// Validate the unswept scenario. A bad value that a sweep axis
    /// replaces at every point is left to the check of each point.
    fn check_base(&self, s: &Scenario) -> Result<(), ScenarioError> {
        match self.check(s, &[]) {
            Err(e)
                if e.key.as_deref().is_some_and(|k| {
                    self.sweep
                        .iter()
                        .any(|a| validate::paths_overlap(&a.key, k))
                }) =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// Semantic validation; errors are located in the file text, or name
    /// the sweep axis or `--set` that gave the bad value.
    fn check(&self, s: &Scenario, params: &[(String, String)]) -> Result<(), ScenarioError> {
        validate::check(s, &self.base_dir, &self.data).map_err(|(key, message)| {
            let swept = self
                .sweep
                .iter()
                .zip(params)
                .find(|(a, _)| validate::paths_overlap(&a.key, &key));
            if let Some((axis, (_, v))) = swept {
                let message = if axis.key == key {
                    format!("{message} (sweep value {v})")
                } else {
                    format!("`{key}` {message} (sweep value {v})")
                };
                return self.sweep_error(axis, message);
            }
            self.error_at(&key, message)
        })
    }
}

/// The value index on each axis of grid point `index`, for axes of
/// `lens` values (row-major: the last axis varies fastest). `merge`
/// recomputes a shard's parameter columns with it.
pub fn grid_picks(lens: &[usize], index: usize) -> Vec<usize> {
    let mut rest = index;
    let mut picks = vec![0usize; lens.len()];
    for (i, len) in lens.iter().enumerate().rev() {
        let len = (*len).max(1);
        picks[i] = rest % len;
        rest /= len;
    }
    picks
}

/// Most points a sweep grid may have.
pub const MAX_POINTS: usize = 1_000_000;

/// Serialize a scenario into a TOML table.
fn to_table(s: &Scenario) -> Result<toml::Table, String> {
    match Value::try_from(s) {
        Ok(Value::Table(t)) => Ok(t),
        Ok(_) => Err("scenario did not serialize to a table".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Parse a `--set` value as TOML (number, bool, array, inline table,
/// quoted string); anything else is taken as a bare string.
/// Write override `key = value` into a scenario file's own table (before
/// it is validated), as [`Loaded::apply_as`] applies it to the resolved
/// one: `sweep.AXIS` / `sweep` set axes; any other key is set (where the
/// file's structure allows; otherwise the later [`Loaded::apply_as`] says
/// what is wrong) and pins the file's axes inside it.
fn override_raw(table: &mut toml::Table, key: &str, value: Value) {
    fn sweep_axes(table: &mut toml::Table) -> Option<&mut toml::Table> {
        table
            .entry("sweep")
            .or_insert_with(|| Value::Table(toml::Table::new()))
            .as_table_mut()
    }
    if key == "sweep" {
        if let (Value::Table(axes), Some(sweep)) = (value, sweep_axes(table)) {
            sweep.extend(axes);
        }
        return;
    }
    if let Some(axis) = key.strip_prefix("sweep.") {
        let axis = axis
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .unwrap_or(axis);
        if let Some(sweep) = sweep_axes(table) {
            sweep.insert(axis.to_string(), value);
        }
        return;
    }
    if let Some(Value::Table(sweep)) = table.get_mut("sweep") {
        sweep.retain(|axis, _| !validate::path_within(axis, key));
    }
    let mut tree = Value::Table(std::mem::take(table));
    let _ = set_path(&mut tree, key, value);
    if let Value::Table(t) = tree {
        *table = t;
    }
}

pub fn parse_value(raw: &str) -> Value {
    let doc = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&doc) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| Value::String(raw.into())),
        Err(_) => Value::String(raw.to_string()),
    }
}

/// How a parameter value is written in CSV.
pub fn csv_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{f:.0}")
            } else {
                f.to_string()
            }
        }
        Value::Boolean(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// Set `value` at a dotted path. A numeric segment indexes an array; a
/// name segment applied to an array applies to every element (so
/// `agents.csma_tick_ms` sets it in every group). Missing table keys are
/// created (deserialization then rejects unknown ones).
pub fn set_path(tree: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let segs: Vec<&str> = path.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(format!("`{path}` is not a valid dotted key"));
    }
    set_segs(tree, &segs, value, path)
}

fn set_segs(node: &mut Value, segs: &[&str], value: Value, path: &str) -> Result<(), String> {
    let Some((first, rest)) = segs.split_first() else {
        *node = value;
        return Ok(());
    };
    match node {
        Value::Table(t) => {
            if rest.is_empty() {
                t.insert((*first).to_string(), value);
                return Ok(());
            }
            let child = t
                .entry((*first).to_string())
                .or_insert_with(|| Value::Table(toml::Table::new()));
            set_segs(child, rest, value, path)
        }
        Value::Array(items) => {
            if let Ok(i) = first.parse::<usize>() {
                let len = items.len();
                let item = items.get_mut(i).ok_or_else(|| {
                    let entries = if len == 1 { "entry" } else { "entries" };
                    format!("index {i} is out of range in `{path}` (the list has {len} {entries})")
                })?;
                set_segs(item, rest, value, path)
            } else {
                for item in items.iter_mut() {
                    set_segs(item, segs, value.clone(), path)?;
                }
                Ok(())
            }
        }
        _ => Err(format!(
            "`{path}` goes through `{first}`, which is not a table"
        )),
    }
}

/// A scenario duration (ms) as the floor's whole milliseconds on a clock
/// that runs `speed` times faster than scenario time (1: the simulator;
/// `live`'s `--speed`): `ms / speed` rounded to the nearest millisecond.
/// Scaling never turns a duration on or off (0 means "off" for the rate
/// limit and the sweep period): one that rounds to 0 ms unscaled is 0, one
/// that rounds to at least 1 ms stays at least 1 ms however fast the clock.
/// At speed 1 this is `ms.round()`, the simulator's rounding. (Until issue
/// 40, `live` rounded `ms / speed` up instead; it now rounds to the nearest,
/// and a duration under 0.5 ms is 0 there as in the simulator.)
pub fn floor_ms(ms: f64, speed: f64) -> u64 {
    if ms.round() < 1.0 {
        0
    } else {
        ((ms / speed).round() as u64).max(1)
    }
}

impl Scenario {
    /// The floor server this scenario's `[server]` describes, under
    /// `policy`, on a clock `speed` times faster than scenario time: every
    /// duration through [`floor_ms`]; the sweep's drift in µs rounded to
    /// the nearest; a `sweep_phase_ms` given in ms rounded down (a word,
    /// `random`, is 0 here: the simulator draws it per replication); the
    /// claim guard's epoch is the scenario's `epoch_ms`. The flood limit
    /// is off (the simulator turns it on). The one place the scenario
    /// becomes a floor configuration: the simulator ([`crate::model`]) and
    /// `live`'s embedded server both call it.
    pub fn floor_config(&self, policy: PolicyKind, speed: f64) -> crate::floor::Config {
        use crate::floor::ClaimGuard;
        let s = &self.server;
        let mut c = crate::floor::Config::for_policy(policy);
        c.ttl_ms = floor_ms(s.ttl_ms, speed);
        c.enabled = s.enabled;
        c.rate_limit_ms = floor_ms(s.rate_limit_ms, speed);
        c.sweep_phase_ms = match s.sweep_phase_ms {
            SweepPhase::Ms(ms) => (ms / speed).floor() as u64,
            SweepPhase::Word(_) => 0,
        };
        c.sweep_drift_us = (s.sweep_drift_ms * 1000.0 / speed).round() as u64;
        c.sweep_every_ms = floor_ms(s.sweep_every_ms, speed);
        c.rate_limit_operator = s.rate_limit_operator;
        c.claim_guard = match s.claim_guard {
            ClaimGuardSpec::Off => ClaimGuard::Off,
            ClaimGuardSpec::Relayed => ClaimGuard::Relayed,
            ClaimGuardSpec::Clock => ClaimGuard::Clock {
                skew_ms: floor_ms(s.claim_skew_ms, speed),
                epoch_ms: self.epoch_ms as i64,
            },
        };
        c.frame_limit = false;
        c
    }
}

/// The largest char boundary at or before byte `i` (clamped to the text).
pub fn floor_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_ms_is_the_simulators_rounding_at_speed_one() {
        // The simulator rounded every server duration with `round()`.
        for ms in [0.0, 0.3, 0.5, 1.0, 1.49, 999.5, 45_000.0, 1e10] {
            assert_eq!(floor_ms(ms, 1.0), ms.round() as u64, "{ms}");
        }
        // Faster clocks: to the nearest ms, never on or off by scaling.
        assert_eq!(floor_ms(1400.0, 1000.0), 1); // live rounded up to 2 before
        assert_eq!(floor_ms(1500.0, 1000.0), 2);
        assert_eq!(floor_ms(1000.0, 1e6), 1);
        assert_eq!(floor_ms(0.3, 0.001), 0);
    }

    #[test]
    fn floor_config_scales_the_servers_durations() {
        let mut s = Scenario::default();
        s.server.ttl_ms = 30_000.0;
        s.server.claim_guard = ClaimGuardSpec::Clock;
        s.server.claim_skew_ms = 250.0;
        s.server.sweep_drift_ms = 0.5;
        s.epoch_ms = 7;
        let c = s.floor_config(PolicyKind::Spec, 1.0);
        assert_eq!(
            (c.ttl_ms, c.sweep_drift_us, c.frame_limit),
            (30_000, 500, false)
        );
        assert_eq!(
            c.claim_guard,
            crate::floor::ClaimGuard::Clock {
                skew_ms: 250,
                epoch_ms: 7
            }
        );
        let c = s.floor_config(PolicyKind::Spec, 100.0);
        assert_eq!((c.ttl_ms, c.sweep_drift_us, c.sweep_every_ms), (300, 5, 50));
    }

    #[test]
    fn builtin_default_resolves() {
        let l = Loaded::builtin_default().expect("default scenario is valid");
        let s = l.base().expect("base");
        assert_eq!(s.agent_count(), 5);
        assert_eq!(l.point_count(), 1);
    }

    #[test]
    fn set_path_creates_and_indexes() {
        let mut l = Loaded::from_text("t.toml", "reps = 3\n", Path::new(".")).expect("ok");
        l.apply_set("agents.0.csma.max_ms=9000").expect("set");
        l.apply_set("server.ttl_ms=1000").expect("set");
        let s = l.base().expect("base");
        assert_eq!(s.server.ttl_ms, 1000.0);
        match &s.agents[0].csma {
            crate::dist::DistSpec::Uniform { max_ms, .. } => assert_eq!(*max_ms, 9000.0),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn sweep_grid_is_row_major() {
        let text =
            "reps = 1\n[sweep]\n\"server.ttl_ms\" = [1000, 2000]\n\"agents.0.count\" = [2, 3, 4]\n";
        let l = Loaded::from_text("t.toml", text, Path::new(".")).expect("ok");
        let pts = l.points().expect("points");
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[1].params[0].1, "1000");
        assert_eq!(pts[1].params[1].1, "3");
        assert_eq!(pts[3].params[0].1, "2000");
        assert_eq!(pts[5].scenario.agents[0].count, 4);
    }

    #[test]
    fn a_sweep_axis_may_carry_labels() {
        let text = "reps = 1\n[sweep]\n\
                    \"agents.0.respond_p\" = { values = [1.0, 0.2], labels = [\"all\", \"few\"] }\n\
                    \"server.ttl_ms\" = { from = 1000, to = 2000, step = 1000, label = \"TTL\" }\n";
        let l = Loaded::from_text("t.toml", text, Path::new(".")).expect("ok");
        assert_eq!(l.points().expect("points").len(), 4);
        let labels = l.sweep_labels();
        assert_eq!(
            labels[0].values,
            vec![("1".into(), "all".into()), ("0.2".into(), "few".into())]
        );
        assert_eq!(labels[1].label.as_deref(), Some("TTL"));
        // The resolved scenario keeps them, and reads back the same.
        let again = Loaded::from_text("r.toml", &l.resolved_toml().expect("toml"), Path::new("."))
            .expect("resolved reads back");
        assert_eq!(again.sweep_labels(), labels);
        // --set replaces the axis, labels and all.
        let mut l = l;
        l.apply_set("sweep.server.ttl_ms=[5000]").expect("set");
        assert_eq!(l.sweep_labels().len(), 1);
    }

    #[test]
    fn bad_sweep_labels_name_the_axis_with_line_and_column() {
        for (axis, want) in [
            (
                "{ values = [1, 2], labels = [\"a\"] }",
                "one label per value",
            ),
            ("{ values = [1, 2], label = 3 }", "`label` must be a string"),
            (
                "{ values = [1, 2], labels = [\"a\", \"a\"] }",
                "names two values",
            ),
            ("{ values = [1, 2], lable = \"x\" }", "unknown key `lable`"),
            ("{ values = [], label = \"x\" }", "lists no values"),
            ("{ values = [1], label = \"\" }", "1 to 100 characters"),
        ] {
            let text = format!("reps = 1\n[sweep]\n\"agents.0.count\" = {axis}\n");
            let e = Loaded::from_text("t.toml", &text, Path::new(".")).expect_err(axis);
            assert_eq!(e.pos.map(|p| p.0), Some(3), "{e}");
            assert_eq!(e.key.as_deref(), Some("sweep.agents.0.count"), "{e}");
            assert!(e.message.contains(want), "{axis}: {e}");
        }
    }

    #[test]
    fn sweep_axis_set_quoted_or_bare() {
        let text = "reps = 1\n";
        for set in [
            "sweep.agents.0.count=[2, 3]",
            "sweep.\"agents.0.count\"=[2, 3]",
        ] {
            let mut l = Loaded::from_text("t.toml", text, Path::new(".")).expect("ok");
            l.apply_set(set).expect(set);
            assert_eq!(l.sweep_keys(), vec!["agents.0.count".to_string()], "{set}");
            assert_eq!(l.points().expect("points").len(), 2);
        }
    }

    #[test]
    fn unknown_key_names_line() {
        let e = Loaded::from_text(
            "t.toml",
            "reps = 3\n[network]\nbse_ms = 4\n",
            Path::new("."),
        )
        .expect_err("unknown key");
        assert_eq!(e.pos.map(|p| p.0), Some(3), "{e}");
        assert!(e.to_string().contains("bse_ms"), "{e}");
    }

    #[test]
    fn script_agents_must_be_spelled_as_their_ids() {
        let text = |agent: &str| {
            format!(
                "[[agents]]\ncount = 3\n[workload]\ncount = 0\n\
                 [[script]]\nat_ms = 0\npost = {{ id = \"q\" }}\n\
                 [[script]]\nat_ms = 1\ninfer = {{ agent = \"{agent}\", msg = \"q\", duration_ms = 5 }}\n"
            )
        };
        assert!(Loaded::from_text("t.toml", &text("agent-002"), Path::new(".")).is_ok());
        for bad in ["agent-2", "agent-003", "agent-0002", "operator"] {
            let e = Loaded::from_text("t.toml", &text(bad), Path::new(".")).expect_err(bad);
            assert!(e.to_string().contains("script.1.infer.agent"), "{e}");
        }
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
