//! Issue 11, part A: herdsim never writes outside `--out`, never lets two
//! processes write one results folder, never panics on a stdout fault,
//! never mixes builds or trusts a shard's files blindly, checks every
//! output path and flag before it simulates, and cleans up after kills
//! and Ctrl-C. Each test here failed on the code before the fix.

use herdsim::report::FolderLock;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const FIXTURE: &str = "tests/data/scenarios/sweep.toml";
const NAME: &str = "sweep-fixture";

fn bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_herdsim"))
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The default scenario, small: a run takes a few tens of milliseconds.
const SMALL: [&str; 5] = ["--reps", "2", "--set", "workload.count=40", "--quiet"];

fn small(out: &Path, extra: &[&str]) -> Output {
    bin()
        .arg("run")
        .args(SMALL)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .expect("runs")
}

/// Every file below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        if let Ok(entries) = std::fs::read_dir(d) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(base, &p, out);
                } else {
                    out.push(
                        p.strip_prefix(base)
                            .expect("below")
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

// ---- 1. Writing outside --out ----------------------------------------

/// A finished shard of the sweep fixture (shard K of N) under `out`.
fn shard(out: &Path, k: usize, n: usize, extra: &[&str]) -> PathBuf {
    let o = bin()
        .args(["run", FIXTURE, "--quiet", "--reps", "2", "--out"])
        .arg(out)
        .args(["--shard", &format!("{k}/{n}")])
        .args(extra)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr_of(&o));
    out.join(NAME)
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(
        text.contains(from),
        "`{from}` in {}:\n{text}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

#[test]
fn merge_refuses_a_shard_scenario_name_that_leaves_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = shard(&dir.path().join("s"), 0, 1, &[]);
    let escape = dir.path().join("escaped");
    for name in [
        "../../escaped".to_string(),
        escape.display().to_string(),
        "x".repeat(300),
    ] {
        let meta = d.join("shard.toml");
        let before = std::fs::read_to_string(&meta).expect("read");
        edit(
            &meta,
            &format!("scenario = \"{NAME}\""),
            &format!("scenario = \"{name}\""),
        );
        let o = bin()
            .args(["merge", "--quiet", "--out"])
            .arg(dir.path().join("out/a/b"))
            .arg(&d)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr_of(&o));
        let err = stderr_of(&o);
        assert!(
            err.starts_with("herdsim: error: ") && err.contains("shard.toml:5:12: key `scenario`"),
            "{err}"
        );
        assert!(!escape.exists() && !dir.path().join("out").exists());
        std::fs::write(&meta, before).expect("restore");
    }
}

// ---- 2. Two runs into one results folder ------------------------------

#[test]
fn a_held_results_folder_is_refused_naming_it_and_the_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("default");
    let held = FolderLock::exclusive(&folder).expect("lock");
    let o = small(dir.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.starts_with("herdsim: error: "), "{err}");
    assert!(err.contains(&folder.display().to_string()), "{err}");
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    assert!(!folder.join("summary.csv").exists());
    // --resume of a journal the holder writes is refused the same way,
    // and leaves the journal alone.
    std::fs::write(folder.join("runs.journal"), "# herdsim-journal 1\n").expect("write");
    let o = small(dir.path(), &["--resume"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_of(&o).contains("in use by"), "{}", stderr_of(&o));
    assert_eq!(
        std::fs::read_to_string(folder.join("runs.journal")).expect("journal"),
        "# herdsim-journal 1\n"
    );
    // merge and tune into a held folder: refused too.
    let s = shard(&dir.path().join("s"), 0, 1, &[]);
    let merged = dir.path().join("m");
    let held_merge = FolderLock::exclusive(&merged.join(NAME)).expect("lock");
    let o = bin()
        .args(["merge", "--quiet", "--out"])
        .arg(&merged)
        .arg(&s)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("in use by"));
    let held_tune = FolderLock::exclusive(&dir.path().join("t/default/tune")).expect("lock");
    let o = bin()
        .args(["tune", "--quiet", "--reps", "2", "--grid", "2", "--out"])
        .arg(dir.path().join("t"))
        .args(["--set", "workload.count=20"])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("in use by"));
    drop((held, held_merge, held_tune));
    // Released (as by a process that ends): the run goes ahead.
    std::fs::remove_file(folder.join("runs.journal")).expect("rm");
    // (A child another test thread forks at the moment this process holds
    // the lock file open keeps a copy of it until its exec; give that a
    // moment. A real second herdsim never inherits the lock.)
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = small(dir.path(), &[]);
        if o.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "{}", stderr_of(&o));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn merge_refuses_a_shard_that_is_being_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = shard(&dir.path().join("s"), 0, 1, &[]);
    let held = FolderLock::exclusive(&s).expect("lock");
    let o = bin()
        .args(["merge", "--quiet", "--out"])
        .arg(dir.path().join("m"))
        .arg(&s)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("in use by"));
    drop(held);
}

/// Two runs of one scenario (other seeds) started together into one
/// `--out`, many times: every process that exits 0 printed the table of
/// the files on disk, the two CSVs always come from one run, and a
/// process that lost exits 2 naming the folder and the holder. The race
/// must have happened: at least one round in which the two overlapped and
/// one was refused (rounds go on, up to a bound, until one has).
#[test]
fn concurrent_runs_into_one_folder_never_mix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = |seed: &str| -> Vec<String> {
        ["--seed", seed, "--set", "workload.count=150"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    // The reference results of each seed, run alone.
    let mut reference = Vec::new();
    for seed in ["1", "2"] {
        let out = dir.path().join(format!("ref{seed}"));
        let o = small(
            &out,
            &args(seed).iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(o.status.success());
        let read = |f: &str| std::fs::read(out.join("default").join(f)).expect("file");
        reference.push((stdout_of(&o), read("summary.csv"), read("runs.csv")));
    }
    assert_ne!(reference[0].1, reference[1].1);
    let mut refused = 0;
    let mut rounds = 0;
    for round in 0..48 {
        // At least 12 rounds, then until a refused run was seen.
        if round >= 12 && refused > 0 {
            break;
        }
        rounds += 1;
        let out = dir.path().join(format!("race{round}"));
        let spawn = |seed: &str| -> Child {
            bin()
                .arg("run")
                .args(SMALL)
                .args(args(seed))
                .arg("--out")
                .arg(&out)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let (a, b) = (spawn("1"), spawn("2"));
        let outs = [
            a.wait_with_output().expect("a"),
            b.wait_with_output().expect("b"),
        ];
        let folder = out.join("default");
        let summary = std::fs::read(folder.join("summary.csv")).expect("summary");
        let runs = std::fs::read(folder.join("runs.csv")).expect("runs");
        // The files on disk are one run's, both of them.
        let owner = reference
            .iter()
            .position(|r| r.1 == summary)
            .unwrap_or_else(|| panic!("round {round}: summary.csv is no run's"));
        assert_eq!(runs, reference[owner].2, "round {round}: CSVs of two runs");
        let winners: Vec<usize> = (0..2).filter(|i| outs[*i].status.success()).collect();
        assert!(!winners.is_empty(), "round {round}: nobody won");
        for (i, o) in outs.iter().enumerate() {
            if o.status.success() {
                assert_eq!(
                    stdout_of(o),
                    reference[i].0,
                    "round {round}: run {i}'s table"
                );
            } else {
                refused += 1;
                assert_eq!(o.status.code(), Some(2), "round {round}: {}", stderr_of(o));
                let err = stderr_of(o);
                assert!(
                    err.contains("in use by another herdsim process (pid ")
                        && err.contains(&folder.display().to_string()),
                    "round {round}: {err}"
                );
                assert!(stdout_of(o).is_empty());
            }
        }
        if winners.len() == 1 {
            // One ran while the other was refused: the files are the winner's.
            assert_eq!(owner, winners[0], "round {round}: files of the loser");
        }
        let left: Vec<String> = files(&folder)
            .into_iter()
            .filter(|f| f != ".herdsim.lock")
            .collect();
        assert_eq!(
            left,
            ["comparison.png", "run.toml", "runs.csv", "summary.csv"],
            "round {round}"
        );
    }
    // Every round holds whichever way it went; the lock was only tested if
    // the two runs overlapped at least once.
    assert!(
        refused > 0,
        "in {rounds} rounds the two runs never overlapped: the race never happened"
    );
    eprintln!("{refused} of {rounds} rounds had a refused run");
}

// ---- 6. Output faults --------------------------------------------------

#[cfg(unix)]
#[test]
fn a_full_stdout_is_an_error_not_a_panic_and_results_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    let o = bin()
        .arg("run")
        .args(SMALL)
        .arg("--out")
        .arg(dir.path())
        .stdout(full())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(
        err.starts_with("herdsim: error: cannot write to stdout") && !err.contains("panicked"),
        "{err}"
    );
    assert!(dir.path().join("default/summary.csv").exists());
    assert!(!dir.path().join("default/runs.journal").exists());
    let o = bin()
        .args(["validate", FIXTURE])
        .stdout(full())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(!stderr_of(&o).contains("panicked"));
    let s = shard(&dir.path().join("s"), 0, 1, &[]);
    let o = bin()
        .args(["merge", "--out"])
        .arg(dir.path().join("m"))
        .arg(&s)
        .stdout(full())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(dir.path().join("m").join(NAME).join("runs.csv").exists());
    let o = bin()
        .args(["arbitrate", "--policy", "spec"])
        .stdin(std::fs::File::open("tests/data/arbitrate/example.jsonl").expect("input"))
        .stdout(full())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(!stderr_of(&o).contains("panicked"));
    let o = bin().arg("--help").stdout(full()).output().expect("runs");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn a_closed_pipe_ends_quietly_with_results_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = || {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        Stdio::from(writer)
    };
    let o = bin()
        .arg("run")
        .args(SMALL)
        .arg("--out")
        .arg(dir.path())
        .stdout(closed())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(stderr_of(&o), "");
    assert!(dir.path().join("default/summary.csv").exists());
    let o = bin()
        .args(["arbitrate", "--policy", "spec"])
        .stdin(std::fs::File::open("tests/data/arbitrate/example.jsonl").expect("input"))
        .stdout(closed())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert_eq!(stderr_of(&o), "");
    let o = bin()
        .args(["validate", FIXTURE])
        .stdout(closed())
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr_of(&o));
    assert!(!stderr_of(&o).contains("panicked"));
}

// ---- 7. Builds, 12. Ctrl-C and leftovers -------------------------------

fn journal_rows(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| !l.starts_with('#')).count())
        .unwrap_or(0)
}

/// Big enough to take a couple of seconds on one thread.
const BIG: [&str; 4] = ["--set", "workload.count=1000", "--reps", "8"];

/// Start the fixture sweep into `out` and stop it with SIGINT once the
/// journal holds a few replications; return its output.
#[cfg(unix)]
fn interrupted(out: &Path) -> Output {
    let journal = out.join(NAME).join("runs.journal");
    let mut child = bin()
        .args(["run", FIXTURE, "--quiet", "--jobs", "1", "--out"])
        .arg(out)
        .args(BIG)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while journal_rows(&journal) < 3 {
        assert!(Instant::now() < deadline, "the journal never filled");
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended before the interrupt"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: sends SIGINT to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    child.wait_with_output().expect("wait")
}

#[cfg(unix)]
#[test]
fn ctrl_c_keeps_the_journal_says_how_to_resume_and_exits_130() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("stopped");
    let o = interrupted(&out);
    assert_eq!(o.status.code(), Some(130), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("herdsim: interrupted"), "{err}");
    assert!(
        err.contains("--resume") && err.contains("runs.journal"),
        "{err}"
    );
    assert!(stdout_of(&o).is_empty());
    let folder = out.join(NAME);
    let journal = folder.join("runs.journal");
    let kept = journal_rows(&journal);
    assert!((3..64).contains(&kept), "{kept} replications kept");
    assert!(!folder.join("summary.csv").exists());
    // No line was cut: every one is whole and checked.
    let text = std::fs::read_to_string(&journal).expect("journal");
    assert!(text.ends_with('\n'));
    // The command it printed completes the run, to the bytes of a whole one.
    let line = err
        .lines()
        .skip_while(|l| !l.contains("to complete the run"))
        .nth(1)
        .expect("the resume command")
        .trim()
        .to_string();
    assert!(
        line.ends_with("--resume") && line.contains(" run "),
        "{line}"
    );
    let o = bin()
        .args([
            "run", FIXTURE, "--quiet", "--jobs", "2", "--resume", "--out",
        ])
        .arg(&out)
        .args(BIG)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr_of(&o));
    let whole = dir.path().join("whole");
    let o = bin()
        .args(["run", FIXTURE, "--quiet", "--jobs", "2", "--out"])
        .arg(&whole)
        .args(BIG)
        .output()
        .expect("runs");
    assert!(o.status.success());
    for f in ["summary.csv", "runs.csv"] {
        assert_eq!(
            std::fs::read(folder.join(f)).expect("f"),
            std::fs::read(whole.join(NAME).join(f)).expect("f"),
            "{f}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_journal_of_another_build_is_refused_and_a_complete_one_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("o");
    let o = interrupted(&out);
    assert_eq!(o.status.code(), Some(130), "{}", stderr_of(&o));
    let folder = out.join(NAME);
    let journal = folder.join("runs.journal");
    let text = std::fs::read_to_string(&journal).expect("journal");
    let build_line = format!("# build {}\n", herdsim::BUILD);
    assert!(text.contains(&build_line), "{text}");

    // 7: another build's journal: refused, naming the build; untouched.
    let other = text.replacen(&build_line, "# build 0123456789abcdef\n", 1);
    std::fs::write(&journal, &other).expect("write");
    let o = bin()
        .args(["run", FIXTURE, "--quiet", "--resume", "--out"])
        .arg(&out)
        .args(BIG)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(
        err.contains("another build of herdsim") && err.contains("0123456789abcdef"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&journal).expect("journal"), other);
    // A journal from before builds were recorded: refused too.
    let old = text.replacen(&build_line, "", 1);
    std::fs::write(&journal, &old).expect("write");
    let o = bin()
        .args(["run", FIXTURE, "--quiet", "--resume", "--out"])
        .arg(&out)
        .args(BIG)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("build unknown"), "{}", stderr_of(&o));

    // 12: killed after the results were written but before the journal
    // was removed: a complete journal beside the CSVs. The next plain run
    // uses it (same bytes) instead of refusing.
    let whole = dir.path().join("whole");
    let o = bin()
        .args(["run", FIXTURE, "--quiet", "--out"])
        .arg(&whole)
        .args(BIG)
        .output()
        .expect("runs");
    assert!(o.status.success());
    let runs = std::fs::read_to_string(whole.join(NAME).join("runs.csv")).expect("runs");
    let header: String = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut complete = header;
    let mut rdr = csv::Reader::from_reader(runs.as_bytes());
    for rec in rdr.records() {
        let rec = rec.expect("row");
        // scenario, policy, 2 sweep keys, rep, seed, metrics...
        let params: Vec<&str> = vec![&rec[2], &rec[3]];
        let point = ["2000", "4000"]
            .iter()
            .position(|v| *v == params[0])
            .expect("x")
            * 2
            + ["10000", "45000"]
                .iter()
                .position(|v| *v == params[1])
                .expect("y");
        let mut values = [0.0; herdsim::metrics::METRICS.len()];
        for (i, v) in values.iter_mut().enumerate() {
            *v = rec[6 + i].parse().expect("number");
        }
        let row = herdsim::sweep::Row {
            job: herdsim::sweep::Job {
                point,
                policy: rec[1].parse().expect("policy"),
                rep: rec[4].parse().expect("rep"),
                seed: rec[5].parse().expect("seed"),
            },
            result: herdsim::metrics::RunResult { values },
        };
        complete.push_str(&herdsim::sweep::journal::line(&row));
    }
    std::fs::write(&journal, complete).expect("write");
    for f in ["summary.csv", "runs.csv"] {
        std::fs::copy(whole.join(NAME).join(f), folder.join(f)).expect("copy");
    }
    let o = bin()
        .args(["run", FIXTURE, "--out"])
        .arg(&out)
        .args(BIG)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("holds every replication"),
        "{}",
        stderr_of(&o)
    );
    assert!(
        stderr_of(&o).contains("herdsim: 0 runs"),
        "{}",
        stderr_of(&o)
    );
    assert!(!journal.exists());
    for f in ["summary.csv", "runs.csv"] {
        assert_eq!(
            std::fs::read(folder.join(f)).expect("f"),
            std::fs::read(whole.join(NAME).join(f)).expect("f")
        );
    }
}

#[test]
fn leftover_temp_files_of_dead_runs_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("default");
    std::fs::create_dir_all(&folder).expect("mkdir");
    // As a kill during an atomic write leaves them (the pid is gone).
    let dead = [".runs.csv.99999999.tmp", ".runs.journal.99999998.tmp"];
    for f in dead {
        std::fs::write(folder.join(f), "half").expect("write");
    }
    // One of a live process (this test) is not touched.
    let live = format!(".summary.csv.{}.tmp", std::process::id());
    std::fs::write(folder.join(&live), "x").expect("write");
    let o = bin()
        .arg("run")
        .args(["--reps", "2", "--set", "workload.count=40", "--out"])
        .arg(dir.path())
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("removed 2 temporary files"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(
        files(&folder),
        [
            ".herdsim.lock",
            &live,
            "comparison.png",
            "run.toml",
            "runs.csv",
            "summary.csv"
        ]
    );
}

#[test]
fn merged_shards_from_another_build_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = shard(&dir.path().join("s"), 0, 1, &[]);
    let meta = s.join("shard.toml");
    let text = std::fs::read_to_string(&meta).expect("read");
    let parsed: herdsim::sweep::shard::ShardMeta = toml::from_str(&text).expect("parses");
    assert_eq!(parsed.build, herdsim::BUILD);
    // Another build, fingerprint consistent with it.
    let other = "0123456789abcdef";
    let fp = herdsim::sweep::journal::fingerprint_of(other, &parsed.resolved, &parsed.data);
    let edited = text
        .replacen(&parsed.build, other, 1)
        .replacen(&parsed.fingerprint, &fp, 1);
    std::fs::write(&meta, &edited).expect("write");
    let o = bin()
        .args(["merge", "--quiet", "--out"])
        .arg(dir.path().join("m"))
        .arg(&s)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("another build of herdsim"),
        "{}",
        stderr_of(&o)
    );
    // The build changed alone: the fingerprint no longer matches.
    std::fs::write(&meta, text.replacen(&parsed.build, other, 1)).expect("write");
    let o = bin()
        .args(["merge", "--quiet", "--out"])
        .arg(dir.path().join("m"))
        .arg(&s)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr_of(&o).contains("key `fingerprint`"),
        "{}",
        stderr_of(&o)
    );
    assert!(!dir.path().join("m").exists());
}

// ---- 8. merge checks its input ------------------------------------------

fn merge_code(dir: &Path, shards: &[&Path]) -> (Option<i32>, String) {
    let o = bin()
        .args(["merge", "--quiet", "--out"])
        .arg(dir.join("merged"))
        .args(shards)
        .output()
        .expect("runs");
    (o.status.code(), stderr_of(&o))
}

#[test]
fn merge_cross_checks_every_row_against_the_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s0 = shard(&dir.path().join("s0"), 0, 2, &[]);
    let s1 = shard(&dir.path().join("s1"), 1, 2, &[]);
    // Another master seed's shard 1.
    let x1 = shard(&dir.path().join("x1"), 1, 2, &["--seed", "99"]);
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_dir_all(dir.path().join("merged")).expect("rm");

    let runs = s1.join("runs.csv");
    let summary = s1.join("summary.csv");
    let orig_runs = std::fs::read(&runs).expect("runs");
    let orig_summary = std::fs::read(&summary).expect("summary");
    let restore = || {
        std::fs::write(&runs, &orig_runs).expect("w");
        std::fs::write(&summary, &orig_summary).expect("w");
    };

    // Swapped point blocks in runs.csv (rows 1-4 are point 1, 5-8 point 3).
    let lines: Vec<&str> = std::str::from_utf8(&orig_runs)
        .expect("utf8")
        .lines()
        .collect();
    let mut swapped = vec![lines[0]];
    swapped.extend(&lines[5..9]);
    swapped.extend(&lines[1..5]);
    std::fs::write(&runs, swapped.join("\n") + "\n").expect("w");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("runs.csv: line 2: column"), "{err}");
    restore();

    // Two rows of one point swapped (other replications).
    let mut swapped: Vec<&str> = lines.clone();
    swapped.swap(1, 2);
    std::fs::write(&runs, swapped.join("\n") + "\n").expect("w");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 2: column rep"), "{err}");
    restore();

    // Another seed's CSVs under this shard's shard.toml.
    std::fs::copy(x1.join("runs.csv"), &runs).expect("copy");
    std::fs::copy(x1.join("summary.csv"), &summary).expect("copy");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("column seed"), "{err}");
    restore();

    // Only summary.csv from the other seed.
    std::fs::copy(x1.join("summary.csv"), &summary).expect("copy");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("summary.csv: line 2: does not match"), "{err}");
    restore();

    // A metric edited in runs.csv: the summary no longer matches it.
    let text = String::from_utf8(orig_runs.clone()).expect("utf8");
    let mut rows: Vec<String> = text.lines().map(String::from).collect();
    let mut cells: Vec<String> = rows[3].split(',').map(String::from).collect();
    let last = cells.len() - 1;
    cells[last] = "123456".into();
    rows[3] = cells.join(",");
    std::fs::write(&runs, rows.join("\n") + "\n").expect("w");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("summary.csv"), "{err}");
    restore();

    // An absurd shard count: exit 2, no panic, no allocation.
    let meta = s1.join("shard.toml");
    let orig_meta = std::fs::read_to_string(&meta).expect("meta");
    edit(&meta, "shards = 2", "shards = 9223372036854775807");
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("key `shards`"), "{err}");
    std::fs::write(&meta, &orig_meta).expect("w");
    for s in [&s0, &s1] {
        edit(
            &s.join("shard.toml"),
            "shards = 2",
            "shards = 9223372036854775807",
        );
    }
    let (code, err) = merge_code(dir.path(), &[&s0, &s1]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("panicked"));
    std::fs::write(&meta, &orig_meta).expect("w");
    assert!(
        !dir.path().join("merged").exists(),
        "nothing written on bad input"
    );
}

// ---- 9. Checks before work -------------------------------------------------

fn refused_before_work(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    assert_cmd::Command::cargo_bin("herdsim")
        .expect("binary builds")
        .arg("run")
        .args(SMALL)
        .arg("--out")
        .arg(&out)
        .args(args)
        .assert()
        .code(2)
        .stderr(predicates::str::starts_with("herdsim: error: "))
        .stderr(predicates::str::contains(needle));
    assert!(!out.exists(), "{args:?}: wrote {:?}", files(&out));
}

#[test]
fn flags_are_checked_before_any_work() {
    refused_before_work(&["--jobs", "100000"], "--jobs 100000");
    refused_before_work(&["--trace-policy", "spec"], "without --trace");
    refused_before_work(
        &[
            "--set",
            "policies=[\"none\"]",
            "--trace-policy",
            "spec",
            "--trace",
            "t.jsonl",
        ],
        "--trace-policy spec: not a policy of this run",
    );
    refused_before_work(
        &["--set", &format!("name={}", "n".repeat(300))],
        "at most 100",
    );
    // The trace policy must be known, too.
    refused_before_work(
        &["--trace-policy", "nope", "--trace", "t.jsonl"],
        "--trace-policy nope",
    );
}

#[test]
fn trace_and_out_paths_are_checked_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let scenario = d.join("s.toml");
    std::fs::copy("scenarios/default.toml", &scenario).expect("copy");
    let before = std::fs::read(&scenario).expect("read");
    let run = |extra: Vec<String>| {
        bin()
            .arg("run")
            .arg(&scenario)
            .args(SMALL)
            .args(extra)
            .output()
            .expect("runs")
    };
    let s = |p: &Path| p.display().to_string();
    let out = d.join("out");
    // --trace naming an existing folder.
    let o = run(vec!["--out".into(), s(&out), "--trace".into(), s(d)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("is a folder"), "{}", stderr_of(&o));
    assert!(!out.exists());
    // --trace naming the scenario file.
    let o = run(vec![
        "--out".into(),
        s(&out),
        "--trace".into(),
        s(&scenario),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("is an input"), "{}", stderr_of(&o));
    assert_eq!(std::fs::read(&scenario).expect("read"), before);
    // --trace naming a results file of the run (by another spelling).
    let other = d.join("out/default/../default/summary.csv");
    let o = run(vec!["--out".into(), s(&out), "--trace".into(), s(&other)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("results file"), "{}", stderr_of(&o));
    assert!(!out.exists());
    // --out that is a file.
    let file = d.join("plain");
    std::fs::write(&file, "x").expect("write");
    let o = run(vec!["--out".into(), s(&file)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("not a folder"), "{}", stderr_of(&o));
    // An output that is an input: the scenario's data file would become runs.csv.
    let res = d.join("res/sweep-fixture");
    std::fs::create_dir_all(&res).expect("mkdir");
    std::fs::copy("tests/data/scenarios/latencies.csv", res.join("runs.csv")).expect("copy");
    std::fs::copy(FIXTURE, d.join("sweep.toml")).expect("copy");
    std::fs::copy(
        "tests/data/scenarios/latencies.csv",
        d.join("latencies.csv"),
    )
    .expect("copy");
    let data = std::fs::read(res.join("runs.csv")).expect("read");
    let o = bin()
        .arg("run")
        .arg(d.join("sweep.toml"))
        .args(SMALL)
        .args([
            "--set",
            "agents.0.inference.path=\"res/sweep-fixture/runs.csv\"",
        ])
        .arg("--out")
        .arg(d.join("res"))
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("would overwrite its input"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(std::fs::read(res.join("runs.csv")).expect("read"), data);
    // A good trace still works, beside the results.
    let t = d.join("out/trace.jsonl");
    let o = run(vec!["--out".into(), s(&out), "--trace".into(), s(&t)]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(t.exists());
}

#[test]
fn a_figure_name_made_from_a_trace_obeys_the_name_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.jsonl");
    let o = small(
        &dir.path().join("out"),
        &["--trace", trace.to_str().expect("utf8")],
    );
    assert!(o.status.success(), "{}", stderr_of(&o));
    let id = "m".repeat(200);
    let o = bin()
        .args(["plot", "--timeline"])
        .arg(&trace)
        .args(["--msg", &id])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("--out FILE.png"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(
        files(dir.path()).len(),
        files(&dir.path().join("out")).len() + 1
    );
}
