//! The memory a plan needs, estimated before anything is allocated, and
//! the budget it must fit (`--max-memory`, default: the memory the machine
//! has available). See docs/limits.md for the figures and how they were
//! measured.

use super::{Error, Plan};
use crate::scenario::Loaded;
use std::path::Path;

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
/// Budget when no memory figure or limit can be read (8 GiB).
pub const FALLBACK_BUDGET: u64 = 8 << 30;
/// Address space kept out of the budget under an address-space limit
/// (`ulimit -v`): worker threads' stacks and the allocator's reserves,
/// which count against that limit but not in the estimate (128 MiB).
pub const ADDRESS_SPACE_RESERVE: u64 = 128 << 20;

/// The memory budget: `--max-memory` if given, else [`default_budget`].
pub fn budget(max_memory: Option<u64>) -> u64 {
    max_memory.unwrap_or_else(default_budget)
}

/// The memory this process may use, as far as the system says: the least
/// of the machine's available memory (`MemAvailable` of /proc/meminfo),
/// what the address-space limit (`RLIMIT_AS`, `ulimit -v`) leaves beyond
/// what is mapped now (less [`ADDRESS_SPACE_RESERVE`]), and what the
/// process's cgroup leaves (v2 `memory.max` less `memory.current`, at its
/// own level and every level above; v1 `memory.limit_in_bytes` less
/// `memory.usage_in_bytes`); [`FALLBACK_BUDGET`] when none can be read.
pub fn default_budget() -> u64 {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let available = read("/proc/meminfo").and_then(|t| meminfo_available(&t));
    let address_space = match (read("/proc/self/limits"), read("/proc/self/status")) {
        (Some(limits), Some(status)) => address_space_left(&limits, &status),
        _ => None,
    };
    let cgroup =
        read("/proc/self/cgroup").and_then(|t| cgroup_left(&t, Path::new("/sys/fs/cgroup")));
    least([available, address_space, cgroup])
}

/// The least of the figures that could be read; [`FALLBACK_BUDGET`] if none.
fn least(figures: [Option<u64>; 3]) -> u64 {
    figures
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(FALLBACK_BUDGET)
}

/// `MemAvailable` in bytes, from /proc/meminfo's text.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    kb_field(meminfo, "MemAvailable:")
}

/// A `Key:  123 kB` line of /proc's text, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// What the address-space limit leaves, from /proc/self/limits (the soft
/// limit of "Max address space") and /proc/self/status (`VmSize`, what is
/// mapped now); `None` when unlimited.
fn address_space_left(limits: &str, status: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line.split_whitespace().nth(3)?.parse().ok()?; // `unlimited`: None
    let mapped = kb_field(status, "VmSize:").unwrap_or(0);
    Some(
        soft.saturating_sub(mapped)
            .saturating_sub(ADDRESS_SPACE_RESERVE),
    )
}

/// A cgroup v1 limit this large means none (the kernel's "unlimited" is
/// 2^63 rounded down to a page).
const V1_UNLIMITED: u64 = 1 << 62;

/// What the process's cgroup leaves, from /proc/self/cgroup's text and the
/// cgroup file systems under `root` (/sys/fs/cgroup): the least over the
/// v2 group and its ancestors (at /sys/fs/cgroup or, on a hybrid system,
/// /sys/fs/cgroup/unified) and the v1 memory group (at its own path, or at
/// the mount's root inside a container); `None` without any limit.
fn cgroup_left(proc_cgroup: &str, root: &Path) -> Option<u64> {
    let read = |p: &Path| -> Option<u64> {
        let text = std::fs::read_to_string(p).ok()?;
        text.trim().parse().ok() // `max`: no limit
    };
    let mut left: Option<u64> = None;
    let mut take = |limit: Option<u64>, used: Option<u64>| {
        if let Some(limit) = limit.filter(|l| *l < V1_UNLIMITED) {
            let rest = limit.saturating_sub(used.unwrap_or(0));
            left = Some(left.map_or(rest, |l| l.min(rest)));
        }
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if id == "0" && controllers.is_empty() {
            // v2: this group and each one above it (a parent's limit binds too).
            for base in [root.to_path_buf(), root.join("unified")] {
                let mut dir = base.join(rel);
                loop {
                    take(
                        read(&dir.join("memory.max")),
                        read(&dir.join("memory.current")),
                    );
                    if dir == base || !dir.pop() {
                        break;
                    }
                }
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let mount = root.join("memory");
            let own = mount.join(rel);
            let dir = if own.join("memory.limit_in_bytes").is_file() {
                own
            } else {
                mount
            };
            take(
                read(&dir.join("memory.limit_in_bytes")),
                read(&dir.join("memory.usage_in_bytes")),
            );
        }
    }
    left
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
    let key = plan
        .points
        .get(at)
        .map_or_else(|| "agents".into(), |p| agents_key(&p.scenario));
    let need = Need {
        held: plan_need.saturating_add(per_points),
        agents: most,
        jobs,
        threads,
    };
    need.check(&plan.loaded, &key, budget)
}

/// The key that sets a scenario's agent count, to name in a refusal: its
/// first group with agents.
pub fn agents_key(scenario: &crate::scenario::Scenario) -> String {
    scenario
        .agents
        .iter()
        .position(|g| g.count > 0)
        .map_or_else(|| "agents".into(), |g| format!("agents.{g}.count"))
}

/// What a run of replications needs besides their pending events.
#[derive(Debug, Clone, Copy)]
pub struct Need {
    /// Bytes held for the whole run (the plan, its points or candidates).
    pub held: u64,
    /// Agents of the largest replication.
    pub agents: u64,
    /// Replications in all (a thread more than these has nothing to run).
    pub jobs: u64,
    /// Worker threads.
    pub threads: usize,
}

impl Need {
    /// Refuse (exit 2, naming `key` and the budget) when `threads`
    /// replications of `agents` agents, with room to relay a few messages
    /// to all of them, do not fit `budget` beside what is held; else the
    /// events each replication may hold pending (its share of the rest).
    /// `herdsim run` and `herdsim tune` both check this before they start.
    pub fn check(&self, loaded: &Loaded, key: &str, budget: u64) -> Result<usize, Error> {
        let most = self.agents;
        let threads = (self.threads as u64).min(self.jobs.max(1));
        let runs = threads.saturating_mul(run_bytes(most));
        // Room for each replication to relay at least a few messages to all.
        let events_floor =
            threads.saturating_mul(most.saturating_mul(4).saturating_mul(EVENT_BYTES));
        let need = self.held.saturating_add(runs);
        if need.saturating_add(events_floor) > budget {
            return Err(loaded
                .error_at(
                    key,
                    format!(
                        "{most} agents on {threads} thread{} need about {} of memory, more \
                         than the {} this run may use (--max-memory; default: what the \
                         machine, ulimit -v and the cgroup leave); use fewer agents or fewer \
                         --jobs",
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

    #[test]
    fn the_default_budget_is_the_least_limit() {
        assert_eq!(least([Some(5), None, Some(3)]), 3);
        assert_eq!(least([None, None, None]), FALLBACK_BUDGET);
        let meminfo = "MemTotal:       24683520 kB\nMemAvailable:   22548876 kB\n";
        assert_eq!(meminfo_available(meminfo), Some(22_548_876 * 1024));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         3221225472           unlimited            bytes\n";
        let status = "Name:\therdsim\nVmPeak:\t   40000 kB\nVmSize:\t   20480 kB\n";
        assert_eq!(
            address_space_left(limits, status),
            Some(3_221_225_472 - 20_480 * 1024 - ADDRESS_SPACE_RESERVE)
        );
        let unlimited = limits.replace("3221225472", "unlimited");
        assert_eq!(address_space_left(&unlimited, status), None);
        // A limit below what is mapped already leaves nothing.
        let tiny = limits.replace("3221225472", "1024");
        assert_eq!(address_space_left(&tiny, status), Some(0));
    }

    #[test]
    fn cgroup_limits_are_read_at_every_level() {
        let root = tempfile::tempdir().expect("tempdir");
        let put = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        };
        // v2: the group has no limit, its parent 3 GiB with 1 GiB used.
        put("user.slice/job/memory.max", "max\n");
        put("user.slice/job/memory.current", "1000\n");
        put("user.slice/memory.max", "3221225472\n");
        put("user.slice/memory.current", "1073741824\n");
        let v2 = "0::/user.slice/job\n";
        assert_eq!(cgroup_left(v2, root.path()), Some(2 << 30));
        // v1 inside a container: the group's path is the host's; the mount
        // root holds the container's limit.
        put("memory/memory.limit_in_bytes", "2147483648\n");
        put("memory/memory.usage_in_bytes", "1073741824\n");
        let v1 = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n";
        assert_eq!(cgroup_left(v1, root.path()), Some(1 << 30));
        // Unlimited v1 (2^63 rounded to a page) and an unknown layout.
        put("memory/memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(cgroup_left(v1, root.path()), None);
        assert_eq!(cgroup_left("garbage", root.path()), None);
        // Hybrid: v1 memory plus v2 at unified/ (without a memory limit).
        put("memory/memory.limit_in_bytes", "4294967296\n");
        put("memory/memory.usage_in_bytes", "0\n");
        let hybrid = "0::/\n4:memory:/\n";
        assert_eq!(cgroup_left(hybrid, root.path()), Some(4 << 30));
    }
}
