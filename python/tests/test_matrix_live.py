"""`herdsim live --compare` and `herdsim observe` on a real Matrix room:
the scenario's agents (the simulator's own actors, run by `herdsim live` in
real time) on a real
Synapse through python/examples/matrix_bridge.py, each with its own replica
of the floor, then the same scenario simulated with the replica carrier on
Matrix (`[carrier] kind = "replica", platform = "matrix"`) and the measured
delays: the two must agree on duplicates, unanswered questions and the time
to first response (live's own tests, docs/live.md). Meanwhile `herdsim
observe` watches the room through the same bridge and calibrates a
scenario from what it saw (the agents' CSMA window and inference time).

Uses test_matrix.py's Synapse (skipped, or failed under
HERDSIM_MATRIX=required, as there) and the `herdsim` binary the README's
test command built (HERDSIM_BIN).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from procs import Proc
from test_matrix import START_S, Synapse, free_port, need
from test_matrix import synapse as synapse  # the module's Synapse fixture

SPEED = 10
AGENTS = 4

# The scenario's times are long against the room's delays (about 30 ms of
# real time each way on a loopback Synapse: 300 ms of scenario time at
# speed 10): live's time to first response includes the operator's two
# links, which the simulated one does not (docs/live.md), and --compare
# allows 10% for that.
SCENARIO = f"""\
name = "matrix-live"
seed = 3
reps = 3
policies = ["POLICY"]

[server]
ttl_ms = 45000

[[agents]]
count = {AGENTS}
respond_p = 1
csma = {{ kind = "uniform", min_ms = 4000, max_ms = 16000 }}
inference = {{ kind = "lognormal", p50_ms = 6000, p99_ms = 16000 }}
clock_skew = {{ kind = "fixed", ms = 0 }}

[workload]
count = 8
arrivals = "fixed"
mean_gap_ms = 28000

[carrier]
kind = "replica"
platform = "matrix"
# The test users' limits are lifted (Synapse's override_ratelimit).
message_rate_per_s = 0
"""


@pytest.mark.parametrize("policy", ["spec", "none"])
def test_live_compare_on_a_matrix_room_agrees_with_the_replica_carrier(
    repo: Path, synapse: Synapse, herdsim_bin: str, tmp_path: Path, policy: str
) -> None:
    """Under `spec` the floor leaves no duplicate; under `none` (no claims:
    an agent skips only when it has seen an answer) many questions get
    several answers: both as the simulation says."""
    need("websockets")
    herdsim = herdsim_bin
    s = synapse
    tokens = {"operator": s.admin.token}
    watcher = s.register(f"{policy}-observer")
    tokens["observer"] = watcher.token
    for i in range(AGENTS):
        u = s.register(f"{policy}-agent-{i:03}")
        s.unlimited(u)
        tokens[f"agent-{i:03}"] = u.token
    room = s.room(s.admin)
    (tmp_path / "tokens.json").write_text(json.dumps(tokens))
    port = free_port()
    bridge = Proc(
        [
            sys.executable,
            str(repo / "python/examples/matrix_bridge.py"),
            "--homeserver",
            s.url,
            "--room",
            room,
            "--tokens",
            str(tmp_path / "tokens.json"),
            "--listen",
            f"127.0.0.1:{port}",
            "--ttl-ms",
            str(45000 // SPEED),
            "--sync-timeout-ms",
            "2000",
            "--policy",
            policy,
        ]
    )
    try:
        bridge.wait_for(r"^ready$", "out", START_S)
        # `herdsim observe` watches the room through the bridge meanwhile,
        # then calibrates what it saw.
        seen = tmp_path / "seen"
        watch = [herdsim, "observe", "--url", f"ws://127.0.0.1:{port}", "--channel", "#general"]
        watch += ["--as", "observer", "--speed", str(SPEED), "--out", str(seen), "--name", "room"]
        # The log's times are real: the TTL the replicas use, and the
        # room's one-way delay (the observer's ping reaches the bridge
        # only; a loopback Synapse takes about 25 ms each way).
        watch += ["--ttl-ms", str(45000 // SPEED), "--link-ms", "25"]
        observer = Proc(watch)
        bridge.wait_for(r"^joined observer$", "out", START_S)
        scenario = tmp_path / "matrix-live.toml"
        scenario.write_text(SCENARIO.replace("POLICY", policy))
        out = tmp_path / "out"
        args = [herdsim, "live", str(scenario), "--url", f"ws://127.0.0.1:{port}"]
        args += ["--speed", str(SPEED), "--compare", "--quiet", "--out", str(out)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (r.stdout, r.stderr, bridge.err)
        found = sorted(out.rglob("compare.csv"))
        assert len(found) == 1, (sorted(out.rglob("*")), r.stdout, r.stderr)
        rows = list(csv.DictReader(found[0].open()))
        verdicts = {row["metric"]: row for row in rows}
        for m in ["duplicate_rate", "unanswered_rate", "ttfr_p50_ms", "ttfr_p95_ms"]:
            row = verdicts[m]
            assert row["agree"] == "true", (m, row, r.stdout)
        # Every question was seen and answered in the real room.
        counts = verdicts["messages"]
        assert counts["live_mean"] == counts["sim_mean"] == "24", counts
        dup = float(verdicts["duplicate_rate"]["live_mean"])
        assert (dup == 0) if policy == "spec" else (dup > 0.2), verdicts["duplicate_rate"]
        print(r.stdout)
        observer.p.terminate()  # SIGTERM: observe stops and calibrates
        assert observer.p.wait(timeout=120) == 0, (observer.out, observer.err)
        est = {
            (row["group"], row["parameter"]): row
            for row in csv.DictReader((seen / "room" / "estimates.csv").open())
        }
        got = {k: float(v["estimate"]) for k, v in est.items()}
        if policy == "spec":
            # What the agents were given (CSMA 4-16 s, inference p50 6 s),
            # read from their claims, with room for 24 questions' sampling.
            assert 3000 <= got[("group-0", "csma.min_ms")] <= 5500, est
            assert 10000 <= got[("group-0", "csma.max_ms")] <= 24000, est
            assert 4000 <= got[("group-0", "inference.p50_ms")] <= 9000, est
            assert got[("observed", "duplicate_rate")] == 0, est
        else:
            # No claims: the herd, seen as it was.
            assert got[("observed", "duplicate_rate")] > 0.5, est
        agents = list(csv.DictReader((seen / "room" / "agents.csv").open()))
        assert len(agents) == AGENTS, agents
    finally:
        bridge.kill()
        if "observer" in locals():
            observer.kill()
    assert not any("gap" in e for e in bridge.err), bridge.err


@pytest.mark.parametrize(
    "flags",
    [
        ["--listen", "0.0.0.0:6690"],
        ["--listen", "nowhere"],
        ["--ttl-ms", "-1"],
        ["--tokens", "/nonexistent/tokens.json"],
    ],
)
def test_bad_bridge_flags_exit_2_with_one_message(repo: Path, tmp_path: Path, flags: list[str]):
    need("websockets")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"operator": "t"}))
    args = [sys.executable, str(repo / "python/examples/matrix_bridge.py")]
    args += ["--homeserver", "http://127.0.0.1:1", "--room", "!r:x", "--tokens", str(tokens)]
    r = subprocess.run(args + flags, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, r.stderr
