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
    >>> t = herdsim.tune("scenarios/default.toml", max_ttfr_p95_ms=20000)
    >>> t.recommended                    # {'AGENTCHAT_CSMA_MIN_MS': 0, ...}
    >>> c = herdsim.calibrate("general.json", reps=3)   # a log or an export
    >>> c.estimates.to_pandas()

Each call is the command line's own library call (``run`` is ``herdsim
run``, ``tune`` ``herdsim tune``, ``calibrate`` ``herdsim calibrate``):
the same input and seed give the same bytes, from Python or the shell,
for any ``jobs``. Bad input raises a ``ValueError``
(``ScenarioError`` names the file, key, line and column). Long runs take
a ``progress`` callback, release the GIL, and stop on Ctrl-C with one
``KeyboardInterrupt``, keeping a journal that ``resume=True`` completes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from . import _herdsim, floor
from ._errors import HerdsimError, InputError, ScenarioError
from ._table import Table, _cell

# Only the type checker reads these. `typing`, `pathlib`, `json` and
# `tempfile` are imported where they are used: at the top they would add
# about 15 ms to every `import herdsim`, against the 100 ms a run of the
# default scenario takes on two cores.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable, Union

__all__ = [
    "CalibrateResult",
    "HerdsimError",
    "InputError",
    "RunResult",
    "ScenarioError",
    "Table",
    "TuneResult",
    "VERSION",
    "calibrate",
    "floor",
    "run",
    "sweep",
    "tune",
]

#: herdsim's version and build identity (as ``herdsim --version`` prints them).
VERSION: str = _herdsim.VERSION

if TYPE_CHECKING:
    Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any], None]
    Progress = Callable[[int, int], None]
    PathArg = Union[str, "os.PathLike[str]"]
    #: A ``tune`` parameter: a value to pin it to, ``(lo, hi)`` or ``(lo, hi,
    #: step)`` to search, or the command line's ``"LO..HI[:STEP]"``.
    Param = Union[int, float, str, Sequence[Union[int, float]]]


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


def _image(path: Path) -> Any:
    """The figure at ``path`` as an object a notebook shows (needs IPython)."""
    from IPython.display import Image

    return Image(filename=str(path))


class TuneResult:
    """What a tuning search wrote: its folder, its candidates and its answer.

    Attributes:
        dir: the results folder (``<out>/<scenario name>/tune``).
        text: the recommendation ``herdsim tune`` prints (an env file:
            every line but the settings is a comment).
        candidates: ``candidates.csv``, a row per candidate evaluated.
        recommended: the recommended settings (``recommended.env``'s
            ``KEY=VALUE`` lines), or None when none met the budget.
        unmet: why nothing was recommended (the command line's error, its
            exit status 1), or None when a setting was.
    """

    def __init__(self, dir: Path, text: str, unmet: str | None) -> None:
        self.dir: Path = dir
        self.text: str = text
        self.unmet: str | None = unmet
        self.candidates: Table = Table.read_csv(dir / "candidates.csv")
        self.recommended: dict[str, int | float | str] | None = None
        env = dir / "recommended.env"
        if unmet is None and env.exists():
            self.recommended = _env(env.read_text(encoding="utf-8"))

    @property
    def figure(self) -> Path | None:
        """``pareto.png``: every candidate's objective against its p95."""
        p = self.dir / "pareto.png"
        return p if p.exists() else None

    def show(self) -> Any:
        """The figure as an object a notebook shows (needs IPython)."""
        if self.figure is None:
            raise HerdsimError(f"{self.dir}: has no pareto.png")
        return _image(self.figure)

    def __repr__(self) -> str:
        return f"TuneResult(dir={str(self.dir)!r})\n{self.text}"


def _env(text: str) -> dict[str, int | float | str]:
    """The ``KEY=VALUE`` lines of an env file, values as numbers where they are."""
    out: dict[str, int | float | str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        cell = _cell(value.strip())
        out[key.strip()] = "" if cell is None else cell
    return out


class CalibrateResult:
    """What a calibration wrote: the fitted scenario, its tables and figures.

    Attributes:
        dir: the results folder (``<out>/<name>``).
        report: the report ``herdsim calibrate`` prints (``report.txt``).
        warnings: what the command line says on stderr as warnings.
        files: every file written, in order.
        scenario: ``scenario.toml``, the fitted scenario (``herdsim.run``
            and ``herdsim.tune`` take it).
        estimates: ``estimates.csv``, every estimate with its interval.
        questions: ``questions.csv``, a row per question observed.
        agents: ``agents.csv``, a row per agent.
    """

    def __init__(self, dir: Path, report: str, warnings: list[str], files: list[str]) -> None:
        self.dir: Path = dir
        self.report: str = report
        self.warnings: list[str] = warnings
        from pathlib import Path

        self.files: list[Path] = [Path(f) for f in files]
        self.scenario: Path = dir / "scenario.toml"
        self.estimates: Table = Table.read_csv(dir / "estimates.csv")
        self.questions: Table = Table.read_csv(dir / "questions.csv")
        self.agents: Table = Table.read_csv(dir / "agents.csv")

    def _optional(self, name: str) -> Table | None:
        p = self.dir / name
        return Table.read_csv(p) if p in self.files else None

    @property
    def prediction(self) -> Table | None:
        """``prediction.csv``: the fitted scenario simulated against what was
        observed (None with ``reps=0`` or no agents)."""
        return self._optional("prediction.csv")

    @property
    def whatif(self) -> Table | None:
        """``whatif.csv``: an export's fitted scenario under each scheme and
        policy (None for a frame log)."""
        return self._optional("whatif.csv")

    @property
    def channel(self) -> Table | None:
        """``channel.csv``: an export's channel as it is (None for a frame log)."""
        return self._optional("channel.csv")

    @property
    def figures(self) -> list[Path]:
        """The figures drawn (``fit-*.png``; none with ``plot=False``)."""
        return [f for f in self.files if f.suffix == ".png"]

    def show(self, figure: str | None = None) -> Any:
        """A figure as an object a notebook shows (needs IPython): the one
        whose file name contains ``figure`` (``"arrivals"``), or with None
        every figure, shown in turn."""
        found = [f for f in self.figures if figure is None or figure in f.name]
        if not found:
            names = ", ".join(f.name for f in self.figures) or "none: plot=False"
            raise HerdsimError(f"no figure {figure!r} in {self.dir} (figures: {names})")
        if figure is not None:
            return _image(found[0])
        from IPython.display import display

        display(*[_image(f) for f in found])
        return None

    def __repr__(self) -> str:
        return f"CalibrateResult(dir={str(self.dir)!r})\n{self.report}"


def _scenario(scenario: Scenario) -> dict[str, Any]:
    """The scenario arguments of ``_herdsim.run``: a file, or a dict as TOML."""
    if scenario is None:
        return {"scenario": None, "text": None, "base_dir": None}
    if isinstance(scenario, Mapping):
        import json

        try:
            as_json = json.dumps(scenario, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InputError(f"the scenario dict: {e}") from None
        text = _herdsim.dict_to_toml(as_json)
        return {"scenario": None, "text": text, "base_dir": os.getcwd()}
    return {"scenario": os.fspath(scenario), "text": None, "base_dir": None}


def _toml(value: Any) -> str:
    """A value as TOML for a ``--set`` (numbers, strings, lists of them)."""
    import json

    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InputError(f"{value!r}: not a value a scenario key takes ({e})") from None


def _sets(set: Mapping[str, Any] | None) -> list[str]:
    """``set=`` as the command line's ``--set KEY=VALUE``s."""
    return [f"{k}={_toml(v)}" for k, v in (set or {}).items()]


def _whole(name: str, value: int | None, lo: int, end: int) -> None:
    """A whole-number argument from ``lo`` to ``end - 1``, or None."""
    if isinstance(value, bool) or (value is not None and not lo <= value < end):
        raise InputError(f"{name}={value!r}: must be a whole number from {lo} to {end - 1}")


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
    sets = _sets(set)
    _whole("reps", reps, 1, 2**32)
    _whole("seed", seed, 0, 2**64)
    if out is None:
        import tempfile

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
    from pathlib import Path

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


def _num(x: Any) -> str:
    """A number as the command line takes it."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise InputError(f"{x!r}: not a number")
    return repr(x)


def _param(key: str, value: Param) -> str:
    """A ``params`` entry as ``--param KEY=LO..HI[:STEP]`` or ``KEY=VALUE``."""
    if isinstance(value, str):
        return f"{key}={value}"
    if isinstance(value, Sequence):
        if len(value) not in (2, 3):
            raise InputError(
                f"params[{key!r}]={value!r}: expected a value, (lo, hi) or (lo, hi, step)"
            )
        text = f"{_num(value[0])}..{_num(value[1])}"
        return f"{key}={text}:{_num(value[2])}" if len(value) == 3 else f"{key}={text}"
    return f"{key}={_num(value)}"


def _objective(objective: str | Mapping[str, float] | Sequence[float]) -> str:
    """``objective=`` as ``--objective``: a string as it is, a dict as named
    weights, three numbers as ``W_DUP,W_WASTE,W_UNANS``."""
    if isinstance(objective, str):
        return objective
    if isinstance(objective, Mapping):
        return ",".join(f"{k}={_num(v)}" for k, v in objective.items())
    return ",".join(_num(v) for v in objective)


def tune(
    scenario: Scenario = None,
    *,
    max_ttfr_p95_ms: float | None = None,
    objective: str | Mapping[str, float] | Sequence[float] = "1,1,1",
    params: Mapping[str, Param] | None = None,
    set: Mapping[str, Any] | None = None,
    policy: str = "spec",
    schemes: str | Sequence[str] | None = None,
    seed: int | None = None,
    reps: int | None = None,
    max_reps: int | None = None,
    grid: int | None = None,
    jobs: int | None = None,
    out: PathArg | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Recommend a CSMA window and claim TTL as ``herdsim tune`` does.

    Args:
        scenario: a scenario file (TOML), a dict of the same keys, or None
            for the built-in default scenario.
        max_ttfr_p95_ms: the latency budget: the mean p95 time to first
            response (ms) a setting may have (None: latency does not count).
        objective: the weights of duplicate_rate, wasted_inference_rate and
            unanswered_rate: ``(1, 0.5, 4)``, ``{"dup": 1, "unanswered":
            4}`` (unnamed ones stay 1) or the command line's text.
        params: keys to search or pin, as ``--param``: ``{"server.ttl_ms":
            (5000, 45000), "agents.csma.min_ms": 0, "agents.csma.max_ms":
            (1000, 30000, 100)}`` (built in: the CSMA window and the TTL).
        set: keys to override first, as ``--set KEY=VALUE``.
        policy: the arbitration policy to tune for.
        schemes: also choose the scheme: ``"all"`` or names
            (``["open", "owner"]``).
        seed: the master seed (the file's ``seed``).
        reps: replications of every candidate (the file's ``reps``).
        max_reps: most replications for the best two (None: 4 x reps).
        grid: grid levels per searched parameter (None: 3 to 9).
        jobs: worker threads (None: all cores); the results do not depend
            on it.
        out: where ``<scenario name>/tune/`` goes (None: a new temporary
            folder).
        progress: called as ``progress(done, total)`` in runs, from the
            calling thread; ``total`` is an estimate the search may raise.
            An exception it raises stops the search and propagates.

    Returns:
        A ``TuneResult``; when no setting meets the budget its
        ``recommended`` is None and ``unmet`` says why (the command line
        exits 1 there), its candidates and figure written all the same.

    Raises:
        ScenarioError: the scenario does not load or validate.
        InputError: another argument is bad.
        KeyboardInterrupt: Ctrl-C; the search stops and writes nothing.
    """
    for name, value in (("reps", reps), ("max_reps", max_reps)):
        _whole(name, value, 0, 2**32)
    _whole("seed", seed, 0, 2**64)
    _whole("grid", grid, 0, 2**63)
    if isinstance(schemes, str) or schemes is None:
        scheme_text = schemes
    else:
        scheme_text = ",".join(schemes)
    if out is None:
        import tempfile

        out = tempfile.mkdtemp(prefix="herdsim-")
    where, text, unmet = _herdsim.tune(
        **_scenario(scenario),
        objective=_objective(objective),
        max_ttfr_p95_ms=None if max_ttfr_p95_ms is None else float(max_ttfr_p95_ms),
        params=[_param(k, v) for k, v in (params or {}).items()],
        sets=_sets(set),
        policy=policy,
        schemes=scheme_text,
        seed=seed,
        reps=reps,
        max_reps=max_reps,
        grid=grid,
        jobs=jobs,
        out=os.fspath(out),
        progress=progress,
    )
    from pathlib import Path

    return TuneResult(Path(where), text, unmet)


def calibrate(
    log: PathArg,
    *,
    out: PathArg | None = None,
    name: str | None = None,
    channel: str | None = None,
    format: str | None = None,
    humans: Sequence[str] = (),
    bots: Sequence[str] = (),
    unthreaded: str = "next-human",
    hash_authors: bool = False,
    since: str | None = None,
    until: str | None = None,
    speed: float = 1.0,
    link_ms: float | None = None,
    ttl_ms: float = 45000.0,
    csma_ms: tuple[float, float] | str | None = None,
    policy: str | None = None,
    reps: int = 20,
    seed: int = 1,
    jobs: int | None = None,
    plot: bool = True,
    progress: Progress | None = None,
) -> CalibrateResult:
    """Fit a scenario to what a channel saw, as ``herdsim calibrate`` does.

    Args:
        log: a frame log (observe's, a recorded session, a ``live``
            trace; plain or gzipped) or a chat export: a Slack export's
            folder, zip or day file, DiscordChatExporter JSON, Matrix room
            events (docs/exports.md).
        out: where ``<name>/`` goes (None: a new temporary folder).
        name: the results folder's name (None: the log's file name).
        channel: the channel to read (None: observe's, else the busiest).
        format: ``"log"``, ``"slack"``, ``"discord"`` or ``"matrix"``
            (None: told from the log).
        humans: an export's authors (ids or names) read as humans.
        bots: an export's authors read as bots (agents).
        unthreaded: an export: what a bot's message outside threads
            answers: ``"next-human"`` or ``"ignore"``.
        hash_authors: an export: write author ids hashed, no names.
        since: an export: only messages at or after this time
            (``YYYY-MM-DD`` or RFC 3339).
        until: an export: only messages before this time.
        speed: scenario time per unit of the log's time (a ``live`` run's
            ``--speed``; 1 for real agents).
        link_ms: the one-way link delay, ms (None: from the log).
        ttl_ms: the server's claim TTL, ms.
        csma_ms: the agents' CSMA window when known, ``(min, max)`` ms.
        policy: the server's policy (None: read from the wire).
        reps: replications of the fitted scenario's prediction (0: none).
        seed: seed of the prediction, the tests and the bootstrap.
        jobs: worker threads of the prediction (None: all cores); the
            results do not depend on it.
        plot: draw the figures.
        progress: called as ``progress(done, total)`` with the fitted
            channel's simulations (replications of the prediction and,
            for an export, of the what-ifs) done of those ahead.

    Raises:
        InputError: a bad argument, or a log or export that cannot be read.
        HerdsimError: a log with nothing to calibrate (no question).
        KeyboardInterrupt: Ctrl-C; the results folder stays as it was.
    """
    _whole("reps", reps, 0, 2**32)
    _whole("seed", seed, 0, 2**64)
    if isinstance(csma_ms, str) or csma_ms is None:
        window = csma_ms
    else:
        if len(csma_ms) != 2:
            raise InputError(f"csma_ms={csma_ms!r}: expected (min, max) in ms")
        window = f"{_num(csma_ms[0])}..{_num(csma_ms[1])}"
    if out is None:
        import tempfile

        out = tempfile.mkdtemp(prefix="herdsim-")
    where, report, warnings, files = _herdsim.calibrate(
        os.fspath(log),
        out=os.fspath(out),
        name=name,
        channel=channel,
        format=format,
        humans=list(humans),
        bots=list(bots),
        unthreaded=unthreaded,
        hash_authors=hash_authors,
        since=since,
        until=until,
        speed=float(speed),
        link_ms=None if link_ms is None else float(link_ms),
        ttl_ms=float(ttl_ms),
        csma_ms=window,
        policy=policy,
        reps=reps,
        seed=seed,
        jobs=jobs,
        plot=plot,
        progress=progress,
    )
    from pathlib import Path

    return CalibrateResult(Path(where), report, warnings, files)
