//! The scenario workflow end to end: `validate`, `--set`, sweeps, `--jobs`
//! determinism, resume after a kill, shards and `merge`. Fixtures are in
//! tests/data/scenarios/.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FIXTURE: &str = "tests/data/scenarios/sweep.toml";
const NAME: &str = "sweep-fixture";

fn herdsim() -> Command {
    Command::cargo_bin("herdsim").expect("binary builds")
}

fn stdout_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stdout).into_owned()
}

fn stderr_of(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(NAME).join(file))
        .unwrap_or_else(|e| panic!("{}/{NAME}/{file}: {e}", dir.display()))
}

/// Run the fixture with `args`, results under `out`.
fn run(out: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    herdsim()
        .args(["run", FIXTURE, "--quiet", "--out"])
        .arg(out)
        .args(args)
        .assert()
}

/// `herdsim merge` of the shards in `dirs` into `out`, which must succeed.
fn merge(out: &Path, dirs: &[PathBuf]) {
    herdsim()
        .args(["merge", "--quiet", "--out"])
        .arg(out)
        .args(dirs)
        .assert()
        .success();
}

#[test]
fn validate_prints_the_resolved_scenario_which_validates_to_itself() {
    let a = herdsim().args(["validate", FIXTURE]).assert().success();
    let text = stdout_of(&a);
    // Every default filled in, the range expanded.
    for line in [
        "ttl_ms = 45000.0",
        "base_ms = 40.0",
        "max_rechecks = 1",
        "mean_gap_ms = 60000.0",
        "epoch_ms = 1700000000000",
        "\"agents.0.csma.max_ms\" = [2000, 4000]",
        "\"server.ttl_ms\" = [10000, 45000]",
    ] {
        assert!(text.contains(line), "`{line}` in\n{text}");
    }
    assert!(stderr_of(&a).contains("4 sweep points x 2 policies x 3 replications"));
    // The output is a scenario that resolves to the same text (the
    // empirical path is relative, so write it beside the fixture's CSV).
    let copy = PathBuf::from("tests/data/scenarios/.resolved-copy.toml");
    std::fs::write(&copy, &text).expect("write");
    let again = herdsim().arg("validate").arg(&copy).assert();
    let _ = std::fs::remove_file(&copy);
    assert_eq!(stdout_of(&again.success()), text);
}

#[test]
fn validate_applies_set_seed_and_reps() {
    let a = herdsim()
        .args([
            "validate",
            FIXTURE,
            "--set",
            "server.ttl_ms=1234",
            "--reps",
            "9",
        ])
        .args(["--set", "agents.0.csma={ kind = \"fixed\", ms = 700 }"])
        .args([
            "--set",
            "workload.channel=\"#ops\"",
            "--set",
            "agents.channels=[\"#ops\"]",
        ])
        .assert()
        .success();
    let text = stdout_of(&a);
    assert!(text.contains("reps = 9"), "{text}");
    assert!(text.contains("kind = \"fixed\"\nms = 700.0"), "{text}");
    assert!(text.contains("channel = \"#ops\""), "{text}");
    // Setting a swept key pins it: its axis is gone.
    assert!(!text.contains("\"server.ttl_ms\" = ["), "{text}");
    assert!(!text.contains("\"agents.0.csma.max_ms\""), "{text}");
    assert!(stderr_of(&a).contains("1 sweep point x 2 policies x 9 replications"));
}

#[test]
fn sweep_grid_from_file_ranges_and_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Replace one axis from the command line (a range), add a third one
    // over every agent group by name, and override a plain key.
    let a = run(
        dir.path(),
        &[
            "--reps",
            "2",
            "--set",
            "sweep.server.ttl_ms={ from = 5000, to = 15000, step = 5000 }",
            "--set",
            "sweep.agents.respond_p=[0.5, 0.9]",
            "--set",
            "network.base_ms=20",
        ],
    )
    .success();
    let summary = String::from_utf8(read(dir.path(), "summary.csv")).expect("utf8");
    let lines: Vec<&str> = summary.lines().collect();
    assert!(
        lines[0].starts_with(
            "scenario,policy,agents.0.csma.max_ms,server.ttl_ms,agents.respond_p,reps,"
        ),
        "{}",
        lines[0]
    );
    // 2 x 3 x 2 points x 2 policies, the last axis fastest.
    assert_eq!(lines.len(), 1 + 2 * 3 * 2 * 2);
    assert!(
        lines[1].starts_with("sweep-fixture,none,2000,5000,0.5,2,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("sweep-fixture,spec,2000,5000,0.5,2,"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with("sweep-fixture,none,2000,5000,0.9,2,"),
        "{}",
        lines[3]
    );
    assert!(
        lines[5].starts_with("sweep-fixture,none,2000,10000,0.5,2,"),
        "{}",
        lines[5]
    );
    assert!(
        lines[24].starts_with("sweep-fixture,spec,4000,15000,0.9,2,"),
        "{}",
        lines[24]
    );
    let table = stdout_of(&a);
    // Swept keys are headed by the shortest unambiguous end of their name.
    assert!(table.contains("respond_p"), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    let runs = String::from_utf8(read(dir.path(), "runs.csv")).expect("utf8");
    assert_eq!(runs.lines().count(), 1 + 12 * 2 * 2);
    // Finished runs leave no journal behind.
    assert!(!dir.path().join(NAME).join("runs.journal").exists());
}

#[test]
fn policies_share_seeds_and_points_differ() {
    let dir = tempfile::tempdir().expect("tempdir");
    run(dir.path(), &[]).success();
    let runs = String::from_utf8(read(dir.path(), "runs.csv")).expect("utf8");
    let mut rdr = csv::Reader::from_reader(runs.as_bytes());
    let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.expect("row")).collect();
    // Row order: point, policy, rep; columns: scenario, policy, 2 keys, rep, seed.
    assert_eq!(rows.len(), 4 * 2 * 3);
    assert_eq!(&rows[0][1], "none");
    assert_eq!(&rows[3][1], "spec");
    assert_eq!(rows[0][5], rows[3][5], "same rep, other policy: same seed");
    assert_ne!(rows[0][5], rows[1][5], "other rep: other seed");
    assert_ne!(rows[0][5], rows[6][5], "other point: other seed");
}

#[test]
fn jobs_1_and_2_write_identical_bytes() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    run(a.path(), &["--jobs", "1"]).success();
    run(b.path(), &["--jobs", "2"]).success();
    assert_eq!(read(a.path(), "summary.csv"), read(b.path(), "summary.csv"));
    assert_eq!(read(a.path(), "runs.csv"), read(b.path(), "runs.csv"));
}

/// Lines of the journal that are finished replications.
fn journal_rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| !l.starts_with('#')).count())
        .unwrap_or(0)
}

#[test]
fn resume_after_a_kill_writes_the_bytes_of_an_uninterrupted_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("killed");
    // Big enough to take a couple of seconds on one thread.
    let big = ["--set", "workload.count=1000", "--reps", "8"];
    let journal = out.join(NAME).join("runs.journal");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
        .args(["run", FIXTURE, "--quiet", "--jobs", "1", "--out"])
        .arg(&out)
        .args(big)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while journal_rows(&journal) < 5 {
        assert!(Instant::now() < deadline, "the journal never filled");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    let kept = journal_rows(&journal);
    assert!((5..64).contains(&kept), "{kept} replications kept");
    assert!(
        !out.join(NAME).join("summary.csv").exists(),
        "no results yet"
    );
    // A torn last line, as a kill in the middle of a write would leave.
    let mut torn = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("open");
    std::io::Write::write_all(&mut torn, b"3\tspec\t7\t12345\t0.5\t0.2").expect("append");
    drop(torn);

    // Running again without --resume refuses and changes nothing.
    let before = std::fs::read(&journal).expect("journal");
    let a = herdsim()
        .args(["run", FIXTURE, "--quiet", "--out"])
        .arg(&out)
        .args(big)
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("--resume"), "{}", stderr_of(&a));
    assert_eq!(std::fs::read(&journal).expect("journal"), before);

    // Resuming against a changed scenario is refused, naming the key.
    let a = herdsim()
        .args(["run", FIXTURE, "--quiet", "--resume", "--out"])
        .arg(&out)
        .args(big)
        .args(["--set", "network.base_ms=41"])
        .assert()
        .code(2);
    let err = stderr_of(&a);
    assert!(
        err.contains("network.base_ms") && err.contains("interrupted run"),
        "{err}"
    );
    assert_eq!(std::fs::read(&journal).expect("journal"), before);

    herdsim()
        .args([
            "run", FIXTURE, "--quiet", "--resume", "--jobs", "2", "--out",
        ])
        .arg(&out)
        .args(big)
        .assert()
        .success();
    assert!(
        !journal.exists(),
        "journal removed once the results are written"
    );

    let whole = dir.path().join("whole");
    herdsim()
        .args(["run", FIXTURE, "--quiet", "--jobs", "2", "--out"])
        .arg(&whole)
        .args(big)
        .assert()
        .success();
    assert_eq!(read(&out, "summary.csv"), read(&whole, "summary.csv"));
    assert_eq!(read(&out, "runs.csv"), read(&whole, "runs.csv"));
}

#[test]
fn fresh_discards_an_interrupted_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join(NAME).join("runs.journal");
    std::fs::create_dir_all(journal.parent().expect("parent")).expect("mkdir");
    std::fs::write(&journal, "# herdsim-journal 1\n").expect("write");
    run(dir.path(), &[]).code(2);
    run(dir.path(), &["--fresh"]).success();
    assert!(!journal.exists());
    assert!(dir.path().join(NAME).join("summary.csv").exists());
}

#[test]
fn shards_merge_into_the_single_run_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = dir.path().join("whole");
    run(&whole, &[]).success();
    // 4 points in 3 shards (0: points 0 and 3), and in 5 shards (4: none).
    for n in [3usize, 5] {
        let mut dirs = Vec::new();
        for k in 0..n {
            let d = dir.path().join(format!("n{n}-shard-{k}"));
            run(&d, &["--shard", &format!("{k}/{n}")]).success();
            let meta =
                std::fs::read_to_string(d.join(NAME).join("shard.toml")).expect("shard.toml");
            assert!(
                meta.contains(&format!("shard = {k}\nshards = {n}")),
                "{meta}"
            );
            dirs.push(d);
        }
        let merged = dir.path().join(format!("merged-{n}"));
        merge(&merged, &dirs);
        assert_eq!(
            read(&merged, "summary.csv"),
            read(&whole, "summary.csv"),
            "{n} shards"
        );
        assert_eq!(
            read(&merged, "runs.csv"),
            read(&whole, "runs.csv"),
            "{n} shards"
        );
        assert!(!merged.join(NAME).join("shard.toml").exists());
        assert!(merged.join(NAME).join("comparison.png").exists());
    }
    let shard0 = dir.path().join("n3-shard-0");
    let shard1 = dir.path().join("n3-shard-1");
    // A missing shard, a repeated one, a shard of another run.
    let a = herdsim()
        .args(["merge", "--out"])
        .arg(dir.path().join("x"))
        .args([&shard0, &shard1])
        .assert()
        .code(2);
    assert!(stderr_of(&a).contains("2/3"), "{}", stderr_of(&a));
    herdsim()
        .args(["merge", "--out"])
        .arg(dir.path().join("x"))
        .args([&shard0, &shard1, &shard1])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("given twice"));
    let other = dir.path().join("other");
    run(&other, &["--shard", "2/3", "--seed", "8"]).success();
    herdsim()
        .args(["merge", "--out"])
        .arg(dir.path().join("x"))
        .args([&shard0, &shard1, &other])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("fingerprint"));
    assert!(
        !dir.path().join("x").exists(),
        "nothing written on bad input"
    );
}

/// `--shard auto` takes K and N from a Slurm array task's environment (and
/// K from Kubernetes' JOB_COMPLETION_INDEX with `auto/N`): the shards are
/// those of `--shard K/N`, and merge into the single run's bytes.
#[test]
fn shard_auto_reads_the_scheduler_and_merges_into_the_single_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = dir.path().join("whole");
    run(&whole, &[]).success();
    let slurm = |k: usize, d: &Path| {
        let a = herdsim()
            .args(["run", FIXTURE, "--shard", "auto", "--out"])
            .arg(d)
            .env("SLURM_ARRAY_TASK_ID", k.to_string())
            .env("SLURM_ARRAY_TASK_MIN", "0")
            .env("SLURM_ARRAY_TASK_MAX", "3")
            .env("SLURM_ARRAY_TASK_COUNT", "4")
            .env_remove("JOB_COMPLETION_INDEX")
            .assert()
            .success();
        let note = format!("herdsim: shard {k}/4 (SLURM_ARRAY_TASK_ID={k}, array 0-3, 4 tasks)");
        assert!(stderr_of(&a).contains(&note), "{}", stderr_of(&a));
    };
    let mut dirs = Vec::new();
    for k in 0..3 {
        let d = dir.path().join(format!("slurm-{k}"));
        slurm(k, &d);
        dirs.push(d);
    }
    // The last one as a Kubernetes indexed Job's pod would run it.
    let d = dir.path().join("k8s-3");
    herdsim()
        .args(["run", FIXTURE, "--quiet", "--shard", "auto/4", "--out"])
        .arg(&d)
        .env("JOB_COMPLETION_INDEX", "3")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .assert()
        .success();
    let meta = std::fs::read_to_string(d.join(NAME).join("shard.toml")).expect("shard.toml");
    assert!(meta.contains("shard = 3\nshards = 4"), "{meta}");
    dirs.push(d);
    let merged = dir.path().join("merged");
    merge(&merged, &dirs);
    for f in ["summary.csv", "runs.csv"] {
        assert_eq!(read(&merged, f), read(&whole, f), "{f}");
    }

    // Outside a scheduler, a subset of an array without the count, more
    // shards than the sweep's 4 points: exit 2, nothing written.
    let refused = |spec: &str, vars: &[(&str, &str)], want: &str| {
        let out = dir.path().join("refused");
        let mut cmd = herdsim();
        cmd.args(["run", FIXTURE, "--quiet", "--shard", spec, "--out"])
            .arg(&out);
        for v in [
            "SLURM_ARRAY_TASK_ID",
            "SLURM_ARRAY_TASK_MIN",
            "SLURM_ARRAY_TASK_MAX",
            "SLURM_ARRAY_TASK_COUNT",
            "SLURM_JOB_ID",
            "JOB_COMPLETION_INDEX",
        ] {
            cmd.env_remove(v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let a = cmd.assert().code(2);
        let err = stderr_of(&a);
        assert!(
            err.starts_with(&format!("herdsim: error: --shard {spec}: ")) && err.contains(want),
            "{spec} {vars:?}: {err}"
        );
        assert!(!out.exists(), "nothing written");
    };
    let array = |id, min, max, count| {
        [
            ("SLURM_ARRAY_TASK_ID", id),
            ("SLURM_ARRAY_TASK_MIN", min),
            ("SLURM_ARRAY_TASK_MAX", max),
            ("SLURM_ARRAY_TASK_COUNT", count),
        ]
    };
    refused("auto", &[], "neither SLURM_ARRAY_TASK_ID");
    refused("auto", &array("2", "2", "2", "1"), "--shard auto/N");
    refused("auto", &array("2", "0", "7", "8"), "the sweep has 4 points");
    refused(
        "auto/4",
        &[("JOB_COMPLETION_INDEX", "4")],
        "not a shard of 4",
    );
    refused("auto", &[("JOB_COMPLETION_INDEX", "1")], "--shard auto/N");
}

/// A shard stopped part-way: merge names the shard and how far it got.
#[test]
fn merge_names_a_shard_that_stopped_part_way() {
    use herdsim::sweep::journal::{Header, Writer};
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("shard-1");
    let folder = out.join(NAME);
    std::fs::create_dir_all(&folder).expect("mkdir");
    let header = Header {
        herdsim: "0.1.0".into(),
        build: herdsim::BUILD.into(),
        fingerprint: "0123456789abcdef".into(),
        shard: Some(herdsim::sweep::Shard { index: 1, count: 3 }),
        jobs: 12,
        data: "cbf29ce484222325".into(),
        scenario: "name = \"x\"\n".into(),
    };
    drop(Writer::create(&folder.join("runs.journal"), &header, &[]).expect("journal"));
    let a = herdsim()
        .args(["merge", "--out"])
        .arg(dir.path().join("m"))
        .arg(&out)
        .assert()
        .code(2);
    let err = stderr_of(&a);
    assert!(
        err.contains(&format!(
            "{}: no shard.toml: shard 1/3 has not finished (0 of 12 replications",
            folder.display()
        )) && err.contains("--shard 1/3 --resume"),
        "{err}"
    );
}

#[test]
fn merge_waits_for_an_unfinished_shard() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join(NAME);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(d.join("runs.journal"), "# herdsim-journal 1\n").expect("write");
    herdsim()
        .args(["merge", "--out"])
        .arg(dir.path().join("x"))
        .arg(&d)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--resume"));
}

/// With one replication the CI is unknown: the table says `n/a`, the CSV
/// leaves every `_ci95` cell empty, and every reader of the CSVs (merge of
/// shards, plot) takes the empty cell.
#[test]
fn one_replication_has_no_ci_and_every_reader_accepts_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let whole = dir.path().join("whole");
    let a = run(&whole, &["--reps", "1"]).success();
    let table = stdout_of(&a);
    assert!(table.contains("±n/a"), "{table}");
    assert!(!table.contains("±0 "), "{table}");
    let summary = String::from_utf8(read(&whole, "summary.csv")).expect("utf8");
    let mut lines = summary.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let ci_cols: Vec<usize> = (0..head.len())
        .filter(|&i| head[i].ends_with("_ci95"))
        .collect();
    assert_eq!(ci_cols.len(), herdsim::metrics::METRICS.len());
    for l in lines {
        let cells: Vec<&str> = l.split(',').collect();
        for &i in &ci_cols {
            assert_eq!(cells[i], "", "{} in {l}", head[i]);
        }
        // The means are there.
        assert!(!cells[ci_cols[0] - 1].is_empty(), "{l}");
    }
    // Shards with one replication merge into the same bytes.
    let mut dirs = Vec::new();
    for k in 0..2 {
        let d = dir.path().join(format!("shard-{k}"));
        run(&d, &["--reps", "1", "--shard", &format!("{k}/2")]).success();
        dirs.push(d);
    }
    let merged = dir.path().join("merged");
    let m = herdsim()
        .args(["merge", "--out"])
        .arg(&merged)
        .args(&dirs)
        .assert()
        .success();
    assert!(stdout_of(&m).contains("±n/a"), "{}", stdout_of(&m));
    assert_eq!(read(&merged, "summary.csv"), read(&whole, "summary.csv"));
    assert!(merged.join(NAME).join("comparison.png").exists());
    // Plot reads it (no bands).
    herdsim()
        .args(["plot"])
        .arg(whole.join(NAME))
        .arg("--out")
        .arg(dir.path().join("fig.png"))
        .assert()
        .success();
    // --resume with one replication (the journal holds per-replication
    // values, which have no CI; resuming from a real journal is covered by
    // resume_after_a_kill_writes_the_bytes_of_an_uninterrupted_run).
    let resumed = dir.path().join("resumed");
    run(&resumed, &["--reps", "1"]).success();
    std::fs::remove_file(resumed.join(NAME).join("summary.csv")).expect("rm");
    run(&resumed, &["--reps", "1", "--resume"]).success();
    assert_eq!(read(&resumed, "summary.csv"), read(&whole, "summary.csv"));
}

/// The printed table fits 100 columns for the default scenario and for a
/// sweep with two keys, and says which metrics it shows.
#[test]
fn the_table_fits_100_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [&[&str]; 2] = [
        &[
            "scenarios/default.toml",
            "--set",
            "workload.count=50",
            "--reps",
            "3",
        ],
        &[
            "scenarios/default.toml",
            "--set",
            "workload.count=50",
            "--reps",
            "3",
            "--set",
            "sweep.server.ttl_ms=[10000, 45000]",
            "--set",
            "sweep.agents.csma_tick_ms=[0, 1000]",
            "--no-plot",
        ],
    ];
    for args in cases {
        let a = herdsim()
            .arg("run")
            .args(args)
            .arg("--quiet")
            .arg("--out")
            .arg(dir.path())
            .assert()
            .success();
        let table = stdout_of(&a);
        for l in table.lines() {
            assert!(
                l.chars().count() <= 100,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        for col in [
            "resp/msg",
            "dup %",
            "waste %",
            "starters",
            "1 starter %",
            "p95 s",
            "calls/msg",
            "infer s/msg",
        ] {
            assert!(table.contains(col), "`{col}` in\n{table}");
        }
        assert!(table.contains("docs/metrics.md"), "{table}");
    }
}

/// A shard with no points says so without a negative zero, and one thread
/// is "1 thread".
#[test]
fn an_empty_shard_reports_zero_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = herdsim()
        .args(["run", FIXTURE, "--shard", "4/5", "--jobs", "1", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let err = stderr_of(&a);
    assert!(err.contains("0 runs, 0 events"), "{err}");
    assert!(err.contains("on 1 thread)"), "{err}");
    assert!(!err.contains("-0"), "{err}");
}

/// A sweep whose axes carry labels (`{ values, label, labels }`) shards and
/// merges like any other: the merged folder has the single run's CSVs,
/// `labels.toml` entries and figure.
#[test]
fn labelled_axes_shard_and_merge_into_the_single_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let labelled = [
        "--set",
        "sweep.server.ttl_ms={ values = [10000, 45000], label = \"claim TTL\", \
         labels = [\"short\", \"long\"] }",
    ];
    let whole = dir.path().join("whole");
    run(&whole, &labelled).success();
    let mut dirs = Vec::new();
    for k in 0..2 {
        let d = dir.path().join(format!("shard-{k}"));
        let mut args = labelled.to_vec();
        let shard = format!("{k}/2");
        args.extend(["--shard", &shard]);
        run(&d, &args).success();
        dirs.push(d);
    }
    let merged = dir.path().join("merged");
    merge(&merged, &dirs);
    for f in ["summary.csv", "runs.csv", "comparison.png"] {
        assert_eq!(read(&merged, f), read(&whole, f), "{f}");
    }
    let labels = String::from_utf8(read(&merged, "labels.toml")).expect("utf-8");
    let body = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let whole_labels = String::from_utf8(read(&whole, "labels.toml")).expect("utf-8");
    assert_eq!(body(&labels), body(&whole_labels));
    assert!(
        labels.contains("claim TTL") && labels.contains("\"long\""),
        "{labels}"
    );
}
