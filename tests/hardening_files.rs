//! Files (issue 22, item 5): outputs written by rename never replace a
//! symbolic link, a device or a FIFO (refused with exit 2 naming the path,
//! or written through for /dev/null and /dev/stdout); inputs that are
//! FIFOs or devices are refused before they are read, so nothing blocks;
//! `arbitrate` bounds its line length; the default memory budget honours
//! the address-space limit; `--set` replaces a value of the file before it
//! is validated. Each test fails on the code before these checks (a
//! replaced link or device, a hang, an abort, or a refusal).

#![cfg(unix)]

mod common;

use assert_cmd::Command;
use common::refused;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn herdsim() -> Command {
    let mut c = Command::cargo_bin("herdsim").expect("binary");
    // A FIFO that blocked, or an endless read, shows as a timeout here.
    c.timeout(Duration::from_secs(60));
    c
}

const SMALL: &str = "name = \"small\"\nreps = 1\n[workload]\ncount = 5\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// In `d`: `keep.<ext>` (holding "keep"), `link.<ext>` (a link to it) and
/// `pipe.<ext>` (a FIFO nobody reads); returns the kept file.
fn link_and_fifo(d: &Path, ext: &str) -> PathBuf {
    let target = write(d, &format!("keep.{ext}"), "keep");
    std::os::unix::fs::symlink(&target, d.join(format!("link.{ext}"))).expect("symlink");
    mkfifo(&d.join(format!("pipe.{ext}")));
    target
}

/// A character device to try writing to: a twin of /dev/full made in `d`
/// where `mknod` works (as root, so that a regression replaces nothing
/// that matters), /dev/full where it does not and this is not root (no
/// write into /dev is possible then); none for a root without `mknod`.
fn spare_char_device(d: &Path) -> Option<PathBuf> {
    let twin = d.join("full");
    let made = std::process::Command::new("mknod")
        .arg(&twin)
        .args(["c", "1", "7"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if made {
        return Some(twin);
    }
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    (uid != "0").then(|| PathBuf::from("/dev/full"))
}

fn is_fifo(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[test]
fn run_trace_never_replaces_a_link_a_device_or_a_fifo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "s.toml", SMALL);
    let target = link_and_fifo(d, "jsonl");
    let device = spare_char_device(d);
    let device = device.as_deref().and_then(Path::to_str);
    let mut cases = vec![
        ("link.jsonl", "is a symbolic link (to "),
        ("pipe.jsonl", "is a FIFO (named pipe) that nobody reads"),
    ];
    cases.extend(device.map(|dev| (dev, "is a character device")));
    for (trace, says) in cases {
        let args = os(&["run", "s.toml", "--quiet", "--out", "out", "--trace", trace]);
        refused(d, &args, &[&format!("--trace {trace}: {says}")]);
        // Refused before any work: nothing written.
        assert!(!d.join("out").exists(), "{trace}");
    }
    assert!(std::fs::symlink_metadata(d.join("link.jsonl")).is_ok_and(|m| m.is_symlink()));
    assert_eq!(std::fs::read(&target).expect("target"), b"keep");
    assert!(is_fifo(&d.join("pipe.jsonl")));
    if let Some(dev) = device {
        assert!(!std::fs::metadata(dev).expect("device").is_file(), "{dev}");
    }

    // What a user means by /dev/null and /dev/stdout: written through.
    let traced = |trace: &str| {
        herdsim()
            .current_dir(d)
            .args(["run", "s.toml", "--quiet", "--out", "o", "--fresh"])
            .args(["--trace", trace])
            .output()
            .expect("runs")
    };
    assert!(traced("/dev/null").status.success());
    assert!(!std::fs::metadata("/dev/null").expect("null").is_file());
    let out = traced("/dev/stdout");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("{\"ev\":\"post\"")),
        "the trace on stdout: {stdout}"
    );
}

/// A FIFO with a reader is written through: the reader gets the whole
/// trace, as one stream (checked before the run, written after it).
#[test]
fn run_trace_streams_into_a_fifo_that_has_a_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_path_buf();
    write(&d, "s.toml", SMALL);
    let trace = |to: &str, out: &str| {
        herdsim()
            .current_dir(&d)
            .args(["run", "s.toml", "--quiet", "--out", out, "--trace", to])
            .output()
            .expect("runs")
    };
    assert!(trace("plain.jsonl", "o0").status.success());
    let want = std::fs::read(d.join("plain.jsonl")).expect("trace");
    let fifo = d.join("pipe.jsonl");
    mkfifo(&fifo);
    // The reader, as `cat pipe.jsonl` would: it waits for a writer, then
    // reads to the end of the stream.
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read"))
    };
    // Until the reader's open has begun, herdsim finds nobody reading.
    let mut ok = false;
    for attempt in 0..250 {
        let o = trace("pipe.jsonl", &format!("o{}", attempt + 1));
        if o.status.success() {
            ok = true;
            break;
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("nobody reads"), "{err}");
        std::thread::sleep(Duration::from_millis(20));
    }
    if !ok {
        // Release the reader before failing.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo));
        panic!("the reader never counted");
    }
    assert_eq!(reader.join().expect("reader"), want);
    assert!(is_fifo(&fifo));
}

#[test]
fn plot_output_and_results_files_are_never_replaced_unless_regular() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "s.toml", SMALL);
    herdsim()
        .current_dir(d)
        .args(["run", "s.toml", "--quiet", "--out", "r"])
        .assert()
        .success();
    let target = link_and_fifo(d, "png");
    for (o, says) in [
        ("link.png", "is a symbolic link"),
        ("pipe.png", "is a FIFO (named pipe) that nobody reads"),
    ] {
        let args = os(&["plot", "r/small/summary.csv", "-o", o]);
        refused(d, &args, &[o, says]);
    }
    assert_eq!(std::fs::read(&target).expect("target"), b"keep");
    assert!(is_fifo(&d.join("pipe.png")));

    // A FIFO or a link where a run writes its results: refused before any
    // work, naming it; left as it is.
    let folder = d.join("r/small");
    std::fs::remove_file(folder.join("runs.csv")).expect("rm");
    mkfifo(&folder.join("runs.csv"));
    let args = os(&["run", "s.toml", "--quiet", "--out", "r"]);
    refused(d, &args, &["runs.csv is not a regular file", "--out r"]);
    assert!(is_fifo(&folder.join("runs.csv")));
    std::fs::remove_file(folder.join("runs.csv")).expect("rm");
    std::fs::remove_file(folder.join("summary.csv")).expect("rm");
    std::os::unix::fs::symlink(&target, folder.join("summary.csv")).expect("symlink");
    refused(d, &args, &["summary.csv is a symbolic link"]);
    assert_eq!(std::fs::read(&target).expect("target"), b"keep");
}

#[test]
fn inputs_that_are_fifos_or_devices_are_refused_before_they_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let fifo = d.join("s.toml");
    mkfifo(&fifo);
    let not_regular = "is a FIFO (named pipe), not a regular file";
    for args in [
        vec!["validate", "s.toml"],
        vec!["run", "s.toml", "--out", "o"],
    ] {
        refused(d, &os(&args), &["s.toml", not_regular]);
    }
    refused(
        d,
        &os(&["validate", "/dev/zero"]),
        &["is a character device"],
    );
    // (plot calls a FIFO "no such file": refused, not read.)
    refused(d, &os(&["plot", "s.toml"]), &["s.toml"]);
    refused(
        d,
        &os(&["plot", "--timeline", "s.toml", "--msg", "q1"]),
        &["s.toml"],
    );

    // A finished shard whose runs.csv is a FIFO.
    write(d, "small.toml", SMALL);
    herdsim()
        .current_dir(d)
        .args([
            "run",
            "small.toml",
            "--quiet",
            "--shard",
            "0/1",
            "--out",
            "shard",
        ])
        .assert()
        .success();
    let runs = d.join("shard/small/runs.csv");
    std::fs::remove_file(&runs).expect("rm");
    mkfifo(&runs);
    refused(
        d,
        &os(&["merge", "shard", "--out", "m"]),
        &["runs.csv", not_regular],
    );

    // TLS files and the server's log: checked where they are opened.
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls");
    let (cert, key) = (tls.join("server.pem"), tls.join("server.key"));
    let f = fifo.as_os_str();
    let serve = |more: &[&std::ffi::OsStr]| {
        let mut a = os(&["serve", "--listen", "127.0.0.1:0"]);
        a.extend(more.iter().map(OsString::from));
        a
    };
    let (c, k) = (cert.as_os_str(), key.as_os_str());
    let tls_cert = std::ffi::OsStr::new("--tls-cert");
    let tls_key = std::ffi::OsStr::new("--tls-key");
    refused(
        d,
        &serve(&[tls_cert, f, tls_key, k]),
        &["--tls-cert", not_regular],
    );
    refused(
        d,
        &serve(&[tls_cert, c, tls_key, f]),
        &["--tls-key", not_regular],
    );
    let live = os(&[
        "live",
        "--url",
        "wss://127.0.0.1:9",
        "--ca-cert",
        "s.toml",
        "--out",
        "o",
    ]);
    let out = herdsim().current_dir(d).args(&live).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("--ca-cert") && err.contains(not_regular),
        "{err}"
    );
    let log = std::ffi::OsStr::new("--log");
    refused(d, &serve(&[log, f]), &["--log", "that nobody reads"]);
    let target = write(d, "real.log", "keep");
    std::os::unix::fs::symlink(&target, d.join("link.log")).expect("symlink");
    let link = d.join("link.log");
    refused(
        d,
        &serve(&[log, link.as_os_str()]),
        &["--log", "is a symbolic link"],
    );
    assert_eq!(std::fs::read(&target).expect("target"), b"keep");
    assert!(is_fifo(&fifo));
}

#[test]
fn arbitrate_bounds_its_lines() {
    // /dev/zero: one endless line without a newline.
    let zero = std::fs::File::open("/dev/zero").expect("/dev/zero");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("herdsim"))
        .arg("arbitrate")
        .stdin(zero)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("arbitrate < /dev/zero did not end in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 1: longer than 67108864 bytes (--max-line-bytes)"),
        "{err}"
    );
    // Lines before the long one are replayed; the long one is named.
    let input = format!(
        "{{\"at_ms\":0,\"agent\":\"operator\",\"role\":\"operator\",\"event\":{{\"type\":\"JOIN\",\"channel\":\"#c\"}}}}\n{}\nnot reached\n",
        "x".repeat(2000)
    );
    let out = herdsim()
        .args(["arbitrate", "--max-line-bytes", "1000"])
        .write_stdin(input)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "line 2: longer than 1000 bytes (--max-line-bytes): not a line of a server log; \
         stopped reading here"
    );
}

/// `herdsim <args>` under an address-space limit of `kib` KiB (`ulimit -v`).
fn capped(dir: &Path, kib: u64, args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("herdsim");
    let mut c = Command::new("sh");
    c.current_dir(dir)
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .timeout(Duration::from_secs(120));
    c.output().expect("runs")
}

#[test]
fn under_a_3_gib_address_space_limit_big_plans_are_refused_not_aborted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let cap = 3 << 20; // KiB: 3 GiB
    // 10^6 points: refused before it starts, the limit named.
    write(
        d,
        "sweep.toml",
        "reps = 1\n[workload]\ncount = 1\n[sweep]\n\
         \"agents.0.respond_p\" = { from = 0, to = 0.9999, step = 0.0001 }\n\
         \"server.ttl_ms\" = { from = 1000, to = 100000, step = 1000 }\n",
    );
    let o = capped(
        d,
        cap,
        &["run", "sweep.toml", "--quiet", "--jobs", "1", "--out", "o"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("1000000 points") && err.contains("ulimit -v"),
        "{err}"
    );
    // 100 000 agents: stopped with an error naming the memory budget
    // (its events outgrow its share), not killed by a failed allocation.
    let o = capped(
        d,
        cap,
        &[
            "run",
            "--set",
            "agents.0.count=100000",
            "--quiet",
            "--jobs",
            "2",
            "--out",
            "o",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--max-memory"), "{err}");
    assert!(!d.join("o/default/runs.csv").exists());
}

#[test]
fn set_replaces_a_value_of_the_file_before_it_is_validated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(
        d,
        "bad.toml",
        "name = \"x\"\nreps = 0\n[server]\nttl_ms = \"soon\"\n[[agents]]\ncount = 2\nrespond_p = 7\n",
    );
    // Every bad value replaced: valid, with the values given.
    let out = herdsim()
        .current_dir(d)
        .args(["validate", "bad.toml", "--set", "server.ttl_ms=30000"])
        .args(["--set", "agents.0.respond_p=0.5", "--reps", "3"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in ["ttl_ms = 30000.0", "respond_p = 0.5", "reps = 3"] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
    // A bad value not replaced is still refused where the file has it;
    // a bad value given on the command line is refused naming it.
    refused(
        d,
        &os(&[
            "validate",
            "bad.toml",
            "--set",
            "server.ttl_ms=30000",
            "--reps",
            "3",
        ]),
        &["bad.toml:7:1: key `agents.0.respond_p`"],
    );
    refused(
        d,
        &os(&[
            "validate",
            "bad.toml",
            "--set",
            "server.ttl_ms=-3",
            "--reps",
            "3",
        ]),
        &["--set server.ttl_ms=-3: key `server.ttl_ms`"],
    );
    // A malformed sweep axis that --set pins is not refused either.
    write(
        d,
        "swept.toml",
        "name = \"y\"\n[sweep]\n\"server.ttl_ms\" = \"soon\"\n",
    );
    herdsim()
        .current_dir(d)
        .args(["validate", "swept.toml", "--set", "server.ttl_ms=20000"])
        .assert()
        .success();
}

/// `--set` values are applied all, then validated once (issue 39, item 6):
/// a count and a gap that fit together are accepted in either order (the
/// gap first used to be refused against the default count of 1000), and a
/// pair that does not fit is refused naming the `--set` that gave the key.
#[test]
fn set_values_are_validated_once_after_all_of_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/default.toml");
    let count = "workload.count=100";
    let gap = "workload.mean_gap_ms=1e10";
    for pair in [[count, gap], [gap, count]] {
        let out = herdsim()
            .current_dir(d)
            .args(["validate", default, "--set", pair[0], "--set", pair[1]])
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{pair:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    refused(
        d,
        &os(&[
            "validate",
            default,
            "--set",
            gap,
            "--set",
            "workload.count=101",
        ]),
        &["--set workload.count=101: key `workload.count`: 101 messages"],
    );
    refused(
        d,
        &os(&[
            "run",
            "--set",
            "workload.count=101",
            "--set",
            gap,
            "--out",
            "o",
        ]),
        &["--set workload.count=101: key `workload.count`"],
    );
    assert!(!d.join("o").exists());
}

/// `herdsim tune` applies `herdsim run`'s memory limits before it starts:
/// under a 3 GiB address-space limit a 100 000-agent scenario is refused
/// naming the agent count and the budget (it aborted at 2.8 GB).
#[test]
fn under_a_3_gib_address_space_limit_tune_refuses_what_run_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let o = capped(
        d,
        3 << 20,
        &[
            "tune",
            "--set",
            "agents.0.count=100000",
            "--quiet",
            "--jobs",
            "2",
            "--out",
            "o",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("key `agents.0.count`") && err.contains("--max-memory"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!d.join("o").exists());
}

/// A sparse file of `size` bytes at `path` (no disk used): zeros, no newline.
fn sparse(path: &Path, size: u64) {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .expect("create");
    f.set_len(size).expect("set_len");
}

const FOUR_GIB: u64 = 4 << 30;

/// A 4 GiB input is refused with exit 2 naming the file and the bound, or
/// streamed (issue 39, item 6): merge's runs.csv and summary.csv (bounded
/// by what the shard's plan can write), plot's summary.csv (256 MiB), a
/// trace (read a line at a time, a line at most 1 MiB) and the journal
/// `--resume` reads (a line at a time, a line at most 16 MiB + 64 B). Each
/// read the whole file before, and aborted.
#[test]
fn four_gib_inputs_are_refused_or_streamed_not_read_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "small.toml", SMALL);
    let shard = [
        "run",
        "small.toml",
        "--reps",
        "2",
        "--shard",
        "0/1",
        "--no-plot",
        "-q",
    ];
    for (out, file, bound) in [
        ("a", "runs.csv", "larger than the "),
        ("b", "summary.csv", "larger than the "),
    ] {
        herdsim()
            .current_dir(d)
            .args(shard)
            .args(["--out", out])
            .assert()
            .success();
        sparse(&d.join(out).join("small").join(file), FOUR_GIB);
        refused(
            d,
            &os(&["merge", &format!("{out}/small"), "--out", "m", "-q"]),
            &[
                &format!("{out}/small/{file}: cannot read: is 4294967296 bytes"),
                bound,
            ],
        );
    }
    assert!(!d.join("m").exists());
    sparse(&d.join("summary.csv"), FOUR_GIB);
    refused(
        d,
        &os(&["plot", "summary.csv", "--out", "x.png"]),
        &["summary.csv: 4294967296 bytes, larger than the 256 MiB"],
    );
    sparse(&d.join("trace.jsonl"), FOUR_GIB);
    refused(
        d,
        &os(&["plot", "--timeline", "trace.jsonl", "--out", "t.png"]),
        &["trace.jsonl: line 1: longer than 1048576 bytes"],
    );
    std::fs::create_dir_all(d.join("r/small")).expect("mkdir");
    sparse(&d.join("r/small/runs.journal"), FOUR_GIB);
    refused(
        d,
        &os(&["run", "small.toml", "--resume", "--out", "r", "-q"]),
        &["r/small/runs.journal: line 1: longer than 16777280 bytes"],
    );
    assert!(!d.join("x.png").exists() && !d.join("t.png").exists());
    assert!(!d.join("r/small/runs.csv").exists());
}
