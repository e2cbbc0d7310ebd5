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
            r#"{"at_ms":7,"to":"agent-a","msg":{"type":"ERROR","code":"INVALID_MSG","message":"Missing or invalid started_at timestamp"}}"#,
        ]
    );
}

#[test]
fn the_operators_claim_takes_the_floor_and_dm_goes_to_one_agent() {
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
            // Humans always get the floor: the holder is displaced.
            r##"{"at_ms":1001,"to":"agent-a","msg":{"type":"YIELD","msg_id":"m1","winner":"operator","channel":"#general"}}"##.to_string(),
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

// ---------------------------------------------------------------------
// agentchat-0.36 as the real server behaves (issue 16): one test per
// divergence found by the differential test, each against the source
// (lib/floor-control.ts, lib/server.ts, lib/server/handlers/message.ts,
// lib/protocol.ts).

const AC: &str = "agentchat-0.36";

fn ev(at: u64, agent: &str, event: &str) -> String {
    format!(r#"{{"at_ms":{at},"agent":"{agent}","event":{event}}}"#)
}

fn claim_on(at: u64, agent: &str, channel: &str, msg: &str, started_at: &str) -> String {
    ev(
        at,
        agent,
        &format!(
            r#"{{"type":"RESPONDING_TO","msg_id":"{msg}","started_at":{started_at},"channel":"{channel}"}}"#
        ),
    )
}

fn msg_to(at: u64, agent: &str, to: &str, in_reply_to: &str) -> String {
    ev(
        at,
        agent,
        &format!(
            r#"{{"type":"MSG","to":"{to}","content":"answer","in_reply_to":"{in_reply_to}"}}"#
        ),
    )
}

fn fc_line(at: u64, to: &str, msg: &str, holder: &str, started_at: &str) -> String {
    format!(
        r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"FLOOR_CLAIMED","msg_id":"{msg}","channel":"#general","holder":"{holder}","started_at":{started_at}}}}}"##
    )
}

fn ac_yield(at: u64, to: &str, msg: &str, holder: &str, hs: &str, displaced: bool) -> String {
    let reason = if displaced {
        "Earlier started_at timestamp"
    } else {
        "Another agent claimed first"
    };
    format!(
        r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"YIELD","msg_id":"{msg}","channel":"#general","holder":"{holder}","holder_started_at":{hs},"reason":"{reason}"}}}}"##
    )
}

fn ac_error(at: u64, to: &str, code: &str, message: &str) -> String {
    format!(
        r#"{{"at_ms":{at},"to":"{to}","msg":{{"type":"ERROR","code":"{code}","message":"{message}"}}}}"#
    )
}

/// Divergence 1: a channel exists without members. Three agents join
/// #general and leave; a claim there is still tracked (the second one,
/// same started_at, gets a YIELD naming the claimant itself). A claim on a
/// channel that never existed is dropped silently; one that was created by
/// a JOIN and emptied is tracked. spec refuses non-members.
#[test]
fn agentchat_tracks_claims_on_an_existing_channel_without_members() {
    let mut events = vec![];
    for a in ["agent-a", "agent-b", "agent-c"] {
        events.push(ev(10, a, r##"{"type":"LEAVE","channel":"#general"}"##));
    }
    events.push(claim_on(1000, "agent-a", "#general", "m1", "500"));
    events.push(claim_on(1100, "agent-a", "#general", "m1", "500"));
    events.push(claim_on(1200, "agent-a", "#nowhere", "m2", "500"));
    events.push(claim_on(1300, "agent-a", "#nowhere", "m2", "500"));
    events.push(ev(
        1400,
        "agent-b",
        r##"{"type":"JOIN","channel":"#custom"}"##,
    ));
    events.push(ev(
        1400,
        "agent-b",
        r##"{"type":"LEAVE","channel":"#custom"}"##,
    ));
    events.push(claim_on(1500, "agent-a", "#custom", "m3", "500"));
    events.push(claim_on(1600, "agent-a", "#custom", "m3", "500"));
    let refs: Vec<&str> = events.iter().map(String::as_str).collect();
    let input = with_members(&["agent-a", "agent-b", "agent-c"], &refs);
    let r = policy(AC, &input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        lines(&r.stdout),
        [
            ac_yield(1100, "agent-a", "m1", "agent-a", "500", false),
            r##"{"at_ms":1600,"to":"agent-a","msg":{"type":"YIELD","msg_id":"m3","channel":"#custom","holder":"agent-a","holder_started_at":500,"reason":"Another agent claimed first"}}"##.to_string(),
        ]
    );
    let r = policy("spec", &input);
    assert_eq!(lines(&r.stdout).len(), 6, "{}", r.stdout);
    assert!(r.stdout.contains(r#""code":"not_member""#));
}

/// Divergence 2: started_at may be any non-zero number: floats, `1e3`
/// (broadcast as 1000), `1000.0`, 0.001, beyond i64. spec wants an integer.
#[test]
fn agentchat_accepts_any_nonzero_number_as_started_at() {
    let values = ["1500.5", "1e3", "1000.0", "0.001", "1e20", "-1e20"];
    let events: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| claim_on(1000 + i as u64, "agent-a", "#general", &format!("m{i}"), v))
        .collect();
    let refs: Vec<&str> = events.iter().map(String::as_str).collect();
    let input = with_members(&["agent-a", "agent-b"], &refs);
    let r = policy(AC, &input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // (JavaScript writes 1e20 with all its digits; herdsim's JSON writer
    // uses the exponent form: the same number.)
    let shown = ["1500.5", "1000", "1000", "0.001", "1e+20", "-1e+20"];
    let want: Vec<String> = shown
        .iter()
        .enumerate()
        .map(|(i, s)| fc_line(1000 + i as u64, "agent-b", &format!("m{i}"), "agent-a", s))
        .collect();
    assert_eq!(lines(&r.stdout), want);
    let r = policy("spec", &input);
    let errors = r
        .stdout
        .matches(r#""message":"`started_at` must be an integer""#)
        .count();
    // 1e3 and 1000.0 are the integer 1000 for spec too; the others are not integers.
    assert_eq!(errors, 4, "{}", r.stdout);
}

/// Divergence 3: compared as IEEE doubles, 2^53 + 1 and 2^53 tie, and the
/// smaller id takes the floor; spec orders them exactly. The real server
/// holds the double it parsed and echoes it: 2^53 + 1 comes back as 2^53
/// in FLOOR_CLAIMED and in the YIELD's `holder_started_at` (the last
/// difference found against a real server, in 7 309 floor messages).
#[test]
fn agentchat_compares_started_at_as_doubles() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &claim_on(1000, "agent-b", "#general", "m1", "9007199254740992"),
            &claim_on(1100, "agent-a", "#general", "m1", "9007199254740993"),
        ],
    );
    let r = policy(AC, &input);
    assert_eq!(
        lines(&r.stdout),
        [
            fc_line(1000, "agent-a", "m1", "agent-b", "9007199254740992"),
            fc_line(1100, "agent-b", "m1", "agent-a", "9007199254740992"),
            ac_yield(1100, "agent-b", "m1", "agent-a", "9007199254740992", true),
        ]
    );
    let r = policy("spec", &input);
    assert!(
        r.stdout
            .ends_with(&(yield_spec(1100, "agent-a", "agent-b") + "\n")),
        "{}",
        r.stdout
    );
}

/// Divergence 4: a channel that is a DM target or longer than 31
/// characters after `#` gets ERROR INVALID_MSG; 31 is fine.
#[test]
fn agentchat_invalid_channel_names_get_invalid_msg() {
    let long31 = format!("#{}", "c".repeat(31));
    let long32 = format!("#{}", "c".repeat(32));
    let join31 = ev(
        5,
        "agent-a",
        &format!(r#"{{"type":"JOIN","channel":"{long31}"}}"#),
    );
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &join31,
            &claim_on(1000, "agent-a", "@agent-b", "m1", "500"),
            &claim_on(1001, "agent-a", &long32, "m1", "500"),
            &claim_on(1002, "agent-b", &long31, "m1", "500"),
        ],
    );
    let r = policy(AC, &input);
    let bad = "Missing or invalid channel";
    assert_eq!(
        lines(&r.stdout),
        [
            ac_error(1000, "agent-a", "INVALID_MSG", bad),
            ac_error(1001, "agent-a", "INVALID_MSG", bad),
            format!(
                r#"{{"at_ms":1002,"to":"agent-a","msg":{{"type":"FLOOR_CLAIMED","msg_id":"m1","channel":"{long31}","holder":"agent-b","started_at":500}}}}"#
            ),
        ]
    );
    // spec: a DM claim is silently ignored, a long name is a channel (the
    // claimants are not members of it).
    let r = policy("spec", &input);
    assert!(!r.stdout.contains(r#""at_ms":1000"#), "{}", r.stdout);
    assert!(!r.stdout.contains("INVALID_MSG"), "{}", r.stdout);
    assert_eq!(r.stdout.matches("not_member").count(), 2, "{}", r.stdout);
}

/// Divergence 5: a MSG within the rate limit of the sender's previous MSG
/// is refused with RATE_LIMITED and releases nothing, so the claim survives
/// and the next claimant is denied. So do a lurking identity's MSG and a
/// non-member's. With the limit off (--rate-limit-ms 0) the claim is
/// released.
#[test]
fn agentchat_refused_msgs_release_nothing() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &msg_to(1000, "agent-a", "#general", "m0"),
            &claim_on(1100, "agent-a", "#general", "m1", "500"),
            &msg_to(1500, "agent-a", "#general", "m1"),
            &claim_on(1600, "agent-b", "#general", "m1", "600"),
        ],
    );
    let relayed = |at: u64, to: &str, from: &str, irt: &str, id: &str| {
        format!(
            r##"{{"at_ms":{at},"to":"{to}","msg":{{"type":"MSG","id":"{id}","from":"{from}","to":"#general","content":"answer","in_reply_to":"{irt}"}}}}"##
        )
    };
    let r = policy(AC, &input);
    assert_eq!(
        lines(&r.stdout),
        [
            relayed(1000, "agent-b", "agent-a", "m0", "s1"),
            fc_line(1100, "agent-b", "m1", "agent-a", "500"),
            ac_error(
                1500,
                "agent-a",
                "RATE_LIMITED",
                "Rate limit exceeded (max 1 message per second)"
            ),
            ac_yield(1600, "agent-b", "m1", "agent-a", "500", false),
        ]
    );
    let r = arbitrate(&["--policy", AC, "--rate-limit-ms", "0"], &[], &input);
    assert_eq!(
        lines(&r.stdout),
        [
            relayed(1000, "agent-b", "agent-a", "m0", "s1"),
            fc_line(1100, "agent-b", "m1", "agent-a", "500"),
            relayed(1500, "agent-b", "agent-a", "m1", "s2"),
            fc_line(1600, "agent-a", "m1", "agent-b", "600"),
        ]
    );
    // A lurking identity and a non-member: refused, nothing released.
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &ev(10, "agent-a", r#"{"type":"IDENTIFY","lurk":true}"#),
            &ev(10, "agent-c", r#"{"type":"IDENTIFY"}"#),
            &claim_on(1100, "agent-a", "#general", "m1", "500"),
            &claim_on(1100, "agent-c", "#general", "m2", "500"),
            &msg_to(1500, "agent-a", "#general", "m1"),
            &msg_to(1500, "agent-c", "#general", "m2"),
            &claim_on(1600, "agent-b", "#general", "m1", "600"),
            &claim_on(1600, "agent-b", "#general", "m2", "600"),
        ],
    );
    let r = policy(AC, &input);
    let out = lines(&r.stdout);
    assert_eq!(out.len(), 7, "{}", r.stdout);
    assert!(out[3].contains(r#""code":"LURK_MODE""#), "{}", out[3]);
    assert_eq!(
        out[4],
        ac_error(1500, "agent-c", "NOT_INVITED", "Not a member of #general")
    );
    assert_eq!(
        out[5],
        ac_yield(1600, "agent-b", "m1", "agent-a", "500", false)
    );
    assert_eq!(
        out[6],
        ac_yield(1600, "agent-b", "m2", "agent-c", "500", false)
    );
}

/// Divergence 6: DMs are disabled; spec relays them to the peer.
#[test]
fn agentchat_refuses_dms() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[&msg_to(1000, "agent-a", "@agent-b", "m1")],
    );
    let r = policy(AC, &input);
    assert_eq!(
        lines(&r.stdout),
        [ac_error(
            1000,
            "agent-a",
            "INVALID_MSG",
            "Direct messages are disabled"
        )]
    );
    let r = policy("spec", &input);
    assert!(
        r.stdout.contains(r#""to":"agent-b","msg":{"type":"MSG""#),
        "{}",
        r.stdout
    );
}

/// A claim from a connection that has not identified is dropped silently;
/// after IDENTIFY it is tracked. Its MSG gets AUTH_REQUIRED.
#[test]
fn agentchat_drops_claims_from_unidentified_connections() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &ev(10, "agent-c", r#"{"type":"CONNECT"}"#),
            &claim_on(1000, "agent-c", "#general", "m1", "500"),
            &msg_to(1001, "agent-c", "#general", "m1"),
            &ev(1002, "agent-c", r#"{"type":"IDENTIFY"}"#),
            &claim_on(1003, "agent-c", "#general", "m1", "500"),
        ],
    );
    let r = policy(AC, &input);
    assert_eq!(
        lines(&r.stdout),
        [
            ac_error(1001, "agent-c", "AUTH_REQUIRED", "Must IDENTIFY first"),
            fc_line(1003, "agent-a", "m1", "agent-c", "500"),
            fc_line(1003, "agent-b", "m1", "agent-c", "500"),
        ]
    );
}

/// The 5 s sweep runs at a phase (and drifts): TTL 3000, a claim at 1000
/// has deadline 4000. Phase 0: swept at 5000. Phase 4500: swept at 4500.
/// Drift 1000 us per sweep: the sweep after 0 comes at 5001.
#[test]
fn agentchat_sweep_phase_and_drift() {
    let input = |at: u64| {
        with_members(
            &["agent-a", "agent-b"],
            &[
                &claim_on(1000, "agent-a", "#general", "m1", "500"),
                &claim_on(at, "agent-b", "#general", "m1", "600"),
            ],
        )
    };
    let granted = |args: &[&str], at: u64| {
        let mut all = vec!["--policy", AC, "--ttl-ms", "3000"];
        all.extend_from_slice(args);
        let r = arbitrate(&all, &[], &input(at));
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        !r.stdout.contains("YIELD")
    };
    assert!(!granted(&[], 4999));
    assert!(granted(&[], 5000));
    assert!(!granted(&["--sweep-phase-ms", "4500"], 4499));
    assert!(granted(&["--sweep-phase-ms", "4500"], 4500));
    assert!(!granted(&["--sweep-drift-us", "1000"], 5000));
    assert!(granted(&["--sweep-drift-us", "1000"], 5001));
    let r = arbitrate(&["--policy", AC, "--sweep-phase-ms", "5000"], &[], "");
    assert_eq!(r.code, Some(2));
}

/// AGENTCHAT_CLAIM_TTL_MS is read as the server's parseInt: "0" is a TTL
/// of 0 (expired at the next sweep), a non-number never expires, trailing
/// text is ignored.
#[test]
fn agentchat_reads_its_ttl_variable_leniently() {
    let input = with_members(
        &["agent-a", "agent-b"],
        &[
            &claim_on(1000, "agent-a", "#general", "m1", "500"),
            &claim_on(5000, "agent-b", "#general", "m1", "600"),
            &claim_on(900_000, "agent-b", "#general", "m2", "600"),
            &claim_on(900_001, "agent-a", "#general", "m2", "700"),
        ],
    );
    let yields = |ttl: &str| {
        let r = arbitrate(
            &["--policy", AC],
            &[("AGENTCHAT_CLAIM_TTL_MS", ttl)],
            &input,
        );
        assert_eq!(r.code, Some(0), "{ttl}: {}", r.stderr);
        r.stdout.matches("YIELD").count()
    };
    assert_eq!(yields("0"), 1); // m1 swept at 5000, m2 contested at once
    assert_eq!(yields("3000abc"), 1); // 3000
    assert_eq!(yields("soon"), 2); // never expires: m1 still held at 5000
    assert_eq!(yields("-5"), 1);
}

/// `--claim-guard relayed` replays a transcript as `herdsim serve` decides
/// (a claim for a message the server never relayed is refused with an
/// ERROR and not relayed); the default, `off`, replays the policy as
/// written (the same claim is relayed). A claim that follows its message
/// is relayed either way, and a name clap does not know is bad input.
#[test]
fn the_claim_guard_refuses_a_claim_for_a_message_never_relayed_only_when_asked() {
    let input = with_members(
        &["a", "b"],
        &[
            r##"{"at_ms":5,"agent":"a","event":{"type":"RESPONDING_TO","msg_id":"m1","started_at":5,"channel":"#general"}}"##,
            r##"{"at_ms":10,"agent":"b","event":{"type":"MSG","id":"m2","to":"#general","content":"q?"}}"##,
            r##"{"at_ms":20,"agent":"a","event":{"type":"RESPONDING_TO","msg_id":"m2","started_at":20,"channel":"#general"}}"##,
        ],
    );
    let relayed_m1 = r##"{"at_ms":5,"to":"b","msg":{"type":"RESPONDING_TO","msg_id":"m1","from":"a","started_at":5,"channel":"#general"}}"##;
    let refused_m1 = r##"{"at_ms":5,"to":"a","msg":{"type":"ERROR","code":"not_relayed","message":"no message `m1` was relayed in #general (a claim must follow the message)"}}"##;
    let relayed_m2 = r##"{"at_ms":20,"to":"b","msg":{"type":"RESPONDING_TO","msg_id":"m2","from":"a","started_at":20,"channel":"#general"}}"##;

    for args in [&[][..], &["--claim-guard", "off"][..]] {
        let r = arbitrate(args, &[], &input);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        let out = lines(&r.stdout);
        assert_eq!(out.first(), Some(&relayed_m1), "{args:?}");
        assert_eq!(out.last(), Some(&relayed_m2), "{args:?}");
    }
    let r = arbitrate(&["--claim-guard", "relayed"], &[], &input);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = lines(&r.stdout);
    assert_eq!(out.first(), Some(&refused_m1));
    assert!(!r.stdout.contains(relayed_m1));
    assert_eq!(out.last(), Some(&relayed_m2));

    let r = arbitrate(&["--claim-guard", "clock"], &[], &input);
    assert_eq!(r.code, Some(2));
    assert!(r.stdout.is_empty());
    assert!(r.stderr.contains("--claim-guard"), "{}", r.stderr);
}
