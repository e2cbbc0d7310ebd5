"""A passive recorder of a Matrix room, for `herdsim calibrate --format matrix`.

    python python/examples/matrix_observe.py --homeserver http://127.0.0.1:8008 \\
        --user @recorder:localhost --token TOKEN --room '!abc:localhost' \\
        --out room.json --duration-s 3600
    herdsim calibrate --format matrix --bots @agent-1:localhost,@agent-2:localhost room.json

It logs in by access token, joins the room (a member is what may read
it; joining a room it is in already changes nothing), and `/sync`s it
with a bounded long poll (`--sync-timeout-ms`, 5000), writing every
timeline event of the room from then on, as the homeserver sent it, to
`--out` as one JSON array of events: the shape calibrate reads
(docs/exports.md). It sends nothing to the room. The array is written as
the events come (nothing is held in memory but one `/sync` batch) and
closed when the recorder stops: after `--duration-s`, after `--events`
events, before `--max-bytes` would be passed (the event that would pass
it is not written), or on SIGINT or SIGTERM. It prints `ready` on stdout
once its first `/sync` is done (events from then on are recorded), and
at the end one line: `events=N bytes=B gaps=G stopped=REASON`.

Bounded: every request within 10 s (a `/sync` within its long poll plus
10 s), a response body of 8 MiB at most, the output `--max-bytes` (64
MiB). A `/sync` that says `limited` (the homeserver left events out: more
than 100 since the last batch) is counted as a gap and reported on
stderr: the recording then misses events.
Exit status: 0; 1 when the homeserver failed or refused, or the output
cannot be written; 2 on bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any, TextIO
from urllib.parse import quote

import aiohttp

MAX_SYNC_BYTES = 8 << 20
MAX_BODY_BYTES = 1 << 20
SYNC_LIMIT = 100
REQUEST_S = 10.0
MAX_DURATION_S = 10**7
MAX_EVENTS = 10**9
MAX_OUT_BYTES = 1 << 40


class ObserveError(Exception):
    """The homeserver failed or refused, or the output failed."""


def bounded(lo: float, hi: float, kind: type = int) -> Any:
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: not a number") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text}: must be {lo} to {hi}")
        return v

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Record a Matrix room's timeline as a JSON array of events."
    )
    p.add_argument("--homeserver", required=True, help="e.g. http://127.0.0.1:8008")
    p.add_argument("--user", required=True, help="the recorder's user id, @name:server")
    p.add_argument("--token", required=True, help="the recorder's access token")
    p.add_argument("--room", required=True, help="the room id (!...) or alias (#...)")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument(
        "--duration-s",
        type=bounded(0.001, MAX_DURATION_S, float),
        default=3600.0,
        help="stop after this long (3600)",
    )
    p.add_argument(
        "--events", type=bounded(1, MAX_EVENTS), default=None, help="stop after this many events"
    )
    p.add_argument(
        "--max-bytes",
        type=bounded(1024, MAX_OUT_BYTES),
        default=64 << 20,
        help="stop before the output passes this many bytes (64 MiB)",
    )
    p.add_argument(
        "--sync-timeout-ms",
        type=bounded(1, 60_000),
        default=5_000,
        help="the /sync long poll (5000)",
    )
    a = p.parse_args(argv)
    if not a.homeserver.startswith(("http://", "https://")):
        p.error("--homeserver must be an http:// or https:// URL")
    if not (a.user.startswith("@") and ":" in a.user):
        p.error("--user must be a Matrix user id, @name:server")
    if not a.room.startswith(("!", "#")):
        p.error("--room must be a room id (!...) or an alias (#...)")
    return a


class Homeserver:
    def __init__(self, session: aiohttp.ClientSession, base: str, token: str) -> None:
        self.session = session
        self.base = base.rstrip("/")
        self.token = token

    async def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float = REQUEST_S,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> dict[str, Any]:
        try:
            async with self.session.request(
                method,
                self.base + path,
                json=body,
                params=params,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as r:
                data = await r.content.read(max_bytes + 1)
                status = r.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            raise ObserveError(f"{method} {path}: {e or type(e).__name__}") from None
        if len(data) > max_bytes:
            raise ObserveError(f"{method} {path}: a response over {max_bytes} bytes")
        try:
            v = json.loads(data)
        except (ValueError, RecursionError):
            v = None
        if status != 200 or not isinstance(v, dict):
            what = data[:200].decode(errors="replace")
            raise ObserveError(f"{method} {path}: HTTP {status}: {what}")
        return v


class Recorder:
    def __init__(self, a: argparse.Namespace, hs: Homeserver, room: str, out: TextIO) -> None:
        self.a = a
        self.hs = hs
        self.room = room
        self.out = out
        self.events = 0
        self.bytes = 0
        self.gaps = 0

    def sync_filter(self) -> str:
        none = {"not_types": ["*"]}
        return json.dumps(
            {
                "presence": none,
                "account_data": none,
                "room": {
                    "rooms": [self.room],
                    "timeline": {"limit": SYNC_LIMIT},
                    "state": {"lazy_load_members": True},
                    "ephemeral": none,
                    "account_data": none,
                },
            }
        )

    async def sync(self, since: str | None, timeout_ms: int) -> tuple[str, list[dict[str, Any]]]:
        params = {"filter": self.sync_filter(), "timeout": str(timeout_ms)}
        if since is not None:
            params["since"] = since
        v = await self.hs.call(
            "GET",
            "/_matrix/client/v3/sync",
            params=params,
            timeout_s=timeout_ms / 1000 + REQUEST_S,
            max_bytes=MAX_SYNC_BYTES,
        )
        token = v.get("next_batch")
        if not isinstance(token, str):
            raise ObserveError("/sync: no next_batch")
        rooms = v.get("rooms")
        joined = rooms.get("join") if isinstance(rooms, dict) else None
        room = joined.get(self.room) if isinstance(joined, dict) else None
        timeline = room.get("timeline") if isinstance(room, dict) else None
        if not isinstance(timeline, dict):
            return token, []
        if timeline.get("limited") is True and since is not None:
            self.gaps += 1
            print("matrix_observe: a /sync gap: events were missed", file=sys.stderr)
        events = timeline.get("events")
        return token, [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []

    def write(self, ev: dict[str, Any]) -> bool:
        """Write one event; False (and nothing written) when it would pass
        --max-bytes (with the array's closing bracket)."""
        text = ("[\n" if self.events == 0 else ",\n") + json.dumps(ev, ensure_ascii=False)
        size = len(text.encode())
        if self.bytes + size + 3 > self.a.max_bytes:
            return False
        self.out.write(text)
        self.bytes += size
        self.events += 1
        return True

    def close(self) -> None:
        self.out.write("[]\n" if self.events == 0 else "\n]\n")
        self.out.flush()

    async def run(self, stop: asyncio.Event) -> str:
        end = time.monotonic() + self.a.duration_s
        since, _ = await self.sync(None, 0)
        print("ready", flush=True)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return "duration"
            poll = min(self.a.sync_timeout_ms, max(1, int(left * 1000)))
            task = asyncio.ensure_future(self.sync(since, poll))
            stopped = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                task.cancel()
                return "signal"
            stopped.cancel()
            since, events = task.result()
            for ev in events:
                if not self.write(ev):
                    return "max-bytes"
                if self.a.events is not None and self.events >= self.a.events:
                    return "events"
            if stop.is_set():
                return "signal"


async def main_async(a: argparse.Namespace, out: TextIO) -> Recorder:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with aiohttp.ClientSession() as session:
        hs = Homeserver(session, a.homeserver, a.token)
        who = await hs.call("GET", "/_matrix/client/v3/account/whoami")
        if who.get("user_id") != a.user:
            raise ObserveError(f"the token is {who.get('user_id')!r}'s, not {a.user!r}")
        v = await hs.call("POST", f"/_matrix/client/v3/join/{quote(a.room, safe='')}", {})
        room = v.get("room_id")
        if not isinstance(room, str):
            raise ObserveError("join: no room_id")
        r = Recorder(a, hs, room, out)
        try:
            reason = await r.run(stop)
        finally:
            r.close()
        print(f"events={r.events} bytes={r.bytes} gaps={r.gaps} stopped={reason}", flush=True)
        return r


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        with open(a.out, "w", encoding="utf-8") as out:
            asyncio.run(main_async(a, out))
    except ObserveError as e:
        print(f"matrix_observe: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"matrix_observe: {a.out}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
