//! `herdsim calibrate` on chat exports (issue 42, docs/exports.md): the
//! fixtures in tests/data/exports (one channel in Slack's, Discord's and
//! Matrix's shapes: threads, edits, deleted messages, joins, a bot-to-bot
//! chain, a question nobody answered) measured exactly; texts never
//! written; authors hashed on request; bad exports refused naming the
//! file and line:col, leaving nothing behind.

mod common;

use common::refused;
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
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        out.join("x"),
    )
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
