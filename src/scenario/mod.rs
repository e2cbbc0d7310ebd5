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
    AgentGroup, Arrivals, NetworkSpec, Scenario, ScriptEvent, ScriptInfer, ScriptPost, ServerSpec,
    WorkloadSpec,
};

use std::fmt;
use std::path::{Path, PathBuf};
use toml::Value;

/// The scenario built into the binary (`scenarios/default.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

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
    /// Sweep axes in file order: dotted key and its values.
    pub sweep: Vec<(String, Vec<Value>)>,
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
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            key: None,
            pos: None,
            message: format!("cannot read: {e}"),
        })?;
        let base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Loaded::from_text(&file, &text, &base_dir)
    }

    /// The embedded default scenario.
    pub fn builtin_default() -> Result<Loaded, ScenarioError> {
        Loaded::from_text("<built-in default.toml>", DEFAULT_SCENARIO, Path::new("."))
    }

    /// Parse and resolve scenario text.
    pub fn from_text(file: &str, text: &str, base_dir: &Path) -> Result<Loaded, ScenarioError> {
        let err_at = |e: toml::de::Error| ScenarioError {
            file: file.to_string(),
            key: e.span().and_then(|s| validate::key_at(text, s.start)),
            pos: e.span().map(|s| line_col(text, s.start)),
            message: e.message().trim().to_string(),
        };
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
        };
        if let Some(sweep) = sweep_value {
            loaded.sweep = validate::sweep_axes(&loaded, sweep)?;
        }
        // Validate the unswept scenario now, so errors point at the file.
        loaded.check(&scenario, &[])?;
        Ok(loaded)
    }

    /// Apply `key=value` (repeatable). A key under `sweep.` replaces that
    /// sweep axis (value must be a list or a range table).
    pub fn apply_set(&mut self, assignment: &str) -> Result<(), ScenarioError> {
        let bad = |key: Option<String>, message: String| ScenarioError {
            file: "--set".into(),
            key,
            pos: None,
            message,
        };
        let Some((key, raw)) = assignment.split_once('=') else {
            return Err(bad(
                None,
                format!("`{assignment}` is not of the form key=value"),
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(bad(None, format!("`{assignment}` has an empty key")));
        }
        let value = parse_value(raw.trim());
        if let Some(axis) = key.strip_prefix("sweep.") {
            let mut t = toml::Table::new();
            t.insert(axis.to_string(), value);
            let axes = validate::sweep_axes(self, Value::Table(t)).map_err(|mut e| {
                e.file = "--set".into();
                e
            })?;
            for (k, vs) in axes {
                if let Some(slot) = self.sweep.iter_mut().find(|(a, _)| *a == k) {
                    slot.1 = vs;
                } else {
                    self.sweep.push((k, vs));
                }
            }
            return Ok(());
        }
        let mut tree = Value::Table(self.resolved.clone());
        set_path(&mut tree, key, value).map_err(|m| bad(Some(key.to_string()), m))?;
        let scenario: Scenario = tree
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| bad(Some(key.to_string()), e.message().trim().into()))?;
        self.check(&scenario, &[]).map_err(|mut e| {
            e.file = "--set".into();
            e.pos = None;
            e
        })?;
        self.resolved = to_table(&scenario).map_err(|m| bad(Some(key.to_string()), m))?;
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
                message: e.message().trim().to_string(),
            })
    }

    /// The resolved scenario as TOML text, sweep included.
    pub fn resolved_toml(&self) -> Result<String, ScenarioError> {
        let mut t = self.resolved.clone();
        if !self.sweep.is_empty() {
            let mut s = toml::Table::new();
            for (k, vs) in &self.sweep {
                s.insert(k.clone(), Value::Array(vs.clone()));
            }
            t.insert("sweep".into(), Value::Table(s));
        }
        toml::to_string(&t).map_err(|e| ScenarioError {
            file: self.file.clone(),
            key: None,
            pos: None,
            message: e.to_string(),
        })
    }

    /// Number of grid points.
    pub fn point_count(&self) -> usize {
        self.sweep.iter().map(|(_, v)| v.len()).product()
    }

    /// Every point of the sweep grid (one point when there is no sweep),
    /// each validated.
    pub fn points(&self) -> Result<Vec<Point>, ScenarioError> {
        let n = self.point_count();
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
        let mut rest = index;
        let mut picks = vec![0usize; self.sweep.len()];
        for (i, (_, values)) in self.sweep.iter().enumerate().rev() {
            picks[i] = rest % values.len();
            rest /= values.len();
        }
        for ((key, values), pick) in self.sweep.iter().zip(&picks) {
            let v = values[*pick].clone();
            params.push((key.clone(), csv_value(&v)));
            set_path(&mut tree, key, v).map_err(|m| self.sweep_error(key, m))?;
        }
        let scenario: Scenario = tree
            .try_into()
            .map_err(|e: toml::de::Error| self.sweep_error("sweep", e.message().trim().into()))?;
        self.check(&scenario, &params)?;
        Ok(Point {
            index,
            params,
            scenario,
        })
    }

    fn sweep_error(&self, key: &str, message: String) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            pos: validate::locate(&self.text, &format!("sweep.{key}")),
            key: Some(format!("sweep.{key}")),
            message,
        }
    }

    /// Semantic validation; errors are located in the file text.
    fn check(&self, s: &Scenario, params: &[(String, String)]) -> Result<(), ScenarioError> {
        validate::check(s, &self.base_dir).map_err(|(key, message)| {
            let swept = params.iter().find(|(k, _)| *k == key);
            let (key, message) = match swept {
                Some((k, v)) => (format!("sweep.{k}"), format!("{message} (sweep value {v})")),
                None => (key, message),
            };
            ScenarioError {
                file: self.file.clone(),
                pos: validate::locate(&self.text, &key),
                key: Some(key),
                message,
            }
        })
    }
}

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
                    format!("index {i} is out of range in `{path}` (the list has {len} entries)")
                })?;
                set_segs(item, rest, value, path)
            } else {
                for item in items.iter_mut() {
                    set_segs(item, segs, value.clone(), path)?;
                }
                Ok(())
            }
        }
        _ => Err(format!("`{path}` goes through `{first}`, which is not a table")),
    }
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            crate::model::dist::DistSpec::Uniform { max_ms, .. } => assert_eq!(*max_ms, 9000.0),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn sweep_grid_is_row_major() {
        let text = "reps = 1\n[sweep]\n\"server.ttl_ms\" = [1000, 2000]\n\"agents.0.count\" = [2, 3, 4]\n";
        let l = Loaded::from_text("t.toml", text, Path::new(".")).expect("ok");
        let pts = l.points().expect("points");
        assert_eq!(pts.len(), 6);
        assert_eq!(pts[1].params[0].1, "1000");
        assert_eq!(pts[1].params[1].1, "3");
        assert_eq!(pts[3].params[0].1, "2000");
        assert_eq!(pts[5].scenario.agents[0].count, 4);
    }

    #[test]
    fn unknown_key_names_line() {
        let e = Loaded::from_text("t.toml", "reps = 3\n[network]\nbse_ms = 4\n", Path::new("."))
            .expect_err("unknown key");
        assert_eq!(e.pos.map(|p| p.0), Some(3), "{e}");
        assert!(e.to_string().contains("bse_ms"), "{e}");
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
