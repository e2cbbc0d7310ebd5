//! Bad input, table-driven: every malformed file, value or flag exits with
//! status 2 and one message that names the file (or flag), the key and,
//! for files, the line:column; nothing is written.

use assert_cmd::Command;

struct Case {
    /// What is wrong.
    what: &'static str,
    /// Scenario text written to `bad.toml` in a fresh folder; `None` runs
    /// the fixture `tests/data/scenarios/sweep.toml`.
    toml: Option<&'static str>,
    /// Extra files beside `bad.toml`.
    files: &'static [(&'static str, &'static str)],
    /// Extra arguments after the scenario.
    args: &'static [&'static str],
    /// Must appear in the message: the key (and where it is).
    expect: &'static [&'static str],
    /// Also check `herdsim validate` (not for `run`-only flags).
    validate: bool,
}

const FIXTURE: &str = "tests/data/scenarios/sweep.toml";

const fn file(what: &'static str, toml: &'static str, expect: &'static [&'static str]) -> Case {
    Case {
        what,
        toml: Some(toml),
        files: &[],
        args: &[],
        expect,
        validate: true,
    }
}

const fn flag(
    what: &'static str,
    args: &'static [&'static str],
    expect: &'static [&'static str],
) -> Case {
    Case {
        what,
        toml: None,
        files: &[],
        args,
        expect,
        validate: true,
    }
}

const CASES: &[Case] = &[
    file(
        "TOML syntax error",
        "reps = 2\n[network\nbase_ms = 3\n",
        &["bad.toml:2:9", "key `network`", "unclosed table"],
    ),
    file(
        "syntax error in a value",
        "reps = 2\n[server]\nttl_ms = 45 000\n",
        &["bad.toml:3:", "key `server.ttl_ms`"],
    ),
    file(
        "unknown top-level key",
        "reps = 2\nrepz = 3\n",
        &["bad.toml:2:1", "key `repz`", "unknown field"],
    ),
    file(
        "unknown nested key",
        "reps = 2\n[network]\nbse_ms = 3\n",
        &["bad.toml:3:1", "key `network.bse_ms`"],
    ),
    file(
        "unknown key in an [[agents]] entry",
        "[[agents]]\ncount = 3\n\n[[agents]]\ncount = 2\nrespond = 0.5\n",
        &["bad.toml:6:1", "key `agents.1.respond`"],
    ),
    file(
        "unknown key in an inline distribution table",
        "[[agents]]\ncsma = { kind = \"uniform\", min_ms = 1, maxms = 3 }\n",
        &["bad.toml:2:40", "key `agents.0.csma.maxms`"],
    ),
    file(
        "unknown key in a distribution table",
        "[[agents]]\ncount = 2\n[agents.inference]\nkind = \"lognormal\"\np50_ms = 4000\np90_ms = 9000\n",
        &["bad.toml:6:1", "key `agents.0.inference.p90_ms`"],
    ),
    file(
        "unknown distribution kind",
        "[network]\njitter = { kind = \"gamma\", mean_ms = 3 }\n",
        &[
            "bad.toml:2:19",
            "key `network.jitter.kind`",
            "unknown variant `gamma`",
        ],
    ),
    file(
        "distribution without kind",
        "[network]\njitter = { mean_ms = 3 }\n",
        &["bad.toml:2:10", "key `network.jitter`", "kind"],
    ),
    file(
        "missing distribution field",
        "[[agents]]\ncsma = { kind = \"uniform\", min_ms = 5000 }\n",
        &[
            "bad.toml:2:8",
            "key `agents.0.csma`",
            "missing field `max_ms`",
        ],
    ),
    file(
        "wrong type",
        "reps = \"two\"\n",
        &["bad.toml:1:8", "key `reps`", "invalid type"],
    ),
    file(
        "wrong type, nested",
        "[server]\nenabled = 1\n",
        &["bad.toml:2:11", "key `server.enabled`"],
    ),
    file(
        "wrong type inside a distribution",
        "[[agents]]\ncsma = { kind = \"uniform\", min_ms = \"x\", max_ms = 3 }\n",
        &["bad.toml:2:37", "key `agents.0.csma.min_ms`"],
    ),
    file(
        "negative count",
        "[[agents]]\ncount = -3\n",
        &["bad.toml:2:9", "key `agents.0.count`"],
    ),
    file(
        "negative duration",
        "[network]\nbase_ms = -4\n",
        &["bad.toml:2:1", "key `network.base_ms`", "-4"],
    ),
    file(
        "NaN duration",
        "[server]\nttl_ms = nan\n",
        &["bad.toml:2:1", "key `server.ttl_ms`", "NaN"],
    ),
    file(
        "negative rate limit",
        "[server]\nrate_limit_ms = -1000\n",
        &["bad.toml:2:1", "key `server.rate_limit_ms`", "-1000"],
    ),
    file(
        "sweep phase out of range",
        "[server]\nsweep_phase_ms = 5000\n",
        &["bad.toml:2:1", "key `server.sweep_phase_ms`", "[0, 5000)"],
    ),
    file(
        "sweep phase neither a number nor random",
        "policies = [\"agentchat-0.36\"]\n[server]\nsweep_phase_ms = \"sometimes\"\n",
        &["bad.toml:3:1", "key `server.sweep_phase_ms`", "sometimes"],
    ),
    file(
        "channel name too long for agentchat-0.36",
        "policies = [\"agentchat-0.36\"]\n[workload]\nchannel = \"#abcdefghijabcdefghijabcdefghijab\"\n",
        &["bad.toml:3:1", "key `workload.channel`", "31 characters"],
    ),
    file(
        "claim guard neither off, relayed nor clock",
        "[server]\nclaim_guard = \"sometimes\"\n",
        &["bad.toml:2:", "sometimes", "relayed"],
    ),
    file(
        "squatter pre-claiming too many ids",
        "[[agents]]\nsquatter = true\nsquat_ahead = 101\n",
        &["bad.toml:3:1", "key `agents.0.squat_ahead`", "at most 100"],
    ),
    file(
        "negative claim skew",
        "[server]\nclaim_skew_ms = -1\n",
        &["bad.toml:2:1", "key `server.claim_skew_ms`", "-1"],
    ),
    file(
        "negative sweep drift",
        "[server]\nsweep_drift_ms = -0.5\n",
        &["bad.toml:2:1", "key `server.sweep_drift_ms`", "-0.5"],
    ),
    file(
        "negative distribution parameter",
        "[network]\njitter = { kind = \"exponential\", mean_ms = -1 }\n",
        &["bad.toml:2:34", "key `network.jitter.mean_ms`"],
    ),
    file(
        "uniform min > max",
        "[[agents]]\ncsma = { kind = \"uniform\", min_ms = 5000, max_ms = 1000 }\n",
        &["bad.toml:2:43", "key `agents.0.csma.max_ms`", "min_ms"],
    ),
    file(
        "lognormal p99 < p50",
        "[[agents]]\ninference = { kind = \"lognormal\", p50_ms = 5000, p99_ms = 1000 }\n",
        &["bad.toml:2:50", "key `agents.0.inference.p99_ms`", "p50_ms"],
    ),
    file(
        "probability above 1",
        "[[agents]]\ncount = 2\nrespond_p = 1.5\n",
        &["bad.toml:3:1", "key `agents.0.respond_p`", "0..1"],
    ),
    file(
        "negative probability",
        "[network]\nloss_p = -0.1\n",
        &["bad.toml:2:1", "key `network.loss_p`", "0..1"],
    ),
    file(
        "crash_p + hang_p above 1",
        "[[agents]]\ncrash_p = 0.6\nhang_p = 0.6\n",
        &["bad.toml:3:1", "key `agents.0.hang_p`"],
    ),
    file(
        "zero agents",
        "[[agents]]\ncount = 0\n",
        &["bad.toml:2:1", "key `agents.0.count`", "zero agents"],
    ),
    file("zero reps", "reps = 0\n", &["bad.toml:1:1", "key `reps`"]),
    file(
        "zero messages",
        "[workload]\ncount = 0\n",
        &["bad.toml:2:1", "key `workload.count`"],
    ),
    Case {
        what: "missing empirical CSV",
        toml: Some("[[agents]]\ninference = { kind = \"empirical\", path = \"nope.csv\" }\n"),
        files: &[],
        args: &[],
        expect: &["bad.toml:2:35", "key `agents.0.inference.path`", "nope.csv"],
        validate: true,
    },
    Case {
        what: "empty empirical CSV",
        toml: Some("[[agents]]\ninference = { kind = \"empirical\", path = \"empty.csv\" }\n"),
        files: &[("empty.csv", "# nothing measured\n")],
        args: &[],
        expect: &["bad.toml:2:35", "key `agents.0.inference.path`", "no data"],
        validate: true,
    },
    Case {
        what: "empirical CSV with a bad value",
        toml: Some("[network]\njitter = { kind = \"empirical\", path = \"j.csv\" }\n"),
        files: &[("j.csv", "12\n-3\n")],
        args: &[],
        expect: &["bad.toml:2:32", "key `network.jitter.path`", "line 2"],
        validate: true,
    },
    file(
        "unknown policy",
        "policies = [\"spec\", \"nope\"]\n",
        &["bad.toml:1:21", "key `policies.1`", "nope"],
    ),
    file(
        "policy listed twice",
        "policies = [\"spec\", \"spec\"]\n",
        &["bad.toml:1:21", "key `policies.1`"],
    ),
    file(
        "bad channel name",
        "[workload]\nchannel = \"general\"\n",
        &["bad.toml:2:1", "key `workload.channel`"],
    ),
    file(
        "bad channel name in a group",
        "[[agents]]\nchannels = [\"#ok\", \"no space\"]\n",
        &["bad.toml:2:20", "key `agents.0.channels.1`"],
    ),
    file(
        "sweep over an unknown key",
        "[sweep]\n\"server.ttl\" = [1, 2]\n",
        &["bad.toml:2:1", "key `sweep.server.ttl`", "unknown field"],
    ),
    file(
        "sweep over a key of a missing group",
        "[sweep]\n\"agents.3.count\" = [1, 2]\n",
        &["bad.toml:2:1", "key `sweep.agents.3.count`", "out of range"],
    ),
    file(
        "sweep over the replications",
        "[sweep]\nreps = [1, 2]\n",
        &["bad.toml:2:1", "key `sweep.reps`"],
    ),
    file(
        "sweep with no values",
        "[sweep]\n\"server.ttl_ms\" = []\n",
        &["bad.toml:2:1", "key `sweep.server.ttl_ms`", "no values"],
    ),
    file(
        "sweep range with a zero step",
        "[sweep.server]\nttl_ms = { from = 1000, to = 2000, step = 0 }\n",
        &["bad.toml:2:1", "key `sweep.server.ttl_ms`", "step"],
    ),
    file(
        "sweep value out of range",
        "[sweep]\n\"agents.0.respond_p\" = [0.5, 2.0]\n",
        &[
            "bad.toml:2:1",
            "key `sweep.agents.0.respond_p`",
            "sweep value 2",
        ],
    ),
    file(
        "sweep value of the wrong type",
        "[sweep]\n\"server.ttl_ms\" = [1000, \"long\"]\n",
        &[
            "bad.toml:2:1",
            "key `sweep.server.ttl_ms`",
            "sweep value long",
        ],
    ),
    flag(
        "--set of a sweep axis overlapping another",
        &[
            "--set",
            "sweep.agents.0.csma=[{ kind = \"fixed\", ms = 1 }]",
        ],
        &[
            "--set sweep.agents.0.csma=",
            "key `sweep.agents.0.csma`",
            "overlaps",
        ],
    ),
    file(
        "two sweep axes on one value",
        "[sweep]\n\"agents.count\" = [1, 2]\n\"agents.0.count\" = [3, 4]\n",
        &["bad.toml:3:1", "key `sweep.agents.0.count`", "overlaps"],
    ),
    flag(
        "--set without =",
        &["--set", "server.ttl_ms"],
        &["--set server.ttl_ms:", "KEY=VALUE"],
    ),
    flag(
        "--set of an unknown key",
        &["--set", "server.tll_ms=3"],
        &[
            "--set server.tll_ms=3",
            "key `server.tll_ms`",
            "unknown field",
        ],
    ),
    flag(
        "--set of a bad value",
        &["--set", "network.base_ms=fast"],
        &[
            "--set network.base_ms=fast",
            "key `network.base_ms`",
            "invalid type",
        ],
    ),
    flag(
        "--set of an out-of-range value",
        &["--set", "agents.0.respond_p=1.5"],
        &["--set agents.0.respond_p=1.5", "key `agents.0.respond_p`"],
    ),
    flag(
        "--set of a bad sweep axis",
        &["--set", "sweep.server.ttl_ms=5"],
        &["--set sweep.server.ttl_ms=5", "key `sweep.server.ttl_ms`"],
    ),
    flag(
        "--set inside a swept value",
        &[
            "--set",
            "sweep.network.jitter=[{ kind = \"exponential\", mean_ms = 5 }]",
            "--set",
            "network.jitter.mean_ms=2",
        ],
        &[
            "--set network.jitter.mean_ms=2",
            "key `network.jitter.mean_ms`",
            "sweep.network.jitter",
        ],
    ),
    flag("--reps 0", &["--reps", "0"], &["--reps 0", "key `reps`"]),
    Case {
        what: "more runs than one invocation holds",
        toml: None,
        files: &[],
        args: &["--reps", "4000000000"],
        expect: &["--reps 4000000000", "key `reps`", "--shard"],
        validate: false,
    },
    Case {
        what: "bad --shard",
        toml: None,
        files: &[],
        args: &["--shard", "3/3"],
        expect: &["--shard", "3/3"],
        validate: false,
    },
    Case {
        what: "--jobs 0",
        toml: None,
        files: &[],
        args: &["--jobs", "0"],
        expect: &["--jobs"],
        validate: false,
    },
    Case {
        what: "unknown --trace-policy",
        toml: None,
        files: &[],
        args: &["--trace-policy", "nope"],
        expect: &["--trace-policy", "nope"],
        validate: false,
    },
];

/// Run one case; the error says what was wrong.
fn check(case: &Case, subcommand: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let scenario = match case.toml {
        Some(text) => {
            let p = dir.path().join("bad.toml");
            std::fs::write(&p, text).map_err(|e| e.to_string())?;
            for (name, content) in case.files {
                std::fs::write(dir.path().join(name), content).map_err(|e| e.to_string())?;
            }
            p
        }
        None => std::path::PathBuf::from(FIXTURE),
    };
    let out = dir.path().join("out");
    let mut cmd = Command::cargo_bin("herdsim").map_err(|e| e.to_string())?;
    cmd.arg(subcommand).arg(&scenario).args(case.args);
    if subcommand == "run" {
        cmd.args(["--quiet", "--out"]).arg(&out);
    }
    let output = cmd.output().map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let fail = |why: String| {
        Err(format!(
            "{subcommand}, {}: {why}; stderr:\n{stderr}",
            case.what
        ))
    };
    if output.status.code() != Some(2) {
        return fail(format!("exit status {:?}", output.status.code()));
    }
    if stderr.matches("error:").count() != 1 {
        return fail("not exactly one message".into());
    }
    if case.toml.is_some() && !stderr.contains("bad.toml") {
        return fail("the file is not named".into());
    }
    for e in case.expect {
        if !stderr.contains(e) {
            return fail(format!("`{e}` missing"));
        }
    }
    if stderr.contains("panicked") {
        return fail("panic".into());
    }
    if !output.stdout.is_empty() {
        return fail("output on stdout".into());
    }
    if out.exists() {
        return fail("a results folder was created".into());
    }
    Ok(())
}

#[test]
fn every_bad_input_exits_2_naming_the_key() {
    assert!(CASES.len() >= 20);
    let mut failures = Vec::new();
    for case in CASES {
        let mut subcommands = vec!["run"];
        if case.validate {
            subcommands.push("validate");
        }
        for sub in subcommands {
            if let Err(e) = check(case, sub) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn missing_and_unreadable_scenario_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = Command::cargo_bin("herdsim")
        .expect("binary")
        .args(["validate", "no/such/file.toml"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        stderr.contains("no/such/file.toml") && stderr.contains("cannot read"),
        "{stderr}"
    );
    let p = dir.path().join("latin1.toml");
    std::fs::write(&p, b"reps = 2\nname = \"caf\xe9\"\n").expect("write");
    let a = Command::cargo_bin("herdsim")
        .expect("binary")
        .arg("validate")
        .arg(&p)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        stderr.contains("latin1.toml:2:") && stderr.contains("UTF-8"),
        "{stderr}"
    );
}

/// Errors found by the argument parser read like every other error: one
/// line starting `herdsim: error: `, exit 2, nothing on stdout, no usage
/// block.
#[test]
fn argument_parser_errors_are_one_prefixed_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--shard", "4/4"], "--shard"),
        (&["arbitrate", "--policy", "bogus"], "bogus"),
        (&["run", "--fresh", "--resume"], "--fresh"),
        (&["run", "--bogus"], "--bogus"),
        (&["tune", "--grid", "x"], "--grid"),
        (&["frob"], "frob"),
        (&[], "no subcommand"),
        (&["plot"], "RESULTS_DIR_OR_CSV"),
        // Every subcommand is named: the hint points to its own --help,
        // and the list of subcommands includes it.
        (&["serve", "--bogus"], "`herdsim serve --help`"),
        (&[], "tune, serve"),
    ];
    for (args, needle) in cases {
        let out = Command::cargo_bin("herdsim")
            .expect("binary")
            .args(*args)
            .write_stdin("")
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("herdsim: error: "), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("Usage:"), "{args:?}: {err}");
    }
}
