"""herdsim.floor: the two halves from Python, on a fake clock and an
in-memory bus (every frame as JSON text, 20 ms a hop)."""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

import pytest

import herdsim
from herdsim.floor import Agent, Server

G = "#general"
HOP = 20
INFER = 3_000


class Room:
    """A server, the operator and agents, driven event by event."""

    def __init__(self, n: int, seeds: list[int] | None = None) -> None:
        self.server = Server()
        self.agents = {
            f"agent-{i + 1}": Agent(f"agent-{i + 1}", seed=(seeds or list(range(n)))[i])
            for i in range(n)
        }
        self.now = 0
        self.seq = 0
        self.queue: list[tuple[int, int, str, str, str]] = []
        self.answers: list[tuple[str, str]] = []
        self.outputs: list[tuple[str, dict[str, Any]]] = []
        for who in ["operator", *self.agents]:
            self.server.join(0, who, G)

    def at(self, t: int, kind: str, who: str, payload: str) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (t, self.seq, kind, who, payload))

    def ask(self, t: int, msg_id: str, to: str, content: str) -> None:
        frame = {"type": "MSG", "id": msg_id, "to": to, "content": content}
        self.at(t, "up", "operator", json.dumps(frame))

    def route(self, sends: list[tuple[str, str]]) -> None:
        for to, frame in sends:
            self.at(self.now + HOP, "down", to, frame)

    def drain(self, who: str) -> None:
        agent = self.agents[who]
        while (out := agent.poll_output()) is not None:
            self.outputs.append((who, out))
            if out["type"] == "transmit":
                frame = json.loads(out["frame"])
                if frame["type"] == "MSG":
                    self.answers.append((frame["in_reply_to"], who))
                self.at(self.now + HOP, "up", who, out["frame"])
            elif out["type"] == "start_inference":
                self.at(self.now + INFER, "done", who, out["msg_id"])

    def next_time(self) -> int | None:
        times = [a.poll_timeout() for a in self.agents.values()]
        times.append(self.server.poll_timeout())
        if self.queue:
            times.append(self.queue[0][0])
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def run_until(self, end: int) -> None:
        while (t := self.next_time()) is not None and t <= end:
            self.now = t
            if (d := self.server.poll_timeout()) is not None and d <= t:
                self.route(self.server.tick(t))
            for who, agent in self.agents.items():
                if (d := agent.poll_timeout()) is not None and d <= t:
                    agent.timeout(t)
                    self.drain(who)
            while self.queue and self.queue[0][0] <= t:
                _, _, kind, who, payload = heapq.heappop(self.queue)
                self.event(kind, who, payload)

    def event(self, kind: str, who: str, payload: str) -> None:
        if kind == "up":
            operator = who == "operator"
            self.route(self.server.frame(self.now, who, payload, operator=operator))
        elif kind == "down" and who in self.agents:
            agent = self.agents[who]
            agent.frame(self.now, payload)
            frame = json.loads(payload)
            if frame["type"] == "MSG" and "in_reply_to" not in frame:
                agent.answer(self.now, payload)
            self.drain(who)
        elif kind == "done":
            self.agents[who].inference_done(self.now, payload, f"{who} answers")
            self.drain(who)


def test_each_question_is_answered_once() -> None:
    room = Room(4)
    for k in range(10):
        room.ask(1_000 + k * 60_000, f"q{k}", G, "what now?")
    room.run_until(11 * 60_000)
    for k in range(10):
        assert [q for q, _ in room.answers].count(f"q{k}") == 1, room.answers


def test_a_mention_is_answered_at_once_by_the_agent_it_names() -> None:
    room = Room(3)
    room.ask(1_000, "q1", G, "@agent-2 what now?")
    room.run_until(30_000)
    assert room.answers == [("q1", "agent-2")]
    skipped = sorted(w for w, o in room.outputs if o["type"] == "skipped")
    assert skipped == ["agent-1", "agent-3"]
    assert all(
        o["reason"] == "addressed_to_others" for _, o in room.outputs if o["type"] == "skipped"
    )
    starts = [o for _, o in room.outputs if o["type"] == "start_inference"]
    assert starts == [
        {"type": "start_inference", "msg_id": "q1", "started_at": 1_020, "exempt": True}
    ]


def test_the_operators_claim_holds_the_floor() -> None:
    room = Room(3)
    room.ask(1_000, "q1", G, "what now?")
    claim = {"type": "RESPONDING_TO", "msg_id": "q1", "started_at": 1_100, "channel": G}
    room.at(1_100, "up", "operator", json.dumps(claim))
    room.run_until(30_000)
    assert room.answers == []
    assert room.server.holder(G, "q1") == "operator"


def test_the_same_seeds_give_the_same_run() -> None:
    def one() -> list[tuple[str, dict[str, Any]]]:
        room = Room(4, seeds=[7, 8, 9, 10])
        room.ask(1_000, "q1", G, "what now?")
        room.run_until(30_000)
        return room.outputs

    assert one() == one()


def test_bad_input_raises_and_bad_frames_are_ignored() -> None:
    with pytest.raises(herdsim.InputError, match="not a policy"):
        Agent("a", policy="nope")
    with pytest.raises(ValueError, match="csma_min_ms"):
        Agent("a", csma_min_ms=9_000, csma_max_ms=1_000)
    with pytest.raises(ValueError, match="not an agent id"):
        Agent("#a")
    with pytest.raises(herdsim.InputError):
        Server(policy="nope")
    with pytest.raises(herdsim.InputError, match="claim_guard"):
        Server(claim_guard="clock")
    a = Agent("a")
    assert a.frame(0, "{not json") is False
    assert a.frame(0, '{"type":"AGENT_JOINED","agent":"x"}') is False
    assert a.answer(0, '{"type":"YIELD","msg_id":"m","winner":"b","channel":"#g"}') is False
    assert a.poll_output() is None
    assert a.id == "a"
    s = Server()
    sends = s.frame(0, "a", "{not json")
    assert [json.loads(f)["type"] for _, f in sends] == ["ERROR"]


def test_a_claim_for_a_message_never_relayed_is_refused_unless_the_guard_is_off() -> None:
    claim = '{"type":"RESPONDING_TO","msg_id":"future","channel":"#g","started_at":1}'
    for guard, want in [(None, ["ERROR"]), ("relayed", ["ERROR"]), ("off", ["RESPONDING_TO"])]:
        s = Server(claim_guard=guard)
        s.join(0, "a", "#g")
        s.join(0, "b", "#g")
        sends = s.frame(1, "a", claim)
        assert [json.loads(f)["type"] for _, f in sends] == want, guard
        assert s.holder("#g", "future") == (None if want == ["ERROR"] else "a")


def test_the_readme_example_runs_as_it_says() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("## The floor, for a gateway") :]
    code = section[section.index("```python") + len("```python") : section.index("```\n", 10)]
    scope: dict[str, Any] = {}
    exec(code, scope)
    out = scope["out"]
    assert out["type"] == "transmit"
    assert json.loads(out["frame"])["type"] == "RESPONDING_TO"


@pytest.mark.parametrize("name", ["", "#general", "@server", "a b", "tab\there"])
def test_the_server_takes_only_agent_ids_as_names(name: str) -> None:
    """A name the wire could not carry (as herdsim arbitrate and Agent refuse
    it) raises InputError, naming it; the server is unchanged."""
    s = Server()
    s.join(0, "alice", "#general")
    frame = '{"type":"MSG","to":"#general","content":"hi"}'
    calls = [
        lambda: s.join(1, name, "#general"),
        lambda: s.leave(1, name, "#general"),
        lambda: s.disconnect(1, name),
        lambda: s.frame(1, name, frame),
        lambda: s.frame(1, name, frame, operator=True),
    ]
    for call in calls:
        with pytest.raises(herdsim.InputError, match="not an agent id"):
            call()
    assert s.join(2, "bob", "#general") == []
    sent = s.frame(3, "bob", frame)
    assert [to for to, _ in sent] == ["alice"]
