//! `herdsim run` end to end: output files, determinism, bad input.

use assert_cmd::Command;
use std::path::Path;

fn herdsim() -> Command {
    Command::cargo_bin("herdsim").expect("binary builds")
}

/// The default scenario, shrunk so a test run takes well under a second.
fn small_run(out: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    let mut cmd = herdsim();
    cmd.args(["run", "scenarios/default.toml", "--quiet", "--reps", "3"])
        .args(["--set", "workload.count=60", "--out"])
        .arg(out)
        .args(extra);
    cmd.assert()
}

#[test]
fn run_writes_summary_and_runs_with_the_documented_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = small_run(dir.path(), &[]).success();
    assert!(
        dir.path().join("default/comparison.png").exists(),
        "no sweep: the bar figure all the same"
    );
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for p in ["none", "spec", "agentchat-0.36", "tombstone", "server-time"] {
        assert!(stdout.contains(p), "table lists {p}:\n{stdout}");
    }
    let summary = std::fs::read_to_string(dir.path().join("default/summary.csv")).expect("summary");
    let header = summary.lines().next().expect("header");
    assert!(header.starts_with("scenario,policy,reps,"), "{header}");
    for m in [
        "duplicate_rate",
        "responses_per_msg",
        "unanswered_rate",
        "wasted_inference_rate",
        "wasted_inference_count_rate",
        "ttfr_p50_ms",
        "ttfr_p95_ms",
        "ttfr_p99_ms",
        "claims",
        "yields",
        "expired_claims",
        "relayed",
        "lost",
        "events",
    ] {
        assert!(
            header.contains(&format!(",{m}_mean,{m}_ci95")),
            "{m} in {header}"
        );
    }
    assert_eq!(summary.lines().count(), 1 + 5, "one row per policy");
    let runs = std::fs::read_to_string(dir.path().join("default/runs.csv")).expect("runs");
    assert!(
        runs.lines()
            .next()
            .expect("header")
            .starts_with("scenario,policy,rep,seed,")
    );
    assert_eq!(runs.lines().count(), 1 + 5 * 3, "one row per replication");
}

#[test]
fn same_seed_gives_identical_bytes_for_any_jobs() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let c = tempfile::tempdir().expect("tempdir");
    let ta = a.path().join("trace.jsonl");
    let tb = b.path().join("trace.jsonl");
    small_run(
        a.path(),
        &["--jobs", "1", "--trace", ta.to_str().expect("utf8")],
    )
    .success();
    small_run(
        b.path(),
        &["--jobs", "2", "--trace", tb.to_str().expect("utf8")],
    )
    .success();
    small_run(c.path(), &["--seed", "2"]).success();
    let read = |d: &Path, f: &str| std::fs::read(d.join("default").join(f)).expect("file");
    assert_eq!(read(a.path(), "summary.csv"), read(b.path(), "summary.csv"));
    assert_eq!(read(a.path(), "runs.csv"), read(b.path(), "runs.csv"));
    assert_eq!(
        std::fs::read(&ta).expect("trace"),
        std::fs::read(&tb).expect("trace")
    );
    assert!(!std::fs::read(&ta).expect("trace").is_empty());
    assert_ne!(read(a.path(), "runs.csv"), read(c.path(), "runs.csv"));
}

#[test]
fn sweep_adds_parameter_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    small_run(
        dir.path(),
        &[
            "--set",
            "policies=[\"spec\"]",
            "--set",
            "sweep.server.ttl_ms=[10000, 45000]",
        ],
    )
    .success();
    // A sweep draws the standard comparison figure next to the CSVs.
    let png = std::fs::metadata(dir.path().join("default/comparison.png")).expect("comparison.png");
    assert!(png.len() > 10_000, "a real figure, not an empty file");
    let summary = std::fs::read_to_string(dir.path().join("default/summary.csv")).expect("summary");
    let mut lines = summary.lines();
    assert!(
        lines
            .next()
            .expect("header")
            .starts_with("scenario,policy,server.ttl_ms,reps,")
    );
    assert!(
        lines
            .next()
            .expect("row")
            .starts_with("default,spec,10000,3,")
    );
    assert!(
        lines
            .next()
            .expect("row")
            .starts_with("default,spec,45000,3,")
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "reps = 2\n[network]\nbse_ms = 3\n").expect("write");
    let out = dir.path().join("out");
    let assert = herdsim()
        .args(["run", "--quiet", "--out"])
        .arg(&out)
        .arg(&bad)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(stderr.contains("bad.toml:3:1"), "{stderr}");
    assert!(stderr.contains("bse_ms"), "{stderr}");
    assert!(!out.exists(), "no results folder for bad input");

    herdsim()
        .args(["run", "--quiet", "no/such/file.toml"])
        .assert()
        .code(2);
    herdsim()
        .args(["run", "--quiet", "--set", "agents.0.respond_p=1.5"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("respond_p"));
}

#[test]
fn a_run_of_another_plan_replaces_the_results_and_what_they_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let res = dir.path().join("default");
    let trace = res.join("spec.jsonl");
    let t = trace.to_str().expect("utf-8");
    small_run(dir.path(), &["--trace", t, "--trace-policy", "spec"]).success();
    assert!(trace.exists() && res.join("comparison.png").exists());
    std::fs::create_dir_all(res.join("tune")).expect("mkdir");
    std::fs::write(res.join("tune/recommended.env"), "X=1\n").expect("write");
    std::fs::write(res.join("timeline-m1.png"), "png").expect("write");
    std::fs::write(res.join("notes.txt"), "mine").expect("write");
    // The same plan again: nothing said, nothing removed.
    let out = small_run(dir.path(), &[]).success();
    assert!(out.get_output().stderr.is_empty());
    assert!(trace.exists() && res.join("tune/recommended.env").exists());
    // Another plan: said (even with --quiet), and what the old one left is gone.
    let out = small_run(dir.path(), &["--set", "server.ttl_ms=5000"]).success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("held the results of another plan (`server.ttl_ms` was 45000.0, now 5000.0)"),
        "{err}"
    );
    assert!(
        err.ends_with("removed what they left: spec.jsonl, timeline-m1.png, tune/\n"),
        "{err}"
    );
    assert!(!trace.exists() && !res.join("timeline-m1.png").exists());
    assert!(!res.join("tune/recommended.env").exists());
    assert!(
        res.join("notes.txt").exists(),
        "a file herdsim did not make stays"
    );
    assert!(res.join("comparison.png").exists(), "the new figure");
    let record = std::fs::read_to_string(res.join("run.toml")).expect("run.toml");
    assert!(record.contains("ttl_ms = 5000"), "{record}");
}

#[test]
fn a_shard_prints_no_partial_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = small_run(
        dir.path(),
        &[
            "--set",
            "sweep.server.ttl_ms=[5000, 45000]",
            "--shard",
            "0/2",
        ],
    )
    .success();
    assert!(out.get_output().stdout.is_empty());
    assert!(dir.path().join("default/summary.csv").exists());
}
