//! The search space of `herdsim tune`: which scenario keys it varies, over
//! which range and at which resolution, and how one candidate's values are
//! written into a scenario.
//!
//! Three parameters are always there: the CSMA window of every agent group
//! ([`CSMA_MIN`], [`CSMA_MAX`]: the window is set as a uniform distribution
//! in every group, whatever the scenario had) and the claim TTL ([`TTL`]).
//! `--param KEY=LO..HI[:STEP]` changes their range or adds any other
//! numeric key; `--param KEY=VALUE` pins one.

use crate::dist::DistSpec;
use crate::scenario::{Loaded, Scenario, ScenarioError};
use toml::Value;

/// The lower edge of the CSMA window, in every group.
pub const CSMA_MIN: &str = "agents.csma.min_ms";
/// The upper edge of the CSMA window, in every group.
pub const CSMA_MAX: &str = "agents.csma.max_ms";
/// The claim TTL.
pub const TTL: &str = "server.ttl_ms";

/// Default range of the lower CSMA edge (ms).
pub const DEFAULT_CSMA_MIN: (i64, i64) = (0, 10_000);
/// Default range of the upper CSMA edge (ms).
pub const DEFAULT_CSMA_MAX: (i64, i64) = (1_000, 30_000);
/// Default range of the claim TTL (ms).
pub const DEFAULT_TTL: (i64, i64) = (5_000, 120_000);

/// What a parameter is to `tune`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    CsmaMin,
    CsmaMax,
    Ttl,
    /// A key named with `--param`.
    Extra,
}

/// A number as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn value(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn parse(s: &str) -> Option<Num> {
        let s = s.trim();
        if let Ok(i) = s.parse::<i64>() {
            return Some(Num::Int(i));
        }
        // Rust accepts "inf" and "NaN"; a range bound must be a number.
        s.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Num::Float)
    }
}

/// One `--param` as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    /// The dotted key, `*` segments removed (`agents.*.csma.min_ms` is
    /// `agents.csma.min_ms`: every group).
    pub key: String,
    pub lo: Num,
    pub hi: Num,
    pub step: Option<Num>,
    /// The flag as given, for messages: `--param server.ttl_ms=5000..60000`.
    pub origin: String,
}

/// Parse `KEY=LO..HI`, `KEY=LO..HI:STEP` or `KEY=VALUE`. The error names
/// the flag.
pub fn parse_param(text: &str) -> Result<ParamSpec, String> {
    let origin = format!("--param {text}");
    let Some((key, range)) = text.split_once('=') else {
        return Err(format!(
            "{origin}: expected KEY=LO..HI, KEY=LO..HI:STEP or KEY=VALUE \
             (e.g. --param server.ttl_ms=10000..60000)"
        ));
    };
    let key: Vec<&str> = key.trim().split('.').filter(|s| *s != "*").collect();
    if key.is_empty() || key.iter().any(|s| s.trim().is_empty()) {
        return Err(format!(
            "{origin}: `{}` is not a dotted key",
            text.split('=').next().unwrap_or("")
        ));
    }
    let key = key.join(".");
    let (range, step) = match range.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (range, None),
    };
    let number = |s: &str, what: &str| {
        Num::parse(s).ok_or_else(|| {
            format!(
                "{origin}: key `{key}`: {what} `{}` is not a number",
                s.trim()
            )
        })
    };
    let (lo, hi) = match range.split_once("..") {
        Some((a, b)) => (number(a, "lower bound")?, number(b, "upper bound")?),
        None => {
            let v = number(range, "value")?;
            (v, v)
        }
    };
    if lo.value() > hi.value() {
        return Err(format!(
            "{origin}: key `{key}`: the lower bound {} is above the upper bound {}",
            lo.value(),
            hi.value()
        ));
    }
    let step = match step {
        Some(s) => {
            let n = number(s, "step")?;
            if n.value() <= 0.0 {
                return Err(format!("{origin}: key `{key}`: the step must be positive"));
            }
            Some(n)
        }
        None => None,
    };
    Ok(ParamSpec {
        key,
        lo,
        hi,
        step,
        origin,
    })
}

/// One searched (or pinned) parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    /// Dotted key, as in the CSV header.
    pub key: String,
    pub role: Role,
    pub lo: f64,
    pub hi: f64,
    /// Values are `lo + k * step`, clamped to `hi`.
    pub step: f64,
    /// Decimals that print every value exactly (0 for integers).
    pub decimals: usize,
    /// Whole numbers only (written to the scenario as TOML integers).
    pub integer: bool,
    /// The scenario's own value, when it has a single numeric one.
    pub current: Option<f64>,
    /// Where the range came from, for messages.
    pub origin: String,
}

impl Dim {
    /// True when the range has more than one value.
    pub fn free(&self) -> bool {
        self.hi > self.lo
    }

    /// The nearest value on the lattice `lo + k * step` inside the range.
    pub fn snap(&self, v: f64) -> f64 {
        if !self.free() {
            return self.lo;
        }
        let top = ((self.hi - self.lo) / self.step + 1e-9).floor();
        let k = ((v - self.lo) / self.step).round().clamp(0.0, top);
        self.canonical(self.lo + k * self.step)
    }

    /// `v` printed with the dimension's decimals and read back, so that a
    /// value has one representation (no 0.30000000000000004).
    fn canonical(&self, v: f64) -> f64 {
        self.format(v).parse().unwrap_or(v)
    }

    /// How a value is written (CSV, scenario, environment).
    pub fn format(&self, v: f64) -> String {
        let s = format!("{v:.prec$}", prec = self.decimals);
        if s.trim_start_matches('-')
            .chars()
            .all(|c| c == '0' || c == '.')
        {
            // "-0" is noise.
            return format!("{:.prec$}", 0.0, prec = self.decimals);
        }
        s
    }

    /// The value as TOML source.
    fn toml(&self, v: f64) -> String {
        let s = self.format(v);
        if self.integer || s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    }

    /// `levels` values spread evenly over the range (snapped, deduplicated).
    pub fn levels(&self, levels: usize) -> Vec<f64> {
        if !self.free() || levels < 2 {
            return vec![self.snap(self.lo)];
        }
        let mut out: Vec<f64> = Vec::with_capacity(levels);
        for i in 0..levels {
            let v = self.snap(self.lo + (self.hi - self.lo) * i as f64 / (levels - 1) as f64);
            if out.last() != Some(&v) {
                out.push(v);
            }
        }
        out
    }

    /// True when `v` lies in the range.
    pub fn contains(&self, v: f64) -> bool {
        v >= self.lo && v <= self.hi
    }
}

/// Decimals needed to print `x` exactly (at most 9).
fn decimals_of(x: f64) -> usize {
    for d in 0..=9 {
        let scaled = x * 10f64.powi(d as i32);
        if (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0) {
            return d;
        }
    }
    9
}

/// The default resolution of a range: a power of ten near 1/100 of it (at
/// least 1 for whole numbers).
fn auto_step(lo: f64, hi: f64, integer: bool) -> f64 {
    let span = hi - lo;
    if span <= 0.0 {
        return 1.0;
    }
    let s = 10f64.powf((span / 100.0).log10().floor());
    if integer { s.max(1.0) } else { s }
}

/// The parameters of one tuning run, in candidate-vector order: CSMA min,
/// CSMA max, TTL, then the `--param` extras in the order given.
#[derive(Debug, Clone)]
pub struct Space {
    pub dims: Vec<Dim>,
}

/// Keys a `--param` may not name: tune sets them itself, or they are not
/// a property of the deployment.
fn forbidden(key: &str) -> Option<String> {
    let segs: Vec<&str> = key.split('.').collect();
    let top = segs.first().copied().unwrap_or("");
    let group_level = |s: &[&str]| -> Option<usize> {
        // agents.csma... or agents.N.csma...
        match s.get(1) {
            Some(n) if n.parse::<usize>().is_ok() => Some(2),
            Some(_) => Some(1),
            None => None,
        }
    };
    match top {
        "seed" | "reps" | "policies" | "name" | "description" | "epoch_ms" | "script" => Some(
            format!("`{key}` is not a deployment setting; tune cannot search it"),
        ),
        "sweep" => Some("tune searches its own grid; a sweep axis cannot be a --param".to_string()),
        "server" if segs.len() == 1 => Some(format!(
            "`{key}` is a table; name a number inside it (e.g. {TTL})"
        )),
        "agents" => {
            let Some(i) = group_level(&segs) else {
                return Some("`agents` is a list of groups; name a number inside it".to_string());
            };
            match segs.get(i) {
                None => Some(format!("`{key}` is a table; name a number inside it")),
                Some(&"csma") => Some(format!(
                    "tune sets the CSMA window of every group itself; give its range as \
                     --param {CSMA_MIN}=LO..HI or --param {CSMA_MAX}=LO..HI"
                )),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The scenario's single numeric value at `key` (every group's, when the
/// key goes through the group list and they all agree).
pub fn current_value(loaded: &Loaded, key: &str) -> Option<f64> {
    let table = Value::Table(loaded.resolved_table());
    let segs: Vec<&str> = key.split('.').collect();
    let mut found = Vec::new();
    collect(&table, &segs, &mut found);
    let first = *found.first()?;
    found.iter().all(|v| *v == first).then_some(first)
}

fn collect(node: &Value, segs: &[&str], out: &mut Vec<f64>) {
    let Some((first, rest)) = segs.split_first() else {
        match node {
            Value::Integer(i) => out.push(*i as f64),
            Value::Float(f) => out.push(*f),
            _ => out.push(f64::NAN),
        }
        return;
    };
    match node {
        Value::Table(t) => match t.get(*first) {
            Some(child) => collect(child, rest, out),
            None => out.push(f64::NAN),
        },
        Value::Array(items) => match first.parse::<usize>() {
            Ok(i) => match items.get(i) {
                Some(item) => collect(item, rest, out),
                None => out.push(f64::NAN),
            },
            Err(_) => {
                for item in items {
                    collect(item, segs, out);
                }
            }
        },
        _ => out.push(f64::NAN),
    }
}

/// The CSMA window every group shares, if they all have the same uniform one.
pub fn current_window(s: &Scenario) -> Option<(f64, f64)> {
    let mut window = None;
    for g in &s.agents {
        let DistSpec::Uniform { min_ms, max_ms } = g.csma else {
            return None;
        };
        match window {
            None => window = Some((min_ms, max_ms)),
            Some(w) if w == (min_ms, max_ms) => {}
            Some(_) => return None,
        }
    }
    window
}

/// The dimension a `--param` flag asks for, checked against the built-in
/// dimensions so far (`dims`), with the index of the one it replaces
/// (`None`: a new scenario key).
fn param_dim(loaded: &Loaded, dims: &[Dim], p: &ParamSpec) -> Result<(Option<usize>, Dim), String> {
    let slot = dims.iter().position(|d| d.key == p.key);
    if let Some(why) = forbidden(&p.key).filter(|_| slot.is_none()) {
        return Err(format!("{}: key `{}`: {why}", p.origin, p.key));
    }
    if slot.is_some_and(|i| dims[i].origin.starts_with("--param")) {
        return Err(format!("{}: key `{}` is given twice", p.origin, p.key));
    }
    let integer = matches!(p.lo, Num::Int(_))
        && matches!(p.hi, Num::Int(_))
        && !matches!(p.step, Some(Num::Float(_)));
    let (lo, hi) = (p.lo.value(), p.hi.value());
    let role = slot.map_or(Role::Extra, |i| dims[i].role);
    if role != Role::Extra {
        if !integer {
            return Err(format!(
                "{}: key `{}` is whole milliseconds (the environment variable is an \
                     integer); write the bounds and step as integers",
                p.origin, p.key
            ));
        }
        if lo < 0.0 || (role == Role::Ttl && lo < 1.0) {
            let min = if role == Role::Ttl { "1" } else { "0" };
            return Err(format!(
                "{}: key `{}`: the lower bound must be at least {min}",
                p.origin, p.key
            ));
        }
    }
    let step = match p.step {
        Some(s) => s.value(),
        None => auto_step(lo, hi, integer),
    };
    let decimals = if integer {
        0
    } else {
        decimals_of(step).max(decimals_of(lo))
    };
    let dim = Dim {
        key: p.key.clone(),
        role,
        lo,
        hi,
        step,
        decimals,
        integer,
        current: match role {
            Role::Extra => current_value(loaded, &p.key),
            _ => slot.and_then(|i| dims[i].current),
        },
        origin: p.origin.clone(),
    };
    Ok((slot, dim))
}

impl Space {
    /// Build the space from the `--param` flags over `loaded` (the scenario
    /// with `--set` applied). Checks every bound against the scenario, so
    /// that a bad range is reported before anything runs.
    pub fn new(loaded: &Loaded, params: &[ParamSpec]) -> Result<Space, String> {
        let base = loaded.base().map_err(|e| e.to_string())?;
        let window = current_window(&base);
        let builtin = |key: &str, role: Role, range: (i64, i64), current: Option<f64>| Dim {
            key: key.to_string(),
            role,
            lo: range.0 as f64,
            hi: range.1 as f64,
            step: auto_step(range.0 as f64, range.1 as f64, true),
            decimals: 0,
            integer: true,
            current,
            origin: format!("the default range of {key} ({}..{})", range.0, range.1),
        };
        let mut dims = vec![
            builtin(
                CSMA_MIN,
                Role::CsmaMin,
                DEFAULT_CSMA_MIN,
                window.map(|w| w.0),
            ),
            builtin(
                CSMA_MAX,
                Role::CsmaMax,
                DEFAULT_CSMA_MAX,
                window.map(|w| w.1),
            ),
            builtin(TTL, Role::Ttl, DEFAULT_TTL, Some(base.server.ttl_ms)),
        ];
        for p in params {
            let (slot, dim) = param_dim(loaded, &dims, p)?;
            match slot {
                Some(i) => dims[i] = dim,
                None => dims.push(dim),
            }
        }
        let space = Space { dims };
        space.check_window_order()?;
        space.check_bounds(loaded)?;
        Ok(space)
    }

    /// The CSMA window's range must hold some window with min <= max.
    fn check_window_order(&self) -> Result<(), String> {
        let (min, max) = (&self.dims[0], &self.dims[1]);
        if min.lo > max.hi {
            return Err(format!(
                "{}: the lowest {CSMA_MIN} ({}) is above the highest {CSMA_MAX} ({}), \
                 so no window has min <= max",
                if min.origin.starts_with("--param") {
                    &min.origin
                } else {
                    &max.origin
                },
                min.format(min.lo),
                max.format(max.hi)
            ));
        }
        Ok(())
    }

    /// Apply each parameter's bounds (the others at a valid middle) to the
    /// scenario, so that an out-of-range bound is bad input up front.
    fn check_bounds(&self, loaded: &Loaded) -> Result<(), String> {
        let (min, max) = (&self.dims[0], &self.dims[1]);
        let mid: Vec<f64> = self.dims.iter().map(|d| d.snap(d.lo)).collect();
        // Window ends: (lowest min, a max >= it) and (a min <= highest max, highest max).
        let mut windows = vec![
            (min.lo, max.snap(max.lo.max(min.lo))),
            (min.snap(min.hi.min(max.hi)), max.hi),
        ];
        windows.dedup();
        for (a, b) in windows {
            let mut v = mid.clone();
            v[0] = a;
            v[1] = b.max(a);
            self.apply(loaded, &v).map_err(|e| e.to_string())?;
        }
        for (i, d) in self.dims.iter().enumerate().skip(2) {
            for bound in [d.lo, d.hi] {
                let mut v = mid.clone();
                v[0] = min.lo;
                v[1] = max.snap(max.lo.max(min.lo));
                v[i] = bound;
                self.apply(loaded, &v).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// True when `v` is a usable candidate (a window with min <= max).
    pub fn valid(&self, v: &[f64]) -> bool {
        v[0] <= v[1]
    }

    /// Snap every value to its lattice.
    pub fn snap(&self, v: &[f64]) -> Vec<f64> {
        self.dims.iter().zip(v).map(|(d, x)| d.snap(*x)).collect()
    }

    /// True when every value lies in its range.
    pub fn contains(&self, v: &[f64]) -> bool {
        self.dims.iter().zip(v).all(|(d, x)| d.contains(*x))
    }

    /// Number of parameters actually searched.
    pub fn free_count(&self) -> usize {
        self.dims.iter().filter(|d| d.free()).count()
    }

    /// The default number of grid levels per searched parameter: about 200
    /// candidates at most, 3 to 9 levels each.
    pub fn default_levels(&self) -> usize {
        let k = self.free_count().max(1) as f64;
        (200f64.powf(1.0 / k).floor() as usize).clamp(3, 9)
    }

    /// The full grid, row-major in dimension order (the last varies fastest),
    /// invalid windows left out.
    pub fn grid(&self, levels: usize) -> Vec<Vec<f64>> {
        let axes: Vec<Vec<f64>> = self.dims.iter().map(|d| d.levels(levels)).collect();
        let mut out = vec![Vec::new()];
        for axis in &axes {
            let mut next = Vec::with_capacity(out.len() * axis.len());
            for prefix in &out {
                for v in axis {
                    let mut p = prefix.clone();
                    p.push(*v);
                    next.push(p);
                }
            }
            out = next;
        }
        out.retain(|v| self.valid(v));
        out
    }

    /// The scenario for candidate values `v`: the window set as a uniform
    /// distribution in every group, the TTL and every extra key. Errors name
    /// the `--param` (or default range) that gave the value.
    pub fn apply(&self, loaded: &Loaded, v: &[f64]) -> Result<Loaded, ScenarioError> {
        let mut l = loaded.clone();
        let (min, max) = (&self.dims[0], &self.dims[1]);
        let window = format!(
            "agents.csma={{ kind = \"uniform\", min_ms = {}, max_ms = {} }}",
            min.toml(v[0]),
            max.toml(v[1])
        );
        let origin = if max.origin.starts_with("--param") {
            &max.origin
        } else {
            &min.origin
        };
        l.apply_as(&window, origin)?;
        for (d, x) in self.dims.iter().zip(v).skip(2) {
            l.apply_as(&format!("{}={}", d.key, d.toml(*x)), &d.origin)?;
        }
        Ok(l)
    }

    /// Squared distance from the scenario's own values, each parameter
    /// scaled to its range (0 where the current value is unknown): the
    /// last tie-break, so that a parameter the objective cannot see stays
    /// where the user had it.
    pub fn distance_to_current(&self, v: &[f64]) -> f64 {
        self.dims
            .iter()
            .zip(v)
            .filter(|(d, _)| d.free())
            .map(|(d, x)| match d.current {
                Some(c) => ((x - c) / (d.hi - d.lo)).powi(2),
                None => 0.0,
            })
            .sum()
    }

    /// The scenario's own values, if it has one for every parameter.
    pub fn current(&self) -> Option<Vec<f64>> {
        self.dims.iter().map(|d| d.current).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn loaded(text: &str) -> Loaded {
        Loaded::from_text("t.toml", text, Path::new(".")).expect("scenario")
    }

    #[test]
    fn params_parse() {
        let p = parse_param("agents.*.csma.max_ms=1000..4000:500").expect("ok");
        assert_eq!(p.key, "agents.csma.max_ms");
        assert_eq!(
            (p.lo, p.hi, p.step),
            (Num::Int(1000), Num::Int(4000), Some(Num::Int(500)))
        );
        let p = parse_param("agents.respond_p=0.25..0.75").expect("ok");
        assert_eq!((p.lo, p.hi), (Num::Float(0.25), Num::Float(0.75)));
        let p = parse_param("server.ttl_ms=45000").expect("ok");
        assert_eq!(p.lo, p.hi);
        for bad in [
            "server.ttl_ms",
            "=1..2",
            "x=a..2",
            "x=3..2",
            "x=1..2:0",
            "x=1..inf",
            "a..b=1",
        ] {
            let e = parse_param(bad).expect_err(bad);
            assert!(e.starts_with(&format!("--param {bad}")), "{e}");
        }
    }

    #[test]
    fn lattice_and_grid() {
        let l = loaded("reps = 2\n");
        let params = [
            parse_param("agents.csma.min_ms=0").expect("p"),
            parse_param("agents.csma.max_ms=1000..4000:500").expect("p"),
            parse_param("server.ttl_ms=30000").expect("p"),
            parse_param("agents.respond_p=0.2..0.9").expect("p"),
        ];
        let s = Space::new(&l, &params).expect("space");
        assert_eq!(s.free_count(), 2);
        let max = &s.dims[1];
        assert_eq!(max.snap(3740.0), 3500.0);
        assert_eq!(max.snap(99_999.0), 4000.0);
        let p = &s.dims[3];
        assert_eq!(p.step, 0.001);
        assert_eq!(p.snap(0.3000000001), 0.3);
        assert_eq!(p.format(0.3), "0.300");
        assert_eq!(p.current, Some(0.6));
        let g = s.grid(3);
        assert_eq!(g.len(), 9);
        assert!(g.iter().all(|v| v[0] == 0.0 && v[2] == 30000.0));
        let applied = s.apply(&l, &g[4]).expect("apply").base().expect("base");
        assert_eq!(current_window(&applied), Some((0.0, 2500.0)));
        assert_eq!(applied.agents[0].respond_p, 0.55);
    }

    #[test]
    fn default_space_and_invalid_windows() {
        let l = loaded("reps = 2\n");
        let s = Space::new(&l, &[]).expect("space");
        assert_eq!(s.dims.len(), 3);
        assert_eq!(s.default_levels(), 5);
        assert_eq!(s.current(), Some(vec![2000.0, 8000.0, 45000.0]));
        assert!(s.grid(5).iter().all(|v| v[0] <= v[1]));
    }

    #[test]
    fn bad_ranges_name_the_flag() {
        let l = loaded("reps = 2\n");
        let cases = [
            ("agents.respond_p=0..2", "--param agents.respond_p=0..2"),
            ("nosuch.key=1..2", "--param nosuch.key=1..2"),
            ("agents.0.csma.max_ms=1..2", "tune sets the CSMA window"),
            ("server.ttl_ms=0..100", "at least 1"),
            ("server.ttl_ms=1.5..100.5", "whole milliseconds"),
            ("seed=1..5", "not a deployment setting"),
        ];
        for (p, want) in cases {
            let spec = parse_param(p).expect("parses");
            let e = Space::new(&l, &[spec]).expect_err(p);
            assert!(e.contains(want), "{p}: {e}");
        }
        let e = Space::new(
            &l,
            &[
                parse_param("agents.csma.min_ms=5000..6000").expect("p"),
                parse_param("agents.csma.max_ms=1000..2000").expect("p"),
            ],
        )
        .expect_err("no window");
        assert!(e.contains("no window"), "{e}");
    }
}
