//! `herdsim tune --schemes`: the same search (docs/tune.md) once per
//! scheme (`[schemes] scheme`, docs/schemes.md), each over the settings
//! that matter under it, on the same common seeds, then the best of each
//! scheme compared: the recommendation is the scheme and settings that meet
//! the budget with the lowest objective, and the runner-up is the best
//! candidate of another scheme.
//!
//! What each scheme searches (every other `--param` as given):
//! - `open`: the CSMA window and the claim TTL (claims race for the floor);
//! - `owner`: the CSMA window (the owner waits its own draw); the TTL is
//!   pinned at the scenario's, since nobody contests an owner's claim;
//! - `mentions`: nothing but the cooldown: a mentioned (or default) agent
//!   answers at once, with no CSMA wait and no contest, so the window and
//!   the TTL are pinned at the scenario's;
//! - every scheme: the cooldown `schemes.cooldown_ms`, 0..60000 ms in steps
//!   of 1000 ms unless `--param schemes.cooldown_ms=...` says otherwise.
//!
//! The scenario's own scheme is always run, for the current settings; when
//! `--schemes` does not name it, only its current settings run, and it is
//! never recommended.

use super::space::{CSMA_MAX, CSMA_MIN, Num, ParamSpec, Space, TTL, current_window};
use super::stats::Paired;
use super::{BUDGET_METRIC, Outcome, Settings, TuneError, estimated_runs, nan_last, tune};
use crate::agent::Scheme;
use crate::progress::Observer;
use crate::scenario::Loaded;
use serde::Deserialize;
use serde::de::IntoDeserializer;
use std::ops::Range;

/// The cooldown key every scheme searches.
pub const COOLDOWN: &str = "schemes.cooldown_ms";
/// Default range and step of the cooldown (ms).
pub const DEFAULT_COOLDOWN: (i64, i64, i64) = (0, 60_000, 1_000);

/// The names `--schemes` takes, for messages: `open, owner, mentions`.
fn names() -> String {
    Scheme::ALL
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse `--schemes`: `all`, or scheme names separated by commas (the
/// names of `[schemes] scheme`), each once. The error names the flag.
pub fn parse_schemes(text: &str) -> Result<Vec<Scheme>, String> {
    let flag = format!("--schemes {text}");
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts == ["all"] {
        return Ok(Scheme::ALL.to_vec());
    }
    let mut out: Vec<Scheme> = Vec::new();
    for p in parts {
        if p == "all" {
            return Err(format!(
                "{flag}: `all` stands alone (names: {}, or all)",
                names()
            ));
        }
        if p.is_empty() {
            return Err(format!(
                "{flag}: an empty scheme name (names: {}, or all)",
                names()
            ));
        }
        let r: Result<Scheme, serde::de::value::Error> = Scheme::deserialize(p.into_deserializer());
        let Ok(scheme) = r else {
            return Err(format!(
                "{flag}: unknown scheme `{p}` (names: {}, or all)",
                names()
            ));
        };
        if out.contains(&scheme) {
            return Err(format!("{flag}: `{p}` is given twice"));
        }
        out.push(scheme);
    }
    Ok(out)
}

/// One scheme's search, checked.
pub struct SchemeSearch {
    pub scheme: Scheme,
    /// Named in `--schemes` (false: the scenario's own scheme, run for its
    /// current settings only).
    pub asked: bool,
    /// The scenario with `schemes.scheme` set.
    pub loaded: Loaded,
    pub space: Space,
    pub settings: Settings,
}

/// A pin of `key` at `v` (whole ms).
fn pin(key: &str, v: f64, scheme: Scheme) -> ParamSpec {
    let v = Num::Int(v.round() as i64);
    ParamSpec {
        key: key.to_string(),
        lo: v,
        hi: v,
        step: None,
        origin: format!("--schemes {}", scheme.name()),
    }
}

/// The scenario under `scheme`: `schemes.scheme` set, and the cooldown
/// written out (so that it has a current value to stay near).
pub fn scheme_loaded(loaded: &Loaded, scheme: Scheme) -> Result<Loaded, TuneError> {
    let base = loaded.base()?;
    let origin = format!("--schemes {}", scheme.name());
    let mut l = loaded.clone();
    l.apply_as(&format!("schemes.scheme=\"{}\"", scheme.name()), &origin)?;
    l.apply_as(
        &format!(
            "{COOLDOWN}={}",
            crate::report::num(base.schemes.cooldown_ms)
        ),
        &origin,
    )?;
    Ok(l)
}

/// The `--param` list `scheme` searches: the user's, less what does not
/// matter under the scheme (pinned at the scenario's value), and the
/// cooldown over its default range unless the user gave one. With
/// `current_only`, every parameter pinned at the scenario's value.
pub fn scheme_params(
    scheme: Scheme,
    user: &[ParamSpec],
    loaded: &Loaded,
    current_only: bool,
) -> Result<Vec<ParamSpec>, TuneError> {
    let base = loaded.base()?;
    let window = current_window(&base);
    let (min, max) = window.unwrap_or((
        super::space::DEFAULT_CSMA_MIN.0 as f64,
        super::space::DEFAULT_CSMA_MAX.0 as f64,
    ));
    let mut pins: Vec<ParamSpec> = Vec::new();
    if current_only || scheme != Scheme::Open {
        pins.push(pin(TTL, base.server.ttl_ms, scheme));
    }
    // Under mentions and selector the chosen agent answers at once: no wait.
    if current_only || matches!(scheme, Scheme::Mentions | Scheme::Selector) {
        pins.push(pin(CSMA_MIN, min, scheme));
        pins.push(pin(CSMA_MAX, max, scheme));
    }
    let mut out: Vec<ParamSpec> = user
        .iter()
        .filter(|p| !pins.iter().any(|q| q.key == p.key))
        .cloned()
        .collect();
    if current_only {
        // Every extra key at the scenario's value (the space fills it in).
        for p in &mut out {
            if let Some(v) = super::space::current_value(loaded, &p.key) {
                let n = match p.lo {
                    Num::Int(_) => Num::Int(v.round() as i64),
                    Num::Float(_) => Num::Float(v),
                };
                p.lo = n;
                p.hi = n;
            }
        }
    }
    out.extend(pins);
    if !user.iter().any(|p| p.key == COOLDOWN) {
        let (lo, hi, step) = DEFAULT_COOLDOWN;
        let cur = Num::Int(base.schemes.cooldown_ms.round() as i64);
        out.push(ParamSpec {
            key: COOLDOWN.to_string(),
            lo: if current_only { cur } else { Num::Int(lo) },
            hi: if current_only { cur } else { Num::Int(hi) },
            step: Some(Num::Int(step)),
            origin: format!("the default range of {COOLDOWN} ({lo}..{hi})"),
        });
    }
    Ok(out)
}

/// The space of one scheme's search: [`Space::new`], the cooldown's
/// current value read from the scenario (a scenario at the defaults does
/// not write its `[schemes]` table out, so the key has no value to read).
pub fn scheme_space(loaded: &Loaded, params: &[ParamSpec]) -> Result<Space, String> {
    let mut space = Space::new(loaded, params)?;
    let cooldown = loaded
        .base()
        .map_err(|e| e.to_string())?
        .schemes
        .cooldown_ms;
    for d in space.dims.iter_mut().filter(|d| d.key == COOLDOWN) {
        d.current = Some(cooldown);
    }
    Ok(space)
}

/// One scheme's part of the search.
#[derive(Debug)]
pub struct SchemeResult {
    pub scheme: Scheme,
    pub asked: bool,
    /// Its candidates' ids in the merged outcome.
    pub ids: Range<usize>,
    /// Its best candidate within the budget (none: nothing met it, or
    /// nothing was answered).
    pub chosen: Option<usize>,
    /// Its candidates tied with its best.
    pub ties: Vec<usize>,
    pub space: Space,
}

/// Everything a search across schemes found: the candidates of every
/// scheme in one outcome (`chosen`: the recommendation, `runner_up`: the
/// best candidate of another scheme with the paired objective difference,
/// `current`: the scenario as written), and each scheme's part.
#[derive(Debug)]
pub struct SchemesOutcome {
    pub merged: Outcome,
    pub schemes: Vec<SchemeResult>,
    /// The scenario's own scheme.
    pub own: Scheme,
    /// The scenario's `schemes.default_agent` (printed under `mentions`).
    pub default_agent: String,
}

impl SchemesOutcome {
    /// The part of the scheme `id` ran under.
    pub fn part(&self, id: usize) -> Option<&SchemeResult> {
        self.schemes.iter().find(|r| r.ids.contains(&id))
    }
}

/// Passes a stage's progress on, its runs counted after those of the
/// stages before and its length raised by the estimate of those after.
struct Stage<'a> {
    inner: &'a dyn Observer,
    name: &'static str,
    before: u64,
    after: u64,
}

impl Observer for Stage<'_> {
    fn length(&self, total: u64) {
        self.inner.length(self.before + total + self.after);
    }
    fn advance(&self, units: u64) {
        self.inner.advance(units);
    }
    fn message(&self, text: String) {
        self.inner.message(format!("{}: {text}", self.name));
    }
    fn warn(&self, line: &str) {
        self.inner.warn(line);
    }
    fn info(&self, line: &str) {
        self.inner.info(line);
    }
}

/// Mean objective, then mean p95, of a candidate (for the scheme ranking).
fn score(o: &Outcome, id: usize, s: &Settings) -> (f64, f64) {
    let c = &o.candidates[id];
    (
        nan_last(c.objective_summary(&s.weights).mean),
        nan_last(c.summary(BUDGET_METRIC).mean),
    )
}

/// Run every scheme's search in turn (each deterministic, on the same
/// seeds), then rank their best: the recommendation and the runner-up.
/// `stop`: as for [`tune`].
pub fn tune_schemes(
    searches: &[SchemeSearch],
    own: Scheme,
    default_agent: String,
    obs: &dyn Observer,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<SchemesOutcome, TuneError> {
    let estimates: Vec<u64> = searches
        .iter()
        .map(|x| estimated_runs(&x.space, &x.settings, x.space.grid(x.settings.levels).len()))
        .collect();
    let mut merged: Option<Outcome> = None;
    let mut parts: Vec<SchemeResult> = Vec::new();
    let mut current = None;
    for (i, x) in searches.iter().enumerate() {
        let before = merged.as_ref().map_or(0, |m| m.runs);
        let stage = Stage {
            inner: obs,
            name: x.scheme.name(),
            before,
            after: estimates[i + 1..].iter().sum(),
        };
        let mut o = match tune(&x.loaded, &x.space, &x.settings, &stage, stop) {
            Ok(o) => o,
            Err(e) => {
                obs.finish();
                return Err(e);
            }
        };
        let m = merged.get_or_insert_with(|| Outcome {
            candidates: Vec::new(),
            chosen: None,
            runner_up: None,
            ties: Vec::new(),
            current: 0,
            grid_count: 0,
            refine_count: 0,
            runs: 0,
            simulated: 0,
        });
        let offset = m.candidates.len();
        for c in &mut o.candidates {
            c.id += offset;
            c.scheme = Some(x.scheme);
        }
        if x.scheme == own {
            current = Some(o.current + offset);
        }
        let n = o.candidates.len();
        m.candidates.append(&mut o.candidates);
        m.grid_count += o.grid_count;
        m.refine_count += o.refine_count;
        m.runs += o.runs;
        m.simulated += o.simulated;
        parts.push(SchemeResult {
            scheme: x.scheme,
            asked: x.asked,
            ids: offset..offset + n,
            chosen: if x.asked {
                o.chosen.map(|c| c + offset)
            } else {
                None
            },
            ties: o.ties.iter().map(|t| t + offset).collect(),
            space: x.space.clone(),
        });
    }
    obs.finish();
    let (Some(mut m), Some(current)) = (merged, current) else {
        return Err(TuneError::Failure(anyhow::anyhow!(
            "internal: the scenario's own scheme `{}` was not run",
            own.name()
        )));
    };
    m.current = current;
    let s = &searches[0].settings;
    // The best of each scheme, best first; ties broken by the order given.
    let mut best: Vec<(usize, usize)> = parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.chosen.map(|c| (i, c)))
        .collect();
    best.sort_by(|a, b| {
        let (x, y) = (score(&m, a.1, s), score(&m, b.1, s));
        x.0.total_cmp(&y.0)
            .then(x.1.total_cmp(&y.1))
            .then(a.0.cmp(&b.0))
    });
    if let Some(&(wi, w)) = best.first() {
        m.chosen = Some(w);
        m.ties = parts[wi].ties.clone();
        m.runner_up = best.get(1).map(|&(_, r)| {
            (
                r,
                Paired::of(
                    &m.candidates[w].objective(&s.weights),
                    &m.candidates[r].objective(&s.weights),
                ),
            )
        });
    }
    Ok(SchemesOutcome {
        merged: m,
        schemes: parts,
        own,
        default_agent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_lists_parse_by_their_scenario_names() {
        assert_eq!(parse_schemes("all"), Ok(Scheme::ALL.to_vec()));
        assert_eq!(
            parse_schemes("owner, open"),
            Ok(vec![Scheme::Owner, Scheme::Open])
        );
        for (bad, want) in [
            ("bogus", "unknown scheme `bogus`"),
            ("open,open", "`open` is given twice"),
            ("open,", "an empty scheme name"),
            ("all,open", "`all` stands alone"),
            ("Open", "unknown scheme `Open`"),
        ] {
            let e = parse_schemes(bad).expect_err(bad);
            assert!(e.starts_with(&format!("--schemes {bad}: ")), "{e}");
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn each_scheme_searches_what_matters_under_it() {
        let l =
            Loaded::from_text("t.toml", "reps = 2\n", std::path::Path::new(".")).expect("scenario");
        let free = |scheme: Scheme| -> Vec<String> {
            let l = scheme_loaded(&l, scheme).expect("loads");
            let params = scheme_params(scheme, &[], &l, false).expect("params");
            let space = scheme_space(&l, &params).expect("space");
            assert_eq!(space.dims.len(), 4);
            space
                .dims
                .iter()
                .filter(|d| d.free())
                .map(|d| d.key.clone())
                .collect()
        };
        assert_eq!(free(Scheme::Open), [CSMA_MIN, CSMA_MAX, TTL, COOLDOWN]);
        assert_eq!(free(Scheme::Owner), [CSMA_MIN, CSMA_MAX, COOLDOWN]);
        assert_eq!(free(Scheme::Mentions), [COOLDOWN]);
        assert_eq!(free(Scheme::Selector), [COOLDOWN]);
        // The scenario's own scheme, for its current settings only.
        let lo = scheme_loaded(&l, Scheme::Open).expect("loads");
        let params = scheme_params(Scheme::Open, &[], &lo, true).expect("params");
        let space = scheme_space(&lo, &params).expect("space");
        assert_eq!(space.free_count(), 0);
        assert_eq!(space.current(), Some(vec![2000.0, 8000.0, 45000.0, 0.0]));
    }
}
