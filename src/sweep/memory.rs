//! The memory a plan needs, estimated before anything is allocated, and
//! the budget it must fit (`--max-memory`, default: the memory the machine
//! has available). See docs/limits.md for the figures and how they were
//! measured.

use super::{Error, Plan};
use crate::scenario::Loaded;

/// Bytes per agent of one running replication (client, links, random
/// streams, server membership, id), measured: 40 000 agents need about
/// 1.6 KB each (RSS at 10 000 and 40 000 agents, one DM); rounded up.
pub const AGENT_BYTES: u64 = 2_048;
/// Bytes per agent held for each sweep point of the run (its id and group).
pub const POINT_AGENT_BYTES: u64 = 64;
/// Bytes per sweep point: its scenario, parameters and prepared world.
pub const POINT_BYTES: u64 = 8_192;
/// Bytes per replication of the plan: the job, its result row (twice, as
/// the rows are sorted and summarised) and its share of the summaries.
pub const JOB_BYTES: u64 = 640;
/// Bytes per pending event (the event, its message and its queue entry),
/// measured: one message relayed to 40 000 agents adds about 770 B each.
pub const EVENT_BYTES: u64 = 1_024;
/// Fixed bytes per replication (event queue buckets, tables).
pub const RUN_BASE_BYTES: u64 = 1 << 20;
/// Fixed bytes of the process.
pub const PROCESS_BYTES: u64 = 32 << 20;
/// Budget when the machine's available memory cannot be read (8 GiB).
pub const FALLBACK_BUDGET: u64 = 8 << 30;

/// The memory budget: `--max-memory` if given, else the machine's
/// available memory (`MemAvailable` of /proc/meminfo), else 8 GiB.
pub fn budget(max_memory: Option<u64>) -> u64 {
    max_memory.unwrap_or_else(|| available().unwrap_or(FALLBACK_BUDGET))
}

/// `MemAvailable` in bytes, on Linux.
fn available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Parse a `--max-memory` value: bytes, or a number with a binary suffix
/// `K`, `M`, `G`, `T` (optionally followed by `B` or `iB`), e.g. `512M`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (digits, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let bad = || format!("`{s}` is not a size (bytes, or a number with K, M, G or T, e.g. 4G)");
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if bytes == 0 {
        return Err("must be more than 0 bytes".into());
    }
    Ok(bytes)
}

/// A size for messages: `1.5 GiB`.
pub fn show(bytes: u64) -> String {
    let b = bytes as f64;
    for (unit, scale) in [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)] {
        if bytes >= scale {
            return format!("{:.1} {unit}", b / scale as f64);
        }
    }
    format!("{:.0} KiB", (b / 1024.0).ceil())
}

/// The plan as a whole (points x policies x replications), before its
/// points are expanded: `(bytes, key to blame)`.
pub fn plan_bytes(loaded: &Loaded, points: u64, policies: u64, reps: u64) -> (u64, String) {
    let jobs = points.saturating_mul(policies).saturating_mul(reps);
    let job_bytes = jobs.saturating_mul(JOB_BYTES);
    let point_bytes = points.saturating_mul(POINT_BYTES);
    let key = if job_bytes >= point_bytes && reps > 1 {
        "reps".to_string()
    } else {
        loaded
            .sweep
            .last()
            .map_or_else(|| "reps".to_string(), |a| format!("sweep.{}", a.key))
    };
    (
        PROCESS_BYTES
            .saturating_add(job_bytes)
            .saturating_add(point_bytes),
        key,
    )
}

/// What one replication of `agents` agents needs before its events.
pub fn run_bytes(agents: u64) -> u64 {
    RUN_BASE_BYTES.saturating_add(agents.saturating_mul(AGENT_BYTES))
}

/// Refuse a run of `run_points` on `threads` threads whose agents do not
/// fit `budget`, before they are allocated; return how many events each
/// replication may hold pending (its share of what is left: docs/limits.md).
pub fn check_run(
    plan: &Plan,
    run_points: &[usize],
    threads: usize,
    budget: u64,
) -> Result<usize, Error> {
    let agents = |p: usize| plan.points.get(p).map_or(0, |p| p.scenario.agent_count());
    let (most, at) = run_points
        .iter()
        .map(|&p| (agents(p), p))
        .max()
        .unwrap_or((0, 0));
    let per_points: u64 = run_points
        .iter()
        .map(|&p| agents(p).saturating_mul(POINT_AGENT_BYTES))
        .fold(0, u64::saturating_add);
    let (plan_need, _) = plan_bytes(
        &plan.loaded,
        plan.points.len() as u64,
        plan.policies.len() as u64,
        u64::from(plan.reps),
    );
    // Replications run concurrently, up to one per thread.
    let jobs = (run_points.len() as u64)
        .saturating_mul(plan.policies.len() as u64)
        .saturating_mul(u64::from(plan.reps));
    let threads = (threads as u64).min(jobs.max(1));
    let runs = threads.saturating_mul(run_bytes(most));
    // Room for each replication to relay at least a few messages to all.
    let events_floor = threads.saturating_mul(most.saturating_mul(4).saturating_mul(EVENT_BYTES));
    let need = plan_need.saturating_add(per_points).saturating_add(runs);
    if need.saturating_add(events_floor) > budget {
        let key = plan
            .points
            .get(at)
            .and_then(|p| {
                p.scenario
                    .agents
                    .iter()
                    .position(|g| g.count > 0)
                    .map(|g| format!("agents.{g}.count"))
            })
            .unwrap_or_else(|| "agents".into());
        return Err(plan
            .loaded
            .error_at(
                &key,
                format!(
                    "{most} agents on {threads} thread{} need about {} of memory, more than \
                     the {} this run may use (--max-memory; default: the memory available); \
                     use fewer agents or fewer --jobs",
                    if threads == 1 { "" } else { "s" },
                    show(need.saturating_add(events_floor)),
                    show(budget)
                ),
            )
            .into());
    }
    let per_run = (budget - need) / threads / EVENT_BYTES;
    Ok(usize::try_from(per_run).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1tb"), Ok(1 << 40));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(show(3 << 29), "1.5 GiB");
    }
}
