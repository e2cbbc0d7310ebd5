"""The floor from Python: RESPONDING_TO's two halves, sans-IO.

For a gateway that puts agents in a Matrix, Slack, Discord or Telegram
room: the gateway owns the sockets and the clock, the floor decides. Both
halves take the time (integer milliseconds, the gateway's clock) and a
frame (the wire's JSON text) and say what to do; neither reads a clock or
a socket, so the same calls run under a test's fake clock.

``Agent`` is the agent half: feed it every frame from the server
(``frame``), each message the agent would like to answer (``answer``),
each finished inference (``inference_done``) and, at ``poll_timeout()``,
``timeout``; then carry out ``poll_output()`` until ``None``::

    from herdsim.floor import Agent

    a = Agent("alice", seed=1)  # CSMA 2-8 s, TTL 45 s, spec
    q = '{"type":"MSG","id":"q1","from":"operator","to":"#general","content":"TTL?"}'
    a.frame(0, q)
    a.answer(0, q)
    t = a.poll_timeout()  # the end of its CSMA wait
    a.timeout(t)
    a.poll_output()  # {'type': 'transmit', 'frame': '{"type":"RESPONDING_TO",...'}

A DM, a message from ``@server`` and an @mention of the agent are
answered at once without a claim; a message that @mentions only others is
skipped. ``Server`` is the server half (membership, the claim table,
relay): each call returns the frames to send as ``(recipient, json)``.
Its ``claim_guard`` is ``"relayed"`` unless told (``"off"`` under
``agentchat-0.36``), as ``herdsim serve``: a claim for a message it has
not relayed is refused; ``claim_guard="off"`` runs the policy as written.
Both wrap the Rust crate ``herdsim-floor`` (its docs have every rule).
"""

from __future__ import annotations

from ._herdsim import FloorAgent as Agent
from ._herdsim import FloorServer as Server

__all__ = ["Agent", "Server"]
