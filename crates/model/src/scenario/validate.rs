//! Semantic checks of a resolved scenario, sweep axes, and locating a
//! dotted key in the file text (for line:column in messages).

use super::{
    AgentGroup, Axis, Loaded, NetworkSpec, Scenario, ScenarioError, ServerSpec, SweepPhase,
    floor_boundary, line_col, set_path,
};
use crate::dist::{DataCache, DistError, DistSpec};
use crate::floor::PolicyKind;
use crate::limits::{MAX_DURATION_MS, MAX_FALLBACKS, MAX_SQUAT_AHEAD, MAX_TIME_MS};
use std::path::Path;
use toml::Spanned;
use toml::Value;
use toml::de::{DeTable, DeValue};

/// Most agents a scenario may have (memory and id width stay sane).
pub const MAX_AGENTS: u64 = 100_000;
/// Most values one sweep axis may expand to.
pub const MAX_AXIS_VALUES: usize = 10_000;

/// Longest scenario `name` (it becomes a folder name; file systems allow 255 bytes).
pub const MAX_NAME_LEN: usize = 100;

/// The rule for every name herdsim turns into a path component (a
/// scenario's `name`, the `scenario` of a shard's `shard.toml`): 1 to
/// [`MAX_NAME_LEN`] ASCII letters, digits, `-`, `_` or `.`, not starting
/// with `.`. So it can never be absolute, climb out with `..`, hide, or
/// hold a separator, and it fits in any file system's name limit.
pub fn check_name(name: &str) -> Result<(), String> {
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if name.is_empty() || !chars_ok || name.starts_with('.') {
        let shown: String = name.chars().take(MAX_NAME_LEN + 20).collect();
        return Err(format!(
            "`{shown}` must be a non-empty file name of letters, digits, `-`, `_` or `.`, \
             not starting with `.`"
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "is {} characters long; a name (it becomes a folder name) may have at most {MAX_NAME_LEN}",
            name.len()
        ));
    }
    Ok(())
}

/// Check every value; the error is (dotted key, message). Empirical data
/// files are loaded through `cache` (once per cache).
pub fn check(s: &Scenario, base_dir: &Path, cache: &DataCache) -> Result<(), (String, String)> {
    check_run(s)?;
    check_server(&s.server, base_dir, cache)?;
    check_network(&s.network, base_dir, cache)?;
    check_agents(s, base_dir, cache)?;
    check_workload(s, base_dir, cache)?;
    check_schemes(s, base_dir, cache)?;
    check_carrier(s)?;
    s.check_script()?;
    Ok(())
}

/// `[schemes]`: a cooldown in ms, a default agent the scenario has.
fn check_schemes(s: &Scenario, base_dir: &Path, cache: &DataCache) -> Result<(), (String, String)> {
    let c = &s.schemes;
    time("schemes.cooldown_ms", c.cooldown_ms)?;
    // A duration, not a time: with at most MAX_FALLBACKS of them after a
    // post, a question's last fallback stays far inside the horizon (a
    // time of 1e12 ms, k times over, passed it with every question
    // answered and was blamed on the workload).
    duration("schemes.fallback_ms", c.fallback_ms)?;
    if c.max_fallbacks > MAX_FALLBACKS {
        return fail(
            "schemes.max_fallbacks",
            format!(
                "{} fallbacks a question is more than the {MAX_FALLBACKS} herdsim accepts",
                c.max_fallbacks
            ),
        );
    }
    // Under `selector` every fallback is one more selection (an inference
    // and a message) a question; with every choice hung, each question
    // makes all of them. The run must be able to hold that many messages.
    if c.scheme == crate::agent::Scheme::Selector && c.fallback_ms > 0.0 {
        let w = &s.workload;
        let posts = match w.duration_ms {
            Some(d) => d / w.mean_gap_ms,
            None => w.count as f64,
        };
        let selections = posts * (1.0 + f64::from(c.max_fallbacks));
        if selections > crate::limits::MAX_MESSAGES as f64 {
            return fail(
                "schemes.max_fallbacks",
                format!(
                    "{posts:.0} questions with up to {} selections each could make {selections:e} \
                     selections, more than the {:e} messages a run may post; lower \
                     `schemes.max_fallbacks` or the workload",
                    1 + c.max_fallbacks,
                    crate::limits::MAX_MESSAGES as f64
                ),
            );
        }
    }
    let sel = &c.selector;
    dist(
        "schemes.selector.inference",
        &sel.inference,
        base_dir,
        cache,
    )?;
    prob("schemes.selector.crash_p", sel.crash_p)?;
    prob("schemes.selector.hang_p", sel.hang_p)?;
    exclusive(
        "schemes.selector.hang_p",
        "crash_p + hang_p",
        sel.crash_p,
        sel.hang_p,
    )?;
    if !c.default_agent.is_empty() {
        let n: u64 = s.agents.iter().map(|g| u64::from(g.count)).sum();
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let id = |i| crate::names::agent_id(i, n);
        // The number names the agent, whatever its padding (`agent-0`,
        // `agent-000`, `agent-0000`): one spelling across a sweep of the
        // agent count, whose ids widen at 1000 agents.
        let known = crate::names::parse_agent(&c.default_agent, n).is_some();
        if !known {
            let range = match n {
                0 => "none".to_string(),
                _ => format!("{} .. {}", id(0), id(n - 1)),
            };
            return fail(
                "schemes.default_agent",
                format!(
                    "names no agent of this scenario: {:?} (its agents: {range})",
                    c.default_agent
                ),
            );
        }
    }
    Ok(())
}

/// `[carrier]`: a kind the platform has, limits that are numbers.
fn check_carrier(s: &Scenario) -> Result<(), (String, String)> {
    use crate::carrier::{CarrierKind, Platform};
    let c = &s.carrier;
    if c.platform == Platform::Agentchat
        && !matches!(c.kind, CarrierKind::Server | CarrierKind::None)
    {
        return fail(
            "carrier.kind",
            format!(
                "`{}` needs a chat platform: set `carrier.platform` to matrix, slack, discord \
                 or telegram (on agentchat a claim travels through its server: `server` or `none`)",
                c.kind.name()
            ),
        );
    }
    if let Some(r) = c.message_rate_per_s
        && !(r.is_finite() && (0.0..=1e6).contains(&r))
    {
        return fail(
            "carrier.message_rate_per_s",
            format!("must be a number of messages a second in [0, 1e6] (0: no limit), not {r}"),
        );
    }
    if c.message_burst == Some(0) {
        return fail(
            "carrier.message_burst",
            "must be at least 1 (a limit lets one message through at a time)".into(),
        );
    }
    duration("carrier.typing_timeout_ms", c.typing_timeout_ms)?;
    if !(1.0..=120_000.0).contains(&c.typing_timeout_ms) {
        return fail(
            "carrier.typing_timeout_ms",
            format!(
                "must be 1 to 120000 ms (Synapse caps a typing timeout at 120000), not {}",
                c.typing_timeout_ms
            ),
        );
    }
    Ok(())
}

/// The error (dotted key, message) for `key`.
fn fail(key: &str, message: String) -> Result<(), (String, String)> {
    Err((key.to_string(), message))
}

/// The run's own keys: `name`, `reps`, `policies`.
fn check_run(s: &Scenario) -> Result<(), (String, String)> {
    if let Err(m) = check_name(&s.name) {
        return fail("name", m);
    }
    if s.reps == 0 {
        return fail("reps", "must be at least 1".into());
    }
    if s.policies.is_empty() {
        return fail("policies", "must list at least one policy".into());
    }
    for (i, p) in s.policies.iter().enumerate() {
        if let Err(m) = p.parse::<PolicyKind>() {
            return fail(&format!("policies.{i}"), m);
        }
        if s.policies[..i].contains(p) {
            return fail(&format!("policies.{i}"), format!("`{p}` is listed twice"));
        }
    }
    Ok(())
}

/// The `[server]` table.
fn check_server(
    server: &ServerSpec,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    duration("server.ttl_ms", server.ttl_ms)?;
    if server.ttl_ms == 0.0 {
        return fail("server.ttl_ms", "must be positive".into());
    }
    dist("server.processing", &server.processing, base_dir, cache)?;
    dist(
        "server.disconnect_detect",
        &server.disconnect_detect,
        base_dir,
        cache,
    )?;
    dist("server.restart", &server.restart, base_dir, cache)?;
    duration("server.rate_limit_ms", server.rate_limit_ms)?;
    duration("server.sweep_every_ms", server.sweep_every_ms)?;
    let every = server.sweep_every_ms;
    if every == 0.0 {
        return fail(
            "server.sweep_every_ms",
            "must be positive (the real server sweeps every 5000 ms)".into(),
        );
    }
    let phase_msg =
        |v: String| format!("must be a number of ms in [0, {every}) or \"random\", not {v}");
    match &server.sweep_phase_ms {
        SweepPhase::Ms(v) if v.is_finite() && (0.0..every).contains(v) => {}
        SweepPhase::Ms(v) => return fail("server.sweep_phase_ms", phase_msg(v.to_string())),
        SweepPhase::Word(w) if w == "random" => {}
        SweepPhase::Word(w) => {
            return fail("server.sweep_phase_ms", phase_msg(format!("\"{w}\"")));
        }
    }
    duration("server.claim_skew_ms", server.claim_skew_ms)?;
    duration("server.sweep_drift_ms", server.sweep_drift_ms)?;
    if server.sweep_drift_ms >= every {
        return fail(
            "server.sweep_drift_ms",
            format!(
                "must be less than {every} ms per sweep, not {}",
                server.sweep_drift_ms
            ),
        );
    }
    Ok(())
}

/// The `[network]` table.
fn check_network(
    network: &NetworkSpec,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    duration("network.base_ms", network.base_ms)?;
    dist("network.jitter", &network.jitter, base_dir, cache)?;
    prob("network.loss_p", network.loss_p)?;
    Ok(())
}

/// The `[[agents]]` groups: at least one agent, at most [`MAX_AGENTS`],
/// then each group.
fn check_agents(s: &Scenario, base_dir: &Path, cache: &DataCache) -> Result<(), (String, String)> {
    if s.agents.is_empty() {
        return fail("agents", "must have at least one agent group".into());
    }
    let total = s.agent_count();
    if total == 0 {
        return fail(
            "agents.0.count",
            "the scenario has zero agents (every group's count is 0)".into(),
        );
    }
    if total > MAX_AGENTS {
        return fail(
            "agents",
            format!("{total} agents is more than the {MAX_AGENTS} supported"),
        );
    }
    for (i, g) in s.agents.iter().enumerate() {
        check_agent_group(s, i, g, base_dir, cache)?;
    }
    Ok(())
}

/// Agent group `i` (`agents.{i}.*`).
fn check_agent_group(
    s: &Scenario,
    i: usize,
    g: &AgentGroup,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    let k = |f: &str| format!("agents.{i}.{f}");
    prob(&k("respond_p"), g.respond_p)?;
    dist(&k("csma"), &g.csma, base_dir, cache)?;
    duration(&k("csma_tick_ms"), g.csma_tick_ms)?;
    dist(&k("inference"), &g.inference, base_dir, cache)?;
    signed_dist(&k("clock_skew"), &g.clock_skew, base_dir, cache)?;
    prob(&k("ignore_yield_p"), g.ignore_yield_p)?;
    prob(&k("crash_p"), g.crash_p)?;
    prob(&k("hang_p"), g.hang_p)?;
    exclusive(&k("hang_p"), "crash_p + hang_p", g.crash_p, g.hang_p)?;
    if g.channels.is_empty() {
        return fail(&k("channels"), "must list at least one channel".into());
    }
    if g.squat_ahead > MAX_SQUAT_AHEAD {
        return fail(
            &k("squat_ahead"),
            format!("must be at most {MAX_SQUAT_AHEAD}, not {}", g.squat_ahead),
        );
    }
    duration(&k("squat_lead_ms"), g.squat_lead_ms)?;
    for (j, c) in g.channels.iter().enumerate() {
        channel(&format!("agents.{i}.channels.{j}"), c)?;
        agentchat_channel(s, &format!("agents.{i}.channels.{j}"), c)?;
    }
    Ok(())
}

/// The `[workload]` table.
fn check_workload(
    s: &Scenario,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    let w = &s.workload;
    duration("workload.mean_gap_ms", w.mean_gap_ms)?;
    if w.mean_gap_ms == 0.0 {
        return fail("workload.mean_gap_ms", "must be positive".into());
    }
    if let Some(gap) = &w.gap {
        dist("workload.gap", gap, base_dir, cache)?;
        // The run's length (and every plan made from it) is counted from
        // `mean_gap_ms`: it must be the gaps' mean.
        let mean = gap
            .prepare_with(base_dir, cache)
            .map_err(|e| ("workload.gap".to_string(), e.to_string()))?
            .mean_us()
            / 1000.0;
        if mean <= 0.0 {
            return fail("workload.gap", "must have a positive mean".into());
        }
        if (w.mean_gap_ms - mean).abs() > 0.01 * mean {
            return fail(
                "workload.mean_gap_ms",
                format!(
                    "must be the mean of `workload.gap` ({}) when `gap` is set, not {}",
                    crate::dist::show(mean),
                    crate::dist::show(w.mean_gap_ms)
                ),
            );
        }
    }
    if let Some(d) = w.duration_ms {
        time("workload.duration_ms", d)?;
    } else if w.count == 0 && s.script.is_empty() {
        return fail(
            "workload.count",
            "must be at least 1 (or set workload.duration_ms)".into(),
        );
    } else if w.count as f64 * w.mean_gap_ms > MAX_TIME_MS {
        return fail(
            "workload.count",
            format!(
                "{} messages {} ms apart would last {:e} ms of virtual time, more than the \
                 1e12 ms (about 31.7 years) a run may cover; lower `workload.count` or \
                 `workload.mean_gap_ms`",
                w.count,
                w.mean_gap_ms,
                w.count as f64 * w.mean_gap_ms
            ),
        );
    }
    channel("workload.channel", &w.channel)?;
    agentchat_channel(s, "workload.channel", &w.channel)?;
    prob("workload.mention_p", w.mention_p)?;
    prob("workload.dm_p", w.dm_p)?;
    exclusive("workload.dm_p", "mention_p + dm_p", w.mention_p, w.dm_p)?;
    prob("workload.reply_to_agent_p", w.reply_to_agent_p)?;
    Ok(())
}

/// A duration in ms: finite, >= 0, at most [`MAX_DURATION_MS`].
pub fn duration(key: &str, v: f64) -> Result<(), (String, String)> {
    if !v.is_finite() || v < 0.0 {
        return Err((
            key.to_string(),
            format!("must be a finite, non-negative number of ms, not {v}"),
        ));
    }
    if v > MAX_DURATION_MS {
        return Err((
            key.to_string(),
            format!(
                "{} ms is above the largest duration herdsim accepts, 1e10 ms (about 115 days)",
                crate::dist::show(v)
            ),
        ));
    }
    Ok(())
}

/// A point of virtual time in ms: finite, >= 0, at most [`MAX_TIME_MS`].
pub fn time(key: &str, v: f64) -> Result<(), (String, String)> {
    if !v.is_finite() || v < 0.0 {
        return Err((
            key.to_string(),
            format!("must be a finite, non-negative number of ms, not {v}"),
        ));
    }
    if v > MAX_TIME_MS {
        return Err((
            key.to_string(),
            format!(
                "{} ms is beyond the latest virtual time a scenario can name, 1e12 ms \
                 (about 31.7 years)",
                crate::dist::show(v)
            ),
        ));
    }
    Ok(())
}

/// Two probabilities of exclusive outcomes (`sum` names them, `a + b`):
/// together at most 1, reported at `key`.
fn exclusive(key: &str, sum: &str, a: f64, b: f64) -> Result<(), (String, String)> {
    if a + b > 1.0 {
        return fail(key, format!("{sum} = {} must not exceed 1", a + b));
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

fn dist(
    key: &str,
    d: &DistSpec,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    d.prepare_with(base_dir, cache)
        .map(|_| ())
        .map_err(|e| (dist_field(key, &e), e.to_string()))
}

/// The dotted key of the field a distribution error is about, so the
/// message points at `max_ms` or `path` rather than the whole table.
fn dist_field(key: &str, e: &DistError) -> String {
    match e {
        DistError::Invalid { field, .. } => format!("{key}.{field}"),
        DistError::File { message, .. } | DistError::Data { message, .. }
            if message.contains("`column`") || message.starts_with("no column named") =>
        {
            format!("{key}.column")
        }
        _ => format!("{key}.path"),
    }
}

/// Clock skew may be negative: only its shape is checked.
fn signed_dist(
    key: &str,
    d: &DistSpec,
    base_dir: &Path,
    cache: &DataCache,
) -> Result<(), (String, String)> {
    if let DistSpec::Normal { mean_ms, sd_ms } = d {
        if !mean_ms.is_finite() || !sd_ms.is_finite() || *sd_ms < 0.0 {
            let field = if mean_ms.is_finite() {
                "sd_ms"
            } else {
                "mean_ms"
            };
            return Err((
                format!("{key}.{field}"),
                format!("needs a finite mean_ms and a finite sd_ms >= 0 (got {mean_ms}, {sd_ms})"),
            ));
        }
        // The bounds (|mean_ms|, sd_ms <= the largest duration).
        return d
            .validate()
            .map_err(|e| (dist_field(key, &e), e.to_string()));
    }
    dist(key, d, base_dir, cache)
}

fn channel(key: &str, c: &str) -> Result<(), (String, String)> {
    // The same rule the server applies on the wire.
    if !crate::floor::address::is_channel_name(c) {
        return Err((
            key.to_string(),
            format!("`{c}` is not a channel name (`#` then letters, digits, `-`, `_`)"),
        ));
    }
    Ok(())
}

/// The agentchat 0.36 server refuses channel names longer than 31
/// characters after the `#` (`isValidChannel`, `lib/protocol.ts`): a
/// scenario running that policy on such a channel would measure nothing.
fn agentchat_channel(s: &Scenario, key: &str, c: &str) -> Result<(), (String, String)> {
    let max = crate::floor::sim::AGENTCHAT_CHANNEL_MAX;
    if s.policies.iter().any(|p| p == "agentchat-0.36") && c.len() > max + 1 {
        return Err((
            key.to_string(),
            format!(
                "`{c}` is longer than agentchat-0.36 allows ({max} characters after the `#`); that server refuses it"
            ),
        ));
    }
    Ok(())
}

/// Serde's words for types, in the user's words.
pub fn humanize(message: &str) -> String {
    let mut m = message.to_string();
    for (rust, user) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        (
            "expected u64",
            "expected a whole number from 0 to 18446744073709551615",
        ),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected a sequence", "expected a list `[...]`"),
        ("expected a map", "expected a table"),
        ("expected struct ", "expected a table "),
        ("invalid type: map", "invalid type: table"),
        ("invalid type: sequence", "invalid type: list"),
        ("floating point `", "decimal number `"),
        ("expected variant identifier", "expected a name"),
    ] {
        m = m.replace(rust, user);
    }
    if m == "missing field `kind`" {
        m = format!(
            "missing field `kind`: a distribution needs `kind`, one of {}, e.g. \
             `{{ kind = \"uniform\", min_ms = 2000, max_ms = 8000 }}`",
            KINDS.join(", ")
        );
    }
    m
}

/// Keys that hold one table, keys that hold a list of tables, and the
/// distributions (the `kind` tables), for [`shape`].
const ONE_TABLE: [&str; 4] = ["server", "network", "workload", "sweep"];
const TABLE_LISTS: [(&str, &str); 2] = [("agents", "agent group"), ("script", "scripted event")];
const KINDS: [&str; 6] = [
    "fixed",
    "uniform",
    "exponential",
    "normal",
    "lognormal",
    "empirical",
];

/// Tables written with the wrong brackets, and distributions written as
/// nested tables: the error says what to write instead. `(key, message)`.
pub fn shape(t: &toml::Table) -> Result<(), (String, String)> {
    for k in ONE_TABLE {
        if let Some(Value::Array(_)) = t.get(k) {
            return Err((
                k.to_string(),
                format!(
                    "`[[{k}]]` (double brackets) makes a list of tables, but a scenario has one \
                     `{k}` table: write `[{k}]` (single brackets)"
                ),
            ));
        }
    }
    for (k, what) in TABLE_LISTS {
        if let Some(Value::Table(_)) = t.get(k) {
            return Err((
                k.to_string(),
                format!(
                    "`[{k}]` (single brackets) is one table, but `{k}` is a list of tables: \
                     write `[[{k}]]` (double brackets) before each {what}"
                ),
            ));
        }
    }
    let mut dists: Vec<(String, String, &Value)> = Vec::new();
    for (table, key) in [
        ("server", "processing"),
        ("server", "disconnect_detect"),
        ("server", "restart"),
        ("network", "jitter"),
        ("workload", "gap"),
    ] {
        if let Some(v) = t.get(table).and_then(|s| s.get(key)) {
            dists.push((format!("{table}.{key}"), format!("{table}.{key}"), v));
        }
    }
    if let Some(Value::Array(groups)) = t.get("agents") {
        for (i, g) in groups.iter().enumerate() {
            for key in ["csma", "inference", "clock_skew"] {
                if let Some(v) = g.get(key) {
                    dists.push((format!("agents.{i}.{key}"), format!("agents.{key}"), v));
                }
            }
        }
    }
    for (key, header, v) in dists {
        let last = header.rsplit('.').next().unwrap_or(&header);
        let example = format!("`{last} = {{ kind = \"uniform\", min_ms = 2000, max_ms = 8000 }}`");
        match v {
            Value::Array(_) => {
                return Err((
                    key,
                    format!(
                        "a distribution is one table, not a list: write `[{header}]` once (single \
                         brackets), or {example}"
                    ),
                ));
            }
            Value::Table(d) => {
                if let Some((name, _)) = d.iter().find(|(_, v)| v.is_table() || v.is_array()) {
                    let hint = if KINDS.contains(&name.as_str()) {
                        format!(
                            "write `kind = \"{name}\"` and its parameters directly in \
                             `[{header}]` rather than a `[{header}.{name}]` table"
                        )
                    } else {
                        format!(
                            "write `kind` and its parameters directly in `[{header}]`, e.g. \
                             {example}"
                        )
                    };
                    return Err((
                        format!("{key}.{name}"),
                        format!("a distribution takes no nested tables or lists: {hint}"),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Top-level keys that shape the plan rather than one run: they cannot be
/// swept (list several policies instead, or use `--reps`/`--seed`).
pub const PLAN_KEYS: [&str; 6] = ["name", "description", "seed", "reps", "policies", "sweep"];

/// Flatten a `[sweep]` table into axes: dotted key -> values. A leaf is a
/// non-empty array, or a range table `{ from, to, step }` (inclusive of
/// `to` when it falls on a step). Every axis must name a known key, and no
/// two axes may set the same value. `set` names the `--set` the table came
/// from (errors then name it instead of the file).
pub fn sweep_axes(
    loaded: &Loaded,
    sweep: Value,
    set: Option<&str>,
) -> Result<Vec<Axis>, ScenarioError> {
    let err = |key: &str, message: String| match set {
        Some(origin) => ScenarioError {
            file: origin.to_string(),
            pos: None,
            key: Some(key.to_string()),
            message,
        },
        None => sweep_err(loaded, key, message),
    };
    let mut axes = Vec::new();
    let Value::Table(t) = sweep else {
        return Err(err("sweep", "must be a table".into()));
    };
    flatten("", t, &mut axes).map_err(|(k, m)| err(&k, m))?;
    let mut out: Vec<Axis> = Vec::with_capacity(axes.len());
    for FlatAxis {
        key,
        values,
        label,
        value_labels,
    } in axes
    {
        let skey = format!("sweep.{key}");
        let first_seg = key.split('.').next().unwrap_or("");
        if PLAN_KEYS.contains(&first_seg) {
            return Err(err(
                &skey,
                format!(
                    "`{first_seg}` cannot be swept: it shapes the whole run (list policies in \
                     `policies`, set `reps` and `seed` once)"
                ),
            ));
        }
        if let Some(other) = out.iter().find(|a| paths_overlap(&a.key, &key)) {
            return Err(err(
                &skey,
                format!(
                    "overlaps the sweep axis `{}`: both would set the same value",
                    other.key
                ),
            ));
        }
        // The key must be known: apply the first value and deserialize.
        let mut tree = Value::Table(loaded.resolved.clone());
        set_path(&mut tree, &key, values[0].clone()).map_err(|m| err(&skey, m))?;
        if let Err(e) = tree.try_into::<Scenario>() {
            return Err(err(
                &skey,
                format!("cannot sweep `{key}`: {}", humanize(e.message().trim())),
            ));
        }
        out.push(Axis {
            key,
            values,
            set: set.map(str::to_string),
            label,
            value_labels,
        });
    }
    Ok(out)
}

/// Whether two dotted keys set (part of) the same value: one is a prefix
/// of the other, where a name segment applied to a list (`agents.count`)
/// matches any index (`agents.0.count`).
pub fn paths_overlap(a: &str, b: &str) -> bool {
    fn go(a: &[&str], b: &[&str]) -> bool {
        match (a.split_first(), b.split_first()) {
            (None, _) | (_, None) => true,
            (Some((x, ra)), Some((y, rb))) => {
                if x == y {
                    return go(ra, rb);
                }
                let xn = x.parse::<usize>().is_ok();
                let yn = y.parse::<usize>().is_ok();
                match (xn, yn) {
                    (true, false) => go(ra, b),
                    (false, true) => go(a, rb),
                    _ => false,
                }
            }
        }
    }
    let a: Vec<&str> = a.split('.').collect();
    let b: Vec<&str> = b.split('.').collect();
    go(&a, &b)
}

/// Whether `inner` is `outer` or lies inside it (`agents.0.csma.max_ms`
/// inside `agents.csma`), with the same index matching as [`paths_overlap`].
pub fn path_within(inner: &str, outer: &str) -> bool {
    fn go(i: &[&str], o: &[&str]) -> bool {
        match (i.split_first(), o.split_first()) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some((x, ri)), Some((y, ro))) => {
                if x == y {
                    return go(ri, ro);
                }
                let xn = x.parse::<usize>().is_ok();
                let yn = y.parse::<usize>().is_ok();
                match (xn, yn) {
                    (true, false) => go(ri, o),
                    (false, true) => go(i, ro),
                    _ => false,
                }
            }
        }
    }
    let i: Vec<&str> = inner.split('.').collect();
    let o: Vec<&str> = outer.split('.').collect();
    go(&i, &o)
}

/// The axes of a `[sweep]` table as written (lists, ranges, labelled
/// axes), checked in form only, not against a scenario: how `merge` reads
/// the plan a shard recorded. An error is (`sweep.<key>`, message).
pub fn sweep_table(t: toml::Table) -> Result<Vec<Axis>, (String, String)> {
    let mut flat = Vec::new();
    flatten("", t, &mut flat)?;
    Ok(flat
        .into_iter()
        .map(|a| Axis {
            key: a.key,
            values: a.values,
            set: None,
            label: a.label,
            value_labels: a.value_labels,
        })
        .collect())
}

/// A sweep axis as written: its key, its values and its labels.
struct FlatAxis {
    key: String,
    values: Vec<Value>,
    label: Option<String>,
    value_labels: Option<Vec<String>>,
}

type Flat = Vec<FlatAxis>;

/// Longest label of a sweep axis or of one of its values, in characters.
pub const MAX_LABEL_CHARS: usize = 100;

/// A label: a string of 1 to [`MAX_LABEL_CHARS`] characters, on one line.
fn label_text(v: &Value, what: &str) -> Result<String, String> {
    let Value::String(s) = v else {
        return Err(format!("{what} must be a string"));
    };
    let n = s.chars().count();
    if s.trim().is_empty() || n > MAX_LABEL_CHARS || s.contains(['\n', '\r']) {
        return Err(format!(
            "{what} must be text of 1 to {MAX_LABEL_CHARS} characters on one line"
        ));
    }
    Ok(s.clone())
}

/// The labelled axis `key = { values = [...], label = "...", labels =
/// [...] }`: its values, its label and one label per value, both optional.
fn labelled(key: String, t: &toml::Table) -> Result<FlatAxis, String> {
    for k in t.keys() {
        if !matches!(k.as_str(), "values" | "label" | "labels") {
            return Err(format!(
                "unknown key `{k}` in a labelled axis (expected values, label, labels)"
            ));
        }
    }
    let Some(Value::Array(values)) = t.get("values") else {
        return Err("`values` must be a list of values".into());
    };
    if values.is_empty() {
        return Err("lists no values".into());
    }
    if values.len() > MAX_AXIS_VALUES {
        return Err(format!("has more than {MAX_AXIS_VALUES} values"));
    }
    let label = t
        .get("label")
        .map(|v| label_text(v, "`label`"))
        .transpose()?;
    let labels = match t.get("labels") {
        None => None,
        Some(Value::Array(ls)) => {
            if ls.len() != values.len() {
                return Err(format!(
                    "`labels` has {} entries for {} values: give one label per value",
                    ls.len(),
                    values.len()
                ));
            }
            let ls = ls
                .iter()
                .enumerate()
                .map(|(i, v)| label_text(v, &format!("`labels` entry {}", i + 1)))
                .collect::<Result<Vec<String>, String>>()?;
            for (i, l) in ls.iter().enumerate() {
                if ls[..i].contains(l) {
                    return Err(format!("`labels` names two values `{l}`"));
                }
            }
            Some(ls)
        }
        Some(_) => return Err("`labels` must be a list of strings, one per value".into()),
    };
    Ok(FlatAxis {
        key,
        values: values.clone(),
        label,
        value_labels: labels,
    })
}

fn flatten(prefix: &str, t: toml::Table, axes: &mut Flat) -> Result<(), (String, String)> {
    for (k, v) in t {
        let key = if prefix.is_empty() {
            k
        } else {
            format!("{prefix}.{k}")
        };
        let skey = format!("sweep.{key}");
        if key.split('.').any(str::is_empty) {
            return Err((skey, format!("`{key}` is not a valid dotted key")));
        }
        match v {
            Value::Array(vs) => {
                if vs.is_empty() {
                    return Err((skey, "lists no values".into()));
                }
                if vs.len() > MAX_AXIS_VALUES {
                    return Err((skey, format!("has more than {MAX_AXIS_VALUES} values")));
                }
                axes.push(FlatAxis {
                    key,
                    values: vs,
                    label: None,
                    value_labels: None,
                });
            }
            Value::Table(inner) if inner.contains_key("values") => {
                axes.push(labelled(key, &inner).map_err(|m| (skey, m))?);
            }
            Value::Table(mut inner)
                if inner.contains_key("from")
                    || inner.contains_key("to")
                    || inner.contains_key("step") =>
            {
                let label = inner
                    .remove("label")
                    .map(|v| label_text(&v, "`label`"))
                    .transpose()
                    .map_err(|m| (skey.clone(), m))?;
                let vs = range(&inner).map_err(|m| (skey, m))?;
                axes.push(FlatAxis {
                    key,
                    values: vs,
                    label,
                    value_labels: None,
                });
            }
            Value::Table(inner) if inner.is_empty() => {
                return Err((skey, "lists no values".into()));
            }
            Value::Table(inner) => flatten(&key, inner, axes)?,
            _ => {
                return Err((
                    skey,
                    "must be a list of values, a range table { from, to, step } or a labelled \
                     axis { values, label, labels }"
                        .into(),
                ));
            }
        }
    }
    Ok(())
}

/// Expand `{ from, to, step }`: `from`, `from + step`, ... up to `to`
/// (included when it falls on a step, within 1e-9 of a step). All three
/// integers give integers; otherwise floats, each rounded to the shortest
/// decimal within 1e-9 steps of `from + i * step` (so 0.1 steps give 0.3,
/// not 0.30000000000000004).
fn range(t: &toml::Table) -> Result<Vec<Value>, String> {
    for k in t.keys() {
        if !matches!(k.as_str(), "from" | "to" | "step") {
            return Err(format!("unknown range key `{k}` (expected from, to, step)"));
        }
    }
    let get = |k: &str| -> Result<&Value, String> {
        t.get(k).ok_or_else(|| format!("range needs `{k}`"))
    };
    let (from, to, step) = (get("from")?, get("to")?, get("step")?);
    if let (Value::Integer(from), Value::Integer(to), Value::Integer(step)) = (from, to, step) {
        let (from, to, step) = (i128::from(*from), i128::from(*to), i128::from(*step));
        if step <= 0 {
            return Err(format!("range `step` must be positive, not {step}"));
        }
        if to < from {
            return Err(format!("range `to` ({to}) must be >= `from` ({from})"));
        }
        let n = (to - from) / step + 1;
        if n > MAX_AXIS_VALUES as i128 {
            return Err(format!(
                "range expands to more than {MAX_AXIS_VALUES} values"
            ));
        }
        return (0..n)
            .map(|i| {
                i64::try_from(from + step * i)
                    .map(Value::Integer)
                    .map_err(|_| "range value out of the 64-bit range".to_string())
            })
            .collect();
    }
    let num = |k: &str, v: &Value| -> Result<f64, String> {
        match v {
            Value::Integer(i) => Ok(*i as f64),
            Value::Float(f) => Ok(*f),
            _ => Err(format!("range `{k}` must be a number")),
        }
    };
    let (from, to, step) = (num("from", from)?, num("to", to)?, num("step", step)?);
    if !(from.is_finite() && to.is_finite() && step.is_finite()) {
        return Err("range values must be finite".into());
    }
    if step <= 0.0 {
        return Err(format!("range `step` must be positive, not {step}"));
    }
    if to < from {
        return Err(format!("range `to` ({to}) must be >= `from` ({from})"));
    }
    let q = (to - from) / step;
    if q >= MAX_AXIS_VALUES as f64 {
        return Err(format!(
            "range expands to more than {MAX_AXIS_VALUES} values"
        ));
    }
    let n = (q + 1e-9 * q.max(1.0)).floor() as usize + 1;
    Ok((0..n)
        .map(|i| Value::Float(snap(from + step * i as f64, step)))
        .collect())
}

/// The shortest decimal within `1e-9 * step` of `v`.
fn snap(v: f64, step: f64) -> f64 {
    let tol = step * 1e-9;
    (0..=17)
        .filter_map(|digits| format!("{v:.digits$}").parse::<f64>().ok())
        .find(|x| (x - v).abs() <= tol)
        .unwrap_or(v)
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
    walk(doc.get_ref(), dotted, &mut best);
    best.map(|off| line_col(text, off))
}

/// Follow `path` from table `t`. `best` is the offset of the deepest key
/// (or array item) found on the way; the result is the value at the whole
/// path, if it is written in the file. A name segment applied to an array
/// of tables follows the first element that has it.
fn walk<'a, 'i>(
    t: &'a DeTable<'i>,
    path: &str,
    best: &mut Option<usize>,
) -> Option<&'a Spanned<DeValue<'i>>> {
    for (k, v) in t.iter() {
        let name: &str = k.get_ref();
        if path == name {
            *best = Some(k.span().start);
            return Some(v);
        }
        if let Some(rest) = path.strip_prefix(name).and_then(|r| r.strip_prefix('.')) {
            *best = Some(k.span().start);
            return walk_value(v, rest, best);
        }
    }
    None
}

fn walk_value<'a, 'i>(
    v: &'a Spanned<DeValue<'i>>,
    path: &str,
    best: &mut Option<usize>,
) -> Option<&'a Spanned<DeValue<'i>>> {
    match v.get_ref() {
        DeValue::Table(t) => walk(t, path, best),
        DeValue::Array(items) => {
            let (first, rest) = path.split_once('.').unwrap_or((path, ""));
            if let Ok(i) = first.parse::<usize>() {
                let item = items.get(i)?;
                *best = Some(item.span().start);
                if rest.is_empty() {
                    Some(item)
                } else {
                    walk_value(item, rest, best)
                }
            } else {
                for item in items.iter() {
                    let mut b = None;
                    if let Some(found) = walk_value(item, path, &mut b) {
                        *best = b;
                        return Some(found);
                    }
                }
                None
            }
        }
        _ => None,
    }
}

/// Sharpen a deserialization error whose span covers a whole table (as
/// for a distribution, an internally tagged enum, whose errors carry the
/// table's span): for `unknown field `x`` or `invalid type/value: ...`,
/// find the offending entry in the table at `key`. Returns the entry's
/// dotted key and byte offset.
///
/// This reads serde's message text: serde reports `unknown field` and
/// `invalid type` only as text (`de::Error::unknown_field` and
/// `invalid_type` build a message), and toml's error carries that message
/// and the table's span, no field or value; the field's own span is then
/// found in the document, parsed with spans.
pub fn refine(text: &str, key: &str, message: &str) -> Option<(String, usize)> {
    let doc = DeTable::parse(text).ok()?;
    let mut best = None;
    let node = walk(doc.get_ref(), key, &mut best)?;
    let DeValue::Table(t) = node.get_ref() else {
        return None;
    };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let field = rest.split('`').next()?;
        return t
            .iter()
            .find(|(k, _)| {
                let name: &str = k.get_ref();
                name == field
            })
            .map(|(k, _)| (format!("{key}.{field}"), k.span().start));
    }
    let desc = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?;
    let unexpected = desc.split(", expected").next()?;
    t.iter()
        .find(|(_, v)| is_unexpected(v.get_ref(), unexpected))
        .map(|(k, v)| {
            let name: &str = k.get_ref();
            (format!("{key}.{name}"), v.span().start)
        })
}

/// Whether a value is the one serde describes as `unexpected`
/// (`string "x"`, `integer `3``, `floating point `1.5``, `boolean `true``,
/// `sequence`, `map`).
fn is_unexpected(v: &DeValue<'_>, unexpected: &str) -> bool {
    let literal = |prefix: &str| {
        unexpected
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('`'))
            .and_then(|r| r.strip_suffix('`'))
            .map(str::to_string)
    };
    match v {
        DeValue::String(s) => unexpected == format!("string {:?}", s.as_ref()),
        DeValue::Integer(i) => literal("integer ").is_some_and(|lit| {
            let raw: String = i
                .as_str()
                .chars()
                .filter(|c| *c != '_' && *c != '+')
                .collect();
            raw == lit
        }),
        DeValue::Float(_) => unexpected.starts_with("floating point"),
        DeValue::Boolean(b) => literal("boolean ").is_some_and(|lit| lit == b.to_string()),
        DeValue::Array(_) => unexpected == "sequence",
        DeValue::Table(_) => unexpected == "map",
        DeValue::Datetime(_) => unexpected.contains("date"),
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

/// For a syntax error (no parse tree): the key being written on the
/// error's line, from the text alone: the table header it is in, plus the
/// key before `=` on that line.
pub fn syntax_key(text: &str, offset: usize) -> Option<String> {
    let offset = floor_boundary(text, offset);
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = text[line_start..line_end].trim();
    let header_of = |l: &str| -> Option<String> {
        let l = l.trim();
        let inner = l.strip_prefix("[[").or_else(|| l.strip_prefix('['))?;
        let name = inner.split(']').next().unwrap_or(inner).trim();
        (!name.is_empty()).then(|| unquote_key(name))
    };
    if line.starts_with('[') {
        return header_of(line);
    }
    let table = text[..line_start]
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('['))
        .and_then(header_of);
    let lhs = line
        .split_once('=')
        .map(|(k, _)| unquote_key(k.trim()))
        .filter(|k| !k.is_empty() && !k.starts_with('#'));
    match (table, lhs) {
        (Some(t), Some(k)) => Some(format!("{t}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(t), None) => Some(t),
        (None, None) => None,
    }
}

fn unquote_key(k: &str) -> String {
    k.split('.')
        .map(|s| s.trim().trim_matches('"').trim_matches('\''))
        .collect::<Vec<_>>()
        .join(".")
}

fn key_in_table(t: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (k, v) in t.iter() {
        let name: &str = k.get_ref();
        if k.span().contains(&offset) {
            path.push(name.to_string());
            return true;
        }
        if v.span().contains(&offset)
            || matches!(v.get_ref(), DeValue::Table(_) | DeValue::Array(_))
        {
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
    fn names_that_become_folders() {
        for ok in [
            "default",
            "csma-window",
            "a.b_c-1",
            &"x".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "../x",
            "/etc",
            "a/b",
            "a\\b",
            "C:x",
            "caf\u{e9}",
            "a b",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn locate_finds_nested_and_array_keys() {
        let text = "reps = 2\n\n[[agents]]\ncount = 3\n\n[[agents]]\ncount = 4\nrespond_p = 2\n";
        assert_eq!(locate(text, "reps"), Some((1, 1)));
        assert_eq!(locate(text, "agents.1.respond_p"), Some((8, 1)));
        assert_eq!(
            locate(text, "agents.respond_p"),
            Some((8, 1)),
            "name segment: first group that has it"
        );
        assert_eq!(
            locate(text, "agents.1.csma"),
            Some((6, 1)),
            "nearest written parent"
        );
    }

    #[test]
    fn locate_finds_quoted_and_nested_sweep_keys() {
        let text = "[sweep]\n\"server.ttl_ms\" = [1, 2]\n[sweep.agents.0]\ncount = [1, 2]\n";
        assert_eq!(locate(text, "sweep.server.ttl_ms"), Some((2, 1)));
        assert_eq!(locate(text, "sweep.agents.0.count"), Some((4, 1)));
    }

    #[test]
    fn key_at_names_the_value() {
        let text = "reps = 2\n[network]\nbase_ms = \"x\"\n";
        let off = text.find("\"x\"").expect("present");
        assert_eq!(key_at(text, off).as_deref(), Some("network.base_ms"));
    }

    #[test]
    fn refine_finds_the_field_inside_a_distribution() {
        let text = "[[agents]]\ncsma = { kind = \"uniform\", min_ms = \"x\", maxms = 3 }\n";
        let (k, off) = refine(
            text,
            "agents.0.csma",
            "unknown field `maxms`, expected `min_ms` or `max_ms`",
        )
        .expect("found");
        assert_eq!(k, "agents.0.csma.maxms");
        assert_eq!(line_col(text, off), (2, 42));
        let (k, _) = refine(
            text,
            "agents.0.csma",
            "invalid type: string \"x\", expected f64",
        )
        .expect("found");
        assert_eq!(k, "agents.0.csma.min_ms");
        assert_eq!(
            refine(text, "agents.0.csma", "missing field `max_ms`"),
            None
        );
    }

    #[test]
    fn syntax_key_reads_the_line() {
        let text = "reps = 2\n[network]\nbase_ms = = 3\n";
        let off = text.find("= 3").expect("present");
        assert_eq!(syntax_key(text, off).as_deref(), Some("network.base_ms"));
        assert_eq!(syntax_key("[netw\n", 2).as_deref(), Some("netw"));
    }

    #[test]
    fn overlap_matches_indices_and_name_segments() {
        assert!(paths_overlap("agents.count", "agents.0.count"));
        assert!(paths_overlap("agents.0.csma", "agents.0.csma.max_ms"));
        assert!(!paths_overlap("agents.0.count", "agents.1.count"));
        assert!(!paths_overlap("server.ttl_ms", "server.enabled"));
        assert!(path_within("agents.0.csma.max_ms", "agents.csma"));
        assert!(!path_within("agents.0.csma", "agents.0.csma.max_ms"));
    }

    #[test]
    fn ranges_expand_inclusively() {
        let mut t = toml::Table::new();
        t.insert("from".into(), Value::Integer(1000));
        t.insert("to".into(), Value::Integer(3000));
        t.insert("step".into(), Value::Integer(1000));
        let v = range(&t).expect("range");
        assert_eq!(
            v,
            vec![
                Value::Integer(1000),
                Value::Integer(2000),
                Value::Integer(3000)
            ]
        );
        t.insert("from".into(), Value::Float(0.0));
        t.insert("to".into(), Value::Float(0.3));
        t.insert("step".into(), Value::Float(0.1));
        let v = range(&t).expect("range");
        assert_eq!(
            v,
            vec![
                Value::Float(0.0),
                Value::Float(0.1),
                Value::Float(0.2),
                Value::Float(0.3)
            ]
        );
        t.insert("step".into(), Value::Float(0.0));
        assert!(range(&t).is_err());
    }
}
