"""A child process for the tests that run example agents and servers: its
stdout and stderr read by threads (its pipes never fill), its lines queued
for waiting on. Shared by test_gateway.py and test_matrix.py (a module of
its own, so that neither imports the other: each skips without its own
client library)."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from typing import IO

import pytest


class Proc:
    """A child process whose stdout and stderr are read by threads (its
    pipes never fill), its stdout lines also queued for waiting on."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.p = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self.lines: queue.Queue[tuple[str, str]] = queue.Queue()
        for name, pipe, into in [
            ("out", self.p.stdout, self.out),
            ("err", self.p.stderr, self.err),
        ]:
            threading.Thread(target=self._read, args=(name, pipe, into), daemon=True).start()

    def _read(self, name: str, pipe: IO[str] | None, into: list[str]) -> None:
        assert pipe is not None
        for line in pipe:
            into.append(line.rstrip("\n"))
            self.lines.put((name, line.rstrip("\n")))

    def wait_for(self, pattern: str, stream: str, timeout: float) -> re.Match[str]:
        """The first line of `stream` matching `pattern`, within `timeout` s."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                name, line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.p.poll() is not None and self.lines.empty():
                    break
                continue
            if name == stream and (m := re.search(pattern, line)):
                return m
        self.kill()
        pytest.fail(f"{self.args[:3]}: no {pattern!r} in {timeout} s: {self.out} {self.err}")

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)
