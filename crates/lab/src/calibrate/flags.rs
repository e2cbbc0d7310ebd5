//! `herdsim calibrate`'s and `observe`'s fitting flags checked into
//! [`Settings`], and the results folder a calibration runs in.

use super::fit::Settings;
use crate::error::Error;
use crate::floor::PolicyKind;
use std::path::Path;
use std::str::FromStr;

/// The fitting flags as given.
#[derive(Debug, Clone, Copy)]
pub struct Flags<'a> {
    pub speed: f64,
    pub link_ms: Option<f64>,
    pub ttl_ms: f64,
    pub csma_ms: Option<&'a str>,
    pub policy: Option<&'a str>,
    pub reps: u32,
    pub seed: u64,
}

/// The most replications of the prediction.
pub const MAX_REPS: u32 = 10_000;

/// A number flag: finite and within [lo, hi].
fn number(flag: &str, x: f64, lo: f64, hi: f64) -> Result<f64, Error> {
    if x.is_finite() && x >= lo && x <= hi {
        Ok(x)
    } else {
        Err(Error::bad(format!(
            "{flag} {x}: must be a number from {lo} to {hi}"
        )))
    }
}

/// `MIN..MAX` in ms.
fn window(raw: &str) -> Result<(f64, f64), Error> {
    let bad = || {
        Error::bad(format!(
            "--csma-ms {raw}: expected MIN..MAX in ms with 0 <= MIN <= MAX, e.g. 2000..8000"
        ))
    };
    let (a, b) = raw.split_once("..").ok_or_else(bad)?;
    let a: f64 = a.trim().parse().map_err(|_| bad())?;
    let b: f64 = b.trim().parse().map_err(|_| bad())?;
    if !(a.is_finite()
        && b.is_finite()
        && a >= 0.0
        && a <= b
        && b <= crate::limits::MAX_DURATION_MS)
    {
        return Err(bad());
    }
    Ok((a, b))
}

/// The settings, every flag checked (exit 2 naming the flag otherwise).
pub fn settings(f: &Flags) -> Result<Settings, Error> {
    let max = crate::limits::MAX_DURATION_MS;
    let speed = number(
        "--speed",
        f.speed,
        crate::limits::MIN_SPEED,
        crate::limits::MAX_SPEED,
    )?;
    let link_ms = f
        .link_ms
        .map(|l| number("--link-ms", l, 0.0, max))
        .transpose()?;
    let ttl_ms = number("--ttl-ms", f.ttl_ms, 1.0, max)?;
    // Converted to scenario time, each must stay a duration.
    for (flag, v) in [("--ttl-ms", ttl_ms), ("--link-ms", link_ms.unwrap_or(0.0))] {
        if v * speed > max {
            return Err(Error::bad(format!(
                "{flag} {v} x --speed {speed} is beyond the longest duration a scenario holds ({max:e} ms)"
            )));
        }
    }
    let csma_ms = f.csma_ms.map(window).transpose()?;
    let policy = f
        .policy
        .map(|p| PolicyKind::from_str(p).map_err(|e| Error::bad(format!("--policy {p}: {e}"))))
        .transpose()?;
    if f.reps > MAX_REPS {
        return Err(Error::bad(format!("--reps {}: at most {MAX_REPS}", f.reps)));
    }
    Ok(Settings {
        speed,
        link_ms,
        ttl_ms,
        csma_ms,
        policy,
        seed: f.seed,
    })
}

/// `--since` or `--until`: a date (`YYYY-MM-DD`, its midnight UTC) or an
/// RFC 3339 time (`2024-01-31T12:00:00Z`, `...+01:00`), in µs since 1970.
pub fn instant(flag: &str, raw: &str) -> Result<i64, Error> {
    let t = raw.trim();
    let parsed = if t.len() == 10 {
        super::export::discord::rfc3339_us(&format!("{t}T00:00:00Z"))
    } else {
        super::export::discord::rfc3339_us(t)
    };
    parsed.ok_or_else(|| {
        Error::bad(format!(
            "{flag} {}: expected a date (YYYY-MM-DD, midnight UTC) or an RFC 3339 time \
             (2024-01-31T12:00:00Z, 2024-01-31T12:00:00+01:00)",
            super::export::raw::clip(raw, 80)
        ))
    })
}

/// `--since` and `--until` checked: each a time ([`instant`]), the first
/// before the second.
pub fn period(
    since: Option<&str>,
    until: Option<&str>,
) -> Result<(Option<i64>, Option<i64>), Error> {
    let s = since.map(|x| instant("--since", x)).transpose()?;
    let u = until.map(|x| instant("--until", x)).transpose()?;
    if let (Some(a), Some(b)) = (s, u)
        && a >= b
    {
        return Err(Error::bad(format!(
            "--since {} is not before --until {}: the window is empty",
            super::export::raw::clip(since.unwrap_or(""), 80),
            super::export::raw::clip(until.unwrap_or(""), 80)
        )));
    }
    Ok((s, u))
}

/// The prediction's threads, checked (default: all cores).
pub fn jobs(jobs: Option<usize>) -> Result<usize, Error> {
    let j = jobs.unwrap_or_else(crate::sweep::default_threads);
    if j == 0 || j > 1024 {
        return Err(Error::bad(format!(
            "--jobs {j}: must be from 1 to 1024 worker threads"
        )));
    }
    Ok(j)
}

/// Lock the results folder `dir` and run `f` in it (`obs` hears the
/// lock's notes); when `f` fails and the folder was made for it, the
/// (empty) folder is removed again: bad input leaves nothing behind.
pub fn in_folder<T>(
    dir: &Path,
    obs: &dyn crate::progress::Observer,
    f: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    let existed = dir.exists();
    let lock = crate::sweep::outputs::lock_results(dir, obs)?;
    let result = f();
    drop(lock);
    if result.is_err() && !existed {
        let _ = std::fs::remove_file(dir.join(crate::report::LOCK_FILE));
        // Only an empty folder goes (what was written stays).
        let _ = std::fs::remove_dir(dir);
    }
    result
}
