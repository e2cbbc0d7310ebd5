//! `herdsim ui` (docs/ui.md) from the outside: the binary started on a free
//! loopback port, asked over plain HTTP (the page, a run against `herdsim
//! run`'s own summary.csv and table, a bad value, the safety refusals), and
//! in a real browser: headless Chromium driven through chromedriver's W3C
//! WebDriver API loads the page, changes a control and sees the CLI's
//! numbers and the figure; its screenshot is checked for content.
//!
//! The browser test skips when /usr/bin/chromium or chromedriver is missing,
//! unless HERDSIM_UI_BROWSER=required (as .ci/run sets it): then it fails.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_herdsim");

/// A `herdsim ui` on a free loopback port (under `timeout`, so it ends
/// even if the test dies); stopped when dropped.
struct Ui {
    child: Child,
    /// `127.0.0.1:PORT`, as its URL says.
    addr: String,
}

impl Ui {
    fn start(args: &[&str]) -> Ui {
        let mut child = Command::new("timeout")
            .args(["-s", "TERM", "600", BIN, "ui", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herdsim ui starts");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("the URL line");
        let mut err = child.stderr.take().expect("stderr");
        // Keep reading, so that the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        let addr = line
            .trim()
            .strip_prefix("http://")
            .and_then(|a| a.strip_suffix('/'))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        Ui { child, addr }
    }

    fn url(&self, rest: &str) -> String {
        format!("http://{}{rest}", self.addr)
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// A response: status, head (lowercased), body.
struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// Send `raw` to `addr` and read the response: its Content-Length of
/// body, or up to the close (chromedriver keeps the connection open).
fn exchange(addr: &str, raw: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    s.write_all(raw).expect("writes");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let (end, length) = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            break (end, length);
        }
        let n = s.read(&mut chunk).expect("reads");
        assert!(
            n > 0,
            "closed before a head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    match length {
        Some(len) => {
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).expect("reads");
                assert!(n > 0, "closed inside the body");
                buf.extend_from_slice(&chunk[..n]);
            }
        }
        None => {
            s.read_to_end(&mut buf).expect("reads");
        }
    }
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    Reply {
        status,
        head,
        body: buf[end + 4..].to_vec(),
    }
}

fn get(addr: &str, path: &str, extra: &str) -> Reply {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}\r\n");
    exchange(addr, raw.as_bytes())
}

fn post(addr: &str, host: &str, extra: &str, body: &str) -> Reply {
    let raw = format!(
        "POST /api/run HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    );
    exchange(addr, raw.as_bytes())
}

/// `herdsim run` with `args` into a fresh folder: its stdout (the table)
/// and summary.csv.
fn cli_run(args: &[&str]) -> (String, String) {
    let (table, summary, _) = cli_run_all(args);
    (table, summary)
}

/// [`cli_run`], and runs.csv.
fn cli_run_all(args: &[&str]) -> (String, String, String) {
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(BIN)
        .arg("run")
        .args(args)
        .args(["--quiet", "--no-plot", "--out"])
        .arg(out.path())
        .output()
        .expect("herdsim run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.path().join("default/summary.csv")).expect("summary");
    let runs = std::fs::read_to_string(out.path().join("default/runs.csv")).expect("runs");
    (String::from_utf8_lossy(&o.stdout).into_owned(), csv, runs)
}

/// `herdsim run ARGS --trace --trace-policy POLICY`, then `herdsim plot
/// --timeline` of that trace as SVG: the SVG and the message drawn.
fn cli_timeline(args: &[&str], policy: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.jsonl");
    let o = Command::new(BIN)
        .arg("run")
        .args(args)
        .arg("--trace")
        .arg(&trace)
        .args(["--trace-policy", policy, "--quiet", "--no-plot", "--out"])
        .arg(dir.path().join("r"))
        .output()
        .expect("herdsim run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = dir.path().join("t.svg");
    let o = Command::new(BIN)
        .args(["plot", "--timeline"])
        .arg(&trace)
        .arg("--out")
        .arg(&svg)
        .output()
        .expect("herdsim plot");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    let msg = said
        .trim_end()
        .rsplit(' ')
        .next()
        .expect("the message drawn")
        .to_string();
    (std::fs::read_to_string(svg).expect("svg"), msg)
}

fn post_to(addr: &str, path: &str, body: &str) -> Reply {
    let raw = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, raw.as_bytes())
}

/// The settings of the runs compared, as the page posts them and as the
/// CLI's flags.
const SETTINGS: &str = r#"{"values": {"agents.0.count": "3", "server.ttl_ms": "30000",
    "workload.count": "200"}, "policies": ["spec", "none"], "seed": "7", "reps": "3"}"#;
const CLI: [&str; 12] = [
    "--set",
    "agents.0.count=3",
    "--set",
    "server.ttl_ms=30000",
    "--set",
    "workload.count=200",
    "--set",
    "policies=[\"spec\", \"none\"]",
    "--seed",
    "7",
    "--reps",
    "3",
];

#[test]
fn the_page_loads_and_describes_the_scenario() {
    let ui = Ui::start(&["--quiet"]);
    let page = get(&ui.addr, "/?seed=3", "");
    assert_eq!(page.status, 200);
    assert!(
        page.head.contains("content-type: text/html"),
        "{}",
        page.head
    );
    assert!(
        page.head
            .contains("content-security-policy: default-src 'none'")
    );
    assert!(page.text().contains("<title>herdsim ui</title>"));
    let d = get(&ui.addr, "/api/scenario", "").json();
    assert_eq!(d["name"], "default");
    assert_eq!(d["controls"][0]["key"], "agents.0.count");
    assert_eq!(d["controls"][0]["value"], "5");
    assert_eq!(d["seed"], "1");
    assert_eq!(get(&ui.addr, "/nothing", "").status, 404);
    let put = format!("PUT / HTTP/1.1\r\nHost: {}\r\n\r\n", ui.addr);
    assert_eq!(exchange(&ui.addr, put.as_bytes()).status, 405);
}

#[test]
fn a_run_gives_the_numbers_table_and_command_of_herdsim_run() {
    let ui = Ui::start(&["--quiet"]);
    let r = post(&ui.addr, &ui.addr, "", SETTINGS);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let (table, csv, runs) = cli_run_all(&CLI);
    assert_eq!(v["summary_csv"].as_str(), Some(csv.as_str()));
    assert_eq!(v["runs_csv"].as_str(), Some(runs.as_str()));
    assert_eq!(
        v["table"].as_str().map(str::trim_end),
        Some(table.trim_end())
    );
    assert!(
        v["svg"]
            .as_str()
            .is_some_and(|s| s.starts_with("<svg") && s.contains("</svg>"))
    );
    // The command the page shows, run by a shell, gives the same numbers.
    let command = v["command"].as_str().expect("command").to_string();
    assert_eq!(
        command,
        "herdsim run --set agents.0.count=3 --set server.ttl_ms=30000 --set workload.count=200 \
         --set 'policies=[\"spec\", \"none\"]' --seed 7 --reps 3"
    );
    let out = tempfile::tempdir().expect("tempdir");
    let line = command.replacen("herdsim", BIN, 1);
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("{line} --quiet --no-plot --out \"$1\""))
        .arg("sh")
        .arg(out.path())
        .output()
        .expect("sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let again = std::fs::read_to_string(out.path().join("default/summary.csv")).expect("csv");
    assert_eq!(again, csv);
    // `ui SCENARIO --seed N`: the file and seed the page starts from.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("scenarios/default.toml");
    let ui = Ui::start(&["--quiet", "--seed", "9", file.to_str().expect("utf-8")]);
    let body = r#"{"values": {"workload.count": "100"}, "reps": "2", "policies": ["spec"]}"#;
    let v = post(&ui.addr, &ui.addr, "", body).json();
    let (_, csv) = cli_run(&[
        file.to_str().expect("utf-8"),
        "--set",
        "workload.count=100",
        "--set",
        "policies=[\"spec\"]",
        "--seed",
        "9",
        "--reps",
        "2",
    ]);
    assert_eq!(v["summary_csv"].as_str(), Some(csv.as_str()), "{v}");
    // scenario.toml is what `herdsim validate` prints for the same settings.
    let o = Command::new(BIN)
        .arg("validate")
        .arg(&file)
        .args([
            "--set",
            "workload.count=100",
            "--set",
            "policies=[\"spec\"]",
        ])
        .args(["--seed", "9", "--reps", "2"])
        .output()
        .expect("herdsim validate");
    assert!(o.status.success());
    assert_eq!(
        v["scenario_toml"].as_str(),
        Some(String::from_utf8_lossy(&o.stdout).as_ref())
    );
    assert!(
        v["command"]
            .as_str()
            .is_some_and(|c| c.contains("default.toml") && c.contains("--seed 9"))
    );
}

/// `herdsim run ARGS --out DIR` (figure drawn) into a fresh folder: the
/// run.toml it writes into `DIR/NAME/`.
fn cli_run_toml(args: &[&str], name: &str) -> String {
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(BIN)
        .arg("run")
        .args(args)
        .args(["--quiet", "--out"])
        .arg(out.path())
        .output()
        .expect("herdsim run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(out.path().join(name).join("run.toml")).expect("run.toml")
}

#[test]
fn run_toml_is_the_one_herdsim_run_writes() {
    let ui = Ui::start(&["--quiet"]);
    let v = post(&ui.addr, &ui.addr, "", SETTINGS).json();
    let cli = cli_run_toml(&CLI, "default");
    assert!(cli.contains("comparison.png"), "{cli}");
    assert_eq!(v["run_toml"].as_str(), Some(cli.as_str()));
    // A sweep's (its labels.toml among the files): the same bytes too.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("scenarios/pile-on.toml");
    let file = file.to_str().expect("utf-8");
    let ui = Ui::start(&["--quiet", file]);
    let body = r#"{"values": {"workload.count": "40"}, "reps": "2"}"#;
    let r = post(&ui.addr, &ui.addr, "", body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let cli = cli_run_toml(
        &[file, "--set", "workload.count=40", "--reps", "2"],
        v["name"].as_str().expect("name"),
    );
    assert!(cli.contains("labels.toml"), "{cli}");
    assert_eq!(v["run_toml"].as_str(), Some(cli.as_str()));
}

#[test]
fn the_tradeoff_runs_each_window_maximum_as_herdsim_run_does() {
    let ui = Ui::start(&["--quiet"]);
    let r = post_to(&ui.addr, "/api/tradeoff", SETTINGS);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let maxima: Vec<&str> = v["maxima"]
        .as_array()
        .expect("maxima")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    // The default window is 2000..8000 ms: five maxima from 2000 to 16000.
    assert_eq!(maxima, ["2000", "5500", "9000", "12500", "16000"]);
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(10), "{v}");
    assert!(
        v["svg"]
            .as_str()
            .is_some_and(|s| s.starts_with("<svg") && s.contains("</svg>"))
    );
    // Each maximum's numbers are `herdsim run --set agents.0.csma.max_ms=V`'s.
    let third = &v["runs"][2];
    assert_eq!(third["max_ms"], "9000");
    assert!(
        third["command"]
            .as_str()
            .is_some_and(|c| c.contains("--set agents.0.csma.max_ms=9000")),
        "{third}"
    );
    let mut cli: Vec<&str> = CLI.to_vec();
    cli.extend(["--set", "agents.0.csma.max_ms=12500"]);
    let (_, csv) = cli_run(&cli);
    assert_eq!(v["runs"][3]["summary_csv"].as_str(), Some(csv.as_str()));
    let row = &v["rows"][6];
    assert_eq!(
        (row["max_ms"].as_str(), row["policy"].as_str()),
        (Some("12500"), Some("spec"))
    );
    // The work of all the maxima together is bounded.
    let big = r#"{"values": {"workload.count": "4000"}, "reps": "100"}"#;
    let r = post_to(&ui.addr, "/api/tradeoff", big);
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("5 window maxima"), "{}", r.text());
    // A scenario that sweeps the window: its own maxima.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("scenarios/csma-window.toml");
    let ui = Ui::start(&["--quiet", file.to_str().expect("utf-8")]);
    let body = r#"{"values": {"workload.count": "30"}, "reps": "2"}"#;
    let v = post_to(&ui.addr, "/api/tradeoff", body).json();
    assert_eq!(v["maxima"].as_array().map(Vec::len), Some(6), "{v}");
    assert_eq!(v["maxima"][0], "1000");
}

#[test]
fn a_tune_recommends_what_herdsim_tune_prints() {
    let ui = Ui::start(&["--quiet"]);
    let body = r#"{"values": {"agents.0.count": "3", "workload.count": "100"}, "seed": "7"}"#;
    let r = post_to(&ui.addr, "/api/tune", body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(BIN)
        .args([
            "tune",
            "--set",
            "agents.0.count=3",
            "--set",
            "workload.count=100",
        ])
        .args([
            "--seed", "7", "--reps", "2", "--grid", "3", "--quiet", "--out",
        ])
        .arg(out.path())
        .output()
        .expect("herdsim tune");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        v["text"].as_str(),
        Some(String::from_utf8_lossy(&o.stdout).as_ref())
    );
    let csv = std::fs::read_to_string(out.path().join("default/tune/candidates.csv"))
        .expect("candidates.csv");
    assert_eq!(v["candidates_csv"].as_str(), Some(csv.as_str()));
    assert_eq!(
        v["command"],
        "herdsim tune --set agents.0.count=3 --set workload.count=100 --seed 7 --reps 2 --grid 3"
    );
    // What "apply" sets: the recommendation's window and TTL, as it says them.
    let text = v["text"].as_str().expect("text");
    for key in [
        "agents.0.csma.min_ms",
        "agents.0.csma.max_ms",
        "server.ttl_ms",
    ] {
        let value = v["apply"][key].as_str().expect("applied");
        assert!(text.contains(value), "{key}={value}: {text}");
    }
    assert!(v["svg"].as_str().is_some_and(|s| s.starts_with("<svg")));
    // Bounded: a tune of too much work is refused before it runs.
    let big = r#"{"values": {"agents.0.count": "100", "workload.count": "20000"},
        "policies": ["spec"], "reps": "2"}"#;
    let r = post_to(&ui.addr, "/api/tune", big);
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("a tune of about"), "{}", r.text());
}

#[test]
fn a_tune_across_schemes_recommends_what_herdsim_tune_schemes_prints() {
    let ui = Ui::start(&["--quiet"]);
    let body = r#"{"values": {"agents.0.count": "3", "workload.count": "100"}, "seed": "7",
        "schemes": "all"}"#;
    let r = post_to(&ui.addr, "/api/tune", body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let out = tempfile::tempdir().expect("tempdir");
    let o = Command::new(BIN)
        .args([
            "tune",
            "--set",
            "agents.0.count=3",
            "--set",
            "workload.count=100",
        ])
        .args([
            "--seed",
            "7",
            "--reps",
            "2",
            "--grid",
            "3",
            "--schemes",
            "all",
            "--quiet",
            "--out",
        ])
        .arg(out.path())
        .output()
        .expect("herdsim tune --schemes");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(v["text"].as_str(), Some(text.as_ref()));
    assert!(text.contains("across schemes"), "{text}");
    let csv = std::fs::read_to_string(out.path().join("default/tune/candidates.csv"))
        .expect("candidates.csv");
    assert_eq!(v["candidates_csv"].as_str(), Some(csv.as_str()));
    assert_eq!(
        v["command"],
        "herdsim tune --set agents.0.count=3 --set workload.count=100 --seed 7 --reps 2 --grid 3 \
         --schemes all"
    );
    // "apply" sets the recommended scheme too, as the text writes it.
    let scheme = v["apply"]["schemes.scheme"].as_str().expect("a scheme");
    assert!(
        text.contains(&format!("scheme = \"{scheme}\"")),
        "{scheme}: {text}"
    );
    // A scheme that does not exist is the command line's message; a long
    // list is refused before it is read.
    let bad = r#"{"values": {"workload.count": "100"}, "schemes": "open,nobody"}"#;
    let r = post_to(&ui.addr, "/api/tune", bad);
    assert_eq!(r.status, 422, "{}", r.text());
    let o = Command::new(BIN)
        .args([
            "tune",
            "--set",
            "workload.count=100",
            "--schemes",
            "open,nobody",
        ])
        .args(["--quiet", "--out"])
        .arg(out.path())
        .output()
        .expect("herdsim tune");
    assert_eq!(o.status.code(), Some(2));
    let cli = String::from_utf8_lossy(&o.stderr);
    let page = r.json()["error"].as_str().expect("error").to_string();
    assert!(cli.contains(&page), "{cli} / {page}");
    let long = format!(r#"{{"schemes": "{}"}}"#, "open,".repeat(40));
    let r = post_to(&ui.addr, "/api/tune", &long);
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("at most 100"), "{}", r.text());
}

#[test]
fn a_calibrated_channel_shows_what_calibrate_wrote_beside_the_live_results() {
    let out = tempfile::tempdir().expect("tempdir");
    let export =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/exports/discord/general.json");
    let o = Command::new(BIN)
        .args([
            "calibrate",
            "--quiet",
            "--no-plot",
            "--reps",
            "2",
            "--name",
            "team",
        ])
        .arg("--out")
        .arg(out.path())
        .arg(&export)
        .output()
        .expect("herdsim calibrate");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = out.path().join("team");
    let scenario = dir.join("scenario.toml");
    let ui = Ui::start(&["--quiet", scenario.to_str().expect("a UTF-8 path")]);
    let d = get(&ui.addr, "/api/scenario", "").json();
    let cal = &d["calibrated"];
    assert_eq!(cal["dir"].as_str(), dir.to_str(), "{d}");
    let files = cal["files"].as_array().expect("files");
    let names: Vec<&str> = files.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(
        names,
        ["channel.csv", "prediction.csv", "whatif.csv"],
        "{d}"
    );
    for f in files {
        let name = f["name"].as_str().expect("name");
        let written = std::fs::read_to_string(dir.join(name)).expect("calibrate's file");
        assert_eq!(f["csv"].as_str(), Some(written.as_str()), "{name}");
    }
    assert_eq!(cal["notes"], serde_json::json!([]));
    // The live results of the controls run the calibrated scenario.
    let r = post_to(&ui.addr, "/api/run", r#"{"reps": "2"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let page = get(&ui.addr, "/", "").text();
    assert!(page.contains("Your channel today"));
    drop(ui);
    // Bounded: a file larger than the page reads is named, not shown.
    std::fs::write(dir.join("whatif.csv"), "x".repeat(70_000)).expect("writes");
    let ui = Ui::start(&["--quiet", scenario.to_str().expect("a UTF-8 path")]);
    let d = get(&ui.addr, "/api/scenario", "").json();
    let cal = &d["calibrated"];
    assert_eq!(cal["files"].as_array().map(Vec::len), Some(2), "{d}");
    assert!(
        cal["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("whatif.csv") && n.contains("64 KiB")),
        "{d}"
    );
    drop(ui);
    // A scenario.toml not beside calibrate's files is no calibration.
    std::fs::remove_file(dir.join("estimates.csv")).expect("removes");
    let ui = Ui::start(&["--quiet", scenario.to_str().expect("a UTF-8 path")]);
    let d = get(&ui.addr, "/api/scenario", "").json();
    assert!(d["calibrated"].is_null(), "{d}");
    let d = get(&Ui::start(&["--quiet"]).addr, "/api/scenario", "").json();
    assert!(d["calibrated"].is_null(), "{d}");
}

#[test]
fn a_runs_progress_is_read_by_its_name_while_it_runs() {
    let ui = Ui::start(&["--quiet"]);
    let addr = ui.addr.clone();
    // 500 replications (5 policies x 100) of 2000 messages: long enough to be
    // seen running.
    let body = r#"{"run": "t-1", "values": {"workload.count": "2000"}, "reps": "100"}"#;
    let long = std::thread::spawn(move || post_to(&addr, "/api/run", body));
    let mut seen = Vec::new();
    while !long.is_finished() {
        let r = get(&ui.addr, "/api/progress/t-1", "");
        if r.status == 200 {
            let v = r.json();
            seen.push((v["done"].as_u64(), v["total"].as_u64()));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = long.join().expect("the run");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!seen.is_empty(), "never seen running");
    for (done, total) in &seen {
        assert_eq!(*total, Some(500), "{seen:?}");
        assert!(done.is_some_and(|d| d <= 500), "{seen:?}");
    }
    // Over: no such run under way.
    assert_eq!(get(&ui.addr, "/api/progress/t-1", "").status, 404);
}

#[test]
fn a_timeline_is_the_one_herdsim_plot_draws_of_herdsim_runs_trace() {
    let ui = Ui::start(&["--quiet"]);
    let body = SETTINGS.replacen('{', r#"{"policy": "spec", "#, 1);
    let r = post_to(&ui.addr, "/api/timeline", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let (svg, msg) = cli_timeline(&CLI, "spec");
    assert_eq!(v["msg"].as_str(), Some(msg.as_str()));
    assert!(v["svg"].as_str() == Some(svg.as_str()), "the SVGs differ");
    let command = v["command"].as_str().expect("command");
    assert!(
        command.ends_with(
            "--seed 7 --reps 3 --trace timeline.jsonl --trace-policy spec\n\
         herdsim plot --timeline timeline.jsonl"
        ),
        "{command}"
    );
    // A message named, one that is not there, a policy the run does not run.
    let named = SETTINGS.replacen('{', r#"{"policy": "none", "msg": "m3", "#, 1);
    let v = post_to(&ui.addr, "/api/timeline", &named).json();
    assert_eq!(v["msg"], "m3", "{v}");
    let absent = SETTINGS.replacen('{', r#"{"msg": "zz9", "#, 1);
    let r = post_to(&ui.addr, "/api/timeline", &absent);
    assert_eq!(r.status, 422);
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("no message `zz9`")),
        "{}",
        r.text()
    );
    let other = SETTINGS.replacen('{', r#"{"policy": "tombstone", "#, 1);
    let r = post_to(&ui.addr, "/api/timeline", &other);
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["error"].as_str(),
        Some("--trace-policy tombstone: not a policy of this run (it runs spec, none)")
    );
    // The trace is held in memory: bounded.
    let big = r#"{"values": {"agents.0.count": "50", "workload.count": "1000"}, "reps": "1"}"#;
    let r = post_to(&ui.addr, "/api/timeline", big);
    assert_eq!(r.status, 422);
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("50000")),
        "{}",
        r.text()
    );
}

#[test]
fn a_bad_value_comes_back_as_the_clis_message() {
    let ui = Ui::start(&["--quiet"]);
    let r = post(
        &ui.addr,
        &ui.addr,
        "",
        r#"{"values": {"agents.0.count": "abc"}}"#,
    );
    assert_eq!(r.status, 422, "{}", r.text());
    let o = Command::new(BIN)
        .args(["run", "--set", "agents.0.count=abc", "--quiet"])
        .output()
        .expect("herdsim run");
    assert_eq!(o.status.code(), Some(2));
    let cli = String::from_utf8_lossy(&o.stderr);
    let cli = cli
        .trim_end()
        .strip_prefix("herdsim: error: ")
        .expect("one message");
    assert_eq!(r.json()["error"].as_str(), Some(cli));
    // Over a bound: said, with the bound.
    let r = post(&ui.addr, &ui.addr, "", r#"{"reps": "101"}"#);
    assert_eq!(r.status, 422);
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|m| m.contains("--reps 101") && m.contains("100"))
    );
    let r = post(
        &ui.addr,
        &ui.addr,
        "",
        r#"{"values": {"agents.0.count": "500"}}"#,
    );
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|m| m.contains("500 agents")),
        "{}",
        r.text()
    );
    let r = post(
        &ui.addr,
        &ui.addr,
        "",
        r#"{"values": {"workload.count": "1000000"}}"#,
    );
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|m| m.contains("1000000 messages")),
        "{}",
        r.text()
    );
    // Not a control: no file, no other key.
    let r = post(
        &ui.addr,
        &ui.addr,
        "",
        r#"{"values": {"network.base_ms": "1"}}"#,
    );
    assert_eq!(r.status, 422);
    let r = post(&ui.addr, &ui.addr, "", "{not json");
    assert_eq!(r.status, 400);
}

#[test]
fn other_hosts_and_origins_are_refused_and_bodies_bounded() {
    let ui = Ui::start(&["--quiet"]);
    let a = &ui.addr;
    let port = a.rsplit(':').next().expect("port");
    let local = format!("localhost:{port}");
    assert_eq!(get(a, "/", &format!("Origin: http://{a}\r\n")).status, 200);
    assert_eq!(get(&ui.addr, "/", "").status, 200);
    let raw = format!("GET / HTTP/1.1\r\nHost: {local}\r\n\r\n");
    assert_eq!(exchange(a, raw.as_bytes()).status, 200);
    for (host, extra) in [
        ("evil.example", ""),
        ("127.0.0.1:1", ""),
        (a.as_str(), "Origin: http://evil.example\r\n"),
        (a.as_str(), "Origin: null\r\n"),
        (
            local.as_str(),
            &format!("Origin: https://{local}\r\n") as &str,
        ),
    ] {
        let r = post(a, host, extra, SETTINGS);
        assert_eq!(r.status, 403, "{host} {extra}: {}", r.text());
        let raw = format!("GET /api/scenario HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
        assert_eq!(exchange(a, raw.as_bytes()).status, 403, "{host} {extra}");
    }
    let raw = "GET / HTTP/1.1\r\n\r\n".to_string();
    assert_eq!(exchange(a, raw.as_bytes()).status, 403, "no Host");
    // A body over 64 KiB is refused before it is read.
    let raw = format!(
        "POST /api/run HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/json\r\n\
         Content-Length: 70000\r\n\r\n"
    );
    let r = exchange(a, raw.as_bytes());
    assert_eq!(r.status, 413, "{}", r.text());
    let big = format!(r#"{{"values": {{}}, "seed": "{}"}}"#, "1".repeat(70_000));
    assert_eq!(post(a, a, "", &big).status, 413);
    let head = format!(
        "GET / HTTP/1.1\r\nHost: {a}\r\nX: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(exchange(a, head.as_bytes()).status, 431);
    let form = format!(
        "POST /api/run HTTP/1.1\r\nHost: {a}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 3\r\n\r\na=1"
    );
    assert_eq!(exchange(a, form.as_bytes()).status, 415);
}

#[test]
fn a_slow_client_blocks_no_other() {
    let ui = Ui::start(&["--quiet"]);
    // Half a request head, never finished, and a run under way.
    let mut slow = TcpStream::connect(&ui.addr).expect("connects");
    slow.write_all(b"GET / HTTP/1.1\r\nHost: ").expect("writes");
    let addr = ui.addr.clone();
    let run = std::thread::spawn(move || {
        post(
            &addr,
            &addr,
            "",
            r#"{"values": {"workload.count": "400"}, "reps": "4"}"#,
        )
        .status
    });
    let t = Instant::now();
    for _ in 0..5 {
        assert_eq!(get(&ui.addr, "/", "").status, 200);
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(run.join().expect("joins"), 200);
    drop(slow);
}

#[test]
fn a_run_the_page_gives_up_on_is_stopped() {
    let ui = Ui::start(&["--quiet"]);
    // Two long runs (200 agents, 500 messages, 5 policies, 20 replications:
    // some seconds each), as many as run at once; both given up on.
    let heavy = r#"{"values": {"agents.0.count": "200", "workload.count": "500"}, "reps": "20"}"#;
    let mut given_up = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(&ui.addr).expect("connects");
        let raw = format!(
            "POST /api/run HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{heavy}",
            ui.addr,
            heavy.len()
        );
        s.write_all(raw.as_bytes()).expect("writes");
        given_up.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(given_up);
    // Were they still running, this one would wait for them.
    let t = Instant::now();
    let r = post(
        &ui.addr,
        &ui.addr,
        "",
        r#"{"values": {"workload.count": "50"}, "reps": "2"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let took = t.elapsed();
    assert!(took < Duration::from_secs(8), "the small run took {took:?}");
}

#[test]
fn bad_command_lines_exit_2_with_one_message() {
    for (args, expect) in [
        (
            vec!["ui", "--listen", "0.0.0.0:0"],
            "not a loopback address",
        ),
        (
            vec!["ui", "--listen", "192.0.2.1:80"],
            "not a loopback address",
        ),
        (vec!["ui", "no-such-file.toml"], "no-such-file.toml"),
        (vec!["ui", "--seed", "-1"], "whole number"),
    ] {
        let o = Command::new(BIN).args(&args).output().expect("runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("herdsim: error: ") && err.contains(expect),
            "{args:?}: {err}"
        );
    }
}

// ---- the real browser

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromedriver() -> Option<PathBuf> {
    ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Driver {
    fn start(bin: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("timeout")
            .args(["-s", "TERM", "300"])
            .arg(bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = format!("127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("profile dir");
        let mut d = Driver {
            child,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let t = Instant::now();
        while TcpStream::connect(&d.addr).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "chromedriver never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1120,860",
            &format!("--user-data-dir={}", d._profile.path().display()),
        ];
        let caps = serde_json::json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        }}});
        let v = d.call("POST", "/session", Some(&caps));
        d.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        d
    }

    /// One WebDriver command: its `value`.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> serde_json::Value {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let raw = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        let r = exchange(&self.addr, raw.as_bytes());
        let v = r.json();
        assert_eq!(r.status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn session(&self, method: &str, rest: &str, body: serde_json::Value) -> serde_json::Value {
        let path = format!("/session/{}{rest}", self.session);
        self.call(method, &path, Some(&body))
    }

    fn script(&self, js: &str) -> serde_json::Value {
        self.session(
            "POST",
            "/execute/sync",
            serde_json::json!({ "script": js, "args": [] }),
        )
    }

    /// The browser's screenshot, decoded.
    fn screenshot(&self) -> image::RgbImage {
        use base64::Engine;
        let png = self.call(
            "GET",
            &format!("/session/{}/screenshot", self.session),
            None,
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64 PNG"))
            .expect("decodes");
        image::load_from_memory(&bytes).expect("a PNG").to_rgb8()
    }

    /// Poll `js` until `ok` holds of its value (at most `secs`).
    fn until(
        &self,
        js: &str,
        secs: u64,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let t = Instant::now();
        loop {
            let v = self.script(js);
            if ok(&v) {
                return v;
            }
            assert!(
                t.elapsed() < Duration::from_secs(secs),
                "timed out on {js}: last {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let raw = format!(
                "DELETE {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.addr
            );
            if let Ok(mut s) = TcpStream::connect(&self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                let _ = s.write_all(raw.as_bytes());
                let _ = s.read_to_end(&mut Vec::new());
            }
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn in_a_real_browser_a_control_change_shows_the_clis_numbers_and_figure() {
    let required = std::env::var("HERDSIM_UI_BROWSER").is_ok_and(|v| v == "required");
    let driver = chromedriver();
    let Some(driver) = driver.filter(|_| Path::new(CHROMIUM).is_file()) else {
        assert!(
            !required,
            "HERDSIM_UI_BROWSER=required but {CHROMIUM} or chromedriver is missing \
             (apt-get install chromium chromium-driver)"
        );
        eprintln!(
            "SKIPPED: the browser test needs {CHROMIUM} and chromedriver (Debian: apt-get install \
             chromium chromium-driver); .ci/run installs them"
        );
        return;
    };
    let ui = Ui::start(&["--quiet"]);
    let d = Driver::start(&driver);
    // A link that sets the view: fewer messages and replications, two policies.
    let start = "/?workload.count=200&server.ttl_ms=30000&policies=spec,none&seed=7&reps=3";
    d.session("POST", "/url", serde_json::json!({ "url": ui.url(start) }));
    let state = "return document.body.dataset.state || ''";
    d.until(state, 60, |v| v == "done");
    let (five, _) = cli_run(&[&CLI[2..8], &CLI[8..]].concat());
    let table = "return document.getElementById('table').textContent";
    assert_eq!(
        d.script(table).as_str().map(str::trim_end),
        Some(five.trim_end())
    );
    // Move a control as a user does: clear the field, type 3.
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "[data-key=\"agents.0.count\"]" }),
    );
    let id = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{id}/clear"),
        serde_json::json!({}),
    );
    d.session(
        "POST",
        &format!("/element/{id}/value"),
        serde_json::json!({ "text": "3" }),
    );
    let (three, _) = cli_run(&CLI);
    assert_ne!(three, five, "3 agents give other numbers than 5");
    let shown = d.until(table, 60, |v| {
        v.as_str().map(str::trim_end) == Some(three.trim_end())
    });
    assert!(
        shown
            .as_str()
            .is_some_and(|t| t.contains("spec") && t.contains("none"))
    );
    let command = d.script("return document.getElementById('command').textContent");
    assert_eq!(
        command.as_str(),
        Some(
            "herdsim run --set agents.0.count=3 --set server.ttl_ms=30000 --set workload.count=200 \
             --set 'policies=[\"spec\", \"none\"]' --seed 7 --reps 3"
        )
    );
    let figure = d.until(
        "const f = document.getElementById('figure'); \
         return [f.complete, f.naturalWidth, f.src.slice(0, 5), getComputedStyle(f).display]",
        30,
        |v| v[0] == true && v[1].as_u64().is_some_and(|w| w > 200),
    );
    // README's screenshot (results/examples/ui.png): this view.
    if let Ok(path) = std::env::var("HERDSIM_UI_SCREENSHOT") {
        let img = d.screenshot();
        std::fs::write(Path::new(&path), png_best(&img)).expect("screenshot written");
    }
    assert_eq!(figure[2], "blob:");
    assert_eq!(figure[3], "block");
    let href = d.script("return location.search");
    assert!(
        href.as_str()
            .is_some_and(|h| h.contains("agents.0.count=3") && h.contains("seed=7")),
        "{href}"
    );
    // A bad value: the CLI's message on the page, the last results kept.
    d.session(
        "POST",
        &format!("/element/{id}/clear"),
        serde_json::json!({}),
    );
    d.session(
        "POST",
        &format!("/element/{id}/value"),
        serde_json::json!({ "text": "x" }),
    );
    let error = d.until(
        "const e = document.getElementById('error'); \
         return e.style.display === 'block' ? e.textContent : ''",
        30,
        |v| v.as_str().is_some_and(|s| !s.is_empty()),
    );
    assert!(
        error.as_str().is_some_and(|e| e.contains("agents.0.count")),
        "{error}"
    );
    d.session(
        "POST",
        &format!("/element/{id}/clear"),
        serde_json::json!({}),
    );
    d.session(
        "POST",
        &format!("/element/{id}/value"),
        serde_json::json!({ "text": "3" }),
    );
    d.until(table, 60, |v| {
        v.as_str().map(str::trim_end) == Some(three.trim_end())
    });
    d.until(
        "return document.getElementById('error').style.display",
        30,
        |v| v == "none",
    );
    // A click on the timeline button: the timeline herdsim plot draws.
    let (_, msg) = cli_timeline(&CLI, "spec");
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#tl-show" }),
    );
    let button = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{button}/click"),
        serde_json::json!({}),
    );
    d.until("return document.body.dataset.timeline || ''", 60, |v| {
        v == "done"
    });
    let status = d.script("return document.getElementById('tl-status').textContent");
    assert_eq!(
        status.as_str(),
        Some(format!("message {msg} under spec").as_str())
    );
    d.until(
        "const f = document.getElementById('timeline'); return [f.complete, f.naturalWidth]",
        30,
        |v| v[0] == true && v[1].as_u64().is_some_and(|w| w > 200),
    );
    // A click on the table's row of `none`: its timeline.
    let (_, msg) = cli_timeline(&CLI, "none");
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#table .row[data-policy=none]" }),
    );
    let row = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{row}/click"),
        serde_json::json!({}),
    );
    let want = format!("message {msg} under none");
    d.until(
        "return document.getElementById('tl-status').textContent",
        60,
        |v| v.as_str() == Some(want.as_str()),
    );
    // A click on the trade-off: a row per window maximum and policy, and its figure.
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#to-show" }),
    );
    let to = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{to}/click"),
        serde_json::json!({}),
    );
    d.until("return document.body.dataset.tradeoff || ''", 60, |v| {
        v == "done"
    });
    let rows = d.script("return document.querySelectorAll('#to-table tr').length");
    assert_eq!(rows.as_u64(), Some(11), "{rows}");
    d.until(
        "const f = document.getElementById('to-figure'); return [f.complete, f.naturalWidth]",
        30,
        |v| v[0] == true && v[1].as_u64().is_some_and(|w| w > 200),
    );
    // Tune: the recommendation herdsim tune prints, applied to the controls.
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#tu-show" }),
    );
    let tu = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{tu}/click"),
        serde_json::json!({}),
    );
    d.until("return document.body.dataset.tune || ''", 120, |v| {
        v == "done"
    });
    let tuned = d.script(
        "return [document.getElementById('tu-text').textContent, \
         document.querySelectorAll('#tu-table tr').length]",
    );
    let out = tempfile::tempdir().expect("tempdir");
    let mut tune_args = vec!["tune"];
    tune_args.extend(&CLI[..CLI.len() - 2]);
    let o = Command::new(BIN)
        .args(&tune_args)
        .args(["--reps", "2", "--grid", "3", "--quiet", "--out"])
        .arg(out.path())
        .output()
        .expect("herdsim tune");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        tuned[0].as_str(),
        Some(String::from_utf8_lossy(&o.stdout).as_ref())
    );
    assert!(tuned[1].as_u64().is_some_and(|n| n > 2), "{tuned}");
    // Pinned: 3 agents stay beside while 4 are run.
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#pin" }),
    );
    let pin = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{pin}/click"),
        serde_json::json!({}),
    );
    d.session(
        "POST",
        &format!("/element/{id}/clear"),
        serde_json::json!({}),
    );
    d.session(
        "POST",
        &format!("/element/{id}/value"),
        serde_json::json!({ "text": "4" }),
    );
    let mut four_args = CLI.to_vec();
    four_args[1] = "agents.0.count=4";
    let (four, _) = cli_run(&four_args);
    d.until(table, 60, |v| {
        v.as_str().map(str::trim_end) == Some(four.trim_end())
    });
    let pinned = d.script("return document.getElementById('pinned-table').textContent");
    assert_eq!(pinned.as_str().map(str::trim_end), Some(three.trim_end()));
    let shown = d.script(
        "const p = document.getElementById('pinned'); const f = document.getElementById('pinned-figure'); \
         return [getComputedStyle(p).display, f.naturalWidth]",
    );
    assert_eq!(shown[0], "block", "{shown}");
    assert!(shown[1].as_u64().is_some_and(|w| w > 200), "{shown}");
    // The screenshot has content: many colours, not one.
    let img = d.screenshot();
    assert!(
        img.width() >= 800 && img.height() >= 600,
        "{}x{}",
        img.width(),
        img.height()
    );
    let mut colours = std::collections::HashSet::new();
    for p in img.pixels() {
        colours.insert(p.0);
    }
    assert!(colours.len() > 50, "{} colours", colours.len());
    // "apply": the recommendation in the controls, and the command runs it.
    let apply = d.script("return tuApply");
    let max = apply["agents.0.csma.max_ms"]
        .as_str()
        .expect("a recommended max")
        .to_string();
    let found = d.session(
        "POST",
        "/element",
        serde_json::json!({ "using": "css selector", "value": "#tu-apply" }),
    );
    let button = found["element-6066-11e4-a52e-4f735466cecf"]
        .as_str()
        .expect("element id")
        .to_string();
    d.session(
        "POST",
        &format!("/element/{button}/click"),
        serde_json::json!({}),
    );
    let want = format!("--set agents.0.csma.max_ms={max}");
    d.until(
        "return document.getElementById('command').textContent",
        60,
        |v| v.as_str().is_some_and(|c| c.contains(&want)),
    );
    let field = d.script("return document.getElementById('c-agents.0.csma.max_ms').value");
    assert_eq!(field.as_str(), Some(max.as_str()));
}

/// `img` as a PNG, compressed as hard as the encoder does.
fn png_best(img: &image::RgbImage) -> Vec<u8> {
    use image::ImageEncoder;
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let mut png = Vec::new();
    PngEncoder::new_with_quality(&mut png, CompressionType::Best, FilterType::Adaptive)
        .write_image(
            img.as_raw(),
            img.width(),
            img.height(),
            image::ColorType::Rgb8,
        )
        .expect("encodes");
    png
}
