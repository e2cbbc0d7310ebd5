//! `herdsim arbitrate` end to end: every policy on the README example, the
//! cases where policies disagree, bad lines, bad events, configuration.

use assert_cmd::Command;
use std::path::Path;

struct Run {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn arbitrate(args: &[&str], env: &[(&str, &str)], input: &str) -> Run {
    let mut cmd = Command::cargo_bin("herdsim").expect("binary builds");
    cmd.arg("arbitrate").args(args);
    for var in [
        "AGENTCHAT_RESPOND_TTL_MS",
        "AGENTCHAT_CLAIM_TTL_MS",
        "AGENTCHAT_RESPOND_ENABLED",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .write_stdin(input.as_bytes().to_vec())
        .output()
        .expect("runs");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

fn policy(p: &str, input: &str) -> Run {
    arbitrate(&["--policy", p], &[], input)
}

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/arbitrate")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Input lines: joins for the given agents in #general, then `events`.
fn with_members(agents: &[&str], events: &[&str]) -> String {
    let mut s = String::new();
    for a in agents {
        s.push_str(&format!(
            r##"{{"at_ms":0,"agent":"{a}","event":{{"type":"JOIN","channel":"#general"}}}}"##
        ));
        s.push('\n');
    }
    for e in events {
        s.push_str(e);
        s.push('\n');
    }
    s
}

fn claim(at: u64, agent: &str, started_at: i64) -> String {
    format!(
        r##"{{"at_ms":{at},"agent":"{agent}","event":{{"type":"RESPONDING_TO","msg_id":"m1","started_at":{started_at},"channel":"#general"}}}}"##
    )
}

fn reply(at: u64, agent: &str) -> String {
    format!(
        r##"{{"at_ms":{at},"agent":"{agent}","event":{{"type":"MSG","to":"#general","content":"answer","in_reply_to":"m1"}}}}"##
    )
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

fn yield_spec(at: u64, to: &str, winner: &str) -> String {
    format!(
        r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"YIELD","msg_id":"m1","winner":"{winner}","channel":"#general"}}}}"##
    )
}

fn relay(at: u64, to: &str, from: &str, started_at: i64) -> String {
    format!(
        r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"RESPONDING_TO","msg_id":"m1","from":"{from}","started_at":{started_at},"channel":"#general"}}}}"##
    )
}

#[test]
fn readme_example_under_every_policy() {
    let input = fixture("example.jsonl");
    for p in ["none", "spec", "agentchat-0.36", "tombstone", "server-time"] {
        let r = policy(p, &input);
        assert_eq!(r.code, Some(0), "{p}: {}", r.stderr);
        assert_eq!(r.stderr, "", "{p}");
        assert_eq!(r.stdout, fixture(&format!("example.{p}.out.jsonl")), "{p}");
    }
}

#[test]
fn spec_contest_relays_then_yields_the_loser() {
    let input = with_members(
        &["agent-a", "agent-b", "agent-c"],
        &[&claim(1000, "agent-b", 600), &claim(1100, "agent-a", 500)],
    );
    let r = policy("spec", &input);
    assert_eq!(r.code, Some(0));
    assert_eq!(
        lines(&r.stdout),
        [
            relay(1000, "agent-a", "agent-b", 600),
            relay(1000, "agent-c", "agent-b", 600),
            relay(1100, "agent-b", "agent-a", 500),
            relay(1100, "agent-c", "agent-a", 500),
            yield_spec(1100, "agent-b", "agent-a"),
        ]
    );
}

#[test]
fn none_relays_claims_and_never_yields() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[&claim(1000, "agent-b", 600), &claim(1100, "agent-a", 500)],
    );
    let r = policy("none", &input);
    assert_eq!(
        lines(&r.stdout),
        [
            relay(1000, "agent-a", "agent-b", 600),
            relay(1100, "agent-b", "agent-a", 500),
        ]
    );
}

/// agentchat-0.36 expires claims only at 5 s sweeps: a claim past its
/// deadline still wins until the next sweep; spec expires it exactly.
#[test]
fn expired_claim_before_the_sweep_spec_vs_agentchat() {
    // TTL 3000: agent-a's claim at 1000 has deadline 4000; the next sweep is at 5000.
    let input = with_members(
        &["agent-a", "agent-b", "agent-c"],
        &[
            &claim(1000, "agent-a", 500),
            &claim(4500, "agent-b", 900),
            &claim(5000, "agent-c", 950),
        ],
    );
    let r = arbitrate(
        &["--policy", "agentchat-0.36", "--ttl-ms", "3000"],
        &[],
        &input,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let fc = |at: u64, to: &str, holder: &str, s: i64| {
        format!(
            r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"FLOOR_CLAIMED","msg_id":"m1","channel":"#general","holder":"{holder}","started_at":{s}}}}}"##
        )
    };
    assert_eq!(
        lines(&r.stdout),
        [
            fc(1000, "agent-b", "agent-a", 500),
            fc(1000, "agent-c", "agent-a", 500),
            // 4500: agent-a's claim expired at 4000 but is not swept yet: denied.
            r##"{"at_ms":4500,"to":"agent-b","msg":{"type":"YIELD","msg_id":"m1","channel":"#general","holder":"agent-a","holder_started_at":500,"reason":"Another agent claimed first"}}"##.to_string(),
            // 5000: the sweep runs first, so agent-c gets the floor.
            fc(5000, "agent-a", "agent-c", 950),
            fc(5000, "agent-b", "agent-c", 950),
        ]
    );
    // spec: expired at 4000 exactly, so agent-b gets it at 4500, then agent-c
    // (later started_at) is denied.
    let r = arbitrate(&["--policy", "spec", "--ttl-ms", "3000"], &[], &input);
    assert_eq!(
        lines(&r.stdout),
        [
            relay(1000, "agent-b", "agent-a", 500),
            relay(1000, "agent-c", "agent-a", 500),
            relay(4500, "agent-a", "agent-b", 900),
            relay(4500, "agent-c", "agent-b", 900),
            relay(5000, "agent-a", "agent-c", 950),
            relay(5000, "agent-b", "agent-c", 950),
            yield_spec(5000, "agent-c", "agent-b"),
        ]
    );
}

/// A claim arriving just after the winner's MSG: spec grants it (the claim
/// was cleared), tombstone denies it (the message is answered).
#[test]
fn claim_just_after_the_winners_msg_spec_vs_tombstone() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &claim(1000, "agent-b", 600),
            &reply(6000, "agent-b"),
            &claim(6001, "agent-a", 500),
        ],
    );
    let msg = r##"{"at_ms":6000,"to":"agent-a","msg":{"type":"MSG","id":"s1","from":"agent-b","to":"#general","content":"answer","in_reply_to":"m1"}}"##;
    let common = [
        relay(1000, "agent-a", "agent-b", 600),
        msg.to_string(),
        relay(6001, "agent-b", "agent-a", 500),
    ];
    let r = policy("spec", &input);
    assert_eq!(lines(&r.stdout), common);
    let r = policy("tombstone", &input);
    let mut want = common.to_vec();
    want.push(yield_spec(6001, "agent-a", "agent-b"));
    assert_eq!(lines(&r.stdout), want);
}

/// agent-b's clock runs 500 ms fast: it claims first but reports a later
/// started_at than agent-a, who claims 100 ms later. spec trusts the
/// clocks (agent-a displaces agent-b); server-time orders by arrival
/// (agent-a is denied).
#[test]
fn skewed_clocks_spec_vs_server_time() {
    let epoch = 1_700_000_000_000i64;
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &claim(1000, "agent-b", epoch + 1000 + 500),
            &claim(1100, "agent-a", epoch + 1100),
        ],
    );
    let common = [
        relay(1000, "agent-a", "agent-b", epoch + 1500),
        relay(1100, "agent-b", "agent-a", epoch + 1100),
    ];
    let r = policy("spec", &input);
    let mut want = common.to_vec();
    want.push(yield_spec(1100, "agent-b", "agent-a"));
    assert_eq!(lines(&r.stdout), want);
    let r = policy("server-time", &input);
    let mut want = common.to_vec();
    want.push(yield_spec(1100, "agent-a", "agent-b"));
    assert_eq!(lines(&r.stdout), want);
}

#[test]
fn bad_lines_exit_2_with_line_numbers_and_processing_goes_on() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            "this is not json",
            &claim(1000, "agent-a", 500),
            r#"{"at_ms":900,"agent":"agent-b","event":{"type":"DISCONNECT"}}"#,
            r#"{"agent":"agent-b","event":{"type":"DISCONNECT"}}"#,
            &claim(1100, "agent-b", 600),
        ],
    );
    let r = policy("spec", &input);
    assert_eq!(r.code, Some(2));
    let err = lines(&r.stderr);
    assert_eq!(err.len(), 3, "{}", r.stderr);
    assert!(err[0].starts_with("line 3: not JSON"), "{}", err[0]);
    assert!(
        err[1].starts_with("line 5: `at_ms` 900 is before the previous line's 1000"),
        "{}",
        err[1]
    );
    assert_eq!(err[2], "line 6: missing field `at_ms`");
    assert_eq!(
        lines(&r.stdout),
        [
            relay(1000, "agent-b", "agent-a", 500),
            relay(1100, "agent-a", "agent-b", 600),
            yield_spec(1100, "agent-b", "agent-a"),
        ]
    );
}

#[test]
fn protocol_errors_go_to_the_sender_and_exit_0() {
    let input = with_members(
        &["agent-a"],
        &[
            r##"{"at_ms":5,"agent":"agent-a","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":"soon","channel":"#general"}}"##,
            r##"{"at_ms":6,"agent":"agent-z","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1,"channel":"#general"}}"##,
            r##"{"at_ms":7,"agent":"agent-a","event":{"type":"SHOUT"}}"##,
            r##"{"at_ms":8,"agent":"agent-a","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":-4,"channel":"#general"}}"##,
            r##"{"at_ms":9,"agent":"agent-a","event":{"type":"JOIN","channel":"general"}}"##,
            r##"{"at_ms":10,"agent":"agent-a","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1,"channel":"@agent-z"}}"##,
        ],
    );
    let r = policy("spec", &input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        lines(&r.stdout),
        [
            r#"{"at_ms":5,"to":"agent-a","msg":{"type":"ERROR","code":"bad_message","message":"`started_at` must be an integer"}}"#,
            r##"{"at_ms":6,"to":"agent-z","msg":{"type":"ERROR","code":"not_member","message":"not a member of #general"}}"##,
            r#"{"at_ms":7,"to":"agent-a","msg":{"type":"ERROR","code":"bad_message","message":"unknown type `SHOUT`"}}"#,
            r#"{"at_ms":8,"to":"agent-a","msg":{"type":"ERROR","code":"bad_started_at","message":"`started_at` must be a non-negative integer"}}"#,
            r#"{"at_ms":9,"to":"agent-a","msg":{"type":"ERROR","code":"bad_channel","message":"bad channel name `general`"}}"#,
        ]
    );
    // agentchat-0.36: a negative started_at and a non-member are accepted, 0 is not.
    let input = with_members(
        &["agent-a"],
        &[
            r##"{"at_ms":6,"agent":"agent-z","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":-4,"channel":"#general"}}"##,
            r##"{"at_ms":7,"agent":"agent-a","event":{"type":"RESPONDING_TO","msg_id":"m2","started_at":0,"channel":"#general"}}"##,
        ],
    );
    let r = policy("agentchat-0.36", &input);
    assert_eq!(
        lines(&r.stdout),
        [
            r##"{"at_ms":6,"to":"agent-a","msg":{"type":"FLOOR_CLAIMED","msg_id":"m1","channel":"#general","holder":"agent-z","started_at":-4}}"##,
            r#"{"at_ms":7,"to":"agent-a","msg":{"type":"ERROR","code":"bad_started_at","message":"`started_at` must be a non-zero number"}}"#,
        ]
    );
}

#[test]
fn operator_is_never_yielded_and_dm_goes_to_one_agent() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            r##"{"at_ms":0,"agent":"operator","role":"operator","event":{"type":"JOIN","channel":"#general"}}"##,
            &claim(1000, "agent-a", 500),
            r##"{"at_ms":1001,"agent":"operator","role":"operator","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":1,"channel":"#general"}}"##,
            r##"{"at_ms":1002,"agent":"operator","role":"operator","event":{"type":"MSG","to":"@agent-b","content":"psst"}}"##,
        ],
    );
    let r = policy("spec", &input);
    assert_eq!(
        lines(&r.stdout),
        [
            relay(1000, "agent-b", "agent-a", 500),
            relay(1000, "operator", "agent-a", 500),
            relay(1001, "agent-a", "operator", 1),
            relay(1001, "agent-b", "operator", 1),
            r#"{"at_ms":1002,"to":"agent-b","msg":{"type":"MSG","id":"s1","from":"operator","to":"@agent-b","content":"psst"}}"#.to_string(),
        ]
    );
}

#[test]
fn ttl_comes_from_the_policys_variable_unless_given() {
    // Claim at 1000; a second claim at 2500 is denied while the first is
    // live, granted once it expired (TTL 1000 => deadline 2000).
    let input = with_members(
        &["agent-a", "agent-b"],
        &[&claim(1000, "agent-a", 500), &claim(2500, "agent-b", 600)],
    );
    let yielded = |r: &Run| r.stdout.contains("YIELD");
    let spec = ["--policy", "spec"];
    assert!(yielded(&arbitrate(&spec, &[], &input)));
    assert!(!yielded(&arbitrate(
        &spec,
        &[("AGENTCHAT_RESPOND_TTL_MS", "1000")],
        &input
    )));
    // spec ignores agentchat's variable, agentchat-0.36 ignores the spec's.
    assert!(yielded(&arbitrate(
        &spec,
        &[("AGENTCHAT_CLAIM_TTL_MS", "1000")],
        &input
    )));
    let ac = ["--policy", "agentchat-0.36"];
    assert!(yielded(&arbitrate(
        &ac,
        &[("AGENTCHAT_RESPOND_TTL_MS", "1000")],
        &input
    )));
    // agentchat sweeps at 5000: claim again after it.
    let input_late = with_members(
        &["agent-a", "agent-b"],
        &[&claim(1000, "agent-a", 500), &claim(5000, "agent-b", 600)],
    );
    assert!(!yielded(&arbitrate(
        &ac,
        &[("AGENTCHAT_CLAIM_TTL_MS", "1000")],
        &input_late
    )));
    // --ttl-ms wins over the variable.
    let args = ["--policy", "spec", "--ttl-ms", "45000"];
    assert!(yielded(&arbitrate(
        &args,
        &[("AGENTCHAT_RESPOND_TTL_MS", "1000")],
        &input
    )));
    // Tracking off: relayed, never yielded.
    assert!(!yielded(&arbitrate(
        &spec,
        &[("AGENTCHAT_RESPOND_ENABLED", "false")],
        &input
    )));
}

#[test]
fn bad_configuration_exits_2() {
    let r = arbitrate(&[], &[("AGENTCHAT_RESPOND_TTL_MS", "soon")], "");
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr
            .contains("AGENTCHAT_RESPOND_TTL_MS=`soon` is invalid"),
        "{}",
        r.stderr
    );
    let r = arbitrate(&[], &[("AGENTCHAT_RESPOND_ENABLED", "perhaps")], "");
    assert_eq!(r.code, Some(2));
    assert_eq!(arbitrate(&["--ttl-ms", "0"], &[], "").code, Some(2));
    let r = arbitrate(&["--policy", "fastest"], &[], "");
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains("unknown policy `fastest`"),
        "{}",
        r.stderr
    );
}

#[test]
fn stats_flag_prints_counters() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[&claim(1000, "agent-a", 500), &claim(1100, "agent-b", 600)],
    );
    let r = arbitrate(&["--stats"], &[], &input);
    assert_eq!(
        r.stderr.trim(),
        r#"{"lines":4,"bad_lines":0,"claims_received":2,"yields":1,"expired":0,"overruled":0,"relayed":2}"#
    );
}
