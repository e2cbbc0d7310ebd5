"""Type stubs of the extension module (python/src/lib.rs)."""

from typing import Callable

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
) -> tuple[str, str]: ...
def dict_to_toml(json: str) -> str: ...
