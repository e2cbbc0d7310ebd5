"""An asyncio agent on a Matrix room, with the floor and no floor server.

    python python/examples/matrix_agent.py --homeserver http://127.0.0.1:8008 \\
        --user @agent-1:localhost --password secret --room '!abc:localhost'

It talks the Matrix client-server API over HTTP (`aiohttp`), joins one
room and answers the questions posted there, with the fake lognormal model
of floor_agent.py. A question is an `m.room.message` from anyone but this
agent that replies to nothing.

The floor without a server (docs/matrix.md has the whole design):

- A claim is a room timeline event of type `org.herdsim.claim`, content
  `{"msg_id": "<the question's event_id>", "started_at": <Unix ms>}`
  (integers only: Matrix refuses floats in event content; a state event
  would need power levels a bot usually lacks).
- The homeserver puts a room's events in one order, and `/sync` gives
  every member that order. So each agent runs its own
  `herdsim.floor.Server(policy=...)` as a *replica* and feeds it every
  timeline event in `/sync` order, at the event's `origin_server_ts` as
  the replica's time: a join (`m.room.member`, membership `join`) as a
  join, a leave, kick or ban as a leave, an `m.room.message` as a MSG
  whose id is the event_id (`in_reply_to` from its `m.relates_to`
  `m.in_reply_to`), a claim as a RESPONDING_TO. The replica never reads
  a clock, so every replica reaches the same verdicts, expiry included
  (a claim expires at the first event at or past its deadline), and they
  are the verdicts a floor server would have sent.
- Ids: a Matrix user id `@name:server` is the floor agent id
  `name:server` (the floor's agent ids may not start with `@`); the room
  is the floor channel `#room`; an event_id is used as the message id
  unchanged.
- What the replica sends to this agent (a relayed question or claim, a
  YIELD) is what `herdsim.floor.Agent` gets as frames (at the agent's own
  wall clock, as in floor_agent.py); what the Agent transmits becomes a
  room event: a claim as `org.herdsim.claim`, an answer as an
  `m.room.message` whose `m.relates_to` is `m.in_reply_to` the question.
  The agent's own events come back through `/sync` and go through its
  replica like everyone's: a YIELD is how it learns it lost.
- Before the replica sees a claim, one rule of its own, the same in every
  replica since it reads only the events: a claim is dropped unless its
  `msg_id` is a question the replica has seen and its `started_at` is an
  integer no more than `--claim-skew-ms` (1000) before that question's
  `origin_server_ts` nor more than that after the claim's own (an absurd
  `started_at` takes no floor; the margin is for clocks that differ). The
  floor's own claim guard (`relayed`) would refuse a claim for a message
  it has not relayed in any case.

Each verdict the replica reaches (a question's holder after a claim, when
it changes) is a line `verdict <question event_id> <winner's Matrix user
id>` on `--verdicts FILE` (stdout without it), so agents can be compared.
The agent prints `ready` on stdout once it has joined and read the room's
state; questions older than that are not answered. It stops after
`--run-ms`, or, with `--questions N`, once it has seen N questions, each
has an answer in the room and it has nothing left to do, `--linger-ms`
(1000) later; then it prints one line of counts, as floor_agent.py does:
`questions=Q started=S aborted=A answered=N skipped=K`.

`--no-floor` leaves the floor out: every question is answered at once,
with no claim (the herd); the replica still runs and logs (no claims, no
verdicts).

`--carrier` is how a claim travels, as the simulator's `[carrier] kind`
(docs/matrix.md, "Compared with the simulator"):

- `replica` (the default): the floor above.
- `reaction`: no floor. An agent waits its CSMA delay on each question;
  then it skips if it has seen another agent's claim on the question (a
  reaction, `m.reaction` annotating the question with the key `on it`)
  or an answer to it; else it sends its own reaction and starts its
  inference, and answers when it is done, whatever it sees meanwhile
  (nobody aborts). A reaction seen is believed for good (the simulator
  believes one for `server.ttl_ms`: the same unless a CSMA wait is
  longer than the TTL).
- `none`: no claim at all. An agent waits its CSMA delay; then it skips
  only if it has seen an answer to the question, else it infers and
  answers.

Under `reaction` and `none` the replica still runs (no claims, so no
verdicts). `--no-floor` is only for `--carrier replica` (the default).

A homeserver is a network peer, so bounded: every request within 10 s
(a `/sync` within its long-poll `--sync-timeout-ms`, 5000, plus 10 s), a
response body in bytes (8 MiB for `/sync`, 1 MiB otherwise; larger is an
error), a rate-limited request retried 3 times at most after the server's
`retry_after_ms` (10 s at most), the question ids remembered (4096) and
inferences under way (64: more questions are skipped), and the `/sync`
batches read and not yet handled (16). A `/sync` that says `limited` (a
gap: events this replica will never see) is counted and reported on
stderr: the replica may then differ from the others.
Exit status: 0; 1 when the homeserver failed or refused; 2 on bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import quote

import aiohttp

from herdsim.floor import Agent, Server

CLAIM_TYPE = "org.herdsim.claim"
CHANNEL = "#room"
# Response bodies, at most: a /sync batch, and any other answer.
MAX_SYNC_BYTES = 8 << 20
MAX_BODY_BYTES = 1 << 20
# /sync batches read and not yet handled, at most (then syncing waits).
MAX_QUEUED_BATCHES = 16
# Timeline events per /sync batch asked for.
SYNC_LIMIT = 100
# Question ids remembered, inferences under way, at most.
MAX_SEEN = 4096
MAX_THINKING = 64
MAX_MS = 10**12
REQUEST_S = 10.0
MAX_RETRIES = 3
MAX_RETRY_MS = 10_000
POLICIES = ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]
CARRIERS = ["replica", "reaction", "none"]
# A reaction claim: an `m.annotation` of the question with this key.
REACTION_KEY = "on it"


class AgentError(Exception):
    """The homeserver failed, refused, or went away."""


def now_ms() -> int:
    """The agent's clock: wall-clock ms since the Unix epoch."""
    return time.time_ns() // 1_000_000


def floor_id(user_id: str) -> str:
    """A Matrix user id as a floor agent id: `@a:hs` is `a:hs`."""
    return user_id.removeprefix("@")


def user_id(fid: str) -> str:
    """A floor agent id as the Matrix user id it stands for."""
    return "@" + fid


@dataclass
class Counts:
    questions: int = 0
    started: int = 0
    aborted: int = 0
    answered: int = 0
    skipped: int = 0
    gaps: int = 0

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
        description="An agent on a Matrix room, the floor run as a replica of the room's order."
    )
    p.add_argument("--homeserver", required=True, help="e.g. http://127.0.0.1:8008")
    p.add_argument("--user", required=True, help="the Matrix user id, e.g. @agent-1:localhost")
    auth = p.add_mutually_exclusive_group(required=True)
    auth.add_argument("--password", help="log in with this password")
    auth.add_argument("--token", help="an access token (instead of --password)")
    p.add_argument("--room", required=True, help="the room id (!...) or alias (#...) to join")
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="no floor control: answer every question at once, with no claim (the herd)",
    )
    p.add_argument(
        "--carrier",
        default="replica",
        choices=CARRIERS,
        help="how a claim travels: replica (the floor; the default), reaction, none",
    )
    p.add_argument("--policy", default="spec", choices=POLICIES, help="the floor's policy (spec)")
    p.add_argument("--ttl-ms", type=positive_int, default=45_000, help="claim TTL (45000)")
    p.add_argument("--csma-min-ms", type=non_negative, default=2_000, help="CSMA wait, low end")
    p.add_argument("--csma-max-ms", type=non_negative, default=8_000, help="CSMA wait, high end")
    p.add_argument(
        "--claim-skew-ms",
        type=non_negative,
        default=1_000,
        help="a claim's started_at may be this much before its question or after its event (1000)",
    )
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
        "--latency-max-ms", type=positive_int, default=60_000, help="latency cap (60000)"
    )
    p.add_argument("--seed", type=seed, default=1, help="CSMA and latency seed (1)")
    p.add_argument(
        "--run-ms", type=positive_int, default=60_000, help="stop after this long (60000)"
    )
    p.add_argument(
        "--questions",
        type=positive_int,
        default=None,
        help="stop once this many questions are seen, answered in the room and done with",
    )
    p.add_argument(
        "--linger-ms",
        type=non_negative,
        default=1_000,
        help="with --questions: keep reading this long before stopping (1000)",
    )
    p.add_argument(
        "--sync-timeout-ms",
        type=positive_int,
        default=5_000,
        help="the /sync long poll (5000)",
    )
    p.add_argument("--verdicts", default=None, help="write verdict lines here (default stdout)")
    a = p.parse_args(argv)
    if a.csma_min_ms > a.csma_max_ms:
        p.error("--csma-min-ms is above --csma-max-ms")
    if a.no_floor and a.carrier != "replica":
        p.error("--no-floor is for --carrier replica only")
    if not 0 <= a.latency_sigma <= 10:
        p.error("--latency-sigma must be 0 to 10")
    if a.sync_timeout_ms > 60_000:
        p.error("--sync-timeout-ms must be at most 60000")
    if not a.homeserver.startswith(("http://", "https://")):
        p.error("--homeserver must be an http:// or https:// URL")
    if not (a.user.startswith("@") and ":" in a.user):
        p.error("--user must be a Matrix user id, @name:server")
    if not a.room.startswith(("!", "#")):
        p.error("--room must be a room id (!...) or an alias (#...)")
    return a


def as_object(data: bytes | str) -> dict[str, Any] | None:
    """JSON text as an object, or None (not JSON, not an object, too deep)."""
    try:
        v = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return v if isinstance(v, dict) else None


class Homeserver:
    """The client-server API, each request bounded in time and in bytes."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base.rstrip("/")
        self.token: str | None = None
        self.txn = 0
        self.txn_prefix = f"{os.getpid()}-{now_ms()}"

    async def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float = REQUEST_S,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        for attempt in range(MAX_RETRIES + 1):
            try:
                async with self.session.request(
                    method,
                    self.base + path,
                    json=body,
                    params=params,
                    headers=headers,
                    timeout=aiohttp.ClientTimeout(total=timeout_s),
                ) as r:
                    data = await r.content.read(max_bytes + 1)
                    status = r.status
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                raise AgentError(f"{method} {path}: {e or type(e).__name__}") from None
            if len(data) > max_bytes:
                raise AgentError(f"{method} {path}: a response over {max_bytes} bytes")
            v = as_object(data)
            if status == 429 and attempt < MAX_RETRIES:
                wait = v.get("retry_after_ms") if v else None
                wait = wait if isinstance(wait, int) and 0 <= wait <= MAX_RETRY_MS else 1000
                await asyncio.sleep(wait / 1000)
                continue
            if status != 200 or v is None:
                what = (
                    f"{v.get('errcode')} {v.get('error')}"
                    if v
                    else data[:200].decode(errors="replace")
                )
                raise AgentError(f"{method} {path}: HTTP {status}: {what}")
            return v
        raise AgentError(f"{method} {path}: rate-limited {MAX_RETRIES + 1} times")

    async def send(self, room: str, kind: str, content: dict[str, Any]) -> None:
        self.txn += 1
        txn = f"{self.txn_prefix}-{self.txn}"
        path = f"/_matrix/client/v3/rooms/{quote(room, safe='')}/send/{quote(kind)}/{txn}"
        await self.call("PUT", path, content)


async def room_sync(
    hs: Homeserver, room_id: str, flt: str, since: str | None, timeout_ms: int
) -> tuple[str, dict[str, Any] | None]:
    """One bounded `/sync` with filter `flt`: the next batch token and the
    room's part of the answer (None: nothing for the room)."""
    params = {"filter": flt, "timeout": str(timeout_ms)}
    if since is not None:
        params["since"] = since
    v = await hs.call(
        "GET",
        "/_matrix/client/v3/sync",
        params=params,
        timeout_s=timeout_ms / 1000 + REQUEST_S,
        max_bytes=MAX_SYNC_BYTES,
    )
    token = v.get("next_batch")
    if not isinstance(token, str):
        raise AgentError("/sync: no next_batch")
    rooms = v.get("rooms")
    joined = rooms.get("join") if isinstance(rooms, dict) else None
    room = joined.get(room_id) if isinstance(joined, dict) else None
    return token, room if isinstance(room, dict) else None


def replied_to(content: dict[str, Any]) -> str | None:
    """The event id an `m.room.message` replies to, if any."""
    rel = content.get("m.relates_to")
    if not isinstance(rel, dict):
        return None
    irt = rel.get("m.in_reply_to")
    eid = irt.get("event_id") if isinstance(irt, dict) else None
    return eid if isinstance(eid, str) and eid else None


def reacted_to(ev: dict[str, Any]) -> str | None:
    """The question a reaction claim (`m.reaction`, an `m.annotation` with
    the key `on it`) is on, if `ev` is one."""
    if ev.get("type") != "m.reaction":
        return None
    content = ev.get("content")
    rel = content.get("m.relates_to") if isinstance(content, dict) else None
    if not isinstance(rel, dict) or rel.get("rel_type") != "m.annotation":
        return None
    eid = rel.get("event_id")
    if rel.get("key") != REACTION_KEY or not isinstance(eid, str) or not eid:
        return None
    return eid


class Runner:
    """One run: the replica, the floor's agent half (None under
    --no-floor and the carriers `reaction` and `none`), the CSMA waits of
    those carriers, the model's inferences under way, the counts."""

    def __init__(self, a: argparse.Namespace, hs: Homeserver, me: str, room: str) -> None:
        self.a = a
        self.hs = hs
        self.me = floor_id(me)
        self.room = room
        self.replica = Server(policy=a.policy, ttl_ms=a.ttl_ms)
        try:
            self.floor = (
                None
                if a.no_floor or a.carrier != "replica"
                else Agent(
                    self.me,
                    policy=a.policy,
                    ttl_ms=a.ttl_ms,
                    csma_min_ms=a.csma_min_ms,
                    csma_max_ms=a.csma_max_ms,
                    seed=a.seed,
                )
            )
        except ValueError as e:  # herdsim.InputError: an id the floor refuses
            raise AgentError(f"the floor refuses the id {self.me!r}: {e}") from None
        self.model = FakeModel(a.latency_median_ms, a.latency_sigma, a.latency_max_ms, a.seed)
        # `reaction` and `none`: the CSMA waits under way (question id ->
        # the time the wait ends), drawn from a stream of their own; the
        # questions another agent has reacted to.
        self.csma = random.Random(a.seed ^ 0x5EED)
        self.waiting: dict[str, int] = {}
        self.reacted: set[str] = set()
        self.reacted_order: deque[str] = deque()
        self.thinking: dict[str, int] = {}  # question id -> time the answer is ready
        self.seen: set[str] = set()
        self.seen_order: deque[str] = deque()
        # Every question in the room (ours to answer or not): its
        # origin_server_ts, whether an answer has been seen, the last
        # holder logged.
        self.asked: OrderedDict[str, int] = OrderedDict()
        self.answered_in_room: set[str] = set()
        self.holders: dict[str, str] = {}
        self.n = Counts()
        self.out: TextIO = open(a.verdicts, "w") if a.verdicts else sys.stdout
        self.done_at: int | None = None

    # ------------------------------------------------------------ the replica

    def remember_question(self, eid: str, ts: int) -> None:
        self.asked[eid] = ts
        if len(self.asked) > MAX_SEEN:
            old, _ = self.asked.popitem(last=False)
            self.answered_in_room.discard(old)
            self.holders.pop(old, None)

    def claim_in_time(self, content: dict[str, Any], ts: int) -> bool:
        """The replica's own rule: a claim for a question seen, `started_at`
        an integer no more than `--claim-skew-ms` before the question nor
        more than that after the claim event."""
        q, at = content.get("msg_id"), content.get("started_at")
        if not isinstance(q, str) or not isinstance(at, int) or isinstance(at, bool):
            return False
        asked = self.asked.get(q)
        skew = self.a.claim_skew_ms
        return asked is not None and asked - skew <= at <= ts + skew

    def replica_input(self, ev: dict[str, Any]) -> tuple[int, list[tuple[str, str]]] | None:
        """Feed one timeline event to the replica: its time and its sends."""
        kind, sender, ts = ev.get("type"), ev.get("sender"), ev.get("origin_server_ts")
        content = ev.get("content")
        if not isinstance(sender, str) or not sender.startswith("@"):
            return None
        if (
            not isinstance(ts, int)
            or isinstance(ts, bool)
            or ts < 0
            or not isinstance(content, dict)
        ):
            return None
        who = floor_id(sender)
        if kind == "m.room.member":
            target = ev.get("state_key")
            if not isinstance(target, str) or not target.startswith("@"):
                return None
            membership = content.get("membership")
            if membership == "join":
                return ts, self.replica.join(ts, floor_id(target), CHANNEL)
            if membership in ("leave", "ban"):
                return ts, self.replica.leave(ts, floor_id(target), CHANNEL)
            return None
        eid = ev.get("event_id")
        if not isinstance(eid, str) or not eid:
            return None
        if kind == "m.room.message":
            body = content.get("body")
            if not isinstance(body, str):
                return None
            rel = content.get("m.relates_to")
            irt = replied_to(content)
            if isinstance(rel, dict) and irt is None:
                return None  # an edit, a reaction-like relation: no MSG
            frame: dict[str, Any] = {"type": "MSG", "id": eid, "to": CHANNEL, "content": body}
            if irt is not None:
                frame["in_reply_to"] = irt
                if irt in self.asked:
                    self.answered_in_room.add(irt)
            else:
                self.remember_question(eid, ts)
            return ts, self.replica.frame(ts, who, json.dumps(frame))
        if kind == CLAIM_TYPE:
            if not self.claim_in_time(content, ts):
                return None
            frame = {
                "type": "RESPONDING_TO",
                "msg_id": content["msg_id"],
                "started_at": content["started_at"],
                "channel": CHANNEL,
            }
            sends = self.replica.frame(ts, who, json.dumps(frame))
            self.log_verdict(content["msg_id"])
            return ts, sends
        return None

    def log_verdict(self, qid: str) -> None:
        holder = self.replica.holder(CHANNEL, qid)
        if holder is None or self.holders.get(qid) == holder:
            return
        self.holders[qid] = holder
        self.out.write(f"verdict {qid} {user_id(holder)}\n")
        self.out.flush()

    # -------------------------------------------------------------- the agent

    async def on_event(self, ev: dict[str, Any], live: bool) -> None:
        on = reacted_to(ev)
        if on is not None and ev.get("sender") != user_id(self.me) and on not in self.reacted:
            self.reacted.add(on)
            self.reacted_order.append(on)
            if len(self.reacted_order) > MAX_SEEN:
                self.reacted.discard(self.reacted_order.popleft())
        got = self.replica_input(ev)
        if got is None or not live:
            return
        now = now_ms()
        for to, text in got[1]:
            if to != self.me:
                continue
            known = self.floor.frame(now, text) if self.floor is not None else True
            msg = as_object(text)
            qid = self.question(msg) if known and msg is not None else None
            if qid is None or qid in self.seen:
                continue
            self.seen.add(qid)
            self.seen_order.append(qid)
            if len(self.seen_order) > MAX_SEEN:
                self.seen.discard(self.seen_order.popleft())
            self.n.questions += 1
            if len(self.thinking) + len(self.waiting) >= MAX_THINKING:
                self.n.skipped += 1
                continue
            if self.floor is not None:
                self.floor.answer(now, text)
            elif self.a.carrier != "replica":
                lo, hi = self.a.csma_min_ms, self.a.csma_max_ms
                self.waiting[qid] = now + round(self.csma.uniform(lo, hi))
            else:
                self.start(now, qid)
            await self.drain(now)
        await self.drain(now)

    def question(self, msg: dict[str, Any]) -> str | None:
        """A relayed MSG that answers nothing: its id."""
        if msg.get("type") != "MSG" or msg.get("to") != CHANNEL:
            return None
        if msg.get("in_reply_to") is not None or msg.get("from") in (None, self.me):
            return None
        mid = msg.get("id")
        return mid if isinstance(mid, str) else None

    def start(self, now: int, qid: str) -> None:
        self.n.started += 1
        self.thinking[qid] = now + self.model.latency_ms()

    async def answer(self, qid: str, body: str) -> None:
        content = {
            "msgtype": "m.text",
            "body": body,
            "m.relates_to": {"m.in_reply_to": {"event_id": qid}},
        }
        await self.hs.send(self.room, "m.room.message", content)
        self.n.answered += 1

    async def on_timers(self, now: int) -> None:
        if self.floor is not None and (t := self.floor.poll_timeout()) is not None and t <= now:
            self.floor.timeout(now)
        for qid, due in sorted(self.waiting.items(), key=lambda kv: kv[1]):
            if due > now:
                continue
            del self.waiting[qid]
            # The wait is over: skip for an answer seen (and, under
            # `reaction`, for another agent's claim seen); else claim (a
            # reaction) and infer. The inference starts when the wait
            # ended, as the claim is sent.
            claimed = self.a.carrier == "reaction" and qid in self.reacted
            if qid in self.answered_in_room or claimed:
                self.n.skipped += 1
                continue
            self.start(now, qid)
            if self.a.carrier == "reaction":
                rel = {"rel_type": "m.annotation", "event_id": qid, "key": REACTION_KEY}
                await self.hs.send(self.room, "m.reaction", {"m.relates_to": rel})
        for qid, due in sorted(self.thinking.items(), key=lambda kv: kv[1]):
            if due > now:
                continue
            del self.thinking[qid]
            body = f"{user_id(self.me)}'s answer to {qid}"
            if self.floor is not None:
                self.floor.inference_done(now, qid, body)
            else:
                await self.answer(qid, body)

    async def drain(self, now: int) -> None:
        if self.floor is None:
            return
        while (out := self.floor.poll_output()) is not None:
            kind = out["type"]
            if kind == "transmit":
                frame = as_object(out["frame"]) or {}
                if frame.get("type") == "RESPONDING_TO":
                    claim = {"msg_id": frame["msg_id"], "started_at": frame["started_at"]}
                    await self.hs.send(self.room, CLAIM_TYPE, claim)
                elif frame.get("type") == "MSG" and isinstance(frame.get("in_reply_to"), str):
                    await self.answer(frame["in_reply_to"], str(frame.get("content", "")))
                # Anything else the floor would send (a release) has no
                # room event: a claim ends when its question is answered.
            elif kind == "start_inference":
                self.start(now, out["msg_id"])
            elif kind == "abort_inference":
                self.n.aborted += 1
                self.thinking.pop(out["msg_id"], None)
            elif kind == "skipped":
                self.n.skipped += 1

    def idle(self) -> bool:
        return (
            not self.thinking
            and not self.waiting
            and (self.floor is None or self.floor.poll_timeout() is None)
        )

    def finished(self, now: int) -> bool:
        """With --questions: enough seen, each answered in the room, nothing
        to do; true `--linger-ms` after that first holds."""
        q = self.a.questions
        ready = (
            q is not None
            and self.n.questions >= q
            and self.idle()
            and all(s in self.answered_in_room for s in self.seen)
        )
        if not ready:
            self.done_at = None
            return False
        if self.done_at is None:
            self.done_at = now + self.a.linger_ms
        return now >= self.done_at

    # ---------------------------------------------------------------- syncing

    def sync_filter(self, limit: int) -> str:
        none = {"not_types": ["*"]}
        return json.dumps(
            {
                "presence": none,
                "account_data": none,
                "room": {
                    "rooms": [self.room],
                    "timeline": {"limit": limit},
                    "ephemeral": none,
                    "account_data": none,
                },
            }
        )

    async def sync(self, since: str | None, timeout_ms: int) -> tuple[str, list[dict[str, Any]]]:
        """One /sync: the next batch token and the room's events in order
        (state first, then the timeline)."""
        token, room = await room_sync(
            self.hs, self.room, self.sync_filter(SYNC_LIMIT), since, timeout_ms
        )
        if not isinstance(room, dict):
            return token, []
        events: list[dict[str, Any]] = []
        state = room.get("state")
        if isinstance(state, dict) and isinstance(state.get("events"), list):
            events += [e for e in state["events"] if isinstance(e, dict)]
        timeline = room.get("timeline")
        if isinstance(timeline, dict):
            if timeline.get("limited") is True and since is not None:
                self.n.gaps += 1
                print("matrix_agent: a /sync gap: events were missed", file=sys.stderr)
            if isinstance(timeline.get("events"), list):
                events += [e for e in timeline["events"] if isinstance(e, dict)]
        return token, events

    async def syncer(
        self, since: str, batches: asyncio.Queue[list[dict[str, Any]] | Exception]
    ) -> None:
        try:
            while True:
                since, events = await self.sync(since, self.a.sync_timeout_ms)
                if events:
                    await batches.put(events)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # handed to the main loop
            await batches.put(e)

    async def run(self) -> Counts:
        end = now_ms() + self.a.run_ms
        # The room as it is: its members join the replica; its history is
        # not answered.
        since, events = await self.sync(None, 0)
        for ev in events:
            if ev.get("type") == "m.room.member":
                await self.on_event(ev, live=False)
        print("ready", flush=True)
        batches: asyncio.Queue[list[dict[str, Any]] | Exception] = asyncio.Queue(MAX_QUEUED_BATCHES)
        reader = asyncio.create_task(self.syncer(since, batches))
        try:
            while True:
                now = now_ms()
                if now >= end or self.finished(now):
                    break
                dues = [end, *self.thinking.values(), *self.waiting.values()]
                if self.floor is not None and (t := self.floor.poll_timeout()) is not None:
                    dues.append(t)
                if self.done_at is not None:
                    dues.append(self.done_at)
                wait = max(0, min(dues) - now) / 1000
                got = []
                try:
                    got.append(await asyncio.wait_for(batches.get(), wait or 0.001))
                except asyncio.TimeoutError:
                    pass
                # Every event that has come before the timers: a YIELD read
                # before an inference is done aborts it.
                while not batches.empty():
                    got.append(batches.get_nowait())
                for batch in got:
                    if isinstance(batch, Exception):
                        raise AgentError(f"/sync failed: {batch}")
                    for ev in batch:
                        await self.on_event(ev, live=True)
                await self.on_timers(now_ms())
                await self.drain(now_ms())
        finally:
            reader.cancel()
            if self.out is not sys.stdout:
                self.out.close()
        return self.n


async def main_async(a: argparse.Namespace) -> Counts:
    async with aiohttp.ClientSession() as session:
        hs = Homeserver(session, a.homeserver)
        if a.token is not None:
            hs.token = a.token
            who = await hs.call("GET", "/_matrix/client/v3/account/whoami")
            if who.get("user_id") != a.user:
                raise AgentError(f"the token is {who.get('user_id')!r}'s, not {a.user!r}")
        else:
            login = {
                "type": "m.login.password",
                "identifier": {"type": "m.id.user", "user": a.user},
                "password": a.password,
            }
            v = await hs.call("POST", "/_matrix/client/v3/login", login)
            if not isinstance(v.get("access_token"), str):
                raise AgentError("login: no access_token")
            hs.token = v["access_token"]
        v = await hs.call("POST", f"/_matrix/client/v3/join/{quote(a.room, safe='')}", {})
        room = v.get("room_id")
        if not isinstance(room, str):
            raise AgentError("join: no room_id")
        return await Runner(a, hs, a.user, room).run()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        n = asyncio.run(main_async(a))
    except AgentError as e:
        print(f"matrix_agent: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    print(n.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
