"""An asyncio agent on `herdsim.floor.Agent`, against `herdsim serve`.

    herdsim serve --listen 127.0.0.1:6667
    python python/examples/floor_agent.py --url ws://127.0.0.1:6667 --name agent-1

It connects with `websockets`, identifies (IDENTIFY, then WELCOME), joins
one channel (JOIN, then JOINED) and answers the questions posted there:
channel MSGs that answer nothing, from anyone but itself. The floor
decides whether and when; this file carries out what it says with a real
socket and real timers:

- every frame from the server goes to `Agent.frame`; a question also to
  `Agent.answer`;
- one timer: at `Agent.poll_timeout()`, `Agent.timeout` (the floor's CSMA
  waits and claim timers are inside it);
- `Agent.poll_output()` until `None`: `transmit` (a claim or an answer)
  is sent; `start_inference` starts the fake model, whose latency is
  lognormal (`--latency-median-ms`, `--latency-sigma`, drawn from the
  `--seed` stream); when it is done, `Agent.inference_done`, whose output
  is the answer MSG; `abort_inference` (a YIELD: another agent holds the
  floor) drops that inference.

`--no-floor` leaves the floor out: every question is answered at once,
with no claim and no wait, to show the herd (every agent answers every
question). The clock is the wall clock in ms since the Unix epoch, as a
real agent's `started_at` is: claims from agents on one machine compare
fairly.

It prints `ready` on stdout once it has joined and, when it stops, one line
of counts: `questions=Q started=S aborted=A answered=N skipped=K`. It stops
after `--run-s` seconds, or once it has seen `--questions` questions and
has nothing left to do for them. A server is a network peer, so an
adversary: the connection and the handshake are bounded in time (10 s),
every send too (10 s), a frame in size (1 MiB, larger ends the
connection), the frames read and not yet handled in count (about 32), the
question ids remembered (4096) and the inferences under way (64: more
questions are skipped), and a peer that leaves a ping (one every 20 s)
unanswered for 20 s is dropped.
Exit status: 0; 1 when the connection failed or was lost; 2 on bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from herdsim.floor import Agent

# The longest frame read; a longer one ends the connection (close 1009).
MAX_FRAME_BYTES = 1 << 20
# Frames read and not yet handled, at most (then reading waits), in this
# file's queue and in websockets' own: 32 frames, 32 MiB at most.
MAX_QUEUED_FRAMES = 16
# Question ids remembered (to answer each once), and inferences under way,
# at most: a server that floods questions costs a bounded memory (those
# past the second bound are skipped).
MAX_SEEN = 4096
MAX_THINKING = 64
# Times from the flags, at most (1e12 ms: about 31.7 years).
MAX_MS = 10**12
# The connection and the IDENTIFY / JOIN exchange, each; every send.
HANDSHAKE_S = 10.0
SEND_S = 10.0
POLICIES = ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]


class AgentError(Exception):
    """The connection failed, or the server refused or went away."""


def now_ms() -> int:
    """The agent's clock: wall-clock ms since the Unix epoch."""
    return time.time_ns() // 1_000_000


@dataclass
class Counts:
    questions: int = 0
    started: int = 0
    aborted: int = 0
    answered: int = 0
    skipped: int = 0

    def line(self) -> str:
        return (
            f"questions={self.questions} started={self.started} aborted={self.aborted}"
            f" answered={self.answered} skipped={self.skipped}"
        )


class FakeModel:
    """An inference of lognormal latency: `median_ms` * exp(`sigma` * Z),
    Z standard normal, drawn from its own seeded stream, capped at
    `max_ms`."""

    def __init__(self, median_ms: float, sigma: float, max_ms: int, seed: int) -> None:
        self.mu = math.log(median_ms)
        self.sigma = sigma
        self.max_ms = max_ms
        self.rng = random.Random(seed)

    def latency_ms(self) -> int:
        return min(self.max_ms, max(1, round(self.rng.lognormvariate(self.mu, self.sigma))))


def positive_int(text: str) -> int:
    v = int(text)
    if not 0 < v <= MAX_MS:
        raise argparse.ArgumentTypeError(f"{text}: must be 1 to {MAX_MS}")
    return v


def positive_float(text: str) -> float:
    v = float(text)
    if not 0 < v <= MAX_MS:
        raise argparse.ArgumentTypeError(f"{text}: must be above 0, at most {MAX_MS}")
    return v


def non_negative(text: str) -> int:
    v = int(text)
    if not 0 <= v <= MAX_MS:
        raise argparse.ArgumentTypeError(f"{text}: must be 0 to {MAX_MS}")
    return v


def seed(text: str) -> int:
    v = int(text)
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"{text}: must be 0 to 2^64 - 1")
    return v


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="An agent on herdsim.floor.Agent with a fake model, for herdsim serve."
    )
    p.add_argument("--url", required=True, help="the server, e.g. ws://127.0.0.1:6667")
    p.add_argument("--name", required=True, help="the IDENTIFY name (1-32 of [A-Za-z0-9_-])")
    p.add_argument("--channel", default="#general", help="the channel to join (#general)")
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="no floor control: answer every question at once, with no claim (the herd)",
    )
    p.add_argument("--policy", default="spec", choices=POLICIES, help="the floor's policy (spec)")
    p.add_argument("--ttl-ms", type=positive_int, default=45_000, help="claim TTL (45000)")
    p.add_argument("--csma-min-ms", type=non_negative, default=2_000, help="CSMA wait, low end")
    p.add_argument("--csma-max-ms", type=non_negative, default=8_000, help="CSMA wait, high end")
    p.add_argument(
        "--latency-median-ms",
        type=positive_float,
        default=1_000.0,
        help="the fake model's median latency (1000)",
    )
    p.add_argument(
        "--latency-sigma",
        type=float,
        default=0.5,
        help="the fake model's lognormal sigma (0.5; 0: always the median)",
    )
    p.add_argument(
        "--latency-max-ms",
        type=positive_int,
        default=60_000,
        help="the fake model's latency cap (60000)",
    )
    p.add_argument("--seed", type=seed, default=1, help="CSMA and latency seed (1)")
    p.add_argument("--run-s", type=positive_float, default=60.0, help="stop after this long (60 s)")
    p.add_argument(
        "--questions",
        type=positive_int,
        default=None,
        help="stop once this many questions are seen and done with",
    )
    a = p.parse_args(argv)
    if a.csma_min_ms > a.csma_max_ms:
        p.error("--csma-min-ms is above --csma-max-ms")
    if not 0 <= a.latency_sigma <= 10:
        p.error("--latency-sigma must be 0 to 10")
    return a


async def send(ws: ClientConnection, frame: str) -> None:
    """Send a frame within SEND_S."""
    try:
        await asyncio.wait_for(ws.send(frame), SEND_S)
    except asyncio.TimeoutError:
        raise AgentError(f"a send took over {SEND_S:g} s") from None


def as_json(data: str | bytes) -> dict[str, Any] | None:
    """A frame as a JSON object, or None (not JSON, not an object, too deep)."""
    try:
        v = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return v if isinstance(v, dict) else None


async def next_frame(ws: ClientConnection) -> dict[str, Any]:
    """The next frame that is a JSON object; an ERROR is the error (during
    the handshake: a name refused, a bad channel)."""
    while True:
        v = as_json(await ws.recv())
        if v is None:
            continue
        if v.get("type") == "ERROR":
            raise AgentError(f"the server refused: {v.get('code')} {v.get('message')}")
        return v


async def handshake(ws: ClientConnection, name: str, channel: str) -> str:
    """IDENTIFY, then JOIN. The id the server names this agent by
    (WELCOME's `agent_id` without its `@`): `from`, `winner` and `holder`
    carry it."""
    await send(ws, json.dumps({"type": "IDENTIFY", "name": name}))
    while True:
        v = await next_frame(ws)
        if v.get("type") == "WELCOME":
            me = v.get("agent_id")
            me = me if isinstance(me, str) else name
            me = me.removeprefix("@")
            break
    await send(ws, json.dumps({"type": "JOIN", "channel": channel}))
    while (await next_frame(ws)).get("type") != "JOINED":
        pass
    return me


def sender(msg: dict[str, Any]) -> str | None:
    f = msg.get("from")
    return f.removeprefix("@") if isinstance(f, str) else None


class Runner:
    """One connection's run: the floor (None under --no-floor), the model's
    inferences under way, the counts."""

    def __init__(self, a: argparse.Namespace, ws: ClientConnection, me: str) -> None:
        self.a = a
        self.ws = ws
        self.me = me
        try:
            self.floor = (
                None
                if a.no_floor
                else Agent(
                    me,
                    policy=a.policy,
                    ttl_ms=a.ttl_ms,
                    csma_min_ms=a.csma_min_ms,
                    csma_max_ms=a.csma_max_ms,
                    seed=a.seed,
                )
            )
        except ValueError as e:  # herdsim.InputError: the id WELCOME gave
            raise AgentError(f"the server named this agent {me!r}: {e}") from None
        # The model's stream is not the floor's CSMA stream.
        self.model = FakeModel(a.latency_median_ms, a.latency_sigma, a.latency_max_ms, a.seed)
        self.thinking: dict[str, int] = {}  # question id -> time the answer is ready
        self.seen: set[str] = set()
        self.seen_order: deque[str] = deque()
        self.replies = 0
        self.n = Counts()
        self.closed: ConnectionClosed | None = None

    def question(self, msg: dict[str, Any]) -> str | None:
        """The id of `msg` if it is a question this agent would answer: a
        MSG to the channel that answers nothing, not its own."""
        if msg.get("type") != "MSG" or msg.get("to") != self.a.channel:
            return None
        if msg.get("in_reply_to") is not None or msg.get("replay") is True:
            return None
        mid = msg.get("id")
        if not isinstance(mid, str) or sender(msg) in (None, self.me):
            return None
        return mid

    async def on_frame(self, now: int, data: str | bytes) -> None:
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        known = self.floor.frame(now, text) if self.floor is not None else True
        msg = as_json(text)
        qid = self.question(msg) if known and msg is not None else None
        if qid is None or qid in self.seen:
            return
        self.seen.add(qid)
        self.seen_order.append(qid)
        if len(self.seen_order) > MAX_SEEN:
            self.seen.discard(self.seen_order.popleft())
        self.n.questions += 1
        if len(self.thinking) >= MAX_THINKING:
            self.n.skipped += 1
            return
        if self.floor is not None:
            self.floor.answer(now, text)
        else:
            self.start(now, qid)

    def start(self, now: int, qid: str) -> None:
        self.n.started += 1
        self.thinking[qid] = now + self.model.latency_ms()

    async def on_timers(self, now: int) -> None:
        if self.floor is not None and (t := self.floor.poll_timeout()) is not None and t <= now:
            self.floor.timeout(now)
        for qid, due in sorted(self.thinking.items(), key=lambda kv: kv[1]):
            if due > now:
                continue
            del self.thinking[qid]
            self.replies += 1
            reply_id = f"{self.me}-r{self.replies}"
            content = f"{self.a.name}'s answer to {qid}"
            if self.floor is not None:
                self.floor.inference_done(now, qid, content, reply_id=reply_id)
            else:
                frame = {
                    "type": "MSG",
                    "id": reply_id,
                    "to": self.a.channel,
                    "content": content,
                    "in_reply_to": qid,
                }
                await send(self.ws, json.dumps(frame))
                self.n.answered += 1

    async def drain(self, now: int) -> None:
        if self.floor is None:
            return
        while (out := self.floor.poll_output()) is not None:
            kind = out["type"]
            if kind == "transmit":
                frame: str = out["frame"]
                await send(self.ws, frame)
                if (sent := as_json(frame)) is not None and sent.get("type") == "MSG":
                    self.n.answered += 1
            elif kind == "start_inference":
                self.start(now, out["msg_id"])
            elif kind == "abort_inference":
                self.n.aborted += 1
                self.thinking.pop(out["msg_id"], None)
            elif kind == "skipped":
                self.n.skipped += 1

    def idle(self) -> bool:
        """Nothing left to do: no inference under way, no floor timer."""
        return not self.thinking and (self.floor is None or self.floor.poll_timeout() is None)

    def finished(self) -> bool:
        q = self.a.questions
        return q is not None and self.n.questions >= q and self.idle()

    async def read(self, frames: asyncio.Queue[str | bytes | None]) -> None:
        """Queue every frame read (waiting while the queue is full); None
        when the connection is gone, its reason kept."""
        try:
            async for data in self.ws:
                await frames.put(data)
        except ConnectionClosed as e:
            self.closed = e
        finally:
            await frames.put(None)

    async def run(self) -> Counts:
        end = now_ms() + round(self.a.run_s * 1000)
        frames: asyncio.Queue[str | bytes | None] = asyncio.Queue(MAX_QUEUED_FRAMES)
        reader = asyncio.create_task(self.read(frames))
        try:
            while not self.finished():
                now = now_ms()
                if now >= end:
                    break
                dues = [end, *self.thinking.values()]
                if self.floor is not None and (t := self.floor.poll_timeout()) is not None:
                    dues.append(t)
                wait = max(0, min(dues) - now) / 1000
                got = []
                try:
                    got.append(await asyncio.wait_for(frames.get(), wait or 0.001))
                except asyncio.TimeoutError:
                    pass
                # Every frame that has come is handled before the timers: a
                # YIELD read before an inference is done aborts it.
                while not frames.empty():
                    got.append(frames.get_nowait())
                now = now_ms()
                for data in got:
                    if data is None:
                        raise AgentError(f"the server closed the connection ({self.closed})")
                    await self.on_frame(now, data)
                    await self.drain(now)
                await self.on_timers(now)
                await self.drain(now)
        finally:
            reader.cancel()
        return self.n


async def main_async(a: argparse.Namespace) -> Counts:
    try:
        ws = await connect(
            a.url,
            open_timeout=HANDSHAKE_S,
            close_timeout=2,
            ping_interval=20,
            ping_timeout=20,
            max_size=MAX_FRAME_BYTES,
            max_queue=MAX_QUEUED_FRAMES,
            compression=None,
            proxy=None,
        )
    except (OSError, InvalidURI, InvalidHandshake, asyncio.TimeoutError) as e:
        raise AgentError(f"{a.url}: no connection: {e or type(e).__name__}") from None
    try:
        try:
            me = await asyncio.wait_for(handshake(ws, a.name, a.channel), HANDSHAKE_S)
        except asyncio.TimeoutError:
            raise AgentError(f"no WELCOME and JOINED within {HANDSHAKE_S:g} s") from None
        print("ready", flush=True)
        return await Runner(a, ws, me).run()
    except ConnectionClosed as e:
        raise AgentError(f"the server closed the connection ({e})") from None
    finally:
        await ws.close()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        n = asyncio.run(main_async(a))
    except AgentError as e:
        print(f"floor_agent: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(n.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
