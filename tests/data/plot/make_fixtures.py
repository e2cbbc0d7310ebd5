#!/usr/bin/env python3
"""Write the plot test fixtures in this directory.

The numbers are synthetic (plausible shapes, not simulator output); they only
exercise the plotting code. Formats: issue 3 item 5 (summary.csv) and the
trace events of `herdsim run --trace`. Run: python3 make_fixtures.py
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))

METRICS = [
    "duplicate_rate", "responses_per_msg", "unanswered_rate", "wasted_inference_rate",
    "wasted_inference_count_rate", "ttfr_p50_ms", "ttfr_p95_ms", "ttfr_p99_ms", "claims",
    "yields", "expired_claims", "relayed", "lost", "events",
]
POLICIES = ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]
# How much each policy cuts duplicates relative to `none`.
CUT = {"none": 1.0, "spec": 0.12, "agentchat-0.36": 0.16, "tombstone": 0.08, "server-time": 0.11}


def metrics(policy, window_ms, ttl_ms=45000.0):
    """Plausible metric means and CI half-widths for one sweep point."""
    w = max(window_ms - 2000.0, 250.0)
    base_dup = 0.62 * math.exp(-w / 9000.0) + 0.08
    dup = min(base_dup * CUT[policy] * (1.0 + 2000.0 / w * 0.3), 0.95)
    if policy == "none":
        dup = base_dup
    # Claims add a little latency and a hung holder can leave a message
    # unanswered; the policies differ a little in both.
    extra = {"none": 0.0, "spec": 1.0, "agentchat-0.36": 1.6, "tombstone": 0.8, "server-time": 1.2}[policy]
    unanswered = 0.002 + 0.003 * extra * (3.0 if ttl_ms < 10000 else 1.0) * (1.0 + 4000.0 / w)
    wasted = min(dup * 0.9 + (0.05 if policy != "none" else 0.0), 0.9)
    p50 = 2000.0 + w * 0.25 + 4000.0
    p95 = 2000.0 + w * 0.55 + 13000.0 + extra * 350.0
    p99 = p95 * 1.3
    claims = 0.0 if policy == "none" else 1000 * (1.0 + dup * 2)
    out = {
        "duplicate_rate": (dup, dup * 0.09 + 0.004),
        "responses_per_msg": (1.0 + dup * 1.4, 0.02),
        "unanswered_rate": (unanswered, unanswered * 0.25 + 0.0005),
        "wasted_inference_rate": (wasted, wasted * 0.08 + 0.005),
        "wasted_inference_count_rate": (wasted * 1.1, wasted * 0.09 + 0.005),
        "ttfr_p50_ms": (p50, 90.0),
        "ttfr_p95_ms": (p95, 420.0),
        "ttfr_p99_ms": (p99, 900.0),
        "claims": (claims, claims * 0.02),
        "yields": (claims * dup, claims * dup * 0.05),
        "expired_claims": (claims * 0.001, 0.5),
        "relayed": (4000.0 + claims * 4, 80.0),
        "lost": (0.0, 0.0),
        "events": (52000.0 + claims * 12, 300.0),
    }
    return out


def header(params):
    cols = ["scenario", "policy"] + params + ["reps"]
    for m in METRICS:
        cols += [f"{m}_mean", f"{m}_ci95"]
    return ",".join(cols)


def row(scenario, policy, params, values):
    cells = [scenario, policy] + [str(p) for p in params] + ["20"]
    for m in METRICS:
        mean, ci = values[m]
        cells += [f"{mean:.6g}", f"{ci:.6g}"]
    return ",".join(cells)


def write(rel, lines):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    # A one-key sweep of the CSMA window, all five policies.
    lines = [header(["agents.0.csma.max_ms"])]
    for p in POLICIES:
        for mx in [3000, 4000, 6000, 8000, 12000, 16000]:
            lines.append(row("csma-window", p, [mx], metrics(p, mx)))
    write("sweep/summary.csv", lines)
    write("sweep/runs.csv", ["scenario,policy,agents.0.csma.max_ms,rep,seed,duplicate_rate",
                             "csma-window,spec,3000,0,12345,0.1"])

    # No swept key: one row per policy (the default scenario).
    lines = [header([])]
    for p in POLICIES:
        lines.append(row("default", p, [], metrics(p, 8000)))
    write("default/summary.csv", lines)

    # Two keys: CSMA window x TTL, two policies.
    lines = [header(["agents.0.csma.max_ms", "ttl_ms"])]
    for p in ["spec", "tombstone"]:
        for ttl in [5000, 45000]:
            for mx in [4000, 8000, 12000]:
                lines.append(row("window-ttl", p, [mx, ttl], metrics(p, mx, ttl)))
    write("two-keys/summary.csv", lines)

    # A string-valued key.
    lines = [header(["agents.0.csma.dist"])]
    for p in ["none", "spec"]:
        for d, mx in [("uniform", 8000), ("exponential", 6000), ("fixed", 3000)]:
            lines.append(row("csma-shape", p, [d], metrics(p, mx)))
    write("categorical/summary.csv", lines)

    # Bad inputs.
    good = header([]).split("\n")[0]
    write("bad/ragged.csv", [good, row("default", "spec", [], metrics("spec", 8000)), "default,none,20,0.5"])
    bad_row = row("default", "none", [], metrics("none", 8000)).split(",")
    bad_row[5] = "lots"
    write("bad/number.csv", [good, row("default", "spec", [], metrics("spec", 8000)), ",".join(bad_row)])

    write_trace()


def write_trace():
    """A replication's trace: m1 is contested by three agents (a winner, one
    that yields and one that ignores the YIELD), m2 has a hung inference and a
    lost claim, m3 nobody answers."""
    ev = []
    epoch = 1700000000000
    d = 40_000  # one-way delay, us
    agents = [f"agent-00{i}" for i in range(1, 6)]

    def e(t, name, **kw):
        ev.append(dict(t_us=t, ev=name, **kw))

    def post(t, mid):
        e(t, "post", msg_id=mid, **{"from": "operator"}, to="#general", kind="channel")
        for a in agents:
            msg = {"type": "MSG", "id": mid, "from": "operator", "to": "#general", "content": "question"}
            e(t, "server_send", to=a, msg=msg)
            e(t + d, "recv", agent=a, msg=msg)

    def claim(t, a, mid, others, winner_yield_to=None):
        started = epoch + t // 1000
        m = {"type": "RESPONDING_TO", "msg_id": mid, "started_at": started, "channel": "#general"}
        e(t, "send", agent=a, msg=m)
        e(t + d, "server_recv", agent=a, msg=m)
        relay = dict(m, **{"from": a})
        for o in others:
            e(t + d, "server_send", to=o, msg=relay)
            e(t + 2 * d, "recv", agent=o, msg=relay)
        if winner_yield_to:
            y = {"type": "YIELD", "msg_id": mid, "winner": winner_yield_to, "channel": "#general"}
            e(t + d, "server_send", to=a, msg=y)
            e(t + 2 * d, "recv", agent=a, msg=y)
        return started

    def reply(t, a, mid, rid, others):
        m = {"type": "MSG", "to": "#general", "content": "answer", "in_reply_to": mid, "id": rid}
        e(t, "send", agent=a, msg=m)
        e(t + d, "server_recv", agent=a, msg=m)
        relay = dict(m, **{"from": a})
        for o in others:
            e(t + d, "server_send", to=o, msg=relay)
            e(t + 2 * d, "recv", agent=o, msg=relay)

    # m1 at 60 s.
    t0 = 60_000_000
    post(t0, "m1")
    arrive = t0 + d
    csma = {"agent-003": 2_480_000, "agent-001": 2_530_000, "agent-005": 2_545_000,
            "agent-004": 5_100_000, "agent-002": 11_900_000}
    for a, w in csma.items():
        e(arrive, "csma", agent=a, msg_id="m1", until_us=arrive + w)
    others = lambda a: [o for o in agents if o != a]
    # agent-003 wins.
    t3 = arrive + csma["agent-003"]
    s3 = claim(t3, "agent-003", "m1", others("agent-003"))
    e(t3, "infer", agent="agent-003", msg_id="m1", started_at=s3, until_us=t3 + 6_200_000)
    # agent-001 collides, yields on YIELD.
    t1 = arrive + csma["agent-001"]
    s1 = claim(t1, "agent-001", "m1", others("agent-001"), winner_yield_to="agent-003")
    e(t1, "infer", agent="agent-001", msg_id="m1", started_at=s1, until_us=t1 + 9_000_000)
    e(t1 + 2 * d, "abort", agent="agent-001", msg_id="m1", winner="agent-003")
    # agent-005 collides too but ignores the YIELD: a duplicate reply.
    t5 = arrive + csma["agent-005"]
    s5 = claim(t5, "agent-005", "m1", others("agent-005"), winner_yield_to="agent-003")
    e(t5, "infer", agent="agent-005", msg_id="m1", started_at=s5, until_us=t5 + 7_400_000)
    # agent-004 saw a claim.
    e(arrive + csma["agent-004"], "skip", agent="agent-004", msg_id="m1", reason="seen_claim")
    # agent-003 answers.
    done3 = t3 + 6_200_000
    e(done3, "done", agent="agent-003", msg_id="m1")
    reply(done3, "agent-003", "m1", "r1", others("agent-003"))
    done5 = t5 + 7_400_000
    e(done5, "done", agent="agent-005", msg_id="m1")
    reply(done5, "agent-005", "m1", "r2", others("agent-005"))
    e(arrive + csma["agent-002"], "skip", agent="agent-002", msg_id="m1", reason="seen_response")
    e(t0 + 5_000_000, "sweep_tick", note="an event this reader does not know")

    # m2 at 130 s: agent-002 hangs holding the claim; agent-004's claim is lost.
    t0 = 130_000_000
    post(t0, "m2")
    arrive = t0 + d
    e(arrive, "csma", agent="agent-002", msg_id="m2", until_us=arrive + 3_000_000)
    e(arrive, "csma", agent="agent-004", msg_id="m2", until_us=arrive + 3_020_000)
    t2 = arrive + 3_000_000
    s2 = claim(t2, "agent-002", "m2", others("agent-002"))
    e(t2, "infer", agent="agent-002", msg_id="m2", started_at=s2, until_us=None)
    t4 = arrive + 3_020_000
    m = {"type": "RESPONDING_TO", "msg_id": "m2", "started_at": epoch + t4 // 1000, "channel": "#general"}
    e(t4, "send", agent="agent-004", msg=m)
    e(t4, "infer", agent="agent-004", msg_id="m2", started_at=epoch + t4 // 1000, until_us=t4 + 5_000_000)
    e(t4 + d, "lost", dir="up", agent="agent-004", msg=m)
    e(t4 + 5_000_000, "done", agent="agent-004", msg_id="m2")
    reply(t4 + 5_000_000, "agent-004", "m2", "r3", others("agent-004"))
    e(t4 + 6_000_000, "crash", agent="agent-001")

    # m3 at 200 s: nobody wants it.
    post(200_000_000, "m3")

    ev.sort(key=lambda x: x["t_us"])
    with open(os.path.join(HERE, "trace.jsonl"), "w") as f:
        for x in ev:
            f.write(json.dumps(x, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
