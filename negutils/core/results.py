"""Result tables: pandas DataFrames written atomically as CSV under artifacts/<profile>/results/.
Result rows name the dataset (``embedded``, ``coco``) and the ``split`` (``val``, ``ood``) in two
columns."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .cache import atomic_save

if TYPE_CHECKING:   # annotations only: config is a later stage, results take any profile
    from ..config import Profile


def write_results(frame: pd.DataFrame, profile: Profile, name: str) -> Path:
    path = profile.artifacts_dir() / "results" / f"{name}.csv"
    return atomic_save(path, lambda tmp: frame.to_csv(tmp, index=False))


def read_results(profile: Profile, name: str) -> pd.DataFrame:
    """The table ``name`` of ``profile``; result rows written before ``split`` had its own column
    (``dataset`` "embedded/val") come back in the current shape (``embedded``, ``val``)."""
    path = profile.artifacts_dir() / "results" / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the chapter that writes {name!r} first "
                                f"(python -m negutils.run --profile {profile.name})")
    frame = pd.read_csv(path)
    packed = "dataset" in frame and "split" not in frame and len(frame) > 0
    if packed and frame["dataset"].astype(str).str.contains("/").all():
        # written before result rows had a split column (dataset "embedded/val"): split it back out
        parts = frame["dataset"].astype(str).str.rpartition("/")
        frame["dataset"] = parts[0]
        frame.insert(frame.columns.get_loc("dataset") + 1, "split", parts[2])
    return frame


def method_table(results: pd.DataFrame, columns: dict[tuple[str, str, str], str], methods=None,
                 fractions: tuple[str, ...] = ("rho",)) -> pd.DataFrame:
    """One row per method, one column per (task, split, metric) of a results frame, in % except the
    metrics named in ``fractions`` (correlations), which keep 3 decimals."""
    split = results["split"]
    methods = list(methods) if methods is not None else list(dict.fromkeys(results["method"]))
    table = {}
    for (task, split_name, metric), label in columns.items():
        rows = results[(results["task"] == task) & (split == split_name)].set_index("method")
        scale, digits = (1, 3) if metric in fractions else (100, 1)
        table[label] = (scale * rows[metric].reindex(methods)).round(digits) if metric in rows else pd.Series(
            float("nan"), index=methods)
    return pd.DataFrame(table, index=methods)


def result_value(results: pd.DataFrame, method: str, task: str, column: str, split: str = "val") -> float:
    """One number of a results frame (the row of ``method``, ``task`` and ``split``), NaN when absent."""
    rows = results[(results["method"] == method) & (results["task"] == task) & (results["split"] == split)]
    return (float(rows[column].iloc[0]) if len(rows) and column in rows and pd.notna(rows[column].iloc[0])
            else float("nan"))
