"""herdsim.tune and herdsim.calibrate: the command line's files, from Python."""

from __future__ import annotations

from pathlib import Path

import pytest

import herdsim

# A small search: 5 questions, 2 replications, 2 grid levels over the CSMA
# ceiling only (a few dozen runs).
SMALL = {"workload.count": 5}
PARAMS = {"agents.csma.min_ms": 0, "agents.csma.max_ms": (1000, 3000), "server.ttl_ms": 30000}
TUNE_FILES = ["candidates.csv", "pareto.png", "recommended.env"]

DISCORD = "tests/data/exports/discord/general.json"
SLACK = "tests/data/exports/slack"
MATRIX = "tests/data/exports/matrix/general.json"
EXPORTS = (DISCORD, SLACK, MATRIX)
WIRE = "tests/data/agentchat-wire/expiry-ttl1s.jsonl.gz"


def small_tune(out: Path, scenario: herdsim.Scenario = None, **kwargs) -> herdsim.TuneResult:
    args = {"reps": 2, "max_reps": 2, "grid": 2, "seed": 3, "set": SMALL, "params": PARAMS}
    return herdsim.tune(scenario, out=out, **{**args, **kwargs})


TUNE_FLAGS = [
    "--reps",
    "2",
    "--max-reps",
    "2",
    "--grid",
    "2",
    "--seed",
    "3",
    "--set",
    "workload.count=5",
    "--param",
    "agents.csma.min_ms=0",
    "--param",
    "agents.csma.max_ms=1000..3000",
    "--param",
    "server.ttl_ms=30000",
    "--quiet",
]


def test_tune_equals_the_command_line(cli, tmp_path):
    r = small_tune(tmp_path / "py", jobs=2)
    c = cli(["tune", *TUNE_FLAGS, "--out", str(tmp_path / "cli")], tmp_path)
    assert c.returncode == 0, c.stderr
    assert r.dir == tmp_path / "py" / "default" / "tune"
    for f in TUNE_FILES:
        assert (r.dir / f).read_bytes() == (tmp_path / "cli/default/tune" / f).read_bytes(), f
    # What the command line prints, the CSV's columns, the settings.
    assert r.text == c.stdout
    assert r.unmet is None
    header = (r.dir / "candidates.csv").read_text().splitlines()[0].split(",")
    assert r.candidates.columns == header
    assert len(r.candidates) > 2
    assert r.recommended is not None
    assert set(r.recommended) == {
        "AGENTCHAT_CSMA_MIN_MS",
        "AGENTCHAT_CSMA_MAX_MS",
        "AGENTCHAT_RESPOND_TTL_MS",
    }
    assert r.recommended["AGENTCHAT_CSMA_MIN_MS"] == 0
    assert r.recommended["AGENTCHAT_RESPOND_TTL_MS"] == 30000
    assert r.figure == r.dir / "pareto.png"


def test_tune_gives_the_same_bytes_for_any_jobs(tmp_path):
    a = small_tune(tmp_path / "1", jobs=1)
    b = small_tune(tmp_path / "2", jobs=2)
    for f in TUNE_FILES:
        assert (a.dir / f).read_bytes() == (b.dir / f).read_bytes(), f


def test_tune_takes_a_dict_and_reports_progress(repo, tmp_path):
    import tomllib  # noqa: PLC0415 (3.11+; the tests run on the machine's 3.11)

    as_dict = tomllib.loads((repo / "scenarios" / "default.toml").read_text())
    seen: list[tuple[int, int]] = []
    a = small_tune(tmp_path / "dict", as_dict, progress=lambda d, t: seen.append((d, t)))
    b = small_tune(tmp_path / "file", repo / "scenarios" / "default.toml")
    assert (a.dir / "candidates.csv").read_bytes() == (b.dir / "candidates.csv").read_bytes()
    assert seen and seen[-1][0] > 0
    assert all(x[0] <= y[0] for x, y in zip(seen, seen[1:]))


def test_tune_with_an_unmet_budget_returns_its_candidates(tmp_path):
    r = small_tune(tmp_path, max_ttfr_p95_ms=1)
    assert r.recommended is None
    assert r.unmet == "no setting in the searched ranges meets --max-ttfr-p95-ms 1"
    assert not (r.dir / "recommended.env").exists()
    assert len(r.candidates) > 0 and r.figure is not None


def test_tune_bad_input_raises(tmp_path):
    with pytest.raises(herdsim.ScenarioError) as e:
        small_tune(tmp_path, set={"agents.0.respond_p": 1.5})
    assert e.value.key == "agents.0.respond_p"
    bad = tmp_path / "bad.toml"
    bad.write_text("reps = 2\n[[agents]]\ncount = 2\nrespond_p = 1.5\n")
    with pytest.raises(herdsim.ScenarioError) as e:
        herdsim.tune(bad, out=tmp_path)
    assert (e.value.key, e.value.line) == ("agents.0.respond_p", 4)
    assert e.value.file.endswith("bad.toml")
    for kwargs in [
        {"reps": 1},
        {"policy": "nope"},
        {"objective": (1, 1)},
        {"params": {"server.ttl_ms": (9, 1)}},
        {"params": {"server.ttl_ms": (1, 2, 3, 4)}},
        {"jobs": 0},
        {"seed": -1},
        {"schemes": ["nope"]},
    ]:
        with pytest.raises(herdsim.InputError):
            herdsim.tune(None, out=tmp_path, **kwargs)
    assert not list(tmp_path.glob("*/tune/candidates.csv"))


def test_an_exception_in_tune_progress_stops_it(tmp_path):
    def boom(done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        herdsim.tune(None, reps=2, out=tmp_path, progress=boom)
    # Stopped: nothing written that looks like a search's answer.
    assert not (tmp_path / "default" / "tune" / "candidates.csv").exists()


@pytest.mark.parametrize(
    "log,flags,kwargs",
    [
        (DISCORD, ["--name", "team", "--reps", "2"], {"name": "team", "reps": 2}),
        (
            SLACK,
            ["--channel", "general", "--reps", "2", "--hash-authors"],
            {"channel": "general", "reps": 2, "hash_authors": True},
        ),
        (MATRIX, ["--format", "matrix", "--reps", "2"], {"format": "matrix", "reps": 2}),
        (WIRE, ["--reps", "2", "--seed", "5"], {"reps": 2, "seed": 5}),
    ],
    ids=["discord-export", "slack-export", "matrix-export", "frame-log"],
)
def test_calibrate_equals_the_command_line(repo, cli, tmp_path, monkeypatch, log, flags, kwargs):
    # Each from a folder of its own with the same relative --out: the
    # report names its folder.
    (tmp_path / "py").mkdir()
    (tmp_path / "cli").mkdir()
    monkeypatch.chdir(tmp_path / "py")
    r = herdsim.calibrate(repo / log, out="results", jobs=2, **kwargs)
    c = cli(["calibrate", str(repo / log), *flags, "--out", "results", "-q"], tmp_path / "cli")
    assert c.returncode == 0, c.stderr
    assert r.report == c.stdout
    theirs = tmp_path / "cli" / "results" / r.dir.name
    assert sorted(p.name for p in r.dir.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for f in r.files:
        assert f.read_bytes() == (theirs / f.name).read_bytes(), f.name
    assert r.scenario.is_file()
    header = (r.dir / "estimates.csv").read_text().splitlines()[0].split(",")
    assert r.estimates.columns == header
    assert len(r.questions) > 0 and len(r.agents) > 0
    assert r.prediction is not None
    assert r.figures and all(f.suffix == ".png" for f in r.figures)
    if log in EXPORTS:
        assert r.whatif is not None and r.channel is not None
    else:
        assert r.whatif is None and r.channel is None
    # The fitted scenario runs.
    assert len(herdsim.run(r.scenario, reps=2, out=tmp_path / "run").summary) > 0


def test_calibrate_gives_the_same_bytes_for_any_jobs(repo, tmp_path):
    a, b = (
        herdsim.calibrate(repo / DISCORD, out=tmp_path / str(j), reps=3, jobs=j, plot=False)
        for j in (1, 2)
    )
    assert [f.name for f in a.files] == [f.name for f in b.files]
    for f in a.files:
        if f.name != "report.txt":  # it names its own folder
            assert f.read_bytes() == (b.dir / f.name).read_bytes(), f.name
    assert a.report.replace(str(a.dir), "") == b.report.replace(str(b.dir), "")
    assert a.figures == []


def test_calibrate_reports_its_simulations_progress(repo, tmp_path):
    """progress(done, total) counts the fitted channel's simulations: the
    prediction's replications, then (an export) each scheme and policy's."""
    seen: list[tuple[int, int]] = []
    reps = 3
    herdsim.calibrate(
        repo / DISCORD,
        out=tmp_path,
        reps=reps,
        plot=False,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen, "no progress reported"
    total = reps * (1 + 4 * 2)  # the prediction, then 4 schemes x (spec, none)
    assert seen[-1] == (total, total), seen[-3:]
    # Before the fit is done nothing is ahead yet: (0, 0).
    assert all(t in (0, total) and 0 <= d <= t for d, t in seen), seen
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_calibrate_bad_input_raises(repo, tmp_path):
    with pytest.raises(herdsim.InputError):
        herdsim.calibrate(tmp_path / "missing.jsonl", out=tmp_path)
    for kwargs in [
        {"speed": 0},
        {"csma_ms": (8000, 2000)},
        {"csma_ms": (1, 2, 3)},
        {"policy": "nope"},
        {"name": "../x"},
        {"jobs": 0},
        {"since": "2024-02-30"},
        {"format": "irc"},
        {"unthreaded": "sometimes"},
        {"reps": -1},
    ]:
        with pytest.raises(herdsim.InputError):
            herdsim.calibrate(repo / DISCORD, out=tmp_path, **kwargs)
    # An export's flag on a frame log names the flag.
    with pytest.raises(herdsim.InputError, match="--humans"):
        herdsim.calibrate(repo / WIRE, out=tmp_path, humans=["alice"])
    # Nothing was left behind.
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_tune_with_one_keyboard_interrupt(tmp_path, interrupted):
    """SIGINT during a search: one clean KeyboardInterrupt, and no files
    that would read as a finished search's."""
    interrupted(f"herdsim.tune(None, reps=200, jobs=1, out={str(tmp_path)!r}, progress=progress)")
    for f in TUNE_FILES:
        assert not (tmp_path / "default" / "tune" / f).exists(), f
