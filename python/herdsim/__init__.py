"""herdsim from Python: the deterministic simulator of RESPONDING_TO floor control.

A question arrives in a chat room, five LLM agents answer it at once, four
answers are noise: the thundering herd. herdsim simulates the fix (a
random CSMA delay, then a claim; the earliest starter keeps the floor) on
a virtual clock, with the real arbitration code, and measures duplicates,
unanswered questions, the time to the first answer and the inference bill.

    >>> import herdsim
    >>> r = herdsim.run("scenarios/default.toml", reps=2, seed=7)
    >>> r.summary["duplicate_rate"]      # one value per policy
    >>> r.summary.to_pandas()            # the columns of summary.csv

Each call is the command line's own library call (``run`` is ``herdsim
run``): the same scenario and seed give the same bytes, from Python or
the shell, for any ``jobs``. Bad input raises a ``ValueError``
(``ScenarioError`` names the file, key, line and column). Long runs take
a ``progress`` callback, release the GIL, and stop on Ctrl-C with one
``KeyboardInterrupt``, keeping a journal that ``resume=True`` completes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Union

from . import _herdsim, floor
from ._errors import HerdsimError, InputError, ScenarioError
from ._table import Table

__all__ = [
    "HerdsimError",
    "InputError",
    "RunResult",
    "ScenarioError",
    "Table",
    "VERSION",
    "floor",
    "run",
    "sweep",
]

#: herdsim's version and build identity (as ``herdsim --version`` prints them).
VERSION: str = _herdsim.VERSION

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any], None]
Progress = Callable[[int, int], None]


class RunResult:
    """What a run wrote: its folder and its tables.

    Attributes:
        dir: the results folder (``<out>/<scenario name>``).
        summary: ``summary.csv``, a row per point and policy (mean and
            95% interval of every metric over the replications).
        table: the table ``herdsim run`` prints, as text.
    """

    def __init__(self, dir: Path, table: str) -> None:
        self.dir: Path = dir
        self.table: str = table
        self.summary: Table = Table.read_csv(dir / "summary.csv")

    @property
    def runs(self) -> Table:
        """``runs.csv``: a row per replication (every metric of each run)."""
        return Table.read_csv(self.dir / "runs.csv")

    @property
    def figure(self) -> Path | None:
        """``comparison.png``, when the run drew it (``plot=True``)."""
        p = self.dir / "comparison.png"
        return p if p.exists() else None

    def show(self) -> Any:
        """The figure as an object a notebook shows (needs IPython)."""
        from IPython.display import Image

        if self.figure is None:
            raise HerdsimError("this run drew no figure: run it with plot=True")
        return Image(filename=str(self.figure))

    def __repr__(self) -> str:
        return f"RunResult(dir={str(self.dir)!r})\n{self.table}"


def _scenario(scenario: Scenario) -> dict[str, Any]:
    """The scenario arguments of ``_herdsim.run``: a file, or a dict as TOML."""
    if scenario is None:
        return {"scenario": None, "text": None, "base_dir": None}
    if isinstance(scenario, Mapping):
        try:
            as_json = json.dumps(scenario, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InputError(f"the scenario dict: {e}") from None
        text = _herdsim.dict_to_toml(as_json)
        return {"scenario": None, "text": text, "base_dir": os.getcwd()}
    return {"scenario": os.fspath(scenario), "text": None, "base_dir": None}


def _toml(value: Any) -> str:
    """A value as TOML for a ``--set`` (numbers, strings, lists of them)."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InputError(f"{value!r}: not a value a scenario key takes ({e})") from None


def run(
    scenario: Scenario = None,
    *,
    reps: int | None = None,
    seed: int | None = None,
    set: Mapping[str, Any] | None = None,
    jobs: int | None = None,
    out: str | os.PathLike[str] | None = None,
    plot: bool = False,
    resume: bool = False,
    fresh: bool = False,
    progress: Progress | None = None,
) -> RunResult:
    """Run a scenario as ``herdsim run`` does and return its results.

    Args:
        scenario: a scenario file (TOML), a dict of the same keys, or None
            for the built-in default scenario.
        reps: replications per point and policy (the file's ``reps``).
        seed: the master seed (the file's ``seed``).
        set: keys to override, as ``--set KEY=VALUE``:
            ``{"server.ttl_ms": 30000, "sweep.agents.0.csma.max_ms": [2000, 8000]}``.
        jobs: worker threads (None: all cores); the results do not depend
            on it.
        out: where ``<scenario name>/`` goes (None: a new temporary folder).
        plot: draw ``comparison.png``.
        resume: complete a run that was interrupted, from its journal.
        fresh: discard such a journal and start over.
        progress: called as ``progress(done, total)`` while the run works,
            from the calling thread, in units of work (replications weighed
            by their expected cost: agents x posts); ``done == total`` at
            the end. An exception it raises stops the run and propagates.

    Raises:
        ScenarioError: the scenario does not load or validate.
        InputError: another argument is bad.
        KeyboardInterrupt: Ctrl-C; the finished replications stay in the
            results folder's journal, and ``resume=True`` completes the run.
    """
    sets = [f"{k}={_toml(v)}" for k, v in (set or {}).items()]
    if isinstance(reps, bool) or (reps is not None and not 0 < reps < 2**32):
        raise InputError(f"reps={reps!r}: must be a whole number from 1 to {2**32 - 1}")
    if isinstance(seed, bool) or (seed is not None and not 0 <= seed < 2**64):
        raise InputError(f"seed={seed!r}: must be a whole number from 0 to {2**64 - 1}")
    if out is None:
        out = tempfile.mkdtemp(prefix="herdsim-")
    where, table = _herdsim.run(
        **_scenario(scenario),
        reps=reps,
        seed=seed,
        sets=sets,
        jobs=jobs,
        out=os.fspath(out),
        plot=plot,
        resume=resume,
        fresh=fresh,
        progress=progress,
    )
    return RunResult(Path(where), table)


def sweep(
    scenario: Scenario = None,
    axes: Mapping[str, Sequence[Any]] | None = None,
    *,
    policies: Sequence[str] | None = None,
    schemes: Sequence[str] | None = None,
    set: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> RunResult:
    """Points x policies x schemes x replications: ``run`` with sweep axes.

    Args:
        scenario: as for ``run``.
        axes: each key and the values it takes (``{"agents.0.csma.max_ms":
            [2000, 8000]}``); every combination is a point.
        policies: the policies side by side (the file's ``policies``).
        schemes: the schemes swept (``schemes.scheme``: open, owner,
            mentions, selector).
        set: other keys to override.
        **kwargs: ``reps``, ``seed``, ``jobs``, ``out``, ``plot``,
            ``resume``, ``fresh``, ``progress``, as for ``run``.
    """
    sets: dict[str, Any] = dict(set or {})
    for key, values in (axes or {}).items():
        sets[f"sweep.{key}"] = list(values)
    if policies is not None:
        sets["policies"] = list(policies)
    if schemes is not None:
        sets["sweep.schemes.scheme"] = list(schemes)
    return run(scenario, set=sets, **kwargs)
