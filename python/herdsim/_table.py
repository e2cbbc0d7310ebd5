"""A results table: the columns of one of herdsim's CSV files, typed.

No dependency: ``to_pandas()`` and ``to_polars()`` give a DataFrame when
pandas or polars is installed; ``rows()`` and ``columns`` need nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # as in __init__.py: `typing` is for the type checker only
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Union

    Cell = Union[int, float, str, None]


def _cell(text: str) -> Cell:
    """A CSV cell as its value: empty is None, then int, float, or the text."""
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class Table:
    """The columns of a CSV that herdsim wrote, in its order, with its names.

    ``table["duplicate_rate"]`` is a column (a list), ``len(table)`` the
    number of rows, ``table.rows()`` each row as a dict.
    """

    def __init__(self, columns: list[str], data: dict[str, list[Cell]]) -> None:
        self.columns: list[str] = columns
        self._data = data

    @classmethod
    def read_csv(cls, path: str | Path) -> Table:
        """The table of a CSV file that herdsim wrote."""
        with open(path, newline="", encoding="utf-8") as f:
            import csv  # here, not at the top: it brings `re` (3 ms)

            reader = csv.reader(f)
            header = next(reader, [])
            data: dict[str, list[Cell]] = {c: [] for c in header}
            for row in reader:
                for c, v in zip(header, row):
                    data[c].append(_cell(v))
        return cls(list(header), data)

    def __len__(self) -> int:
        return len(self._data[self.columns[0]]) if self.columns else 0

    def __getitem__(self, column: str) -> list[Cell]:
        return self._data[column]

    def __iter__(self) -> Iterator[dict[str, Cell]]:
        return iter(self.rows())

    def rows(self) -> list[dict[str, Cell]]:
        """Each row as a dict, column name to value."""
        return [{c: self._data[c][i] for c in self.columns} for i in range(len(self))]

    def to_dict(self) -> dict[str, list[Cell]]:
        """Column name to its values (what a DataFrame is built from)."""
        return {c: list(self._data[c]) for c in self.columns}

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with the CSV's columns (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.to_dict(), columns=self.columns)

    def to_polars(self) -> Any:
        """A ``polars.DataFrame`` with the CSV's columns (needs polars)."""
        import polars as pl

        return pl.DataFrame(self.to_dict())

    def __repr__(self) -> str:
        return self.format()

    def format(self, columns: list[str] | None = None, max_rows: int = 40) -> str:
        """The table as aligned text (numbers to 4 significant digits)."""
        cols = columns or self.columns

        def show(v: Cell) -> str:
            if v is None:
                return ""
            if isinstance(v, float):
                return f"{v:.4g}"
            return str(v)

        n = len(self)
        shown = list(range(min(n, max_rows)))
        cells = [[show(self._data[c][i]) for c in cols] for i in shown]
        widths = [max([len(c)] + [len(r[j]) for r in cells]) for j, c in enumerate(cols)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
        if n > len(shown):
            lines.append(f"... {n - len(shown)} more rows")
        return "\n".join(lines)
