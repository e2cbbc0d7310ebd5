"""Where the repo and the command line are, for tests that compare with it.

``HERDSIM_BIN`` names the ``herdsim`` binary (tests/python.rs sets it to
the one cargo built); without it, ``herdsim`` on PATH. The scenarios are
the repo's own, found from this file's place.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def herdsim_bin() -> str:
    b = os.environ.get("HERDSIM_BIN") or shutil.which("herdsim")
    if not b:
        pytest.fail("no herdsim binary: set HERDSIM_BIN (tests/python.rs does)")
    return b


@pytest.fixture(scope="session")
def cli(herdsim_bin: str):  # noqa: ANN201
    def call(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [herdsim_bin, *args], cwd=cwd, capture_output=True, text=True, timeout=600
        )

    return call


@pytest.fixture(scope="session")
def interrupted():  # noqa: ANN201
    """Runs ``call`` (one line of Python: a herdsim call with
    ``progress=progress``) in a child interpreter, sends it SIGINT once its
    progress says it started, and checks that it stopped with one clean
    ``KeyboardInterrupt``: no traceback, nothing after the interrupt."""

    def run(call: str) -> None:
        script = "\n".join(
            [
                "import sys, herdsim",
                "def progress(done, total):",
                "    if done >= 1:",
                "        print('started', flush=True)",
                "try:",
                f"    {call}",
                "except KeyboardInterrupt:",
                "    print('interrupted', flush=True)",
                "    sys.exit(3)",
                "print('finished', flush=True)",
            ]
        )
        p = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "started", line + (p.stderr.read() if p.stderr else "")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 3, (out, err)
        assert out.strip().splitlines()[-1] == "interrupted", out
        assert "Traceback" not in err, err

    return run
