//! Hardening of the input (issue 11, part B): bounds that keep the time
//! arithmetic from wrapping, runs that cannot loop, plans refused before
//! they exhaust memory, empirical files read once and safely, and errors
//! that name the key and say what to write. Each test fails on the code
//! before these checks (a wrapped result, a hang, an abort or a message
//! without a key).

mod common;

use assert_cmd::Command;
use common::refused;
use predicates::prelude::*;
use std::path::Path;
use std::time::Duration;

fn herdsim() -> Command {
    let mut c = Command::cargo_bin("herdsim").expect("binary");
    // Nothing here may take long: a hang is a failure, not a slow test.
    c.timeout(Duration::from_secs(60));
    c
}

const SMALL: &str = "reps = 1\n[workload]\ncount = 5\n";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write");
}

// ----- 3. overflow -------------------------------------------------------

#[test]
fn values_that_would_wrap_the_clock_are_refused_with_their_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", SMALL);
    let cases: &[(&str, &str)] = &[
        ("epoch_ms=9223372036854000", "key `epoch_ms`"),
        (
            "agents.0.inference={kind=\"fixed\",ms=1.8e16}",
            "key `agents.0.inference.ms`",
        ),
        ("network.base_ms=1.8e16", "key `network.base_ms`"),
        ("agents.0.csma.max_ms=1e308", "key `agents.0.csma.max_ms`"),
        (
            "agents.0.inference={kind=\"lognormal\",p50_ms=1e300,p99_ms=1e301}",
            "key `agents.0.inference.p50_ms`",
        ),
        (
            "agents.0.clock_skew.sd_ms=1e300",
            "key `agents.0.clock_skew.sd_ms`",
        ),
        ("agents.0.csma_tick_ms=1e11", "key `agents.0.csma_tick_ms`"),
        ("workload.duration_ms=1e13", "key `workload.duration_ms`"),
        ("workload.count=1000000000", "key `workload.count`"),
        ("server.processing.ms=2e10", "key `server.processing.ms`"),
    ];
    for (set, key) in cases {
        refused(dir.path(), &["validate", "s.toml", "--set", set], &[key]);
        refused(
            dir.path(),
            &["run", "s.toml", "--set", set, "--out", "out"],
            &[key],
        );
    }
    assert!(!dir.path().join("out").exists(), "nothing written");
}

#[test]
fn bounds_in_a_file_name_the_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "s.toml",
        "reps = 1\n[network]\nbase_ms = 1.8e16\n",
    );
    refused(
        dir.path(),
        &["validate", "s.toml"],
        &["s.toml:3:", "key `network.base_ms`", "1e10 ms"],
    );
    write(
        dir.path(),
        "e.toml",
        "reps = 1\nepoch_ms = 9223372036854775808\n",
    );
    refused(
        dir.path(),
        &["validate", "e.toml"],
        &["e.toml:2:", "key `epoch_ms`", "a whole number from 0 to"],
    );
}

#[test]
fn the_largest_accepted_values_run_without_wrapping() {
    // Every bound at once: the run must end, and the spec policy must still
    // accept claims (a wrapped clock made every claim `bad_started_at`).
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "s.toml",
        "reps = 1\npolicies = [\"spec\"]\nepoch_ms = 9000000000000000\n\
         [server]\nttl_ms = 1e10\n[network]\nbase_ms = 1e10\n\
         [[agents]]\ncount = 3\nrespond_p = 1\n\
         csma = { kind = \"uniform\", min_ms = 0, max_ms = 1e10 }\n\
         inference = { kind = \"lognormal\", p50_ms = 1e10, p99_ms = 1e10 }\n\
         clock_skew = { kind = \"normal\", mean_ms = -1e10, sd_ms = 1e10 }\n\
         [workload]\ncount = 3\nmean_gap_ms = 1e10\n",
    );
    let out = herdsim()
        .current_dir(dir.path())
        .args(["run", "s.toml", "--out", "out", "-q", "--no-plot"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let summary = std::fs::read_to_string(dir.path().join("out/default/summary.csv"))
        .expect("summary written");
    assert!(summary.lines().count() >= 2, "{summary}");
    let runs =
        std::fs::read_to_string(dir.path().join("out/default/runs.csv")).expect("runs written");
    let header: Vec<&str> = runs.lines().next().expect("header").split(',').collect();
    let row: Vec<&str> = runs.lines().nth(1).expect("row").split(',').collect();
    let claims = header.iter().position(|h| *h == "claims").expect("claims");
    assert_ne!(row[claims], "0", "claims were made and counted: {runs}");
}

// ----- 4. runs that never end ---------------------------------------------

#[test]
fn a_ttl_that_looped_forever_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "s.toml",
        "reps = 1\npolicies = [\"tombstone\"]\n[server]\nttl_ms = 1.9e16\n[workload]\ncount = 3\n",
    );
    for args in [
        &["validate", "s.toml"][..],
        &["run", "s.toml", "--out", "out"][..],
    ] {
        refused(dir.path(), args, &["s.toml:4:", "key `server.ttl_ms`"]);
    }
}

#[test]
fn a_run_past_max_events_stops_with_an_error_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", SMALL);
    let err = refused(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--set",
            "max_events=50",
            "--out",
            "out",
            "-q",
        ],
        &[
            "s.toml",
            "`max_events`",
            "more than 50 events",
            "replication 0",
        ],
    );
    assert!(!err.contains("panicked"), "{err}");
    // No journal is left to block the next run.
    assert!(!dir.path().join("out/default/runs.journal").exists());
    // The key is validated like any other.
    refused(
        dir.path(),
        &["validate", "s.toml", "--set", "max_events=0"],
        &["key `max_events`", "a whole number from 1 to"],
    );
    // A large enough bound changes nothing.
    herdsim()
        .current_dir(dir.path())
        .args([
            "run",
            "s.toml",
            "--set",
            "max_events=1000000",
            "--out",
            "ok",
        ])
        .args(["-q", "--no-plot"])
        .assert()
        .success();
}

#[test]
fn a_cascade_past_the_horizon_stops_with_an_error() {
    // Two agents answering each other for ever, each answer taking the
    // longest duration: virtual time passes 1e13 ms after 1000 hops.
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", common::ENDLESS_CASCADE);
    refused(
        dir.path(),
        &["run", "s.toml", "--out", "out", "-q"],
        &["s.toml", "horizon of 1e13 ms", "`workload.max_depth`"],
    );
    assert!(!dir.path().join("out/default/runs.csv").exists());
}

// ----- 5. memory -------------------------------------------------------------

#[test]
fn plans_too_big_for_memory_are_refused_before_they_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", SMALL);
    refused(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--reps",
            "50000000",
            "--max-memory",
            "1G",
            "--out",
            "out",
        ],
        &["--reps 50000000", "key `reps`", "memory", "--max-memory"],
    );
    write(
        dir.path(),
        "sweep.toml",
        "reps = 1\n[workload]\ncount = 1\n[sweep]\n\
         \"agents.0.respond_p\" = { from = 0, to = 0.9999, step = 0.0001 }\n\
         \"server.ttl_ms\" = { from = 1000, to = 100000, step = 1000 }\n",
    );
    refused(
        dir.path(),
        &["run", "sweep.toml", "--max-memory", "100M", "--out", "out"],
        &[
            "sweep.toml:6:",
            "key `sweep.server.ttl_ms`",
            "1000000 points",
        ],
    );
    refused(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--set",
            "agents.0.count=100000",
            "--max-memory",
            "100M",
            "--out",
            "out",
        ],
        &["key `agents.0.count`", "100000 agents", "memory"],
    );
    herdsim()
        .current_dir(dir.path())
        .args(["run", "s.toml", "--max-memory", "lots"])
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("--max-memory").and(predicates::str::contains("not a size")),
        );
    assert!(!dir.path().join("out").exists(), "nothing written");
}

#[test]
fn a_run_whose_events_outgrow_its_memory_share_stops_with_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", SMALL);
    refused(
        dir.path(),
        &[
            "run",
            "s.toml",
            "--set",
            "agents.0.count=20000",
            "--set",
            "agents.0.respond_p=1",
            "--set",
            "policies=[\"none\"]",
            "--max-memory",
            "200M",
            "--jobs",
            "1",
            "--out",
            "out",
            "-q",
        ],
        &["pending events", "--max-memory"],
    );
    assert!(!dir.path().join("out/default/runs.journal").exists());
}

// ----- 10. empirical files -----------------------------------------------

#[cfg(unix)]
#[test]
fn a_fifo_as_empirical_path_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("lat.csv");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    write(
        dir.path(),
        "s.toml",
        "reps = 1\n[workload]\ncount = 3\n[[agents]]\ncount = 2\n\
         inference = { kind = \"empirical\", path = \"lat.csv\" }\n",
    );
    refused(
        dir.path(),
        &["validate", "s.toml"],
        &["key `agents.0.inference.path`", "not a regular file"],
    );
}

#[test]
fn a_directory_or_an_oversized_file_as_empirical_path_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("data")).expect("mkdir");
    let big = std::fs::File::create(dir.path().join("big.csv")).expect("create");
    // Sparse: no disk is used.
    big.set_len(64 * 1024 * 1024 + 1).expect("set_len");
    for (path, expect) in [("data", "not a regular file"), ("big.csv", "64 MiB")] {
        write(
            dir.path(),
            "s.toml",
            &format!(
                "reps = 1\n[workload]\ncount = 3\n[network]\n\
                 jitter = {{ kind = \"empirical\", path = \"{path}\" }}\n"
            ),
        );
        refused(
            dir.path(),
            &["validate", "s.toml"],
            &["key `network.jitter.path`", expect],
        );
    }
}

#[test]
fn empirical_data_is_shared_by_every_point_of_a_sweep() {
    use herdsim::model::Prepared;
    use herdsim::scenario::Loaded;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "lat.csv", "ms\n100\n200\n300\n");
    let text = "reps = 1\n[workload]\ncount = 3\n[[agents]]\ncount = 2\n\
                inference = { kind = \"empirical\", path = \"lat.csv\" }\n\
                [sweep]\n\"server.ttl_ms\" = { from = 1000, to = 20000, step = 1000 }\n";
    let loaded = Loaded::from_text("s.toml", text, dir.path()).expect("valid");
    let points = loaded.points().expect("points");
    assert_eq!(points.len(), 20);
    // Read once: with the file gone, every point still prepares from the
    // copy parsed during validation.
    std::fs::remove_file(dir.path().join("lat.csv")).expect("rm");
    for p in &points {
        Prepared::with_cache(&p.scenario, dir.path(), &loaded.data).expect("prepares from cache");
    }
    assert_eq!(loaded.data.len(), 1, "one parsed copy");
}

// ----- 11. errors that name the key and say what to write --------------------

#[test]
fn seeds_take_every_u64() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "s.toml", SMALL);
    let out = herdsim()
        .current_dir(dir.path())
        .args(["validate", "s.toml", "--seed", "18446744073709551615"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resolved = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        resolved.contains("seed = \"18446744073709551615\""),
        "{resolved}"
    );
    // The resolved text is itself a valid scenario with the same seed.
    write(dir.path(), "r.toml", &resolved);
    herdsim()
        .current_dir(dir.path())
        .args(["validate", "r.toml"])
        .assert()
        .success();
    write(
        dir.path(),
        "big.toml",
        "seed = 18446744073709551615\nreps = 1\n",
    );
    herdsim()
        .current_dir(dir.path())
        .args(["validate", "big.toml"])
        .assert()
        .success();
    refused(
        dir.path(),
        &[
            "validate",
            "s.toml",
            "--set",
            "workload.count=18446744073709551615",
        ],
        &[
            "key `workload.count`",
            "a whole number from 0 to 1000000000",
        ],
    );
}

#[test]
fn wrong_brackets_and_nested_distribution_tables_say_what_to_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: &[(&str, &[&str])] = &[
        (
            "[[workload]]\ncount = 3\n",
            &["bad.toml:1:", "key `workload`", "write `[workload]`"],
        ),
        (
            "[agents]\ncount = 3\n",
            &["bad.toml:1:", "key `agents`", "write `[[agents]]`"],
        ),
        (
            "[[agents]]\ncount = 3\n[agents.csma.uniform]\nmin_ms = 1\nmax_ms = 3\n",
            &[
                "bad.toml:3:",
                "key `agents.0.csma.uniform`",
                "kind = \"uniform\"",
            ],
        ),
        (
            "[[agents]]\ncount = 3\n[agents.csma]\nkind = \"fixed\"\nms = 3\n[agents.csma.extra]\nx = 1\n",
            &["bad.toml:6:", "key `agents.0.csma.extra`", "directly in"],
        ),
        (
            "[[agents]]\ncount = 3.5\n",
            &["bad.toml:2:", "key `agents.0.count`", "a whole number"],
        ),
        (
            "[server]\nttl_ms = \"x\"\n",
            &["bad.toml:2:", "key `server.ttl_ms`", "expected a number"],
        ),
    ];
    for (toml, expect) in cases {
        write(dir.path(), "bad.toml", toml);
        let err = refused(dir.path(), &["validate", "bad.toml"], expect);
        for rust in ["u32", "u64", "f64", "i64"] {
            assert!(!err.contains(rust), "Rust type name in: {err}");
        }
    }
}
