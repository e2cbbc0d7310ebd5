"""herdsim.run and herdsim.sweep: the command line's numbers, from Python."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import herdsim

SMALL = {"workload.count": 40}


def test_run_equals_the_command_line(repo, cli, tmp_path):
    scenario = repo / "scenarios" / "default.toml"
    r = herdsim.run(scenario, reps=2, seed=7, out=tmp_path / "py")
    c = cli(
        [
            "run",
            str(scenario),
            "--reps",
            "2",
            "--seed",
            "7",
            "--quiet",
            "--no-plot",
            "--out",
            str(tmp_path / "cli"),
        ],
        tmp_path,
    )
    assert c.returncode == 0, c.stderr
    for f in ["summary.csv", "runs.csv", "run.toml"]:
        assert (r.dir / f).read_bytes() == (tmp_path / "cli" / "default" / f).read_bytes(), f
    # The table the command line prints, and the summary's columns.
    assert r.table == c.stdout
    assert r.summary.columns == (tmp_path / "cli/default/summary.csv").read_text().splitlines()[
        0
    ].split(",")
    assert r.summary["policy"] == ["none", "spec", "agentchat-0.36", "tombstone", "server-time"]
    dup = r.summary["duplicate_rate_mean"]
    assert isinstance(dup[0], float) and dup[0] > 0.5 and dup[1] == 0


def test_the_same_bytes_for_any_jobs(repo, tmp_path):
    scenario = repo / "scenarios" / "default.toml"
    outs = [
        herdsim.run(scenario, reps=3, seed=11, set=SMALL, jobs=j, out=tmp_path / str(j))
        for j in (1, 2)
    ]
    for f in ["summary.csv", "runs.csv"]:
        assert (outs[0].dir / f).read_bytes() == (outs[1].dir / f).read_bytes(), f


def test_a_dict_is_the_same_scenario_as_its_file(repo, tmp_path):
    text = (repo / "scenarios" / "default.toml").read_text()
    import tomllib  # noqa: PLC0415 (3.11+; the tests run on the machine's 3.11)

    as_dict = tomllib.loads(text)
    a = herdsim.run(as_dict, reps=2, seed=3, set=SMALL, out=tmp_path / "dict")
    b = herdsim.run(
        repo / "scenarios" / "default.toml", reps=2, seed=3, set=SMALL, out=tmp_path / "file"
    )
    assert (a.dir / "runs.csv").read_bytes() == (b.dir / "runs.csv").read_bytes()


def test_scenario_errors_name_the_key_and_where(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("reps = 2\n[[agents]]\ncount = 2\nrespond_p = 1.5\n")
    with pytest.raises(herdsim.ScenarioError) as e:
        herdsim.run(bad)
    assert isinstance(e.value, ValueError)
    assert e.value.file.endswith("bad.toml")
    assert e.value.key == "agents.0.respond_p"
    assert e.value.line == 4
    assert e.value.column is not None
    assert "bad.toml:" in str(e.value)
    # The same mistake in a dict: the key, no line (a dict has none).
    with pytest.raises(herdsim.ScenarioError) as e:
        herdsim.run({"reps": 2, "agents": [{"count": 2, "respond_p": 1.5}]})
    assert e.value.file == "<dict>"
    assert e.value.key == "agents.0.respond_p"
    assert e.value.line is None
    with pytest.raises(herdsim.ScenarioError) as e:
        herdsim.run({"no_such_key": 1})
    assert e.value.key == "no_such_key"
    with pytest.raises(herdsim.ScenarioError) as e:
        herdsim.run(None, set={"agents.0.count": -1})
    assert e.value.key == "agents.0.count"
    with pytest.raises(herdsim.ScenarioError):
        herdsim.run(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    "kwargs",
    [{"jobs": 0}, {"jobs": 5000}, {"reps": 0}, {"seed": -1}, {"set": {"x": float("nan")}}],
)
def test_bad_arguments_raise_input_errors(kwargs, tmp_path):
    with pytest.raises(herdsim.InputError):
        herdsim.run(None, out=tmp_path, **kwargs)


def test_none_in_a_dict_is_refused_naming_its_key():
    with pytest.raises(herdsim.InputError, match="agents.0.csma.max_ms"):
        herdsim.run({"agents": [{"count": 2, "csma": {"max_ms": None}}]})


def test_sweep_runs_points_policies_and_schemes(tmp_path):
    r = herdsim.sweep(
        None,
        {"agents.0.csma.max_ms": [3000, 8000]},
        policies=["none", "spec"],
        schemes=["open", "owner"],
        reps=2,
        set=SMALL,
        out=tmp_path,
    )
    assert len(r.summary) == 2 * 2 * 2
    assert set(r.summary["policy"]) == {"none", "spec"}
    assert set(r.summary["schemes.scheme"]) == {"open", "owner"}
    assert len(r.runs) == 2 * 2 * 2 * 2


def test_progress_reaches_the_total(tmp_path):
    seen = []
    herdsim.run(None, reps=4, set=SMALL, out=tmp_path, progress=lambda d, t: seen.append((d, t)))
    assert seen, "progress was never called"
    # Units of work: replications weighed by their expected cost.
    assert seen[-1][0] == seen[-1][1] > 0
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_an_exception_in_progress_stops_the_run(tmp_path):
    def boom(done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        herdsim.run(None, reps=50, out=tmp_path, progress=boom)


def test_results_table_to_pandas(tmp_path):
    pd = pytest.importorskip("pandas")
    r = herdsim.run(None, reps=2, set=SMALL, out=tmp_path)
    df = r.summary.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == r.summary.columns
    assert df["duplicate_rate_mean"].dtype.kind == "f"


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**64 - 1),
    count=st.integers(min_value=1, max_value=30),
)
def test_any_seed_gives_the_same_bytes_twice(seed, count, tmp_path_factory):
    d = tmp_path_factory.mktemp("h")
    a = herdsim.run(None, reps=2, seed=seed, set={"workload.count": count}, out=d / "a")
    b = herdsim.run(None, reps=2, seed=seed, set={"workload.count": count}, out=d / "b", jobs=1)
    assert (a.dir / "runs.csv").read_bytes() == (b.dir / "runs.csv").read_bytes()


def test_ctrl_c_raises_one_keyboard_interrupt_and_resume_completes(tmp_path, interrupted):
    """A long sweep stops on SIGINT with one clean KeyboardInterrupt, leaving a
    journal; a second call with resume=True completes it, to the same bytes as a
    run that was never stopped."""
    out = str(tmp_path / "out")
    interrupted(
        "herdsim.run(None, reps=400, seed=5, jobs=1, set={'workload.count': 200},"
        f" out={out!r}, progress=progress)"
    )
    journal = tmp_path / "out" / "default" / "runs.journal"
    assert journal.exists()
    # Resumed: the same bytes as a run never stopped.
    few = {"workload.count": 200}
    r = herdsim.run(None, reps=400, seed=5, set=few, out=tmp_path / "out", resume=True)
    assert not journal.exists()
    whole = herdsim.run(None, reps=400, seed=5, set=few, out=tmp_path / "whole")
    assert (r.dir / "runs.csv").read_bytes() == (whole.dir / "runs.csv").read_bytes()
    assert os.path.getsize(r.dir / "summary.csv") > 0


def test_version_names_the_build():
    assert herdsim.VERSION.startswith("0.")
    assert "build" in herdsim.VERSION


def test_a_result_shows_its_figure(tmp_path):
    r = herdsim.run(None, reps=2, set=SMALL, out=tmp_path, plot=True)
    assert r.figure is not None and r.figure.stat().st_size > 1000
    assert isinstance(r.figure, Path)
