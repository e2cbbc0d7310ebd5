"""The example gateway agent (python/examples/floor_agent.py) live against
`herdsim serve`: four agents as processes, an operator posting three
questions. Under `spec` each question gets exactly one answer; with
`--no-floor` every agent answers every question (the herd). The spec run's
`--log` then replays to what the operator received, through `herdsim
arbitrate` and through herdsim.floor.Server alike.

Short CSMA windows and a fast fake model keep each run to a few seconds;
every wait is bounded and the processes are always killed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("websockets")
from procs import Proc  # noqa: E402
from test_floor_arbitrate import arbitrate, replay  # noqa: E402
from websockets.asyncio.client import ClientConnection, connect  # noqa: E402

AGENTS = 4
QUESTIONS = ["q1", "q2", "q3"]
CHANNEL = "#general"
# Seconds: the server's and the agents' start, the whole run.
START_S = 20
RUN_S = 30


@contextmanager
def serve(herdsim_bin: str, policy: str, log: Path | None = None) -> Iterator[str]:
    """`herdsim serve` on a free loopback port; its URL. Stopped with
    SIGTERM (a clean stop: the log flushed), killed if that takes over 10 s."""
    args = [herdsim_bin, "serve", "--listen", "127.0.0.1:0", "--policy", policy]
    s = Proc(args + (["--log", str(log)] if log else []))
    try:
        m = s.wait_for(r"listening on (ws://\S+)", "err", START_S)
        yield m.group(1)
    finally:
        if s.p.poll() is None:
            s.p.terminate()
            try:
                s.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                s.p.kill()
        s.kill()


def start_agents(repo: Path, url: str, no_floor: bool, csma_max_ms: int) -> list[Proc]:
    script = str(repo / "python/examples/floor_agent.py")
    flags = ["--csma-min-ms", "0", "--csma-max-ms", str(csma_max_ms)]
    flags += ["--latency-median-ms", "300", "--latency-sigma", "0.3", "--latency-max-ms", "800"]
    flags += ["--questions", str(len(QUESTIONS)), "--run-s", str(RUN_S)]
    if no_floor:
        flags.append("--no-floor")
    agents = []
    for i in range(1, AGENTS + 1):
        args = [sys.executable, script, "--url", url, "--name", f"agent-{i}", "--seed", str(i)]
        agents.append(Proc(args + flags))
    return agents


async def recv_json(ws: ClientConnection, timeout: float) -> dict[str, Any]:
    v = json.loads(await asyncio.wait_for(ws.recv(), timeout))
    assert isinstance(v, dict), v
    return v


async def operator(url: str, agents: list[Proc]) -> list[dict[str, Any]]:
    """Identify as the operator, join, post the questions, and return every
    frame received until all the agents have exited and the server has
    said nothing for 0.5 s."""
    async with connect(url, open_timeout=10, max_size=1 << 20, proxy=None) as ws:
        await ws.send(json.dumps({"type": "IDENTIFY", "name": "operator"}))
        while (await recv_json(ws, 10))["type"] != "WELCOME":
            pass
        await ws.send(json.dumps({"type": "JOIN", "channel": CHANNEL}))
        while (await recv_json(ws, 10))["type"] != "JOINED":
            pass
        for i, q in enumerate(QUESTIONS):
            frame = {"type": "MSG", "id": q, "to": CHANNEL, "content": f"question {i + 1}?"}
            await ws.send(json.dumps(frame))
        got = []
        end = time.monotonic() + RUN_S + 10
        while time.monotonic() < end:
            try:
                got.append(await recv_json(ws, 0.5))
            except asyncio.TimeoutError:
                if all(a.p.poll() is not None for a in agents):
                    return got
        pytest.fail(f"the agents did not finish in {RUN_S + 10} s")


def run_room(
    repo: Path, herdsim_bin: str, no_floor: bool, csma_max_ms: int = 1200, log: Path | None = None
) -> Any:
    with serve(herdsim_bin, "spec", log) as url:
        agents = start_agents(repo, url, no_floor, csma_max_ms)
        try:
            for a in agents:
                a.wait_for("^ready$", "out", START_S)
            got = asyncio.run(operator(url, agents))
            counts = []
            for a in agents:
                assert a.p.wait(timeout=10) == 0, a.err
                m = a.wait_for(
                    r"^questions=(\d+) started=(\d+) aborted=(\d+) answered=(\d+)", "out", 5
                )
                counts.append(tuple(int(x) for x in m.groups()))
        finally:
            for a in agents:
                a.kill()
    answers: dict[str, list[str]] = {q: [] for q in QUESTIONS}
    claims: dict[str, list[str]] = {q: [] for q in QUESTIONS}
    for f in got:
        if f["type"] == "MSG" and f.get("in_reply_to") in answers:
            answers[f["in_reply_to"]].append(f["from"])
        elif f["type"] == "RESPONDING_TO" and f.get("msg_id") in claims:
            claims[f["msg_id"]].append(f["from"])
    print(f"no_floor={no_floor} csma_max_ms={csma_max_ms}")
    print(f"  answers={answers}\n  claims={claims}\n  agents={counts}")
    return answers, claims, counts, got


# CSMA waits of 0 to 1.2 s: the first claim is mostly seen before the
# others' waits end. Of 0: every agent claims at once, the server yields
# all but one and they abort.
@pytest.mark.parametrize("csma_max_ms", [1200, 0])
def test_under_spec_each_question_gets_one_answer(
    repo: Path, herdsim_bin: str, tmp_path: Path, csma_max_ms: int
) -> None:
    log = tmp_path / "session.jsonl"
    answers, claims, counts, got = run_room(repo, herdsim_bin, False, csma_max_ms, log)
    assert {q: len(a) for q, a in answers.items()} == {q: 1 for q in QUESTIONS}, answers
    assert all(claims[q] and answers[q][0] in claims[q] for q in QUESTIONS), (answers, claims)
    # Each agent saw every question; those that lost a contest aborted.
    for q, started, aborted, answered in counts:
        assert q == len(QUESTIONS) and started - aborted == answered, counts
    assert sum(c[3] for c in counts) == len(QUESTIONS)
    # The floor's sends to the operator, replayed from the log, are what it
    # received (the session layer's WELCOME and JOINED are not the floor's).
    text = log.read_text()
    live = [json.dumps(f, separators=(",", ":")) for f in got]
    mine = replay(text, "spec", 45_000, "relayed")
    assert mine == arbitrate(herdsim_bin, text, "spec", 45_000, "relayed")
    assert [m for _, to, m in mine if to == "operator"] == live


def test_without_the_floor_every_agent_answers_every_question(repo: Path, herdsim_bin: str) -> None:
    answers, claims, counts, _ = run_room(repo, herdsim_bin, no_floor=True)
    assert {q: sorted(a) for q, a in answers.items()} == {
        q: [f"agent-{i}" for i in range(1, AGENTS + 1)] for q in QUESTIONS
    }, answers
    assert claims == {q: [] for q in QUESTIONS}
    assert all(c == (len(QUESTIONS), len(QUESTIONS), 0, len(QUESTIONS)) for c in counts), counts
