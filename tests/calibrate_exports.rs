//! `herdsim calibrate` on chat exports (issue 42, docs/exports.md): the
//! fixtures in tests/data/exports (one channel in Slack's, Discord's and
//! Matrix's shapes: threads, edits, deleted messages, joins, a bot-to-bot
//! chain, a question nobody answered) measured exactly; texts never
//! written; authors hashed on request; bad exports refused naming the
//! file and line:col, leaving nothing behind.

mod common;

use common::{flat, refused};
use std::path::{Path, PathBuf};
use std::process::Command;

fn herdsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_herdsim"))
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/exports")
        .join(name)
}

/// Calibrate `export` into `out` (no prediction, no figures); returns the
/// report (stdout) and the results folder.
fn calibrate(out: &Path, export: &Path, flags: &[&str]) -> (String, PathBuf) {
    let o = herdsim()
        .args([
            "calibrate",
            "--quiet",
            "--reps",
            "0",
            "--no-plot",
            "--name",
            "x",
        ])
        .args(flags)
        .arg("--out")
        .arg(out)
        .arg(export)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{export:?} {flags:?}: {err}");
    // Flattened: the report wraps its lines at 80 columns, and where a
    // break falls depends on the length of the export's path.
    (flat(&String::from_utf8_lossy(&o.stdout)), out.join("x"))
}

/// `channel.csv` as (metric, value, samples), the intervals left out (they
/// are the stats helpers', tested beside them).
fn channel(dir: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(dir.join("channel.csv")).expect("channel.csv");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("metric,value,ci_low,ci_high,samples"),
        "{text}"
    );
    lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            assert_eq!(c.len(), 5, "{l}");
            (c[0].to_string(), c[1].to_string(), c[4].to_string())
        })
        .collect()
}

fn expect(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

/// The channel in every fixture: six questions a minute apart (the last
/// one open: posted 4 s before the export ends, less than the 10 s the
/// slowest answer took), the first answered twice (a duplicate), the
/// third by nobody; TTFRs 2, 3, 4 and 10 s; eight bots' messages, two of
/// them replies to a bot's (one chain).
fn common_rows(chain: &str) -> Vec<(String, String, String)> {
    expect(&[
        ("questions", "5", "5"),
        ("open_questions", "1", "1"),
        ("duplicate_rate", "0.2", "5"),
        ("unanswered_rate", "0.2", "5"),
        ("ttfr_p50_ms", "3000", "4"),
        ("ttfr_p95_ms", "10000", "4"),
        ("answers_per_question", "1", "5"),
        ("answer_messages_per_question", "1", "5"),
        ("bot_to_bot_reply_rate", "0.25", "8"),
        ("bot_to_bot_chains", "1", "1"),
        ("chain_length_mean", chain, "1"),
        ("chain_length_max", chain, "1"),
    ])
}

#[test]
fn a_slack_export_is_measured_exactly() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, dir) = calibrate(tmp.path(), &data("slack"), &[]);
    // Slack's threads are flat: a reply in a bot's thread replies to the
    // bot's first message, so the chain is two long.
    assert_eq!(channel(&dir), common_rows("2"));
    for s in [
        "Your channel today (Slack export, channel general):",
        "15 messages by 3 humans and 2 bots",
        "not read: 2 edits, 1 deleted, 1 joins, 1 system, 0 encrypted;",
        "1 human replies",
        "a chat export",
        "policy none",
    ] {
        assert!(report.contains(s), "{s}: {report}");
    }
    // The channel folder given directly, and another channel by name.
    let (_, dir) = calibrate(&tmp.path().join("b"), &data("slack/general"), &[]);
    assert_eq!(channel(&dir), common_rows("2"));
    let (report, dir) = calibrate(
        &tmp.path().join("c"),
        &data("slack"),
        &["--channel", "random"],
    );
    assert!(
        report.contains("(Slack export, channel random)"),
        "{report}"
    );
    let rows = channel(&dir);
    assert!(rows.contains(&("unanswered_rate".into(), "1".into(), "1".into())));
}

/// The same export in folders whose paths are 1 to 120 characters longer
/// gives the same report (flattened) and the same measurements: nothing
/// depends on where the path's length breaks the report's lines (a
/// clone in a 21-character folder once failed the test above).
#[test]
fn the_report_does_not_depend_on_the_folder_the_export_is_in() {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for e in std::fs::read_dir(from).expect("read_dir") {
            let e = e.expect("entry");
            let dest = to.join(e.file_name());
            if e.file_type().expect("type").is_dir() {
                copy(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).expect("copy");
            }
        }
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let mut reports = Vec::new();
    for pad in (1..=120).step_by(7) {
        let folder = tmp.path().join("d".repeat(pad));
        let export = folder.join("slack");
        copy(&data("slack"), &export);
        let (report, dir) = calibrate(&folder.join("out"), &export, &[]);
        assert_eq!(channel(&dir), common_rows("2"), "pad {pad}");
        for s in ["a chat export", "15 messages by 3 humans and 2 bots"] {
            assert!(report.contains(s), "pad {pad}: {s}: {report}");
        }
        reports.push(report.replace(&folder.display().to_string(), "FOLDER"));
    }
    assert!(reports.windows(2).all(|w| w[0] == w[1]), "{reports:#?}");
}

#[test]
fn a_discord_export_is_measured_exactly() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, dir) = calibrate(tmp.path(), &data("discord/general.json"), &[]);
    assert_eq!(channel(&dir), common_rows("3"));
    assert!(
        report.contains("not read: 1 edits, 0 deleted, 1 joins, 1 system, 0 encrypted;"),
        "{report}"
    );
    let agents = std::fs::read_to_string(dir.join("agents.csv")).expect("agents");
    assert!(agents.contains("\nhelper,200000000000000001,"), "{agents}");
    assert!(agents.contains("\noracle,200000000000000002,"), "{agents}");
}

#[test]
fn a_matrix_export_is_measured_exactly() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (report, dir) = calibrate(tmp.path(), &data("matrix/general.json"), &[]);
    assert_eq!(channel(&dir), common_rows("3"));
    assert!(
        report.contains("not read: 1 edits, 1 deleted, 5 joins, 3 system, 1 encrypted;"),
        "{report}"
    );
}

#[test]
fn the_rule_for_unthreaded_answers_and_who_is_human_are_flags() {
    let tmp = tempfile::tempdir().expect("tmp");
    // Discord: oracle's message at 184 s replies to nothing; under
    // `ignore` it answers nothing and the fourth question is unanswered.
    let (report, dir) = calibrate(
        tmp.path(),
        &data("discord/general.json"),
        &["--unthreaded", "ignore"],
    );
    let rows = channel(&dir);
    assert!(rows.contains(&("unanswered_rate".into(), "0.4".into(), "5".into())));
    assert!(rows.contains(&("answers_per_question".into(), "0.8".into(), "5".into())));
    assert!(
        report.contains("1 bots' posts answering nothing"),
        "{report}"
    );
    // oracle read as a human: its message at 184 s is a question, its
    // replies follow-ups; helper alone answers.
    let (_, dir) = calibrate(
        &tmp.path().join("b"),
        &data("discord/general.json"),
        &["--humans", "oracle"],
    );
    let rows = channel(&dir);
    assert!(rows.contains(&("questions".into(), "6".into(), "6".into())));
    assert!(rows.contains(&("duplicate_rate".into(), "0".into(), "6".into())));
    assert!(rows.contains(&("bot_to_bot_chains".into(), "0".into(), "0".into())));
}

/// Every file under `dir`, read.
fn all_text(dir: &Path) -> String {
    let mut s = String::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        s.push_str(&String::from_utf8_lossy(
            &std::fs::read(e.path()).expect("read"),
        ));
    }
    s
}

#[test]
fn texts_are_never_written_and_authors_are_hashed_on_request() {
    let tmp = tempfile::tempdir().expect("tmp");
    for (i, f) in ["slack", "discord/general.json", "matrix/general.json"]
        .iter()
        .enumerate()
    {
        let out = tmp.path().join(i.to_string());
        let (report, dir) = calibrate(&out, &data(f), &["--hash-authors"]);
        let text = all_text(&dir) + &report;
        for word in ["rotate", "Thirty days", "formatter", "deploy docs"] {
            assert!(!text.contains(word), "{f}: a message's text: {word}");
        }
        for who in [
            "helper",
            "oracle",
            "HELPER",
            "ORACLE",
            "alice",
            "ALICE",
            "200000000000000001",
        ] {
            assert!(!text.contains(who), "{f}: an author: {who}");
        }
        let agents = std::fs::read_to_string(dir.join("agents.csv")).expect("agents");
        let ids: Vec<&str> = agents
            .lines()
            .skip(1)
            .filter_map(|l| l.split(',').nth(1))
            .collect();
        assert_eq!(ids.len(), 2, "{agents}");
        for id in ids {
            assert!(
                id.len() == 13
                    && id.starts_with('a')
                    && id[1..].bytes().all(|b| b.is_ascii_hexdigit()),
                "{id}"
            );
        }
    }
}

#[test]
fn bad_exports_are_refused_naming_the_file_and_where() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = tmp.path();
    let discord = std::fs::read_to_string(data("discord/general.json")).expect("fixture");
    // Cut in the middle of the third message: not JSON at its line.
    let cut: String = discord.lines().take(60).collect::<Vec<_>>().join("\n");
    std::fs::write(t.join("cut.json"), &cut).expect("write");
    refused(
        t,
        &["calibrate", "--out", "out", "cut.json"],
        &["cut.json:60:", "EOF while parsing"],
    );
    // A message without a timestamp: named where that message ends.
    let bad = discord.replacen("\"timestamp\": \"2024-03-01T23:59:00.000+00:00\",", "", 1);
    assert_ne!(bad, discord);
    std::fs::write(t.join("bad.json"), &bad).expect("write");
    refused(
        t,
        &["calibrate", "--out", "out", "bad.json"],
        &["bad.json:", "a Discord message without a `timestamp`"],
    );
    // The wrong format named.
    refused(
        t,
        &[
            "calibrate",
            "--out",
            "out",
            "--format",
            "slack",
            data("discord/general.json").to_str().expect("utf-8"),
        ],
        &["general.json:", "a Discord message in a Slack export"],
    );
    refused(
        t,
        &["calibrate", "--out", "out", "--format", "irc", "cut.json"],
        &["--format irc"],
    );
    // Export flags on a frame log.
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agentchat-wire/default.jsonl");
    if log.exists() {
        refused(
            t,
            &[
                "calibrate",
                "--out",
                "out",
                "--hash-authors",
                log.to_str().expect("utf-8"),
            ],
            &["--hash-authors", "not a chat export"],
        );
    }
    // A Slack folder without day files.
    std::fs::create_dir_all(t.join("empty/chan")).expect("mkdir");
    refused(
        t,
        &["calibrate", "--out", "out", "empty"],
        &["empty: a folder without day files"],
    );
    // Nothing left behind: no results folder (the --out folder stays, as
    // for any refused calibration).
    let left: Vec<_> = std::fs::read_dir(t.join("out"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// The round trip's scenario: three bots under `none` (no claims, as in
/// a chat platform), no CSMA wait and no link delay, so that a question's
/// answer comes its inference after it.
const ROUND_TRIP: &str = r#"name = "rt"
seed = 7
reps = 1
policies = ["none"]

[network]
base_ms = 0
jitter = { kind = "fixed", ms = 0 }

[[agents]]
name = "bots"
count = 3
respond_p = 0.6
csma = { kind = "fixed", ms = 0 }
inference = { kind = "lognormal", p50_ms = 3000, p99_ms = 12000 }

[workload]
arrivals = "poisson"
mean_gap_ms = 60000
count = 400
"#;

/// A channel message the simulation's server relayed: id, µs from the
/// start, author, the message it replies to.
struct Sent {
    id: String,
    t_us: i64,
    from: String,
    reply_to: Option<String>,
}

/// The channel from a trace: every MSG the server sent, once (its first
/// send), then a human's late reply to the first question (one hour after
/// the last message: every question's outcome is known by then).
fn channel_of(trace: &Path) -> Vec<Sent> {
    let text = std::fs::read_to_string(trace).expect("trace");
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for l in text.lines() {
        let e: serde_json::Value = serde_json::from_str(l).expect("trace line");
        if e["ev"] != "server_send" || e["msg"]["type"] != "MSG" {
            continue;
        }
        let m = &e["msg"];
        let id = m["id"].as_str().expect("id").to_string();
        if seen.insert(id.clone()) {
            out.push(Sent {
                id,
                t_us: e["t_us"].as_i64().expect("t_us"),
                from: m["from"].as_str().expect("from").to_string(),
                reply_to: m["in_reply_to"].as_str().map(str::to_string),
            });
        }
    }
    let last = out.iter().map(|s| s.t_us).max().unwrap_or(0);
    let first = out[0].id.clone();
    out.push(Sent {
        id: "late".into(),
        t_us: last + 3_600_000_000,
        from: "operator".into(),
        reply_to: Some(first),
    });
    out
}

/// 2024-03-02T00:00:00Z, the channel's start, in s since 1970.
const DAY: i64 = 1_709_337_600;

/// The channel as a Slack export (one channel folder, one day file).
fn slack_export(ch: &[Sent], dir: &Path) {
    let ts = |us: i64| format!("{}.{:06}", DAY + us / 1_000_000, us % 1_000_000);
    let by_id: std::collections::BTreeMap<&str, i64> =
        ch.iter().map(|s| (s.id.as_str(), s.t_us)).collect();
    let msgs: Vec<serde_json::Value> = ch
        .iter()
        .map(|s| {
            let mut m = serde_json::json!({"type": "message", "text": "x", "ts": ts(s.t_us)});
            if s.from == "operator" {
                m["user"] = "U0OPERATOR".into();
            } else {
                m["subtype"] = "bot_message".into();
                m["bot_id"] = s.from.clone().into();
                m["username"] = s.from.clone().into();
            }
            if let Some(r) = &s.reply_to {
                m["thread_ts"] = ts(by_id[r.as_str()]).into();
            }
            m
        })
        .collect();
    std::fs::create_dir_all(dir.join("general")).expect("mkdir");
    std::fs::write(
        dir.join("general/2024-03-02.json"),
        serde_json::to_string(&msgs).expect("json"),
    )
    .expect("write");
}

/// The channel as DiscordChatExporter's JSON.
fn discord_export(ch: &[Sent], file: &Path) {
    let iso = |us: i64| {
        let s = us / 1_000_000;
        format!(
            "2024-03-02T{:02}:{:02}:{:02}.{:06}+00:00",
            s / 3600,
            s / 60 % 60,
            s % 60,
            us % 1_000_000
        )
    };
    let msgs: Vec<serde_json::Value> = ch
        .iter()
        .map(|s| {
            let mut m = serde_json::json!({
                "id": s.id, "type": if s.reply_to.is_some() { "Reply" } else { "Default" },
                "timestamp": iso(s.t_us), "timestampEdited": null, "content": "x",
                "author": {"id": s.from, "name": s.from, "isBot": s.from != "operator"}});
            if let Some(r) = &s.reply_to {
                m["reference"] = serde_json::json!({"messageId": r});
            }
            m
        })
        .collect();
    let doc = serde_json::json!({"guild": {"id": "1"}, "channel": {"id": "2", "name": "general"},
                                 "messages": msgs, "messageCount": ch.len()});
    std::fs::write(file, doc.to_string()).expect("write");
}

/// The channel as Matrix room events (the `/messages` API's `chunk`);
/// bots send `m.notice`.
fn matrix_export(ch: &[Sent], file: &Path) {
    let events: Vec<serde_json::Value> = ch
        .iter()
        .map(|s| {
            let bot = s.from != "operator";
            let mut c = serde_json::json!({"msgtype": if bot { "m.notice" } else { "m.text" },
                                           "body": "x"});
            if let Some(r) = &s.reply_to {
                c["m.relates_to"] = serde_json::json!({"m.in_reply_to": {"event_id": r}});
            }
            serde_json::json!({"type": "m.room.message", "event_id": s.id,
                "sender": format!("@{}:example.org", s.from), "content": c,
                "origin_server_ts": DAY * 1000 + s.t_us / 1000})
        })
        .collect();
    std::fs::write(file, serde_json::json!({"chunk": events}).to_string()).expect("write");
}

/// An estimate of estimates.csv: (estimate, ci_low, ci_high).
fn estimate(csv: &str, group: &str, parameter: &str) -> (f64, f64, f64) {
    let line = csv
        .lines()
        .find(|l| l.starts_with(&format!("{group},{parameter},")))
        .unwrap_or_else(|| panic!("{group},{parameter} in {csv}"));
    let c: Vec<f64> = line
        .split(',')
        .skip(2)
        .take(3)
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect();
    (c[0], c[1], c[2])
}

/// A simulated channel written in each format and calibrated back: the
/// known respond_p, inference p50 and p99 and mean gap each inside its
/// 95% interval, and the measured duplicate rate the simulation's (to the
/// 4 decimals estimates.csv holds). One seed, so deterministic: a 95%
/// interval misses its truth once in 20 seeds, and seed 7 is not such a
/// seed for any of the four (and the three formats give one channel, so
/// they agree).
#[test]
fn a_simulated_channel_calibrates_back_from_each_format() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = tmp.path();
    std::fs::write(t.join("rt.toml"), ROUND_TRIP).expect("write");
    let o = herdsim()
        .args(["run", "--quiet", "--trace"])
        .arg(t.join("trace.jsonl"))
        .arg("--out")
        .arg(t.join("sim"))
        .arg(t.join("rt.toml"))
        .output()
        .expect("runs");
    assert!(o.status.success(), "{o:?}");
    let summary = std::fs::read_to_string(t.join("sim/rt/summary.csv")).expect("summary");
    let mut rows = summary.lines();
    let head: Vec<&str> = rows.next().expect("header").split(',').collect();
    let vals: Vec<&str> = rows.next().expect("row").split(',').collect();
    let col = |name: &str| {
        let i = head.iter().position(|h| *h == name).expect(name);
        vals[i].parse::<f64>().expect("number")
    };
    let sim_dup = col("duplicate_rate_mean");
    let ch = channel_of(&t.join("trace.jsonl"));
    slack_export(&ch, &t.join("slack"));
    discord_export(&ch, &t.join("discord.json"));
    matrix_export(&ch, &t.join("matrix.json"));
    for (i, input) in ["slack", "discord.json", "matrix.json"].iter().enumerate() {
        let (_, dir) = calibrate(&t.join(format!("cal{i}")), &t.join(input), &[]);
        let est = std::fs::read_to_string(dir.join("estimates.csv")).expect("estimates");
        for (group, parameter, truth) in [
            ("group-0", "respond_p", 0.6),
            ("group-0", "inference.p50_ms", 3000.0),
            ("group-0", "inference.p99_ms", 12000.0),
            ("workload", "mean_gap_ms", 60000.0),
        ] {
            let (x, lo, hi) = estimate(&est, group, parameter);
            assert!(
                lo <= truth && truth <= hi,
                "{input}: {parameter} {x} (95% CI {lo}..{hi}) misses {truth}"
            );
        }
        let (dup, _, _) = estimate(&est, "observed", "duplicate_rate");
        assert!(
            (dup - sim_dup).abs() <= 0.5e-4,
            "{input}: duplicate rate {dup}, the simulation's {sim_dup}"
        );
        let rows = channel(&dir);
        assert!(
            rows.contains(&("questions".into(), "400".into(), "400".into())),
            "{rows:?}"
        );
    }
}

/// The what-if: with `--reps`, the fitted scenario runs under each scheme
/// and policy; `whatif.csv` has one row each, the report a section beside
/// "your channel today", `mentions` on a channel whose questions mention
/// nobody says that nobody answers (no TTFR), and the files are the same
/// bytes for `--jobs 1` and `--jobs 2`.
#[test]
fn the_fitted_channel_runs_under_each_scheme_the_same_for_any_jobs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let run = |jobs: &str| {
        let out = tmp.path().join(jobs);
        let o = herdsim()
            .args(["calibrate", "--reps", "3", "--jobs", jobs, "--no-plot"])
            .args(["--name", "x", "--out"])
            .arg(&out)
            .arg(data("discord/general.json"))
            .output()
            .expect("runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dir = out.join("x");
        let csv = std::fs::read_to_string(dir.join("whatif.csv")).expect("whatif.csv");
        // The report names its own folder (the tune command): not compared.
        let report = std::fs::read_to_string(dir.join("report.txt"))
            .expect("report")
            .replace(&out.display().to_string(), "OUT");
        (
            csv,
            flat(&report),
            flat(&String::from_utf8_lossy(&o.stdout)),
        )
    };
    let (csv, report, stdout) = run("1");
    let (csv2, report2, _) = run("2");
    assert_eq!(csv, csv2, "whatif.csv differs between --jobs 1 and 2");
    assert_eq!(report, report2, "report.txt differs between --jobs 1 and 2");
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with("scheme,policy,reps,duplicate_rate,duplicate_rate_ci95,"),
        "{csv}"
    );
    let keys: Vec<(&str, &str)> = lines[1..]
        .iter()
        .map(|l| {
            let mut c = l.split(',');
            (c.next().unwrap_or(""), c.next().unwrap_or(""))
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("open", "spec"),
            ("open", "none"),
            ("owner", "spec"),
            ("owner", "none"),
            ("mentions", "spec"),
            ("mentions", "none"),
            ("selector", "spec"),
            ("selector", "none"),
        ],
        "{csv}"
    );
    for l in &lines[1..] {
        let c: Vec<&str> = l.split(',').collect();
        assert_eq!(c[2], "3", "{l}");
        if c[0] == "mentions" {
            // Nobody is mentioned: every question unanswered, no TTFR.
            assert_eq!(c[5], "1", "{l}");
            assert_eq!((c[7], c[9]), ("", ""), "{l}");
            assert!(c[15].contains("nobody answers under mentions"), "{l}");
        } else {
            assert!(!c[7].is_empty(), "{l}");
            assert!(c[15].is_empty(), "{l}");
        }
    }
    let today = report.find("Your channel today").expect("today");
    let each = report
        .find("Your channel under each scheme")
        .expect("what-if");
    assert!(today < each, "{report}");
    assert!(report.contains("none answered"), "{report}");
    assert!(
        stdout.contains("Your channel under each scheme"),
        "{stdout}"
    );
}

/// Slack authors are named to `--humans`/`--bots` by their names as well
/// as their ids: `users.json`'s `name` and `real_name`, a message's
/// `bot_profile` or `username`; each gives the channel its id gives.
#[test]
fn slack_names_are_accepted_by_the_flags() {
    let tmp = tempfile::tempdir().expect("tmp");
    let slack = data("slack");
    let run =
        |sub: &str, flags: &[&str]| channel(&calibrate(&tmp.path().join(sub), &slack, flags).1);
    let plain = run("plain", &[]);
    let by_id = run("id", &["--humans", "U0HELPER"]);
    assert_ne!(by_id, plain, "--humans U0HELPER changes nothing");
    assert_eq!(run("name", &["--humans", "helper"]), by_id);
    let bot_by_id = run("bid", &["--bots", "U0BOB"]);
    assert_ne!(bot_by_id, plain, "--bots U0BOB changes nothing");
    assert_eq!(run("real", &["--bots", "Bob"]), bot_by_id);
    assert_eq!(run("uname", &["--bots", "bob"]), bot_by_id);
}

/// A small Discord channel: (id, seconds from the start, author, the
/// message it replies to); authors other than `operator` are bots.
fn tiny(msgs: &[(&str, f64, &str, Option<&str>)], file: &Path) {
    let ch: Vec<Sent> = msgs
        .iter()
        .map(|(id, s, from, r)| Sent {
            id: id.to_string(),
            t_us: (s * 1e6) as i64,
            from: from.to_string(),
            reply_to: r.map(str::to_string),
        })
        .collect();
    discord_export(&ch, file);
}

/// (value, ci_low, ci_high) of a `channel.csv` metric.
fn channel_ci(dir: &Path, metric: &str) -> (f64, f64, f64) {
    let text = std::fs::read_to_string(dir.join("channel.csv")).expect("channel.csv");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{metric},")))
        .unwrap_or_else(|| panic!("{metric} in {text}"));
    let c: Vec<f64> = line
        .split(',')
        .skip(1)
        .take(3)
        .map(|x| x.parse().unwrap_or(f64::NAN))
        .collect();
    (c[0], c[1], c[2])
}

/// Calibrate and return the exit status's failure: stderr, for a run
/// that must succeed with the what-if (`--reps 1`).
fn calibrate_whatif(out: &Path, export: &Path) -> String {
    let o = herdsim()
        .args([
            "calibrate",
            "--quiet",
            "--reps",
            "1",
            "--no-plot",
            "--name",
            "x",
            "--out",
        ])
        .arg(out)
        .arg(export)
        .output()
        .expect("runs");
    assert!(
        o.status.success(),
        "{export:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Issue 47: an LLM agent that posts a notice, a progress message and its
/// answer in one thread answered once: one agent posting three messages
/// under each question is 0% duplicates (it read as 100%), and two
/// distinct agents answering is a duplicate; the messages are counted
/// on their own line (`answer_messages_per_question`).
#[test]
fn one_agents_several_messages_are_one_answer_two_agents_a_duplicate() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ids: Vec<(String, String, String, String)> = (0..8)
        .map(|q| {
            (
                format!("1{q}00"),
                format!("1{q}01"),
                format!("1{q}02"),
                format!("1{q}03"),
            )
        })
        .collect();
    let mut one = Vec::new();
    let mut two = Vec::new();
    for (q, (id, a, b, c)) in ids.iter().enumerate() {
        let t = 60.0 * q as f64 + 7.0 * (q % 3) as f64;
        one.push((id.as_str(), t, "operator", None));
        two.push((id.as_str(), t, "operator", None));
        for (k, r) in [a, b, c].into_iter().enumerate() {
            one.push((r.as_str(), t + 2.0 + k as f64, "helper", Some(id.as_str())));
        }
        // Two bots answer the first four questions, helper twice.
        two.push((a.as_str(), t + 2.0, "helper", Some(id.as_str())));
        two.push((b.as_str(), t + 3.0, "helper", Some(id.as_str())));
        if q < 4 {
            two.push((c.as_str(), t + 4.0, "oracle", Some(id.as_str())));
        }
    }
    // A human's follow-up long after: every question's outcome is known.
    two.push(("9999", 1000.0, "operator", Some("1000")));
    tiny(&one, &tmp.path().join("one.json"));
    tiny(&two, &tmp.path().join("two.json"));
    let (report, dir) = calibrate(&tmp.path().join("a"), &tmp.path().join("one.json"), &[]);
    let rows = channel(&dir);
    assert!(
        rows.contains(&("duplicate_rate".into(), "0".into(), "8".into())),
        "{rows:?}"
    );
    assert!(
        rows.contains(&("answers_per_question".into(), "1".into(), "8".into())),
        "{rows:?}"
    );
    assert!(
        rows.contains(&(
            "answer_messages_per_question".into(),
            "3".into(),
            "8".into()
        )),
        "{rows:?}"
    );
    let est = std::fs::read_to_string(dir.join("estimates.csv")).expect("estimates");
    assert_eq!(estimate(&est, "observed", "duplicate_rate").0, 0.0, "{est}");
    assert!(
        flat(&report).contains("8 answers (24 messages)"),
        "{report}"
    );
    let q = std::fs::read_to_string(dir.join("questions.csv")).expect("questions");
    assert!(
        q.starts_with("question,t_ms,claims,answers,answer_messages,"),
        "{q}"
    );
    assert!(
        q.lines().nth(1).is_some_and(|l| l.contains(",0,1,3,")),
        "{q}"
    );
    let (_, dir) = calibrate(&tmp.path().join("b"), &tmp.path().join("two.json"), &[]);
    let rows = channel(&dir);
    assert!(
        rows.contains(&("duplicate_rate".into(), "0.5".into(), "8".into())),
        "{rows:?}"
    );
    let est = std::fs::read_to_string(dir.join("estimates.csv")).expect("estimates");
    assert_eq!(estimate(&est, "observed", "duplicate_rate").0, 0.5, "{est}");
}

/// Issue 47: intervals stay within their quantity's range. Three
/// questions nobody answered and one three bots answered (answers per
/// question 0.75, whose t interval is -1.64..3.14), and gaps of 1 s but
/// one of a day (not Poisson: the mean gap's t interval ran below 0).
#[test]
fn intervals_stay_within_each_quantitys_range() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut msgs = vec![
        ("100", 0.0, "operator", None),
        ("101", 1.0, "b1", Some("100")),
        ("102", 2.0, "b2", Some("100")),
        ("103", 3.0, "b3", Some("100")),
        ("200", 60.0, "operator", None),
        ("300", 120.0, "operator", None),
        ("400", 180.0, "operator", None),
    ];
    // Answered 5 s after: complete (the slowest answer took 3 s).
    let late = [
        ("900", 80_000.0, "operator", None),
        ("901", 80_005.0, "b1", Some("900")),
    ];
    msgs.extend(late);
    tiny(&msgs, &tmp.path().join("few.json"));
    let (_, dir) = calibrate(&tmp.path().join("a"), &tmp.path().join("few.json"), &[]);
    let (m, lo, hi) = channel_ci(&dir, "answers_per_question");
    assert!((m - 0.8).abs() < 1e-9, "{m}");
    assert!(lo >= 0.0 && lo <= m && m <= hi && hi <= 3.0, "{lo}..{hi}");
    // Gaps: eight of 1 s, one of 22 hours.
    let mut gaps = Vec::new();
    for q in 0..10 {
        let t = if q < 9 { q as f64 } else { 80_000.0 };
        gaps.push((format!("{}", 1000 + q), t, format!("{}", 2000 + q)));
    }
    let msgs: Vec<(&str, f64, &str, Option<&str>)> = gaps
        .iter()
        .flat_map(|(id, t, a)| {
            [
                (id.as_str(), *t, "operator", None),
                (a.as_str(), t + 0.5, "helper", Some(id.as_str())),
            ]
        })
        .collect();
    tiny(&msgs, &tmp.path().join("gaps.json"));
    let (report, dir) = calibrate(&tmp.path().join("b"), &tmp.path().join("gaps.json"), &[]);
    let est = std::fs::read_to_string(dir.join("estimates.csv")).expect("estimates");
    let (m, lo, hi) = estimate(&est, "workload", "mean_gap_ms");
    assert!(lo > 0.0 && lo <= m && m <= hi, "{lo}..{hi} of {m}: {est}");
    let (q, lo, hi) = estimate(&est, "workload", "questions_per_hour");
    assert!(
        lo > 0.0 && lo <= q && q <= hi && hi.is_finite(),
        "{lo}..{hi} of {q}: {est}"
    );
    // No interval in the report starts below 0 (`-` alone is "none").
    let f = flat(&report);
    for (i, _) in f.match_indices("CI -") {
        let next = f[i + 4..].chars().next();
        assert!(!next.is_some_and(|c| c.is_ascii_digit()), "{}", &f[i..]);
    }
}

/// Issue 47: answers stamped a little before their question (a federated
/// room's servers' clocks) are answers, with a TTFR of 0, and a warning
/// with their count; one stamped a minute before is left as stamped, and
/// warned of too.
#[test]
fn answers_stamped_a_little_before_their_question_are_answers_with_a_warning() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut msgs = Vec::new();
    let ids: Vec<(String, String)> = (0..6)
        .map(|q| (format!("1{q}0"), format!("1{q}1")))
        .collect();
    for (q, (id, a)) in ids.iter().enumerate() {
        let t = 100.0 + 60.0 * q as f64 + 5.0 * (q % 2) as f64;
        msgs.push((id.as_str(), t, "operator", None));
        // A second or two early, three or four late; the last a minute early.
        let lag = [-2.0, 3.0, -1.0, 4.0, -2.0, -60.0][q];
        msgs.push((a.as_str(), t + lag, "helper", Some(id.as_str())));
    }
    // A last question, answered: the one before it is complete.
    msgs.push(("900", 1000.0, "operator", None));
    msgs.push(("901", 1004.0, "helper", Some("900")));
    tiny(&msgs, &tmp.path().join("early.json"));
    let out = tmp.path().join("out");
    let o = herdsim()
        .args([
            "calibrate",
            "--reps",
            "0",
            "--no-plot",
            "--name",
            "x",
            "--out",
        ])
        .arg(&out)
        .arg(tmp.path().join("early.json"))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let err = flat(&err);
    assert!(
        err.contains(
            "warning: 3 replies are stamped before the message they reply to, by at most 5 s"
        ),
        "{err}"
    );
    assert!(
        err.contains("warning: 1 replies are stamped more than 5 s before"),
        "{err}"
    );
    let dir = out.join("x");
    let rows = channel(&dir);
    // The last question's answer is a minute early: it answers nothing.
    let (unanswered, _, _) = channel_ci(&dir, "unanswered_rate");
    assert!((unanswered - 1.0 / 7.0).abs() < 1e-3, "{rows:?}");
    // TTFRs 0, 3, 0, 4, 0 and 4 s.
    assert!(
        rows.contains(&("ttfr_p50_ms".into(), "0".into(), "6".into())),
        "{rows:?}"
    );
    assert!(
        rows.contains(&("ttfr_p95_ms".into(), "4000".into(), "6".into())),
        "{rows:?}"
    );
    let report = std::fs::read_to_string(dir.join("report.txt")).expect("report");
    assert!(
        flat(&report).contains("3 replies are stamped before"),
        "{report}"
    );
}

/// Issue 47: the report of an export speaks of its answers, not of claims
/// it has none of: no "answered claims", no claim's start, no TTL (in the
/// report or the scenario), no `NaN`; and its `Next:` line is the tune
/// command docs/exports.md gives (`--schemes all`, the budget, `--out`).
#[test]
fn an_exports_report_speaks_of_answers_and_its_next_step_is_the_docs_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("out");
    let o = herdsim()
        .args([
            "calibrate",
            "--quiet",
            "--reps",
            "0",
            "--name",
            "x",
            "--out",
        ])
        .arg(&out)
        .arg(data("discord/general.json"))
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    let dir = out.join("x");
    let scenario = std::fs::read_to_string(dir.join("scenario.toml")).expect("scenario");
    for (what, text) in [("report", &report), ("scenario", &scenario)] {
        let f = flat(text);
        for word in [
            "answered claims",
            "claim's start",
            "TTL",
            "ttl",
            "NaN",
            "started_at",
        ] {
            assert!(!f.contains(word), "{what} says `{word}`: {text}");
        }
    }
    // The command: the docs' shape, this calibration's paths and budget.
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/exports.md"))
            .expect("docs");
    let doc_cmd = docs
        .lines()
        .find(|l| l.starts_with("herdsim tune "))
        .expect("the docs' tune command");
    let shape = |cmd: &str| -> Vec<String> {
        cmd.split_whitespace()
            .map(|w| {
                if w.starts_with('-') || w == "all" || w == "herdsim" || w == "tune" {
                    w.to_string()
                } else {
                    "_".into()
                }
            })
            .collect()
    };
    let next = report
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("herdsim tune "))
        .expect("a tune command");
    assert_eq!(
        shape(next),
        shape(doc_cmd),
        "{next} against the docs' {doc_cmd}"
    );
    let scen = dir.join("scenario.toml");
    assert!(
        next.contains(&format!("tune {} --schemes all", scen.display())),
        "{next}"
    );
    assert!(
        next.ends_with(&format!("--out {}", dir.display())),
        "{next}"
    );
}

/// Issue 47: a bot's display name is written into the fitted scenario's
/// comments escaped: a name with a line break, quotes, `]]` and a NUL
/// adds no key (it added `hang_p = 0.9` to `[[agents]]`); the scenario
/// reads back with the fitted keys alone, and agents.csv holds the name
/// as it is.
#[test]
fn a_hostile_display_name_adds_nothing_to_the_fitted_scenario() {
    let tmp = tempfile::tempdir().expect("tmp");
    let evil = "evil\nhang_p = 0.9\n[[agents]]\nname = \"x\" ]] \u{0} end";
    let mut msgs = Vec::new();
    for q in 0..8 {
        let t = format!("2024-03-02T00:{:02}:{:02}.000+00:00", q * 2, q % 3 * 7);
        let a = format!("2024-03-02T00:{:02}:{:02}.500+00:00", q * 2, q % 3 * 7 + 3);
        msgs.push(
            serde_json::json!({"id": format!("{q}0"), "type": "Default", "timestamp": t,
            "content": "q", "author": {"id": "1", "name": "operator", "isBot": false}}),
        );
        msgs.push(
            serde_json::json!({"id": format!("{q}1"), "type": "Reply", "timestamp": a,
            "content": "a", "author": {"id": "2", "name": evil, "isBot": true},
            "reference": {"messageId": format!("{q}0")}}),
        );
    }
    let doc = serde_json::json!({"guild": {"id": "1"}, "channel": {"id": "2", "name": "general"},
                                 "messages": msgs});
    std::fs::write(tmp.path().join("evil.json"), doc.to_string()).expect("write");
    let (_, dir) = calibrate(&tmp.path().join("out"), &tmp.path().join("evil.json"), &[]);
    let text = std::fs::read_to_string(dir.join("scenario.toml")).expect("scenario");
    let back: toml::Table = toml::from_str(&text).expect("reads back");
    let agents = back["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1, "{text}");
    let a = agents[0].as_table().expect("a table");
    assert!(!a.contains_key("hang_p"), "{text}");
    assert_eq!(a["name"].as_str(), Some("group-0"), "{text}");
    assert!(
        text.contains(r#"# "evil\nhang_p = 0.9\n[[agents]]\nname = \"x\" ]] \u0000 end""#),
        "{text}"
    );
    let mut r = csv::Reader::from_path(dir.join("agents.csv")).expect("agents.csv");
    let names: Vec<String> = r
        .records()
        .map(|x| x.expect("a record")[0].to_string())
        .collect();
    assert_eq!(names, [evil]);
}

/// Issue 47: an export kept in the results folder under one of
/// calibrate's outputs' names (`whatif.csv`) was read, then replaced
/// (exit 0): refused, named, by its own path and through a symbolic
/// link, and left as it was.
#[test]
fn an_input_named_as_an_output_is_refused_and_kept() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("out/x");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let text = std::fs::read(data("discord/general.json")).expect("fixture");
    let inside = dir.join("whatif.csv");
    std::fs::write(&inside, &text).expect("write");
    let args = |input: &str| {
        vec![
            "calibrate".to_string(),
            "--no-plot".into(),
            "--reps".into(),
            "1".into(),
            "--out".into(),
            "out".into(),
            "--name".into(),
            "x".into(),
            input.into(),
        ]
    };
    refused(
        tmp.path(),
        &args("out/x/whatif.csv"),
        &[
            "whatif.csv",
            "a file this calibration writes",
            "another folder",
        ],
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&inside, tmp.path().join("link.json")).expect("symlink");
        refused(tmp.path(), &args("link.json"), &["link.json", "whatif.csv"]);
    }
    assert_eq!(std::fs::read(&inside).expect("kept"), text);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["whatif.csv"]);
    // A Slack export's folder never holds the results.
    let slack = tmp.path().join("slack");
    std::fs::create_dir_all(&slack).expect("mkdir");
    for e in std::fs::read_dir(data("slack")).expect("fixture").flatten() {
        let to = slack.join(e.file_name());
        if e.path().is_dir() {
            std::fs::create_dir_all(&to).expect("mkdir");
            for f in std::fs::read_dir(e.path()).expect("chan").flatten() {
                std::fs::copy(f.path(), to.join(f.file_name())).expect("copy");
            }
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
    refused(
        tmp.path(),
        &[
            "calibrate",
            "--reps",
            "0",
            "--no-plot",
            "--out",
            "slack/res",
            "slack",
        ],
        &["slack", "inside this export"],
    );
    assert!(!slack.join("res").exists());
}

/// A Slack export of one channel over `days` days, one question a day at
/// noon UTC from 2023-01-01 on, each answered 2 s later by a bot in its
/// thread: one day file per month.
fn long_slack_export(dir: &Path, days: i64) {
    let start = 1_672_531_200i64; // 2023-01-01T00:00:00Z
    let mut month: std::collections::BTreeMap<String, Vec<serde_json::Value>> = Default::default();
    for d in 0..days {
        let t = start + d * 86_400 + 43_200;
        let ts = format!("{t}.000100");
        // The day file of its month (the file's name is what Slack calls
        // it; the times inside are what is read).
        let file = format!("{}-{:02}-01.json", 2023 + d / 365, (d % 365) / 31 + 1);
        let m = month.entry(file).or_default();
        m.push(
            serde_json::json!({"type": "message", "user": "U0ALICE", "text": "q",
                                  "ts": ts, "thread_ts": ts}),
        );
        m.push(
            serde_json::json!({"type": "message", "user": "U0HELPER", "bot_id": "B0HELPER",
                                  "text": "a", "ts": format!("{}.000100", t + 2),
                                  "thread_ts": ts}),
        );
    }
    std::fs::create_dir_all(dir.join("general")).expect("mkdir");
    for (file, msgs) in month {
        std::fs::write(
            dir.join("general").join(file),
            serde_json::to_string(&msgs).expect("json"),
        )
        .expect("write");
    }
}

/// Issue 47: a 14-month export was refused ("longer than the longest
/// duration a scenario holds") and printed nothing. Now "your channel
/// today" is over all of it and the scenario is fitted on its last 115.7
/// days (a scenario's longest duration, 1e10 ms); `--since`/`--until`
/// pick another window, checked (exit 2 naming the flag).
#[test]
fn a_long_export_is_measured_whole_and_fitted_on_a_window() {
    let tmp = tempfile::tempdir().expect("tmp");
    let export = tmp.path().join("slack");
    long_slack_export(&export, 430);
    let (report, dir) = calibrate(&tmp.path().join("a"), &export, &[]);
    let rows = channel(&dir);
    // 430 questions, the last one open (less than 2 s before the end? no:
    // its answer ends the export, so it is complete).
    assert!(
        rows.contains(&("questions".into(), "430".into(), "430".into())),
        "{rows:?}"
    );
    let f = flat(&report);
    for s in [
        "Your channel today",
        "The export runs 429.0 days (2023-01-01 12:00 UTC to 2024-03-05 12:00 UTC), longer \
         than a scenario holds (115.7 days)",
        "over its last 115.7 days (2023-11-11 12:00 UTC on)",
        "--since and --until",
    ] {
        assert!(f.contains(s), "{s}: {report}");
    }
    // The fit is over the window's 116 questions.
    let questions = std::fs::read_to_string(dir.join("questions.csv")).expect("questions");
    assert_eq!(questions.lines().count(), 1 + 116, "{questions}");
    // A window of two months: the rest is outside, counted.
    let (report, dir) = calibrate(
        &tmp.path().join("b"),
        &export,
        &["--since", "2023-03-01", "--until", "2023-05-01T00:00:00Z"],
    );
    let rows = channel(&dir);
    assert!(
        rows.contains(&("questions".into(), "61".into(), "61".into())),
        "{rows:?}"
    );
    assert!(
        flat(&report).contains(
            "0 messages whose id an earlier one has (read once), 738 outside --since/--until"
        ),
        "{report}"
    );
    assert!(!report.contains("longer than a scenario holds"), "{report}");
    // A window still too long, bad values, an empty window: exit 2.
    let e = export.to_str().expect("utf-8");
    let t = tmp.path();
    refused(
        t,
        &["calibrate", "--out", "o", "--since", "2023-01-01", e],
        &[
            "slack: the messages between --since and --until run 429.0 days",
            "give a shorter window",
        ],
    );
    refused(
        t,
        &["calibrate", "--out", "o", "--since", "yesterday", e],
        &["--since yesterday: expected a date (YYYY-MM-DD"],
    );
    refused(
        t,
        &["calibrate", "--out", "o", "--until", "2023-02-30", e],
        &["--until 2023-02-30: expected a date"],
    );
    refused(
        t,
        &[
            "calibrate",
            "--out",
            "o",
            "--since",
            "2023-05-01",
            "--until",
            "2023-03-01",
            e,
        ],
        &["--since 2023-05-01 is not before --until 2023-03-01"],
    );
    refused(
        t,
        &["calibrate", "--out", "o", "--since", "2030-01-01", e],
        &["no message between --since and --until (860 outside)"],
    );
    let long = "9".repeat(500);
    let err = refused(t, &["calibrate", "--out", "o", "--since", &long, e], &["…"]);
    assert!(err.len() < 400, "{err}");
}

/// The Discord fixture as JSON, to be changed by a test.
fn discord_doc() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data("discord/general.json")).expect("fixture"))
        .expect("json")
}

/// Issue 47: an answer whose id appears twice was read twice (a
/// duplicate answer). Now the first counts, once, and the report says so.
#[test]
fn a_message_id_read_twice_counts_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut doc = discord_doc();
    let msgs = doc["messages"].as_array_mut().expect("messages");
    let answer = msgs
        .iter()
        .find(|m| m["type"] == "Reply")
        .cloned()
        .expect("an answer");
    msgs.push(answer);
    let file = tmp.path().join("twice.json");
    std::fs::write(&file, doc.to_string()).expect("write");
    let (report, dir) = calibrate(&tmp.path().join("a"), &file, &[]);
    assert_eq!(channel(&dir), common_rows("3"));
    assert!(
        flat(&report).contains("1 messages whose id an earlier one has (read once)"),
        "{report}"
    );
}

/// Issue 47: a Slack export as Slack delivers it (a .zip of the workspace
/// folder) and a gzipped Discord export were refused as "not JSON"; a
/// UTF-8 byte order mark read as an empty export. Each now reads as the
/// plain export does.
#[test]
fn zipped_gzipped_and_bom_exports_read_as_the_plain_ones() {
    use std::io::Write;
    let tmp = tempfile::tempdir().expect("tmp");
    let t = tmp.path();
    // The Slack fixture zipped under a top folder, as Slack names it.
    let zip_path = t.join("Example Slack export Mar 1 2024.zip");
    {
        let f = std::fs::File::create(&zip_path).expect("create");
        let mut z = zip::ZipWriter::new(f);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let root = data("slack");
        for rel in [
            "channels.json",
            "users.json",
            "general/2024-03-01.json",
            "general/2024-03-02.json",
            "random/2024-03-01.json",
        ] {
            z.start_file(format!("Example/{rel}"), opts).expect("entry");
            z.write_all(&std::fs::read(root.join(rel)).expect("fixture"))
                .expect("write");
        }
        z.finish().expect("zip");
    }
    let (report, dir) = calibrate(&t.join("z"), &zip_path, &[]);
    assert_eq!(channel(&dir), common_rows("2"));
    assert!(
        report.contains("(Slack export, channel general)"),
        "{report}"
    );
    let (_, dir) = calibrate(&t.join("zr"), &zip_path, &["--channel", "random"]);
    assert!(channel(&dir).contains(&("unanswered_rate".into(), "1".into(), "1".into())));
    // users.json read from the zip: --humans by users.json's name works.
    let (_, by_name) = calibrate(&t.join("zh"), &zip_path, &["--bots", "Bob"]);
    let (_, by_id) = calibrate(&t.join("zi"), &data("slack"), &["--bots", "U0BOB"]);
    assert_eq!(channel(&by_name), channel(&by_id));
    // Discord gzipped (named .json.gz), and with a byte order mark.
    let plain = std::fs::read(data("discord/general.json")).expect("fixture");
    let gz = t.join("general.json.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("create"),
        flate2::Compression::default(),
    );
    e.write_all(&plain).expect("gzip");
    e.finish().expect("gzip");
    let (report, dir) = calibrate(&t.join("g"), &gz, &[]);
    assert_eq!(channel(&dir), common_rows("3"));
    assert!(
        report.contains("(Discord export, channel general)"),
        "{report}"
    );
    let bom = t.join("bom.json");
    std::fs::write(&bom, [b"\xef\xbb\xbf".as_slice(), &plain].concat()).expect("write");
    let (_, dir) = calibrate(&t.join("b"), &bom, &[]);
    assert_eq!(channel(&dir), common_rows("3"));
    // A zip that is not an export, and one with a symbolic link for a day
    // file: refused naming it.
    let bad = t.join("bad.zip");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&bad).expect("create"));
        let opts = zip::write::SimpleFileOptions::default();
        z.start_file("general/2024-03-01.json", opts)
            .expect("entry");
        z.write_all(b"[]").expect("write");
        z.add_symlink("general/2024-03-02.json", "/etc/passwd", opts)
            .expect("link");
        z.finish().expect("zip");
    }
    refused(
        t,
        &["calibrate", "--out", "o", "bad.zip"],
        &["bad.zip/general/2024-03-02.json: a symbolic link inside the zip"],
    );
    std::fs::write(t.join("junk.zip"), b"PK\x03\x04 not really").expect("write");
    refused(
        t,
        &["calibrate", "--out", "o", "junk.zip"],
        &["junk.zip: not a zip archive"],
    );
}

/// Issue 47: a day file that is a symbolic link was skipped (half the
/// questions, exit 0). Now one that leads inside the export is read, and
/// one that leads outside is refused naming it.
#[cfg(unix)]
#[test]
fn a_symlinked_day_file_is_read_inside_the_export_and_refused_outside() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = tmp.path();
    let copy = |to: &Path| {
        for rel in [
            "users.json",
            "general/2024-03-01.json",
            "general/2024-03-02.json",
        ] {
            let p = to.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::copy(data("slack").join(rel), p).expect("copy");
        }
    };
    // Inside: the day file kept elsewhere in the export, linked.
    let inside = t.join("inside");
    copy(&inside);
    std::fs::create_dir_all(inside.join("store")).expect("mkdir");
    std::fs::rename(
        inside.join("general/2024-03-02.json"),
        inside.join("store/day.json"),
    )
    .expect("move");
    std::os::unix::fs::symlink("../store/day.json", inside.join("general/2024-03-02.json"))
        .expect("link");
    let (_, dir) = calibrate(&t.join("a"), &inside, &[]);
    assert_eq!(channel(&dir), common_rows("2"));
    // Outside: refused, the link named.
    let outside = t.join("outside");
    copy(&outside);
    std::fs::rename(outside.join("general/2024-03-02.json"), t.join("day.json")).expect("move");
    std::os::unix::fs::symlink(t.join("day.json"), outside.join("general/2024-03-02.json"))
        .expect("link");
    refused(
        t,
        &["calibrate", "--out", "o", "outside"],
        &[
            "general/2024-03-02.json: a symbolic link to",
            "outside the export",
        ],
    );
    // A dangling link: refused too.
    std::fs::remove_file(t.join("day.json")).expect("rm");
    refused(
        t,
        &["calibrate", "--out", "o", "outside"],
        &["general/2024-03-02.json: a symbolic link that leads to no file"],
    );
}

/// The report's count of questions that @mention an agent.
fn mentions_line(report: &str) -> String {
    let f = flat(report);
    let at = f.find(" @mentions)").expect("the questions line");
    let start = f[..at].rfind(", ").expect("count");
    f[start + 2..at].to_string()
}

/// Issue 47: mentions in the platforms' own syntax were not read ("no
/// question mentions an agent" about channels where every one does). Now
/// Slack's `<@U…>`, Discord's `mentions` and `<@id>`/`<@!id>`, Matrix's
/// `m.mentions` and pills are read (the text dropped), matched to the
/// bots' ids, and the questions mention an agent.
#[test]
fn mentions_in_each_platform_s_syntax_are_read() {
    let tmp = tempfile::tempdir().expect("tmp");
    let t = tmp.path();
    // Slack: every human message mentions the helper bot.
    let slack = t.join("slack");
    for rel in [
        "users.json",
        "general/2024-03-01.json",
        "general/2024-03-02.json",
    ] {
        let p = slack.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(data("slack").join(rel)).expect("fixture"))
                .expect("json");
        if rel.starts_with("general") {
            for m in v.as_array_mut().expect("day") {
                if m.get("bot_id").is_none() {
                    m["text"] = "<@U0HELPER> how? cc <@U0NOBODY|x> <!here>".into();
                }
            }
        }
        std::fs::write(&p, v.to_string()).expect("write");
    }
    // Discord: one question by the array, the others in the text.
    let mut doc = discord_doc();
    let mut first = true;
    for m in doc["messages"].as_array_mut().expect("messages") {
        if m["author"]["isBot"] == false {
            if first {
                m["mentions"] = serde_json::json!([{"id": "200000000000000001", "name": "helper"}]);
                first = false;
            } else {
                m["content"] = "<@!200000000000000002> and <@200000000000000001> please".into();
            }
        }
    }
    let discord = t.join("discord.json");
    std::fs::write(&discord, doc.to_string()).expect("write");
    // Matrix: m.mentions on one question, a pill on the others.
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("matrix/general.json")).expect("fixture"),
    )
    .expect("json");
    let mut first = true;
    for e in doc["messages"].as_array_mut().expect("events") {
        if e["type"] == "m.room.message" && e["content"]["msgtype"] == "m.text" {
            if first {
                e["content"]["m.mentions"] =
                    serde_json::json!({"user_ids": ["@helper:example.org"]});
                first = false;
            } else {
                e["content"]["formatted_body"] =
                    "<a href=\"https://matrix.to/#/%40helper%3Aexample.org\">helper</a>: how?"
                        .into();
            }
        }
    }
    let matrix = t.join("matrix.json");
    std::fs::write(&matrix, doc.to_string()).expect("write");
    for (name, export) in [("s", &slack), ("d", &discord), ("m", &matrix)] {
        let plain = match name {
            "s" => data("slack"),
            "d" => data("discord/general.json"),
            _ => data("matrix/general.json"),
        };
        let before = calibrate_whatif(&t.join(format!("{name}0")), &plain);
        assert_eq!(mentions_line(&before), "0", "{before}");
        assert!(
            flat(&before).contains("no question mentions an agent"),
            "{before}"
        );
        let report = calibrate_whatif(&t.join(name), export);
        assert!(
            !flat(&report).contains("no question mentions an agent"),
            "{name}: {report}"
        );
        let m = mentions_line(&report);
        // All six questions (one of them open) mention an agent.
        assert_eq!(m, "6", "{name}: {report}");
        // No text is written.
        let all = all_text(&t.join(name).join("x"));
        assert!(!all.contains("how?") && !all.contains("please"), "{name}");
    }
}

/// Issue 47: an export's report said "read 15 frames" and "times from the
/// server's time stamps (ts)" for Discord's `timestamp`.
#[test]
fn an_export_s_report_says_messages_and_the_platform_s_time_field() {
    let tmp = tempfile::tempdir().expect("tmp");
    for (name, export, field) in [
        ("s", data("slack"), "each message's `ts` (Slack's seconds)"),
        (
            "d",
            data("discord/general.json"),
            "each message's `timestamp` (Discord's, ISO 8601)",
        ),
        (
            "m",
            data("matrix/general.json"),
            "each event's `origin_server_ts` (Matrix's ms)",
        ),
    ] {
        let (report, _) = calibrate(&tmp.path().join(name), &export, &[]);
        let f = flat(&report);
        let read = f.find("read ").map(|i| &f[i + 5..]).unwrap_or("");
        let n = read.split(' ').next().unwrap_or("");
        assert!(
            n.parse::<u32>().is_ok() && read[n.len()..].starts_with(" messages"),
            "{report}"
        );
        assert!(f.contains(&format!("times from {field}")), "{report}");
        assert!(!f.contains("frames"), "{report}");
        assert!(!f.contains("time stamps (ts)"), "{report}");
    }
}
