"""A bridge that puts `herdsim live`'s agents on a real Matrix room, with
the floor and no floor server.

    python python/examples/matrix_bridge.py --homeserver http://127.0.0.1:8008 \\
        --room '!abc:localhost' --tokens tokens.json --listen 127.0.0.1:6690 &
    herdsim live my.toml --url ws://127.0.0.1:6690 --compare

`herdsim live` speaks the floor's wire (IDENTIFY, JOIN, RESPONDING_TO,
MSG) to a server. This bridge answers it as a floor server would, but holds
no floor of its own: each connection is one Matrix user (its access token
from `--tokens`, a JSON object of live's names, `operator` and
`agent-000`, ..., to tokens), and carries what that user does to the room
and what the room does back, as docs/matrix.md's agents do:

- a RESPONDING_TO becomes an `org.herdsim.claim` timeline event
  `{"msg_id", "started_at"}` (integers only), a MSG an `m.room.message`
  whose content also carries the floor's ids (`org.herdsim.id`, and
  `org.herdsim.in_reply_to` beside the Matrix reply relation), so that the
  agents keep the ids they chose;
- each connection has its own replica, a `herdsim.floor.Server`, fed its
  user's `/sync` stream in the room's order at each event's
  `origin_server_ts`, after the claim rule of docs/matrix.md (a claim for
  a question the replica has seen, `started_at` an integer no more than
  `--claim-skew-ms` before the question nor after the claim event); what
  the replica sends to that user (the others' messages and claims, a
  YIELD) is what the connection receives. Every replica decides from the
  same events, so the verdicts are the ones a floor server at the
  homeserver would send, and `herdsim live --compare` compares the real
  room with the simulated replica carrier (`[carrier] kind = "replica",
  platform = "matrix"`).

The replicas' members are the users of `--tokens` and, from their first
event, anybody else who writes in the room (as `name:server`, at most
1024), so that `herdsim observe --url ws://127.0.0.1:6690 --as observer`
(with an `observer` token) watches a real room and calibrates from it.
Times are real: give `--ttl-ms` as the scenario's TTL divided by live's
`--speed`.

Bounded, as a network peer must be: a WebSocket frame 64 KiB, 8 frames
queued per connection, the handshake 10 s, connections at most the
tokens' users at once; toward the homeserver, matrix_agent.py's bounds
(every request 10 s, a /sync's body 8 MiB, rate-limit retries 3). The ids
remembered (events to floor ids) are the last 65536.
It prints `ready` on stdout once it listens, and `joined NAME` each time a
connection has joined. Exit status: 0 at Ctrl-C or SIGTERM; 1 when the homeserver fails at start;
2 on bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from matrix_agent import (
    CLAIM_TYPE,
    REQUEST_S,
    SYNC_LIMIT,
    AgentError,
    Homeserver,
    as_object,
    replied_to,
    room_sync,
)
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from herdsim.floor import Server

OPERATOR = "operator"
ID_KEY = "org.herdsim.id"
REPLY_KEY = "org.herdsim.in_reply_to"
MAX_FRAME = 64 << 10
MAX_QUEUE = 8
HANDSHAKE_S = 10.0
MAX_IDS = 65536
MAX_STRANGERS = 1024
POLICIES = ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]


class Ids:
    """Event ids and the floor's message ids, both ways (the last MAX_IDS)."""

    def __init__(self) -> None:
        self.fid: OrderedDict[str, str] = OrderedDict()
        self.eid: dict[str, str] = {}

    def add(self, eid: str, fid: str) -> None:
        self.fid[eid] = fid
        self.eid[fid] = eid
        if len(self.fid) > MAX_IDS:
            old, f = self.fid.popitem(last=False)
            self.eid.pop(f, None)


class Member:
    """One connection: a Matrix user, its replica, its /sync stream."""

    def __init__(self, b: Bridge, name: str, ws: ServerConnection, hs: Homeserver) -> None:
        self.b = b
        self.name = name
        self.ws = ws
        self.hs = hs
        self.channel = ""
        self.replica = Server(policy=b.a.policy, ttl_ms=b.a.ttl_ms)
        self.strangers: set[str] = set()
        # Questions the replica has seen: floor id -> origin_server_ts.
        self.asked: OrderedDict[str, int] = OrderedDict()

    def sync_filter(self) -> str:
        none = {"not_types": ["*"]}
        room = {
            "rooms": [self.b.room],
            "timeline": {"limit": SYNC_LIMIT},
            "ephemeral": none,
            "account_data": none,
            "state": none,
        }
        return json.dumps({"presence": none, "account_data": none, "room": room})

    async def sync(self, since: str | None, timeout_ms: int) -> tuple[str, list[dict[str, Any]]]:
        token, room = await room_sync(self.hs, self.b.room, self.sync_filter(), since, timeout_ms)
        timeline = room.get("timeline") if isinstance(room, dict) else None
        events = timeline.get("events") if isinstance(timeline, dict) else None
        if isinstance(timeline, dict) and timeline.get("limited") is True and since:
            print(f"matrix_bridge: {self.name}: a /sync gap: events were missed", file=sys.stderr)
        return token, [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []

    def stranger(self, sender: str, ts: int) -> str | None:
        """Somebody of the room the tokens do not name (a person, another
        bot): the floor id `name:server` of `@name:server`, a member of the
        replica from its first event (at most MAX_STRANGERS of them)."""
        fid = sender[1:] if sender.startswith("@") else ""
        if fid in self.strangers:
            return fid
        if not fid or len(self.strangers) >= MAX_STRANGERS:
            return None
        try:
            self.replica.join(ts, fid, self.channel)
        except ValueError:  # herdsim.InputError: an id the floor refuses
            return None
        self.strangers.add(fid)
        return fid

    def frame_of(self, ev: dict[str, Any]) -> tuple[int, str, str] | None:
        """A timeline event as (time, sender's floor name, wire frame)."""
        sender, ts, content = ev.get("sender"), ev.get("origin_server_ts"), ev.get("content")
        eid = ev.get("event_id")
        if not isinstance(sender, str) or not isinstance(content, dict) or not isinstance(eid, str):
            return None
        if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
            return None
        who = self.b.names.get(sender) or self.stranger(sender, ts)
        if who is None:
            return None
        kind = ev.get("type")
        if kind == "m.room.message":
            body = content.get("body")
            if not isinstance(body, str):
                return None
            fid = content.get(ID_KEY)
            fid = fid if isinstance(fid, str) and fid else eid
            self.b.ids.add(eid, fid)
            irt = content.get(REPLY_KEY)
            if not isinstance(irt, str):
                reply = replied_to(content)
                irt = self.b.ids.fid.get(reply, reply) if reply else None
            msg: dict[str, Any] = {"type": "MSG", "id": fid, "to": self.channel, "content": body}
            if irt:
                msg["in_reply_to"] = irt
            else:
                self.asked[fid] = ts
                if len(self.asked) > MAX_IDS:
                    self.asked.popitem(last=False)
            return ts, who, json.dumps(msg)
        if kind == CLAIM_TYPE:
            q, at = content.get("msg_id"), content.get("started_at")
            if not isinstance(q, str) or not isinstance(at, int) or isinstance(at, bool):
                return None
            asked, skew = self.asked.get(q), self.b.a.claim_skew_ms
            if asked is None or not asked - skew <= at <= ts + skew:
                return None
            claim = {"type": "RESPONDING_TO", "msg_id": q, "started_at": at}
            claim["channel"] = self.channel
            return ts, who, json.dumps(claim)
        return None

    async def deliver(self, sends: list[tuple[str, str]]) -> None:
        for to, text in sends:
            if to == self.name:
                # A client that does not read fails its connection.
                await asyncio.wait_for(self.ws.send(text), REQUEST_S)

    async def syncing(self, since: str) -> None:
        while True:
            since, events = await self.sync(since, self.b.a.sync_timeout_ms)
            for ev in events:
                got = self.frame_of(ev)
                if got is None:
                    continue
                ts, who, text = got
                sends = self.replica.frame(ts, who, text, operator=who == OPERATOR)
                await self.deliver(sends)

    async def pump(self) -> None:
        """Every frame of the client's, as room events, in order."""
        async for text in self.ws:
            frame = as_object(text)
            if frame is not None:
                await self.send(frame)

    async def send(self, frame: dict[str, Any]) -> None:
        """One frame of live's, as a room event."""
        kind = frame.get("type")
        if kind == "MSG":
            to, fid, body = frame.get("to"), frame.get("id"), frame.get("content")
            if to != self.channel or not isinstance(fid, str) or not isinstance(body, str):
                await self.error("bad_message", "a MSG to the room with an id and a content")
                return
            content: dict[str, Any] = {"msgtype": "m.text", "body": body, ID_KEY: fid}
            irt = frame.get("in_reply_to")
            if isinstance(irt, str):
                content[REPLY_KEY] = irt
                if (eid := self.b.ids.eid.get(irt)) is not None:
                    content["m.relates_to"] = {"m.in_reply_to": {"event_id": eid}}
            await self.hs.send(self.b.room, "m.room.message", content)
        elif kind == "RESPONDING_TO":
            q, at = frame.get("msg_id"), frame.get("started_at")
            if not isinstance(q, str) or not isinstance(at, int) or isinstance(at, bool):
                await self.error("bad_started_at", "started_at must be an integer of ms")
                return
            await self.hs.send(self.b.room, CLAIM_TYPE, {"msg_id": q, "started_at": at})
        # Anything else (a LEAVE, a release) has no room event.

    async def error(self, code: str, message: str) -> None:
        await self.ws.send(json.dumps({"type": "ERROR", "code": code, "message": message}))


class Bridge:
    def __init__(self, a: argparse.Namespace, session: aiohttp.ClientSession) -> None:
        self.a = a
        self.session = session
        self.tokens: dict[str, str] = {}
        self.users: dict[str, str] = {}  # floor name -> Matrix user id
        self.names: dict[str, str] = {}  # Matrix user id -> floor name
        self.room = ""
        self.ids = Ids()
        self.connected: set[str] = set()
        self.open = 0
        self.starts = 0

    async def start(self, tokens: dict[str, str]) -> None:
        for name, token in tokens.items():
            hs = Homeserver(self.session, self.a.homeserver)
            hs.token = token
            who = await hs.call("GET", "/_matrix/client/v3/account/whoami")
            uid = who.get("user_id")
            if not isinstance(uid, str):
                raise AgentError(f"whoami for {name!r}: no user_id")
            v = await hs.call("POST", f"/_matrix/client/v3/join/{quote(self.a.room, safe='')}", {})
            room = v.get("room_id")
            if not isinstance(room, str):
                raise AgentError(f"{name}: join: no room_id")
            self.room = room
            self.tokens[name], self.users[name], self.names[uid] = token, uid, name

    async def handle(self, ws: ServerConnection) -> None:
        # Connections at once: the users', and a few more in their handshake.
        if self.open >= len(self.tokens) + MAX_QUEUE:
            return
        self.open += 1
        name = None
        try:
            hello = as_object(await asyncio.wait_for(ws.recv(), HANDSHAKE_S)) or {}
            name = hello.get("name")
            if hello.get("type") != "IDENTIFY" or name not in self.tokens:
                await ws.send(
                    json.dumps(
                        {"type": "ERROR", "code": "unknown_identity", "message": f"{name!r}"}
                    )
                )
                return
            assert isinstance(name, str)
            if name in self.connected:
                await ws.send(json.dumps({"type": "ERROR", "code": "taken", "message": name}))
                name = None
                return
            self.connected.add(name)
            hs = Homeserver(self.session, self.a.homeserver)
            hs.token = self.tokens[name]
            m = Member(self, name, ws, hs)
            await ws.send(json.dumps({"type": "WELCOME", "agent_id": name}))
            join = as_object(await asyncio.wait_for(ws.recv(), HANDSHAKE_S)) or {}
            channel = join.get("channel")
            if join.get("type") != "JOIN" or not isinstance(channel, str) or not channel:
                await m.error("bad_message", "JOIN a channel first")
                return
            m.channel = channel
            # The room as it is now: later events are the run's. Synapse
            # keeps a /sync answer a while for a request that repeats one
            # (user, filter, since, timeout): a second connection of the same
            # user would get the first one's starting point, and replay
            # everything since. A timeout of its own makes each start new
            # (an initial /sync does not wait for it).
            self.starts += 1
            since, _ = await m.sync(None, 1 + self.starts % 100_000)
            for member in [OPERATOR, *sorted(n for n in self.tokens if n != OPERATOR)]:
                m.replica.join(0, member, channel)
            await ws.send(json.dumps({"type": "JOINED", "channel": channel}))
            print(f"joined {name}", flush=True)
            # The room to the client and the client to the room, until
            # either ends (the client goes, the homeserver fails): then the
            # connection closes, so that live sees it.
            reader = asyncio.create_task(m.syncing(since))
            writer = asyncio.create_task(m.pump())
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            for t in (reader, writer):
                t.cancel()
            for t in done:
                e = None if t.cancelled() else t.exception()
                if e is not None and not isinstance(e, ConnectionClosed):
                    print(f"matrix_bridge: {name}: {e}", file=sys.stderr)
            await ws.close()
        except (ConnectionClosed, asyncio.TimeoutError):
            pass
        except AgentError as e:
            print(f"matrix_bridge: {name}: {e}", file=sys.stderr)
        finally:
            self.open -= 1
            if name is not None:
                self.connected.discard(name)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--homeserver", required=True, help="e.g. http://127.0.0.1:8008")
    p.add_argument("--room", required=True, help="the room id (!...) or alias (#...)")
    p.add_argument("--tokens", required=True, help="JSON: live's names -> access tokens")
    p.add_argument("--listen", default="127.0.0.1:6690", help="host:port (127.0.0.1:6690)")
    p.add_argument("--policy", default="spec", choices=POLICIES, help="the floor's policy (spec)")
    p.add_argument("--ttl-ms", type=int, default=45_000, help="claim TTL, real ms (45000)")
    p.add_argument("--claim-skew-ms", type=int, default=1_000, help="the claim rule's margin")
    p.add_argument("--sync-timeout-ms", type=int, default=5_000, help="the /sync long poll")
    a = p.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        p.error("--listen must be host:port")
    if host not in ("127.0.0.1", "localhost", "::1"):
        p.error("--listen must be a loopback address (the bridge has no authentication)")
    a.host, a.port = host, int(port)
    for flag, v in [("--ttl-ms", a.ttl_ms), ("--claim-skew-ms", a.claim_skew_ms)]:
        if not 0 <= v <= 10**9:
            p.error(f"{flag} must be 0 to 1e9")
    if not 1 <= a.sync_timeout_ms <= 60_000:
        p.error("--sync-timeout-ms must be 1 to 60000")
    try:
        tokens = json.loads(Path(a.tokens).read_text())
    except (OSError, ValueError) as e:
        p.error(f"--tokens {a.tokens}: {e}")
    if not isinstance(tokens, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tokens.items()
    ):
        p.error(f"--tokens {a.tokens}: must be a JSON object of names to token strings")
    if OPERATOR not in tokens:
        p.error(f"--tokens {a.tokens}: no {OPERATOR!r}")
    a.token_map = tokens
    return a


async def main_async(a: argparse.Namespace) -> None:
    async with aiohttp.ClientSession() as session:
        b = Bridge(a, session)
        await b.start(a.token_map)
        stop = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not stop.done():
                stop.set_result(None)

        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, done)
        async with serve(b.handle, a.host, a.port, max_size=MAX_FRAME, max_queue=MAX_QUEUE):
            print("ready", flush=True)
            await stop


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        asyncio.run(main_async(a))
    except AgentError as e:
        print(f"matrix_bridge: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
