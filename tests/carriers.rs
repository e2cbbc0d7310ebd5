//! The carriers and the platforms (docs/carriers.md) against their closed
//! forms. Two agents that both want every question, fixed 40 ms links,
//! no clock skew, CSMA uniform over 2000..8000 ms (T = 6000 ms), questions
//! 20 s apart (they never overlap): what separates the carriers is how
//! long one agent's signal takes to reach the other.

mod common;

use common::{get, refused, run};
use herdsim::floor::PolicyKind;

/// Two-sided false-failure probability 1e-4 under the normal approximation.
const Z_1E4: f64 = 3.89;

/// Questions in the statistical tests.
const N: u32 = 20_000;

fn scenario(carrier: &str, agents: &str) -> String {
    format!(
        r#"
[network]
base_ms = 40
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = 2
respond_p = 1
clock_skew = {{ kind = "fixed", ms = 0 }}
inference = {{ kind = "fixed", ms = 1000 }}
{agents}
[workload]
count = {N}
arrivals = "fixed"
mean_gap_ms = 20000
[carrier]
{carrier}
"#
    )
}

/// P(|U1 - U2| < w) for two uniform draws over T = 6000 ms: both agents
/// start when the second one's wait ends less than `w` after the first's.
fn both_start(w: f64) -> f64 {
    1.0 - (1.0 - w / 6000.0).powi(2)
}

fn within(got: f64, p: f64, what: &str) {
    let tol = Z_1E4 * (p * (1.0 - p) / f64::from(N)).sqrt();
    assert!(
        (got - p).abs() <= tol,
        "{what}: {got} not within {tol} of {p}"
    );
}

/// A reaction and a typing indicator exclude nobody: the second agent
/// answers too when its wait ends before the first one's signal reached
/// it (up 40 + down 40 = 80 ms), P = 1 - (1 - 80/6000)^2 = 0.02649. With
/// no claim it answers unless it saw the first one's answer (80 ms + the
/// 1000 ms inference): P = 1 - (1 - 1080/6000)^2 = 0.3276. A floor server
/// (and the replica of one) leaves no duplicate at all.
#[test]
fn a_reaction_or_typing_claim_leaves_the_race_of_one_delivery() {
    let cases = [
        ("reaction", both_start(80.0)),
        ("typing", both_start(80.0)),
        ("none", both_start(1080.0)),
        ("server", 0.0),
        ("replica", 0.0),
    ];
    for (kind, p) in cases {
        for platform in ["matrix", "discord"] {
            let toml = scenario(&format!("kind = \"{kind}\"\nplatform = \"{platform}\""), "");
            let r = run(&toml, PolicyKind::Spec, 3);
            assert_eq!(get(&r, "messages"), f64::from(N), "{kind} {platform}");
            assert_eq!(get(&r, "unanswered_rate"), 0.0, "{kind} {platform}");
            let dup = get(&r, "duplicate_rate");
            if p == 0.0 {
                assert_eq!(dup, 0.0, "{kind} {platform}");
            } else {
                within(dup, p, &format!("{kind} on {platform}"));
            }
        }
    }
}

/// On Slack a bot cannot send a typing indicator: the typing "claim" is
/// no claim (the same run as `none`, draw for draw). On Telegram a bot
/// sees no other bot's message, reaction or typing: every carrier on the
/// platform is no claim at all, and even an answer stops nobody (each
/// agent answers every question), but a floor server beside the
/// platform still arbitrates.
#[test]
fn what_a_platform_hides_is_no_claim() {
    let slack = |kind: &str| {
        let toml = scenario(&format!("kind = \"{kind}\"\nplatform = \"slack\""), "");
        run(&toml, PolicyKind::Spec, 5)
    };
    let (typing, none) = (slack("typing"), slack("none"));
    for m in ["duplicate_rate", "responses_per_msg", "ttfr_p95_ms"] {
        assert_eq!(get(&typing, m), get(&none, m), "slack typing = none: {m}");
    }
    for kind in ["replica", "reaction", "typing", "none"] {
        let toml = scenario(&format!("kind = \"{kind}\"\nplatform = \"telegram\""), "");
        let r = run(&toml, PolicyKind::Spec, 5);
        assert_eq!(get(&r, "responses_per_msg"), 2.0, "telegram {kind}");
        assert_eq!(get(&r, "duplicate_rate"), 1.0, "telegram {kind}");
    }
    let toml = scenario("kind = \"server\"\nplatform = \"telegram\"", "");
    let r = run(&toml, PolicyKind::Spec, 5);
    assert_eq!(
        get(&r, "duplicate_rate"),
        0.0,
        "a floor server beside Telegram"
    );
}

/// A typing indicator expires: one agent hangs in every inference
/// (agent-000), the other never does. On Discord a hung agent's
/// indicator shows 10 s after its last refresh (its start), longer than
/// any gap between the two waits (under 6 s): when the hung agent starts
/// first and its indicator reached the other (80 ms) before the other's
/// wait ended, the other skips and the question goes unanswered:
/// P = 1/2 (1 - 80/6000)^2 = 0.4868. Otherwise the healthy agent answers.
#[test]
fn a_hung_typer_holds_the_room_until_its_indicator_expires() {
    let toml = scenario(
        "kind = \"typing\"\nplatform = \"discord\"",
        "[[agents]]\ncount = 1\nrespond_p = 1\nhang_p = 1\nclock_skew = { kind = \"fixed\", ms = 0 }\ninference = { kind = \"fixed\", ms = 1000 }",
    );
    // One healthy agent (agent-000), then the hung one (agent-001).
    let toml = toml.replacen("count = 2", "count = 1", 1);
    let r = run(&toml, PolicyKind::Spec, 9);
    let p = 0.5 * (1.0 - 80.0 / 6000.0f64).powi(2);
    within(get(&r, "unanswered_rate"), p, "a hung typer on Discord");
}

/// A platform's send limit delays answers: one agent answers a question
/// every second at once (no CSMA wait, a 1 ms inference) on Matrix, whose
/// default `rc_message` lets 10 events through and then one every 5 s.
/// Answer k (from 0) wants to go 41 ms after its question; from k = 12 on
/// the limit holds it until 5000 k - 45000 ms after the first one wanted
/// to, so its time to first response is 4000 k - 45000 + 81 ms: 151 081
/// ms for the median (k = 49 of 100). With the limit lifted
/// (`message_rate_per_s = 0`, an admin's exemption) every answer takes
/// 40 + 1 + 40 = 81 ms.
#[test]
fn the_platforms_send_limit_delays_answers() {
    let toml = |extra: &str| {
        format!(
            r#"
[network]
base_ms = 40
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = 1
respond_p = 1
clock_skew = {{ kind = "fixed", ms = 0 }}
csma = {{ kind = "fixed", ms = 0 }}
inference = {{ kind = "fixed", ms = 1 }}
[workload]
count = 100
arrivals = "fixed"
mean_gap_ms = 1000
[carrier]
platform = "matrix"
{extra}
"#
        )
    };
    let limited = run(&toml(""), PolicyKind::Spec, 1);
    let p50 = get(&limited, "ttfr_p50_ms");
    assert!((p50 - 151_081.0).abs() <= 151.1, "limited p50 {p50}");
    let lifted = run(&toml("message_rate_per_s = 0"), PolicyKind::Spec, 1);
    for q in ["ttfr_p50_ms", "ttfr_p99_ms"] {
        let t = get(&lifted, q);
        assert!((t - 81.0).abs() <= 0.1, "lifted {q} {t}");
    }
}

/// Bad `[carrier]` input is refused with its key and place.
#[test]
fn bad_carrier_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("kind = \"typing\"", "carrier.kind", "needs a chat platform"),
        (
            "kind = \"replica\"",
            "carrier.kind",
            "needs a chat platform",
        ),
        ("kind = \"pigeon\"", "carrier.kind", "pigeon"),
        ("platform = \"irc\"", "carrier.platform", "irc"),
        (
            "platform = \"matrix\"\nmessage_rate_per_s = -1",
            "carrier.message_rate_per_s",
            "-1",
        ),
        (
            "platform = \"matrix\"\nmessage_burst = 0",
            "carrier.message_burst",
            "at least 1",
        ),
        (
            "platform = \"matrix\"\ntyping_timeout_ms = 200000",
            "carrier.typing_timeout_ms",
            "120000",
        ),
        ("colour = \"red\"", "carrier.colour", "colour"),
    ];
    for (i, (line, key, what)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&file, format!("[carrier]\n{line}\n")).expect("write");
        let name = format!("bad{i}.toml");
        // The key is on the case's last line (the file's line 1 + its lines).
        let at = format!(":{}:", 1 + line.lines().count());
        refused(dir.path(), &["validate", name.as_str()], &[key, what, &at]);
    }
    // `herdsim live` runs its agents on a floor server or a bridge to
    // replicas, not on a carrier nobody arbitrates.
    let file = dir.path().join("live.toml");
    let text = "[carrier]\nplatform = \"matrix\"\nkind = \"typing\"\n";
    std::fs::write(&file, text).expect("write");
    refused(
        dir.path(),
        &["live", "live.toml"],
        &["carrier.kind", "floor server", ":3:"],
    );
}
