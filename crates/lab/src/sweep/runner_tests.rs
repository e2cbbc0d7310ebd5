//! The run API driven as `run`, `merge` and a test call it: a small sweep
//! run whole, stopped and resumed, and split into shards and merged; each
//! way the same bytes.

use super::*;
use crate::sweep::merge::merge;
use std::sync::Mutex;

/// Records the notes it is given.
#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl Observer for Notes {
    fn warn(&self, line: &str) {
        self.0.lock().expect("lock").push(line.to_string());
    }
    fn info(&self, line: &str) {
        self.warn(line);
    }
}

/// Sets `stop` once `after` replications are done, as Ctrl-C would.
struct StopAfter<'a> {
    stop: &'a AtomicBool,
    after: u64,
    done: std::sync::atomic::AtomicU64,
}

impl Observer for StopAfter<'_> {
    fn advance(&self, _units: u64) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.done.fetch_add(1, SeqCst) + 1 >= self.after {
            self.stop.store(true, SeqCst);
        }
    }
}

/// A sweep of 3 points x 2 policies x 2 replications of a tiny workload.
fn plan() -> Plan {
    let sets = [
        "workload.count=4".to_string(),
        "sweep.server.ttl_ms=[1000, 5000, 20000]".to_string(),
        "policies=[\"spec\", \"none\"]".to_string(),
    ];
    Plan::load(None, &sets, Some(3), Some(2), u64::MAX).expect("loads")
}

fn options(out: &Path) -> Options {
    Options {
        out: out.to_path_buf(),
        threads: 2,
        budget: u64::MAX,
        ..Options::default()
    }
}

fn go(plan: &Plan, opts: &Options, stop: bool) -> Result<Outcome, Error> {
    run(plan, opts, &(), &AtomicBool::new(stop))
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).expect("result file")
}

#[test]
fn a_plan_runs_through_the_api_and_writes_its_results() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = plan();
    let Ok(Outcome::Finished(done)) = go(&plan, &options(tmp.path()), false) else {
        panic!("the run finishes");
    };
    assert_eq!(done.dir, tmp.path().join(&plan.name));
    assert_eq!((done.runs, done.resumed), (12, 0));
    assert_eq!(done.keys, vec!["server.ttl_ms".to_string()]);
    assert_eq!(done.summary.len(), 6, "3 points x 2 policies");
    assert!(done.events > 0.0);
    let runs = String::from_utf8(read(&done.dir, "runs.csv")).expect("utf-8");
    assert_eq!(runs.lines().count(), 1 + 12);
    assert!(
        !done.dir.join(JOURNAL_FILE).exists(),
        "the journal is removed"
    );
    assert!(!done.dir.join(SHARD_FILE).exists());
}

#[test]
fn a_stopped_run_resumes_to_the_same_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = plan();
    let whole = tmp.path().join("whole");
    let Ok(Outcome::Finished(w)) = go(&plan, &options(&whole), false) else {
        panic!("the run finishes");
    };
    let split = tmp.path().join("split");
    let opts = options(&split);
    let Ok(Outcome::Interrupted { saved: 0, .. }) = go(&plan, &opts, true) else {
        panic!("a set stop flag starts nothing");
    };
    let stop = AtomicBool::new(false);
    let ctrl_c = StopAfter {
        stop: &stop,
        after: 3,
        done: Default::default(),
    };
    let resume = Options {
        journal: JournalMode::Resume,
        ..opts.clone()
    };
    let Ok(Outcome::Interrupted {
        saved,
        total,
        journal,
    }) = run(&plan, &resume, &ctrl_c, &stop)
    else {
        panic!("the stop flag interrupts the run");
    };
    assert!(
        (3..12).contains(&saved) && total == 12,
        "{saved} of {total}"
    );
    let kept = journal::read(&journal).expect("the journal stays for --resume");
    assert_eq!(kept.rows.len(), saved);
    // Without --resume or --fresh, the journal is refused.
    assert!(matches!(go(&plan, &opts, false), Err(Error::Input(m)) if m.contains("--resume")));
    let notes = Notes::default();
    let Ok(Outcome::Finished(r)) = run(&plan, &resume, &notes, &AtomicBool::new(false)) else {
        panic!("the resumed run finishes");
    };
    let note = format!("resuming {}: {saved} of 12", r.dir.display());
    assert!(notes.0.lock().expect("lock")[0].contains(&note));
    assert_eq!((r.runs, r.resumed), (12 - saved, saved));
    for f in ["runs.csv", "summary.csv"] {
        assert_eq!(read(&w.dir, f), read(&r.dir, f), "{f}");
    }
}

#[test]
fn shards_merge_to_the_bytes_of_one_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = plan();
    let Ok(Outcome::Finished(whole)) = go(&plan, &options(&tmp.path().join("whole")), false) else {
        panic!("the run finishes");
    };
    let mut dirs = Vec::new();
    for k in 0..2 {
        let opts = Options {
            shard: Some(Shard { index: k, count: 2 }),
            ..options(&tmp.path().join(format!("shard{k}")))
        };
        let Ok(Outcome::Finished(s)) = go(&plan, &opts, false) else {
            panic!("shard {k} finishes");
        };
        assert!(s.dir.join(SHARD_FILE).is_file());
        dirs.push(s.dir);
    }
    let out = tmp.path().join("merged");
    let m = merge(&dirs, &out, false, &()).expect("merges");
    assert_eq!((m.shards, m.points), (2, 3));
    for f in ["runs.csv", "summary.csv"] {
        assert_eq!(read(&whole.dir, f), read(&m.dir, f), "{f}");
    }
    // One shard is not the run.
    let e = merge(&dirs[..1], &out, false, &());
    assert!(matches!(e, Err(Error::Input(m)) if m.contains("missing")));
}

#[test]
fn options_are_checked_before_anything_is_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = plan();
    let cases = [
        (
            Options {
                threads: 0,
                ..options(tmp.path())
            },
            "--jobs 0",
        ),
        (
            Options {
                trace_policy: Some("spec".into()),
                ..options(tmp.path())
            },
            "--trace-policy spec: given without --trace",
        ),
        (
            Options {
                trace: Some(tmp.path().join("t.jsonl")),
                trace_policy: Some("tombstone".into()),
                ..options(tmp.path())
            },
            "--trace-policy tombstone: not a policy of this run",
        ),
    ];
    for (opts, start) in cases {
        match go(&plan, &opts, false) {
            Err(Error::Input(m)) => assert!(m.starts_with(start), "{m}"),
            other => panic!("{start}: refused as bad input, not {other:?}"),
        }
    }
    assert_eq!(std::fs::read_dir(tmp.path()).expect("dir").count(), 0);
}
