"""herdsim.floor.Server decides as `herdsim arbitrate` does: the same sends,
byte for byte and in order, on the repo's recorded session under every
policy and on sessions hypothesis makes up (joins, leaves, claims with any
started_at, MSGs and DMs, disconnects, bad frames, at any times).

The Python replay is arbitrate's loop (docs/arbitrate.md): before each
line, the server's timers due strictly before its `at_ms` run (a tick sends
nothing: arbitrate drops what it would send, so the test checks that there
is nothing to drop), then the line's event is the frame its agent sent.
Nothing is normalised: each send is compared as (`at_ms`, recipient,
the message's JSON text).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herdsim.floor import Server

POLICIES = ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]
# arbitrate reads these (as serve does); the Python Server does not.
POLICY_VARS = ("AGENTCHAT_RESPOND_TTL_MS", "AGENTCHAT_CLAIM_TTL_MS", "AGENTCHAT_RESPOND_ENABLED")

Send = tuple[int, str, str]  # at_ms, recipient, the message's JSON text


def arbitrate(
    herdsim_bin: str, text: str, policy: str, ttl_ms: int, claim_guard: str
) -> list[Send]:
    env = {k: v for k, v in os.environ.items() if k not in POLICY_VARS}
    args = ["arbitrate", "--policy", policy, "--ttl-ms", str(ttl_ms)]
    p = subprocess.run(
        [herdsim_bin, *args, "--claim-guard", claim_guard],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert p.returncode == 0 and p.stderr == "", (p.returncode, p.stderr)
    return sends_of(p.stdout)


def sends_of(output: str) -> list[Send]:
    """arbitrate's output lines, `{"at_ms":N,"to":"id","msg":{...}}`, each
    with its message's text as written."""
    out = []
    # Lines end at "\n" only: a message's text may hold U+0085 or U+2028,
    # which str.splitlines() would also split at.
    for line in output.split("\n")[:-1]:
        # The first `,"msg":` is the separator (a quote in an id is escaped).
        cut = line.index(',"msg":')
        head = json.loads(line[:cut] + "}")
        out.append((head["at_ms"], head["to"], line[cut + len(',"msg":') : -1]))
    return out


def replay(text: str, policy: str, ttl_ms: int, claim_guard: str) -> list[Send]:
    """arbitrate's loop on the Python Server."""
    s = Server(policy=policy, ttl_ms=ttl_ms, claim_guard=claim_guard)
    out = []
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        line = json.loads(raw)
        at = line["at_ms"]
        while (t := s.poll_timeout()) is not None and t < at:
            assert s.tick(t) == [], "a tick sent something: arbitrate would drop it"
        event = json.dumps(line["event"])
        operator = line.get("role") == "operator"
        out += [(at, to, msg) for to, msg in s.frame(at, line["agent"], event, operator=operator)]
    return out


# The recorded session of tests/arbitrate.rs (and docs/arbitrate.md's
# worked example), with every policy's expected output.


@pytest.mark.parametrize("policy", POLICIES)
def test_the_recorded_session_replays_to_arbitrates_sends(
    repo: Path, herdsim_bin: str, policy: str
) -> None:
    data = repo / "tests/data/arbitrate"
    text = (data / "example.jsonl").read_text()
    expected = sends_of((data / f"example.{policy}.out.jsonl").read_text())
    assert replay(text, policy, 45_000, "off") == expected
    for guard in ["off", "relayed"]:
        assert replay(text, policy, 45_000, guard) == arbitrate(
            herdsim_bin, text, policy, 45_000, guard
        ), guard


# Made-up sessions.

AGENTS = ["agent-a", "agent-b", "agent-c", "operator"]
IDS = ["m1", "m2", "m3", "s1", "s2"]

# Mostly what a session is made of (one channel, its questions, claims
# and answers), now and then the rest: another channel, a bad one, DMs,
# leaves, disconnects, bad frames.
channel = st.one_of(st.just("#g"), st.just("#g"), st.just("#h"), st.sampled_from(["g", "#a b", 5]))
msg_id = st.sampled_from(IDS)
started_at = st.one_of(
    st.integers(-10, 60_000),
    st.integers(-10, 60_000),
    st.sampled_from([0, -(2**63), 2**53, 2**63 - 1, 2**64 - 1, None, "5", 1.5]),
)
content = st.one_of(
    st.sampled_from(["who knows?", "@agent-a you?", "@operator", "@agent-b @agent-c", ""]),
    # Any text but lone surrogates: serde_json refuses their escapes, so the
    # whole line would be a bad line to arbitrate.
    st.text(
        st.one_of(st.characters(max_codepoint=0xD7FF), st.characters(min_codepoint=0xE000)),
        max_size=12,
    ),
)


def claim(m: str, s: Any, c: Any) -> dict[str, Any]:
    return {"type": "RESPONDING_TO", "msg_id": m, "started_at": s, "channel": c}


@st.composite
def msg_event(draw: st.DrawFn) -> dict[str, Any]:
    dm = st.sampled_from([f"@{a}" for a in AGENTS])
    to = draw(st.one_of(channel, channel, dm))
    e: dict[str, Any] = {"type": "MSG", "to": to, "content": draw(content)}
    if draw(st.booleans()):
        e["in_reply_to"] = draw(msg_id)
    if draw(st.integers(0, 3)) > 0:
        e["id"] = draw(msg_id)
    return e


rare = st.one_of(
    st.builds(lambda c: {"type": "JOIN", "channel": c}, channel),
    st.builds(lambda c: {"type": "LEAVE", "channel": c}, channel),
    st.builds(claim, msg_id, started_at, channel),
    msg_event(),
    st.just({"type": "DISCONNECT"}),
    st.just({"type": "CONNECT"}),
    st.builds(lambda lurk: {"type": "IDENTIFY", "lurk": lurk}, st.booleans()),
    st.sampled_from([None, 5, [], {"type": "FOO"}, {"type": "RESPONDING_TO"}, {"type": "MSG"}]),
)
# A session's lines are mostly questions in #g, claims on them and
# answers; a quarter are anything else.
KINDS = ["question"] * 2 + ["claim"] * 4 + ["answer"] * 2 + ["rare"] * 3
ROLES = [None, None, None, "agent", "operator"]
step = st.sampled_from([0, 0, 1, 10, 500, 999, 1000, 1001, 4999, 5000, 20_000, 50_000])


@st.composite
def session(draw: st.DrawFn) -> str:
    lines: list[dict[str, Any]] = []
    for a in AGENTS:
        if draw(st.integers(0, 4)) > 0:
            join = {"at_ms": 0, "agent": a, "event": {"type": "JOIN", "channel": "#g"}}
            lines.append({**join, "role": "operator"} if a == "operator" else join)
    t = 0
    for _ in range(draw(st.integers(1, 30))):
        t += draw(step)
        kind = draw(st.sampled_from(KINDS))
        m = draw(msg_id)
        if kind == "question":
            agent = draw(st.sampled_from(["operator", "operator", *AGENTS]))
            e: Any = {"type": "MSG", "id": m, "to": "#g", "content": draw(content)}
        elif kind == "claim":
            agent = draw(st.sampled_from(AGENTS))
            e = claim(m, draw(st.one_of(st.integers(0, 100), started_at)), "#g")
        elif kind == "answer":
            agent = draw(st.sampled_from(AGENTS))
            e = {"type": "MSG", "to": "#g", "content": "answer", "in_reply_to": m}
        else:
            agent = draw(st.sampled_from(AGENTS))
            e = draw(rare)
        line: dict[str, Any] = {"at_ms": t, "agent": agent, "event": e}
        # The operator's lines say so; an agent's may say "agent" or
        # nothing (and now and then, "operator").
        role = "operator" if agent == "operator" else draw(st.sampled_from(ROLES))
        if role is not None:
            line["role"] = role
        lines.append(line)
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=session(),
    ttl_ms=st.sampled_from([1, 1000, 3000, 45_000]),
    guard=st.sampled_from(["off", "relayed"]),
)
def test_made_up_sessions_replay_to_arbitrates_sends(
    herdsim_bin: str, policy: str, text: str, ttl_ms: int, guard: str
) -> None:
    assert replay(text, policy, ttl_ms, guard) == arbitrate(
        herdsim_bin, text, policy, ttl_ms, guard
    )
