"""Where the repo and the command line are, for tests that compare with it.

``HERDSIM_BIN`` names the ``herdsim`` binary (tests/python.rs sets it to
the one cargo built); without it, ``herdsim`` on PATH. The scenarios are
the repo's own, found from this file's place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
