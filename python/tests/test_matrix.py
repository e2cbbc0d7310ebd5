"""The floor on a real Matrix room with no floor server
(python/examples/matrix_agent.py, docs/matrix.md), against a real Synapse.

The fixture generates a Synapse configuration in a temp folder (SQLite,
loopback only, a free port, no federation listener, no key server),
starts it, and registers the users by shared secret through the admin
API; the rate limits on messages are lifted for those users only, through
the admin API's `override_ratelimit`. Then 4 agent processes and an
operator (this test) share one room: under `spec`, each question is
answered exactly once, and every agent's replica logs the same verdicts;
with `--no-floor`, the same agents answer the questions more than once.
One small test keeps Synapse's default limits and shows what they do.

Compared with the simulator (docs/matrix.md): the same 4 agents under
each `--carrier` (replica, reaction, none) answer 20 questions, and the
room's duplicate rate, unanswered rate and TTFR p50 must fall inside
the spread of the simulator's replications of that setting
(`[carrier] platform = "matrix"`, the links the measured delay). And
matrix_observe.py records a room that `herdsim.calibrate` then reads.

Skipped when Synapse (the `matrix-synapse` package, in the `test` extra)
or aiohttp cannot be imported, unless HERDSIM_MATRIX=required (CI sets
it: tests/python.rs), which makes that a failure. Every process started
is killed at the end, whatever happens.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from procs import Proc

AGENTS = 4
QUESTIONS = 6
SERVER = "localhost"
START_S = 60
RUN_S = 40
CSMA_MAX_MS = 100
# Between questions.
GAP_S = 0.2


def need(module: str) -> None:
    """Import `module` or skip (fail under HERDSIM_MATRIX=required)."""
    try:
        __import__(module)
    except ImportError as e:
        if os.environ.get("HERDSIM_MATRIX") == "required":
            pytest.fail(f"HERDSIM_MATRIX=required and {module} cannot be imported: {e}")
        pytest.skip(f"{module} cannot be imported ({e}); pip install 'herdsim[test]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Http:
    """Blocking JSON calls to the homeserver (the test's side), each
    within 10 s."""

    def __init__(self, base: str) -> None:
        self.base = base

    def call(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read(1 << 22) or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read(1 << 20) or b"{}")

    def ok(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        status, v = self.call(method, path, body, token)
        assert status == 200, (method, path, status, v)
        return v


@dataclass
class User:
    user_id: str
    token: str
    password: str = ""


@dataclass
class Synapse:
    url: str
    http: Http
    secret: str
    admin: User
    setup_s: float
    n: int = 0

    def register(self, name: str, admin: bool = False) -> User:
        """A user by shared secret (`/_synapse/admin/v1/register`)."""
        path = "/_synapse/admin/v1/register"
        nonce = self.http.ok("GET", path)["nonce"]
        password = secrets.token_hex(8)
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        for part in [nonce, name, password]:
            mac.update(part.encode() + b"\x00")
        mac.update(b"admin" if admin else b"notadmin")
        body = {
            "nonce": nonce,
            "username": name,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        v = self.http.ok("POST", path, body)
        return User(v["user_id"], v["access_token"], password)

    def unlimited(self, u: User) -> None:
        """Lift the message rate limit for `u` only."""
        path = f"/_synapse/admin/v1/users/{urllib.parse.quote(u.user_id)}/override_ratelimit"
        body = {"messages_per_second": 0, "burst_count": 0}
        self.http.ok("POST", path, body, self.admin.token)

    def room(self, creator: User) -> str:
        v = self.http.ok(
            "POST", "/_matrix/client/v3/createRoom", {"preset": "public_chat"}, creator.token
        )
        return str(v["room_id"])

    def send(self, u: User, room: str, kind: str, content: dict[str, Any]) -> tuple[int, Any]:
        self.n += 1
        path = f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/send/{kind}/t{self.n}"
        return self.http.call("PUT", path, content, u.token)

    def events(self, u: User, room: str) -> list[dict[str, Any]]:
        """The room's timeline, oldest first."""
        q = urllib.parse.urlencode({"dir": "f", "limit": "1000"})
        path = f"/_matrix/client/v3/rooms/{urllib.parse.quote(room)}/messages?{q}"
        return list(self.http.ok("GET", path, None, u.token)["chunk"])


LOG_CONFIG = """\
version: 1
formatters:
  plain: {format: '%(asctime)s %(levelname)s %(name)s %(message)s'}
handlers:
  file: {class: logging.FileHandler, formatter: plain, filename: LOGFILE}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    need("synapse")
    need("aiohttp")
    import yaml

    t0 = time.monotonic()
    d = tmp_path_factory.mktemp("synapse")
    cfg_path = d / "homeserver.yaml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "synapse.app.homeserver",
            "--server-name",
            SERVER,
            "--config-path",
            str(cfg_path),
            "--generate-config",
            "--report-stats=no",
            "--data-directory",
            str(d),
        ],
        cwd=d,
        check=True,
        capture_output=True,
        timeout=60,
    )
    cfg = yaml.safe_load(cfg_path.read_text())
    port = free_port()
    cfg["listeners"] = [
        {
            "port": port,
            "bind_addresses": ["127.0.0.1"],
            "type": "http",
            "tls": False,
            "x_forwarded": False,
            "resources": [{"names": ["client"], "compress": False}],
        }
    ]
    log_config = d / "log.yaml"
    log_config.write_text(LOG_CONFIG.replace("LOGFILE", str(d / "homeserver.log")))
    cfg["log_config"] = str(log_config)
    cfg["trusted_key_servers"] = []
    cfg["suppress_key_server_warning"] = True
    cfg["presence"] = {"enabled": False}
    # Passwords are hashed on registration: the fewest rounds, for speed.
    cfg["bcrypt_rounds"] = 4
    cfg_path.write_text(yaml.safe_dump(cfg))
    url = f"http://127.0.0.1:{port}"
    err_path = d / "stderr.txt"
    err_file = err_path.open("wb")
    p = subprocess.Popen(
        [sys.executable, "-m", "synapse.app.homeserver", "--config-path", str(cfg_path)],
        cwd=d,
        stdout=subprocess.DEVNULL,
        stderr=err_file,
    )
    try:
        http = Http(url)
        end = time.monotonic() + START_S
        while True:
            try:
                if http.call("GET", "/_matrix/client/versions")[0] == 200:
                    break
            except OSError:
                pass
            if p.poll() is not None or time.monotonic() > end:
                err = err_path.read_text(errors="replace")
                pytest.fail(f"Synapse did not start in {START_S} s: {err[-2000:]}")
            time.sleep(0.1)
        s = Synapse(url, http, cfg["registration_shared_secret"], User("", ""), 0.0)
        s.admin = s.register("operator", admin=True)
        s.unlimited(s.admin)
        s.setup_s = time.monotonic() - t0
        print(f"Synapse set up in {s.setup_s:.1f} s")
        yield s
    finally:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        err_file.close()


@pytest.fixture(scope="module")
def agents(synapse: Synapse) -> list[User]:
    users = [synapse.register(f"agent-{i}") for i in range(1, AGENTS + 1)]
    for u in users:
        synapse.unlimited(u)
    return users


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Processes to kill at the end of the test, whatever happens."""
    ps: list[Proc] = []
    yield ps
    for p in ps:
        p.kill()


def run_room(
    repo: Path,
    s: Synapse,
    users: list[User],
    procs: list[Proc],
    tmp: Path,
    no_floor: bool,
    after_question: Callable[[str, str], None] | None = None,
    password_login: bool = False,
    model: list[str] | None = None,
    questions: int = QUESTIONS,
    gap_s: float = GAP_S,
    on_room: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[list[str]]]:
    """The operator makes a room (`on_room(room)` then), the agents join
    it and the operator posts the questions (`after_question(room,
    event_id)` after each), `gap_s` apart; once every agent has stopped:
    the room's events, the questions' ids, each agent's verdict lines.
    `model` replaces the agents' CSMA and model flags."""
    room = s.room(s.admin)
    if on_room is not None:
        on_room(room)
    script = str(repo / "python/examples/matrix_agent.py")
    if model is None:
        # A CSMA window shorter than a /sync round trip: claims cross, and
        # the replicas must arbitrate.
        flags = ["--csma-min-ms", "0", "--csma-max-ms", str(CSMA_MAX_MS)]
        # The floor keeps to one answer while a claim reaches every replica
        # faster than the holder's inference (here at least about 400 ms).
        flags += ["--latency-median-ms", "600", "--latency-sigma", "0.15"]
        flags += ["--latency-max-ms", "1000"]
    else:
        flags = list(model)
    flags += ["--questions", str(questions), "--run-ms", str(RUN_S * 1000)]
    flags += ["--sync-timeout-ms", "2000"]
    if no_floor:
        flags.append("--no-floor")
    mine = []
    for i, u in enumerate(users, 1):
        log = tmp / f"verdicts-{i}.txt"
        args = [sys.executable, script, "--homeserver", s.url, "--user", u.user_id]
        # The first agent logs in with its password once (Synapse's login
        # limit is per address: 3 at once); the others use their tokens.
        auth = ["--password", u.password] if i == 1 and password_login else ["--token", u.token]
        args += [*auth, "--room", room, "--seed", str(i), "--verdicts", str(log)]
        p = Proc(args + flags)
        procs.append(p)
        mine.append((p, log))
    for p, _ in mine:
        p.wait_for(r"^ready$", "out", START_S)
    qids = []
    next_at = time.monotonic()
    for i in range(questions):
        status, v = s.send(s.admin, room, "m.room.message", {"msgtype": "m.text", "body": f"q{i}?"})
        assert status == 200, v
        qids.append(v["event_id"])
        # A fixed gap between the posts, whatever each send took.
        next_at += gap_s
        time.sleep(max(0.0, next_at - time.monotonic()))
        if after_question is not None:
            after_question(room, v["event_id"])
    end = time.monotonic() + RUN_S + 10
    for p, _ in mine:
        try:
            rc = p.p.wait(timeout=max(1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"an agent did not stop in {RUN_S + 10} s: {p.out} {p.err}")
        assert rc == 0, (rc, p.out, p.err)
        assert not any("gap" in e for e in p.err), p.err
    logs = [log.read_text().splitlines() if log.exists() else [] for _, log in mine]
    return s.events(s.admin, room), qids, logs


def answers(events: list[dict[str, Any]], qids: list[str]) -> dict[str, list[str]]:
    """Each question's answers: their senders, in room order."""
    got: dict[str, list[str]] = {q: [] for q in qids}
    for e in events:
        if e.get("type") != "m.room.message":
            continue
        irt = e["content"].get("m.relates_to", {}).get("m.in_reply_to", {}).get("event_id")
        if irt in got:
            got[irt].append(e["sender"])
    return got


def test_replica_floor_answers_each_question_once_and_agents_agree(
    repo, synapse, agents, procs, tmp_path
):
    events, qids, logs = run_room(repo, synapse, agents, procs, tmp_path, no_floor=False)
    got = answers(events, qids)
    assert all(len(v) == 1 for v in got.values()), got
    claims = [e for e in events if e["type"] == "org.herdsim.claim"]
    assert claims and all(set(e["content"]) == {"msg_id", "started_at"} for e in claims)
    assert all(isinstance(e["content"]["started_at"], int) for e in claims)
    # Claims crossed: some question was claimed by more than one agent, and
    # the floor, not luck, kept its answers to one.
    per_q = {q: {e["sender"] for e in claims if e["content"]["msg_id"] == q} for q in qids}
    assert max(len(v) for v in per_q.values()) > 1, per_q
    print(f"claimants per question: {sorted(len(v) for v in per_q.values())}")
    lag = [e["origin_server_ts"] - e["content"]["started_at"] for e in claims]
    print(f"claim started_at to its origin_server_ts: {min(lag)}-{max(lag)} ms")
    # Every replica reached the same verdicts, in the same order.
    assert logs[0], logs
    assert all(log == logs[0] for log in logs), logs
    # The last verdict on each question names the agent that answered it.
    last = {}
    for line in logs[0]:
        _, q, winner = line.split()
        last[q] = winner
    assert last == {q: v[0] for q, v in got.items()}, (last, got)


def test_without_the_floor_the_same_agents_answer_more_than_once(
    repo, synapse, agents, procs, tmp_path
):
    events, qids, logs = run_room(
        repo, synapse, agents, procs, tmp_path, no_floor=True, password_login=True
    )
    got = answers(events, qids)
    assert all(len(v) >= 1 for v in got.values()), got
    assert sum(len(v) for v in got.values()) > QUESTIONS, got
    assert not any(e["type"] == "org.herdsim.claim" for e in events)
    assert logs == [[]] * AGENTS


def test_default_rate_limits_refuse_a_burst_but_not_the_lifted_users(synapse, agents):
    """Synapse's default `rc_message` (0.2/s, burst 10): a user with no
    override is refused (429 M_LIMIT_EXCEEDED, with retry_after_ms) within
    a burst of 15 events; a test user whose limit was lifted is not."""
    limited = synapse.register("limited")
    room = synapse.room(synapse.admin)
    for u in (limited, agents[0]):
        synapse.http.ok("POST", f"/_matrix/client/v3/join/{urllib.parse.quote(room)}", {}, u.token)
    results = []
    for u in (limited, agents[0]):
        statuses = []
        for i in range(15):
            status, v = synapse.send(
                u, room, "m.room.message", {"msgtype": "m.text", "body": str(i)}
            )
            statuses.append((status, v))
        results.append(statuses)
    refused = [v for status, v in results[0] if status == 429]
    assert refused, results[0]
    assert all(v.get("errcode") == "M_LIMIT_EXCEEDED" for v in refused)
    assert all(isinstance(v.get("retry_after_ms"), int) for v in refused)
    first = next(i for i, (status, _) in enumerate(results[0]) if status == 429)
    assert first >= 5, results[0]  # a burst is allowed first
    print(f"default limits: message {first + 1} of 15 refused first, {len(refused)} refused")
    assert all(status == 200 for status, _ in results[1]), results[1]


def test_bad_claims_take_no_floor_from_honest_agents(repo, synapse, agents, procs, tmp_path):
    """A bad peer in the room claims every question at once with an absurd
    `started_at` (0, the far past; one after its own event, the future;
    a string), claims messages that do not exist, and floods: every replica
    drops or refuses those claims alike, so each question is still
    answered once, by an honest agent, and no verdict names the bad peer.
    Matrix itself refuses a float `started_at`."""
    bad = synapse.register("bad-peer")
    synapse.unlimited(bad)
    refused_floats = []

    def misbehave(room: str, qid: str) -> None:
        if not refused_floats:
            join = f"/_matrix/client/v3/join/{urllib.parse.quote(room)}"
            synapse.http.ok("POST", join, {}, bad.token)
        claim = "org.herdsim.claim"
        now = int(time.time() * 1000)
        for content in [
            {"msg_id": qid, "started_at": 0},
            {"msg_id": qid, "started_at": now + 3_600_000},
            {"msg_id": qid, "started_at": str(now)},
            {"msg_id": "$no-such-event", "started_at": now},
            *({"msg_id": f"$flood-{i}", "started_at": 1} for i in range(5)),
        ]:
            status, v = synapse.send(bad, room, claim, content)
            assert status == 200, v
        status, v = synapse.send(bad, room, claim, {"msg_id": qid, "started_at": 1.5})
        refused_floats.append((status, v.get("errcode")))

    # The bad peer joins with the first question: the agents are in by then.
    events, qids, logs = run_room(
        repo, synapse, agents, procs, tmp_path, no_floor=False, after_question=misbehave
    )
    assert all(r == (400, "M_BAD_JSON") for r in refused_floats), refused_floats
    got = answers(events, qids)
    assert all(len(v) == 1 for v in got.values()), got
    assert bad.user_id not in {v[0] for v in got.values()}
    assert logs[0] and all(log == logs[0] for log in logs), logs
    assert not any(bad.user_id in line for line in logs[0]), logs[0]


@pytest.mark.parametrize(
    "flags",
    [
        ["--homeserver", "127.0.0.1:8008", "--user", "@a:hs", "--token", "t", "--room", "!r:hs"],
        ["--homeserver", "http://hs", "--user", "a", "--token", "t", "--room", "!r:hs"],
        ["--homeserver", "http://hs", "--user", "@a:hs", "--room", "!r:hs"],
        ["--homeserver", "http://hs", "--user", "@a:hs", "--token", "t", "--room", "r"],
        ["--homeserver", "http://hs", "--user", "@a:hs", "--token", "t", "--room", "!r:hs"]
        + ["--csma-min-ms", "9", "--csma-max-ms", "1"],
    ],
)
def test_bad_flags_exit_2_with_one_message(repo, flags):
    need("aiohttp")
    script = str(repo / "python/examples/matrix_agent.py")
    p = subprocess.run([sys.executable, script, *flags], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, p.stderr


# ------------------------------------------------- compared with the simulator
#
# The same room simulated (`herdsim.run`, `[carrier] platform = "matrix"`):
# 4 agents that want every question, CSMA uniform over 0..1500 ms, the fake
# model lognormal with median 400 ms and sigma 0.5, a question every 2 s,
# the links the one-way delay measured on this Synapse. The simulator is
# run with as many questions a replication as the room had, so the spread
# of its replications' figures is the sampling error of one real run: each
# real figure must fall inside the middle 99.8% of them.

CMP_QUESTIONS = 20
CMP_GAP_S = 2.0
CMP_CSMA_MS = (0, 1500)
CMP_MEDIAN_MS = 400.0
CMP_SIGMA = 0.5
CMP_REPS = 2000
# The band of the simulated replications a real figure must fall in.
CMP_BAND = (0.001, 0.999)
PROBES = 9


def sync_room(s: Synapse, u: User, room: str, since: str | None, timeout_ms: int) -> Any:
    """One /sync of `u` on `room` (the test's side)."""
    none = {"not_types": ["*"]}
    flt = {
        "presence": none,
        "account_data": none,
        "room": {"rooms": [room], "timeline": {"limit": 50}, "ephemeral": none},
    }
    q = {"filter": json.dumps(flt), "timeout": str(timeout_ms)}
    if since is not None:
        q["since"] = since
    path = f"/_matrix/client/v3/sync?{urllib.parse.urlencode(q)}"
    return s.http.ok("GET", path, None, u.token)


def delivery_ms(s: Synapse, sender: User, receiver: User) -> list[float]:
    """Send to seen: `sender` posts to a room of its own while `receiver`
    waits in a /sync long poll on it; the time from the send starting to
    that /sync returning the event, ms, `PROBES` times (up, the server,
    down: two one-way delays)."""
    import threading

    room = s.room(sender)
    s.http.ok("POST", f"/_matrix/client/v3/join/{urllib.parse.quote(room)}", {}, receiver.token)
    since = sync_room(s, receiver, room, None, 0)["next_batch"]
    got: list[float] = []
    for i in range(PROBES):
        seen: dict[str, Any] = {}

        def wait(since: str = since, body: str = f"probe {i}", seen: dict[str, Any] = seen) -> None:
            tok, end = since, time.monotonic() + 10
            while time.monotonic() < end:
                v = sync_room(s, receiver, room, tok, 5000)
                tok = v["next_batch"]
                joined = v.get("rooms", {}).get("join", {}).get(room, {})
                events = joined.get("timeline", {}).get("events", [])
                if any(e.get("content", {}).get("body") == body for e in events):
                    seen["t"], seen["since"] = time.monotonic(), tok
                    return

        t = threading.Thread(target=wait, daemon=True)
        t.start()
        time.sleep(0.3)  # the long poll is waiting
        t0 = time.monotonic()
        status, v = s.send(
            sender, room, "m.room.message", {"msgtype": "m.text", "body": f"probe {i}"}
        )
        assert status == 200, v
        t.join(15)
        assert "t" in seen, f"probe {i} not seen in 10 s"
        got.append((seen["t"] - t0) * 1000)
        since = seen["since"]
    return got


@dataclass
class Figures:
    questions: int
    answers: list[int]
    duplicate_rate: float
    unanswered_rate: float
    ttfr_ms: list[int]
    ttfr_ms_in_order: list[int]
    ttfr_p50_ms: float


def nearest_rank(xs: list[float], p: float) -> float:
    """The simulator's percentile: the value of rank ceil(p x n)."""
    import math

    ys = sorted(xs)
    return ys[max(0, math.ceil(p * len(ys)) - 1)] if ys else float("nan")


def room_figures(events: list[dict[str, Any]], qids: list[str]) -> Figures:
    """The simulator's metrics of the room: per question the distinct
    agents that answered it, TTFR from the question's origin_server_ts to
    its first answer's."""
    ts = {e["event_id"]: e["origin_server_ts"] for e in events if "event_id" in e}
    got: dict[str, list[tuple[int, str]]] = {q: [] for q in qids}
    for e in events:
        if e.get("type") != "m.room.message":
            continue
        irt = e["content"].get("m.relates_to", {}).get("m.in_reply_to", {}).get("event_id")
        if irt in got:
            got[irt].append((e["origin_server_ts"], e["sender"]))
    n = [len({who for _, who in v}) for v in got.values()]
    ttfr = [min(t for t, _ in v) - ts[q] for q, v in got.items() if v]
    return Figures(
        questions=len(qids),
        answers=n,
        duplicate_rate=sum(k >= 2 for k in n) / len(n),
        unanswered_rate=sum(k == 0 for k in n) / len(n),
        ttfr_ms=sorted(ttfr),
        ttfr_ms_in_order=ttfr,
        ttfr_p50_ms=nearest_rank([float(t) for t in ttfr], 0.5),
    )


def simulated(carrier: str, one_way_ms: float, tmp: Path) -> list[dict[str, float]]:
    """The simulator's replications of the room's setting: each one's
    metrics (runs.csv)."""
    import csv
    import math

    import herdsim

    p99 = CMP_MEDIAN_MS * math.exp(2.3263 * CMP_SIGMA)
    text = f"""
name = "matrix-{carrier}"
reps = {CMP_REPS}
seed = 1
policies = ["spec"]
[network]
base_ms = {one_way_ms:.3f}
jitter = {{ kind = "fixed", ms = 0 }}
[[agents]]
count = {AGENTS}
respond_p = 1
clock_skew = {{ kind = "fixed", ms = 0 }}
csma = {{ kind = "uniform", min_ms = {CMP_CSMA_MS[0]}, max_ms = {CMP_CSMA_MS[1]} }}
inference = {{ kind = "lognormal", p50_ms = {CMP_MEDIAN_MS}, p99_ms = {p99:.3f} }}
[workload]
count = {CMP_QUESTIONS}
arrivals = "fixed"
mean_gap_ms = {CMP_GAP_S * 1000:.0f}
[carrier]
kind = "{carrier}"
platform = "matrix"
message_rate_per_s = 0
"""
    path = tmp / f"matrix-{carrier}.toml"
    path.write_text(text)
    r = herdsim.run(path, out=tmp / "sim", jobs=2)
    with (r.dir / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == CMP_REPS, len(rows)
    return [{k: float(v) for k, v in row.items() if k in SIM_METRICS} for row in rows]


SIM_METRICS = ("duplicate_rate", "unanswered_rate", "ttfr_p50_ms", "responses_per_msg")


def band(rows: list[dict[str, float]], metric: str) -> tuple[float, float, float]:
    """The simulated replications' mean of `metric` and the band of
    `CMP_BAND` around it (their quantiles)."""
    xs = sorted(r[metric] for r in rows if r[metric] == r[metric])
    lo = xs[int(CMP_BAND[0] * (len(xs) - 1))]
    hi = xs[int(round(CMP_BAND[1] * (len(xs) - 1)))]
    return sum(xs) / len(xs), lo, hi


def agent_model() -> list[str]:
    lo, hi = CMP_CSMA_MS
    return [
        "--csma-min-ms",
        str(lo),
        "--csma-max-ms",
        str(hi),
        "--latency-median-ms",
        str(CMP_MEDIAN_MS),
        "--latency-sigma",
        str(CMP_SIGMA),
    ]


@pytest.fixture(scope="module")
def one_way_ms(synapse: Synapse, agents: list[User]) -> float:
    """Half the median send-to-seen time on this Synapse."""
    probes = delivery_ms(synapse, synapse.admin, agents[0])
    med = nearest_rank(probes, 0.5)
    print(f"send to seen by another user's /sync, ms: {[round(x, 1) for x in sorted(probes)]}")
    print(f"one-way delay (half the median): {med / 2:.1f} ms")
    return med / 2


@pytest.mark.parametrize("carrier", ["replica", "reaction", "none"])
def test_the_simulated_matrix_carrier_agrees_with_the_real_one(
    repo, synapse, agents, procs, tmp_path, one_way_ms, carrier
):
    t0 = time.monotonic()
    model = [*agent_model(), "--carrier", carrier]
    events, qids, _ = run_room(
        repo,
        synapse,
        agents,
        procs,
        tmp_path,
        no_floor=False,
        model=model,
        questions=CMP_QUESTIONS,
        gap_s=CMP_GAP_S,
    )
    room_s = time.monotonic() - t0
    real = room_figures(events, qids)
    rows = simulated(carrier, one_way_ms, tmp_path)
    print(f"{carrier}: the room took {room_s:.1f} s; answers per question {real.answers}")
    print(f"{carrier}: TTFR ms {real.ttfr_ms}")
    lines = []
    bad = []
    for metric, got in [
        ("duplicate_rate", real.duplicate_rate),
        ("unanswered_rate", real.unanswered_rate),
        ("ttfr_p50_ms", real.ttfr_p50_ms),
    ]:
        mean, lo, hi = band(rows, metric)
        lines.append(f"{carrier} {metric}: real {got:.3f}, simulated mean {mean:.3f} [{lo}, {hi}]")
        if not lo <= got <= hi:
            bad.append(lines[-1])
    print("\n".join(lines))
    assert not bad, bad


# ------------------------------------------------------------ observing a room

OBSERVE_QUESTIONS = 8


def test_a_recorded_room_calibrates(repo, synapse, agents, procs, tmp_path, one_way_ms):
    """matrix_observe.py records a room where the agents answer without a
    claim (`--carrier none`); `herdsim.calibrate(format="matrix")` reads
    the recording: the 4 agents, the questions, what they saw."""
    import herdsim

    rec = synapse.register("recorder")
    out = tmp_path / "room.json"
    script = str(repo / "python/examples/matrix_observe.py")
    recorder: list[Proc] = []

    def start_recorder(room: str) -> None:
        args = [sys.executable, script, "--homeserver", synapse.url, "--user", rec.user_id]
        args += ["--token", rec.token, "--room", room, "--out", str(out)]
        args += ["--duration-s", str(RUN_S + 20), "--sync-timeout-ms", "1000"]
        p = Proc(args)
        procs.append(p)
        recorder.append(p)
        p.wait_for(r"^ready$", "out", START_S)

    events, qids, _ = run_room(
        repo,
        synapse,
        agents,
        procs,
        tmp_path,
        no_floor=False,
        model=[*agent_model(), "--carrier", "none"],
        questions=OBSERVE_QUESTIONS,
        gap_s=CMP_GAP_S,
        on_room=start_recorder,
    )
    p = recorder[0]
    time.sleep(1.5)  # the last answers reach the recorder's /sync
    p.p.send_signal(signal.SIGTERM)
    assert p.p.wait(timeout=20) == 0, (p.out, p.err)
    time.sleep(0.5)  # its last line read off its pipe
    pattern = r"events=(\d+) bytes=\d+ gaps=(\d+) stopped=(\w+)$"
    last = [m for line in p.out if (m := re.match(pattern, line))]
    assert last and last[0].group(3) == "signal", p.out
    summary = last[0]
    recorded = json.loads(out.read_text())
    assert int(summary.group(1)) == len(recorded) and summary.group(2) == "0", p.out
    # Every event of the room from the questions on, in the room's order.
    ids = [e["event_id"] for e in recorded]
    room_ids = [e["event_id"] for e in events]
    assert set(qids) <= set(ids)
    assert ids == [i for i in room_ids if i in set(ids)]
    real = room_figures(events, qids)
    bots = [u.user_id for u in agents]
    c = herdsim.calibrate(
        out,
        out=tmp_path / "cal",
        format="matrix",
        bots=bots,
        link_ms=one_way_ms,
        csma_ms=CMP_CSMA_MS,
        reps=50,
        plot=False,
        jobs=2,
    )
    print(c.report)
    assert not c.warnings, c.warnings
    import csv

    with (c.dir / "estimates.csv").open() as f:
        est = {(r["group"], r["parameter"]): r for r in csv.DictReader(f)}
    with (c.dir / "agents.csv").open() as f:
        found = sorted(r["id"] for r in csv.DictReader(f))
    # The agents, and nobody else, read as agents.
    assert found == sorted(bots), found

    def ci(key: tuple[str, str]) -> tuple[float, float, float]:
        r = est[key]
        return float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"])

    # The operator's fixed 2 s gap.
    gap, lo, hi = ci(("workload", "mean_gap_ms"))
    assert lo <= CMP_GAP_S * 1000 <= hi, (gap, lo, hi)
    assert 'arrivals = "fixed"' in c.report
    # Calibrate's observed figures are over the questions complete at the
    # end of the recording; each is what the room's timeline shows.
    n = int(est[("observed", "duplicate_rate")]["samples"])
    assert OBSERVE_QUESTIONS - 1 <= n <= OBSERVE_QUESTIONS, n
    dup = sum(k >= 2 for k in real.answers[:n]) / n
    assert abs(ci(("observed", "duplicate_rate"))[0] - dup) < 1e-3, (est, real)
    ttfr = nearest_rank([float(t) for t in real.ttfr_ms_in_order[:n]], 0.5)
    assert ci(("observed", "ttfr_p50_ms"))[0] == ttfr, (est, real)
    # With no claims on the wire an answer's time is the CSMA wait and
    # the inference together: its median's interval must meet the range
    # the agents were given, from the model's median alone (a wait of 0)
    # to the CSMA window's top plus it (the longest wait).
    p50, lo, hi = ci(("group-0", "inference.p50_ms"))
    assert lo <= CMP_CSMA_MS[1] + CMP_MEDIAN_MS and hi >= CMP_MEDIAN_MS, (p50, lo, hi)
    print(f"calibrate: wait + inference p50 {p50:.0f} ms ({lo:.0f}..{hi:.0f})")


OBSERVE_BASE = ["--homeserver", "http://hs", "--user", "@r:hs", "--token", "t", "--room", "!r:hs"]


@pytest.mark.parametrize(
    ("script", "flags"),
    [
        ("matrix_agent.py", [*OBSERVE_BASE[:6], "--room", "!r:hs", "--carrier", "typing"]),
        ("matrix_agent.py", [*OBSERVE_BASE, "--carrier", "none", "--no-floor"]),
        ("matrix_observe.py", OBSERVE_BASE),
        ("matrix_observe.py", [*OBSERVE_BASE, "--out", "x.json", "--duration-s", "0"]),
        ("matrix_observe.py", [*OBSERVE_BASE, "--out", "x.json", "--events", "0"]),
        ("matrix_observe.py", [*OBSERVE_BASE, "--out", "x.json", "--max-bytes", "10"]),
        ("matrix_observe.py", [*OBSERVE_BASE[:4], "--token", "t", "--room", "r", "--out", "x"]),
    ],
)
def test_carrier_and_observer_bad_flags_exit_2_with_one_message(repo, tmp_path, script, flags):
    need("aiohttp")
    path = str(repo / "python/examples" / script)
    p = subprocess.run(
        [sys.executable, path, *flags], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, p.stderr
    assert not (tmp_path / "x.json").exists()


def test_the_recorder_stops_at_its_event_and_byte_bounds(repo, synapse, procs, tmp_path):
    """`--events 3` stops after the third event; `--max-bytes 2048` before
    the event that would pass it (each post here is about 700 bytes of
    JSON): both files are whole JSON arrays, in the room's order."""
    rec = synapse.register("bounded-recorder")
    room = synapse.room(synapse.admin)
    script = str(repo / "python/examples/matrix_observe.py")
    runs = []
    for name, bound in [("events", ["--events", "3"]), ("max-bytes", ["--max-bytes", "2048"])]:
        out = tmp_path / f"{name}.json"
        args = [sys.executable, script, "--homeserver", synapse.url, "--user", rec.user_id]
        args += ["--token", rec.token, "--room", room, "--out", str(out), "--duration-s", "30"]
        p = Proc(args + bound)
        procs.append(p)
        p.wait_for(r"^ready$", "out", START_S)
        runs.append((name, out, p))
    posted = []
    for i in range(6):
        body = {"msgtype": "m.text", "body": f"post {i} " + "x" * 400}
        status, v = synapse.send(synapse.admin, room, "m.room.message", body)
        assert status == 200, v
        posted.append(v["event_id"])
    for name, out, p in runs:
        assert p.p.wait(timeout=30) == 0, (p.out, p.err)
        time.sleep(0.2)
        assert any(line.endswith(f"stopped={name}") for line in p.out), p.out
        got = json.loads(out.read_text())
        assert [e["event_id"] for e in got] == posted[: len(got)], (name, got)
        if name == "events":
            assert len(got) == 3
        else:
            assert 1 <= len(got) < len(posted) and out.stat().st_size <= 2048
