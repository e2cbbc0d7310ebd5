//! Semantic checks of a resolved scenario, sweep axes, and locating a
//! dotted key in the file text (for line:column in messages).

use super::{Loaded, Scenario, ScenarioError, line_col, set_path};
use crate::floor::PolicyKind;
use crate::model::dist::DistSpec;
use std::path::Path;
use toml::Value;
use toml::de::{DeTable, DeValue};

/// Most agents a scenario may have (memory and id width stay sane).
pub const MAX_AGENTS: u64 = 100_000;
/// Most values one sweep axis may expand to.
pub const MAX_AXIS_VALUES: usize = 10_000;

/// Check every value; the error is (dotted key, message).
pub fn check(s: &Scenario, base_dir: &Path) -> Result<(), (String, String)> {
    let err = |k: &str, m: String| Err((k.to_string(), m));
    if s.name.is_empty()
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        || s.name.starts_with('.')
    {
        return err(
            "name",
            format!(
                "`{}` must be a non-empty file name of letters, digits, `-`, `_` or `.`",
                s.name
            ),
        );
    }
    if s.reps == 0 {
        return err("reps", "must be at least 1".into());
    }
    if s.policies.is_empty() {
        return err("policies", "must list at least one policy".into());
    }
    for (i, p) in s.policies.iter().enumerate() {
        if let Err(m) = p.parse::<PolicyKind>() {
            return err(&format!("policies.{i}"), m);
        }
        if s.policies[..i].contains(p) {
            return err(&format!("policies.{i}"), format!("`{p}` is listed twice"));
        }
    }
    duration("server.ttl_ms", s.server.ttl_ms)?;
    if s.server.ttl_ms == 0.0 {
        return err("server.ttl_ms", "must be positive".into());
    }
    dist("server.processing", &s.server.processing, base_dir)?;
    dist("server.disconnect_detect", &s.server.disconnect_detect, base_dir)?;
    dist("server.restart", &s.server.restart, base_dir)?;
    duration("network.base_ms", s.network.base_ms)?;
    dist("network.jitter", &s.network.jitter, base_dir)?;
    prob("network.loss_p", s.network.loss_p)?;
    if s.agents.is_empty() {
        return err("agents", "must have at least one agent group".into());
    }
    let total = s.agent_count();
    if total == 0 {
        return err("agents", "the scenario has zero agents".into());
    }
    if total > MAX_AGENTS {
        return err(
            "agents",
            format!("{total} agents is more than the {MAX_AGENTS} supported"),
        );
    }
    for (i, g) in s.agents.iter().enumerate() {
        let k = |f: &str| format!("agents.{i}.{f}");
        prob(&k("respond_p"), g.respond_p)?;
        dist(&k("csma"), &g.csma, base_dir)?;
        duration(&k("csma_tick_ms"), g.csma_tick_ms)?;
        dist(&k("inference"), &g.inference, base_dir)?;
        signed_dist(&k("clock_skew"), &g.clock_skew, base_dir)?;
        prob(&k("ignore_yield_p"), g.ignore_yield_p)?;
        prob(&k("crash_p"), g.crash_p)?;
        prob(&k("hang_p"), g.hang_p)?;
        if g.crash_p + g.hang_p > 1.0 {
            return err(
                &k("hang_p"),
                format!(
                    "crash_p + hang_p = {} must not exceed 1",
                    g.crash_p + g.hang_p
                ),
            );
        }
        if g.channels.is_empty() {
            return err(&k("channels"), "must list at least one channel".into());
        }
        for (j, c) in g.channels.iter().enumerate() {
            channel(&format!("agents.{i}.channels.{j}"), c)?;
        }
    }
    let w = &s.workload;
    duration("workload.mean_gap_ms", w.mean_gap_ms)?;
    if w.mean_gap_ms == 0.0 {
        return err("workload.mean_gap_ms", "must be positive".into());
    }
    if let Some(d) = w.duration_ms {
        duration("workload.duration_ms", d)?;
    } else if w.count == 0 && s.script.is_empty() {
        return err(
            "workload.count",
            "must be at least 1 (or set workload.duration_ms)".into(),
        );
    }
    channel("workload.channel", &w.channel)?;
    prob("workload.mention_p", w.mention_p)?;
    prob("workload.dm_p", w.dm_p)?;
    if w.mention_p + w.dm_p > 1.0 {
        return err(
            "workload.dm_p",
            format!(
                "mention_p + dm_p = {} must not exceed 1",
                w.mention_p + w.dm_p
            ),
        );
    }
    prob("workload.reply_to_agent_p", w.reply_to_agent_p)?;
    s.check_script()?;
    Ok(())
}

fn duration(key: &str, v: f64) -> Result<(), (String, String)> {
    if !v.is_finite() || v < 0.0 {
        return Err((
            key.to_string(),
            format!("must be a finite, non-negative number of ms, not {v}"),
        ));
    }
    Ok(())
}

fn prob(key: &str, v: f64) -> Result<(), (String, String)> {
    if !(0.0..=1.0).contains(&v) {
        return Err((
            key.to_string(),
            format!("is a probability and must lie in 0..1, not {v}"),
        ));
    }
    Ok(())
}

fn dist(key: &str, d: &DistSpec, base_dir: &Path) -> Result<(), (String, String)> {
    d.prepare(base_dir)
        .map(|_| ())
        .map_err(|e| (key.to_string(), e.to_string()))
}

/// Clock skew may be negative: only its shape is checked.
fn signed_dist(key: &str, d: &DistSpec, base_dir: &Path) -> Result<(), (String, String)> {
    if let DistSpec::Normal { mean_ms, sd_ms } = d {
        if !mean_ms.is_finite() || !sd_ms.is_finite() || *sd_ms < 0.0 {
            return Err((
                key.to_string(),
                format!("needs a finite mean_ms and a finite sd_ms >= 0 (got {mean_ms}, {sd_ms})"),
            ));
        }
        return Ok(());
    }
    dist(key, d, base_dir)
}

fn channel(key: &str, c: &str) -> Result<(), (String, String)> {
    let ok = c.len() > 1
        && c.starts_with('#')
        && c[1..]
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
    if !ok {
        return Err((
            key.to_string(),
            format!("`{c}` is not a channel name (`#` then letters, digits, `-`, `_`)"),
        ));
    }
    Ok(())
}

/// Flatten a `[sweep]` table into axes: dotted key -> values. A leaf is a
/// non-empty array, or a range table `{ from, to, step }` (inclusive of
/// `to` when it falls on a step). Every axis must name a known key.
pub fn sweep_axes(loaded: &Loaded, sweep: Value) -> Result<Vec<(String, Vec<Value>)>, ScenarioError> {
    let mut axes = Vec::new();
    let Value::Table(t) = sweep else {
        return Err(sweep_err(loaded, "sweep", "must be a table".into()));
    };
    flatten(loaded, "", t, &mut axes)?;
    for (key, values) in &axes {
        // The key must be known: apply the first value and deserialize.
        let mut tree = Value::Table(loaded.resolved.clone());
        let first = values[0].clone();
        set_path(&mut tree, key, first)
            .map_err(|m| sweep_err(loaded, &format!("sweep.{key}"), m))?;
        if let Err(e) = tree.try_into::<Scenario>() {
            return Err(sweep_err(
                loaded,
                &format!("sweep.{key}"),
                format!("cannot sweep `{key}`: {}", e.message().trim()),
            ));
        }
    }
    Ok(axes)
}

fn flatten(
    loaded: &Loaded,
    prefix: &str,
    t: toml::Table,
    axes: &mut Vec<(String, Vec<Value>)>,
) -> Result<(), ScenarioError> {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Array(vs) => {
                if vs.is_empty() {
                    return Err(sweep_err(
                        loaded,
                        &format!("sweep.{key}"),
                        "lists no values".into(),
                    ));
                }
                if vs.len() > MAX_AXIS_VALUES {
                    return Err(sweep_err(
                        loaded,
                        &format!("sweep.{key}"),
                        format!("has more than {MAX_AXIS_VALUES} values"),
                    ));
                }
                axes.push((key, vs));
            }
            Value::Table(inner) if inner.contains_key("from") || inner.contains_key("to") => {
                let vs = range(&inner).map_err(|m| sweep_err(loaded, &format!("sweep.{key}"), m))?;
                axes.push((key, vs));
            }
            Value::Table(inner) => flatten(loaded, &key, inner, axes)?,
            _ => {
                return Err(sweep_err(
                    loaded,
                    &format!("sweep.{key}"),
                    "must be a list of values or a range table { from, to, step }".into(),
                ));
            }
        }
    }
    Ok(())
}

fn range(t: &toml::Table) -> Result<Vec<Value>, String> {
    for k in t.keys() {
        if !matches!(k.as_str(), "from" | "to" | "step") {
            return Err(format!("unknown range key `{k}` (expected from, to, step)"));
        }
    }
    let num = |k: &str| -> Result<(f64, bool), String> {
        match t.get(k) {
            Some(Value::Integer(i)) => Ok((*i as f64, true)),
            Some(Value::Float(f)) => Ok((*f, false)),
            Some(_) => Err(format!("range `{k}` must be a number")),
            None => Err(format!("range needs `{k}`")),
        }
    };
    let (from, fi) = num("from")?;
    let (to, ti) = num("to")?;
    let (step, si) = num("step")?;
    if !(from.is_finite() && to.is_finite() && step.is_finite()) {
        return Err("range values must be finite".into());
    }
    if step <= 0.0 {
        return Err(format!("range `step` must be positive, not {step}"));
    }
    if to < from {
        return Err(format!("range `to` ({to}) must be >= `from` ({from})"));
    }
    let n = ((to - from) / step + 1e-9).floor() as usize + 1;
    if n > MAX_AXIS_VALUES {
        return Err(format!("range expands to more than {MAX_AXIS_VALUES} values"));
    }
    let ints = fi && ti && si;
    Ok((0..n)
        .map(|i| {
            let v = from + step * i as f64;
            if ints {
                Value::Integer(v.round() as i64)
            } else {
                Value::Float(v)
            }
        })
        .collect())
}

fn sweep_err(loaded: &Loaded, key: &str, message: String) -> ScenarioError {
    ScenarioError {
        file: loaded.file.clone(),
        pos: locate(&loaded.text, key),
        key: Some(key.to_string()),
        message,
    }
}

/// Line and column of a dotted key in the TOML text (the key itself, or
/// the nearest enclosing table that is written there).
pub fn locate(text: &str, dotted: &str) -> Option<(usize, usize)> {
    let doc = DeTable::parse(text).ok()?;
    let mut best = None;
    find_table(doc.get_ref(), dotted, &mut best);
    best.map(|off| line_col(text, off))
}

fn find_table(t: &DeTable<'_>, path: &str, best: &mut Option<usize>) {
    for (k, v) in t.iter() {
        let name: &str = k.get_ref();
        if path == name {
            *best = Some(k.span().start);
            return;
        }
        if let Some(rest) = path.strip_prefix(name).and_then(|r| r.strip_prefix('.')) {
            *best = Some(k.span().start);
            find_value(v.get_ref(), rest, best);
            return;
        }
    }
}

fn find_value(v: &DeValue<'_>, path: &str, best: &mut Option<usize>) {
    match v {
        DeValue::Table(t) => find_table(t, path, best),
        DeValue::Array(items) => {
            let (first, rest) = path.split_once('.').unwrap_or((path, ""));
            if let Ok(i) = first.parse::<usize>() {
                if let Some(item) = items.get(i) {
                    *best = Some(item.span().start);
                    if !rest.is_empty() {
                        find_value(item.get_ref(), rest, best);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The dotted key whose key or value covers byte `offset` of the text.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    let doc = DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    if key_in_table(doc.get_ref(), offset, &mut path) {
        Some(path.join("."))
    } else {
        None
    }
}

fn key_in_table(t: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (k, v) in t.iter() {
        let name: &str = k.get_ref();
        if k.span().contains(&offset) {
            path.push(name.to_string());
            return true;
        }
        if v.span().contains(&offset) || matches!(v.get_ref(), DeValue::Table(_) | DeValue::Array(_)) {
            path.push(name.to_string());
            if key_in_value(v.get_ref(), offset, path) || v.span().contains(&offset) {
                return true;
            }
            path.pop();
        }
    }
    false
}

fn key_in_value(v: &DeValue<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    match v {
        DeValue::Table(t) => key_in_table(t, offset, path),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let inner = matches!(item.get_ref(), DeValue::Table(_) | DeValue::Array(_));
                if item.span().contains(&offset) || inner {
                    path.push(i.to_string());
                    if key_in_value(item.get_ref(), offset, path) || item.span().contains(&offset) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_nested_and_array_keys() {
        let text = "reps = 2\n\n[[agents]]\ncount = 3\n\n[[agents]]\ncount = 4\nrespond_p = 2\n";
        assert_eq!(locate(text, "reps"), Some((1, 1)));
        assert_eq!(locate(text, "agents.1.respond_p"), Some((8, 1)));
    }

    #[test]
    fn key_at_names_the_value() {
        let text = "reps = 2\n[network]\nbase_ms = \"x\"\n";
        let off = text.find("\"x\"").expect("present");
        assert_eq!(key_at(text, off).as_deref(), Some("network.base_ms"));
    }

    #[test]
    fn ranges_expand_inclusively() {
        let mut t = toml::Table::new();
        t.insert("from".into(), Value::Integer(1000));
        t.insert("to".into(), Value::Integer(3000));
        t.insert("step".into(), Value::Integer(1000));
        let v = range(&t).expect("range");
        assert_eq!(v, vec![Value::Integer(1000), Value::Integer(2000), Value::Integer(3000)]);
    }
}
