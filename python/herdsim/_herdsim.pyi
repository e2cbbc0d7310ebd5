"""Type stubs of the extension module (python/src/lib.rs)."""

from typing import Any, Callable

VERSION: str

def run(
    scenario: str | None,
    text: str | None,
    *,
    reps: int | None,
    seed: int | None,
    sets: list[str],
    jobs: int | None,
    out: str,
    plot: bool,
    resume: bool,
    fresh: bool,
    progress: Callable[[int, int], None] | None,
    base_dir: str | None,
) -> tuple[str, str]:
    """``herdsim run``: the results folder and the table it prints."""

def tune(
    scenario: str | None,
    text: str | None,
    *,
    objective: str,
    max_ttfr_p95_ms: float | None,
    params: list[str],
    sets: list[str],
    policy: str,
    schemes: str | None,
    seed: int | None,
    reps: int | None,
    max_reps: int | None,
    grid: int | None,
    jobs: int | None,
    out: str,
    progress: Callable[[int, int], None] | None,
    base_dir: str | None,
) -> tuple[str, str, str | None]:
    """``herdsim tune`` (``params`` and ``sets`` as its ``--param`` and
    ``--set``): the results folder (``<out>/<name>/tune``), the
    recommendation it prints, and why nothing was recommended (its error,
    exit 1) or None."""

def calibrate(
    log: str,
    *,
    out: str,
    name: str | None,
    channel: str | None,
    format: str | None,
    humans: list[str],
    bots: list[str],
    unthreaded: str,
    hash_authors: bool,
    since: str | None,
    until: str | None,
    speed: float,
    link_ms: float | None,
    ttl_ms: float,
    csma_ms: str | None,
    policy: str | None,
    reps: int,
    seed: int,
    jobs: int | None,
    plot: bool,
    progress: Callable[[int, int], None] | None,
) -> tuple[str, str, list[str], list[str]]:
    """``herdsim calibrate`` (``csma_ms`` as its ``MIN..MAX``): the results
    folder, the report it prints, its warnings and the files written."""

def dict_to_toml(json: str) -> str:
    """A scenario dict, as JSON, as TOML text."""

class FloorAgent:
    def __init__(
        self,
        id: str,
        *,
        policy: str = "spec",
        ttl_ms: int = 45000,
        csma_min_ms: int = 2000,
        csma_max_ms: int = 8000,
        seed: int = 0,
    ) -> None: ...
    @property
    def id(self) -> str: ...
    def frame(self, now_ms: int, frame: str) -> bool: ...
    def answer(self, now_ms: int, frame: str) -> bool: ...
    def inference_done(
        self, now_ms: int, msg_id: str, content: str, reply_id: str | None = None
    ) -> None: ...
    def timeout(self, now_ms: int) -> None: ...
    def reset(self, now_ms: int) -> None: ...
    def poll_output(self) -> dict[str, Any] | None: ...
    def poll_timeout(self) -> int | None: ...

class FloorServer:
    def __init__(
        self, *, policy: str = "spec", ttl_ms: int = 45000, claim_guard: str | None = None
    ) -> None: ...
    def join(self, now_ms: int, agent: str, channel: str) -> list[tuple[str, str]]: ...
    def leave(self, now_ms: int, agent: str, channel: str) -> list[tuple[str, str]]: ...
    def disconnect(self, now_ms: int, agent: str) -> list[tuple[str, str]]: ...
    def frame(
        self, now_ms: int, sender: str, frame: str, *, operator: bool = False
    ) -> list[tuple[str, str]]: ...
    def tick(self, now_ms: int) -> list[tuple[str, str]]: ...
    def poll_timeout(self) -> int | None: ...
    def holder(self, channel: str, msg_id: str) -> str | None: ...
