"""The examples run as a user runs them, and make what they say."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_the_sweep_comparison_example_draws_its_figure(repo, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "cw.png"
    p = subprocess.run(
        [sys.executable, str(repo / "python/examples/compare_windows.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
