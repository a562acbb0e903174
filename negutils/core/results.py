"""Result tables: pandas DataFrames written atomically as CSV in a profile's ``results_dir()``
(``artifacts/<profile>/results/``, or ``artifacts/<profile>/backbones/<key>/results/`` for another backbone).
Result rows name the dataset (``embedded``, ``coco``) and the ``split`` (``val``, ``ood``) in two
columns.

Every results CSV is read by ``read_results_file``: an empty file, or two result rows with one key,
is an error naming the file and the chapter to rerun, never a table missing rows or a number taken
from whichever duplicate comes first."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .cache import atomic_save

if TYPE_CHECKING:   # annotations only: config is a later stage, results take any profile
    from ..config import Profile

# what names one result row in CLIP_benchmark's shape (the tables with a ``task`` column), those of its
# columns present; the other columns are its metrics. ``source``: where the items scored came from.
RESULT_KEY = ("method", "dataset", "split", "source", "model", "pretrained", "task")


class ResultsError(ValueError):
    pass


def write_results(frame: pd.DataFrame, profile: Profile, name: str) -> Path:
    path = profile.results_dir() / f"{name}.csv"
    return atomic_save(path, lambda tmp: frame.to_csv(tmp, index=False))


def rerun_hint(path: Path, profile: str | None = None) -> str:
    """Which chapter writes the results file ``path`` (its two-digit prefix) and the command that
    writes it again; the profile defaults to the folder ``artifacts/<profile>/results`` (or
    ``artifacts/<profile>/backbones/<key>/results``) names."""
    path = Path(path)
    chapter = path.stem.split("_", 1)[0]
    backbone_run = len(path.parents) > 3 and path.parents[2].name == "backbones"
    profile = profile or (path.parents[3].name if backbone_run else path.parent.parent.name)
    if not (len(chapter) == 2 and chapter.isdigit()):      # not a chapter's table: the runner's own
        return f"the book's runner writes it: rerun the book (python -m negutils.run --profile {profile})"
    return (f"chapter {chapter} writes it (notebooks/{chapter}_*.md): rerun that chapter "
            f"(python -m negutils.run --profile {profile} --only <its notebook>)")


def read_results(profile: Profile, name: str) -> pd.DataFrame:
    """The table ``name`` of ``profile`` (``read_results_file``)."""
    return read_results_file(profile.results_dir() / f"{name}.csv", run_arguments(profile))


def run_arguments(profile: Profile) -> str:
    """The runner's arguments after ``--profile`` that rerun ``profile``'s backbone: its name, and for a
    backbone other than the profile's own (``backbone_key``), the ``-p`` parameters that open it."""
    if not profile.backbone_key():
        return profile.name
    given = {"backbone": profile.backbone, "pretrained": profile.pretrained, "checkpoint": profile.checkpoint}
    return profile.name + "".join(f" -p {k}={v}" for k, v in given.items() if v is not None)


def read_results_file(path: Path, profile: str | None = None) -> pd.DataFrame:
    """The results CSV at ``path``, checked (``check_unique_results``) and remembering its path
    (``attrs["source"]``, which ``result_value`` names). Result rows written before ``split`` had its
    own column (``dataset`` "embedded/val") come back in the current shape (``embedded``, ``val``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: {rerun_hint(path, profile)}")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ResultsError(f"{path} is empty (not even a header row): a run stopped while writing it, or "
                           f"something else truncated it; {rerun_hint(path, profile)}") from None
    packed = "dataset" in frame and "split" not in frame and len(frame) > 0
    if packed and frame["dataset"].astype(str).str.contains("/").all():
        # written before result rows had a split column (dataset "embedded/val"): split it back out
        parts = frame["dataset"].astype(str).str.rpartition("/")
        frame["dataset"] = parts[0]
        frame.insert(frame.columns.get_loc("dataset") + 1, "split", parts[2])
    check_unique_results(frame, str(path))
    frame.attrs["source"] = str(path)
    return frame


def choice_for(frame: pd.DataFrame, name: str, backbone: str | None, pretrained: str | None) -> pd.DataFrame:
    """The rows of a chapter's choice table (``name``: chapter 02's layers, chapter 03's design) made for
    this backbone (its ``backbone`` and ``pretrained`` columns): a choice measured on one backbone and
    applied to another would score plausibly and wrongly. ``backbone`` None takes the table as it is; a
    table without the columns (written before they were kept) is an error asking to rerun its chapter."""
    if backbone is None:
        return frame
    where = frame.attrs.get("source", name)
    if not {"backbone", "pretrained"} <= set(frame.columns):
        raise ResultsError(f"{where} does not record the backbone its choice was made on: "
                           f"{rerun_hint(Path(where)) if where != name else 'rerun the chapter that writes it'}")
    same = (frame["backbone"].astype(str) == str(backbone)) & (frame["pretrained"].astype(str) == str(pretrained))
    mine = frame[same]
    if mine.empty:
        made = sorted({f"{b} ({p})" for b, p in zip(frame["backbone"], frame["pretrained"])})
        raise ResultsError(f"{where} was measured on {', '.join(made)}, not on {backbone} ({pretrained}): one "
                           f"backbone's choice is not another's; rerun its chapter on this backbone"
                           f"{' (' + rerun_hint(Path(where)) + ')' if where != name else ''}")
    return mine


def check_unique_results(frame: pd.DataFrame, source: str = "results") -> None:
    """Refuse a table in the result-row shape (a ``task`` column) where two rows share one key
    (``RESULT_KEY``): a reader would take whichever comes first. Names the key, the CSV lines and the
    values of the columns that differ between them."""
    if "task" not in frame:
        return
    key = [c for c in RESULT_KEY if c in frame]
    repeated = frame[frame.duplicated(key, keep=False)]
    if repeated.empty:
        return
    _, rows = next(iter(repeated.groupby(key, sort=False, dropna=False)))
    lines = ", ".join(str(i + 2) for i in rows.index)       # line 1 is the header
    differ = [c for c in rows.columns if c not in key and len(rows[c].drop_duplicates()) > 1]
    values = "; ".join(f"{c} = {rows[c].tolist()}" for c in differ) or "identical rows"
    shown = ", ".join(f"{c}={rows[c].iloc[0]!r}" for c in key)
    raise ResultsError(f"{source}: {len(rows)} result rows share one key ({shown}) on lines {lines}: {values}; "
                       "each result must be written once")


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
    """One number of a results frame (the row of ``method``, ``task`` and ``split``), NaN when absent.
    Rows of that key that disagree on ``column`` (results stacked from several tables, or a frame not
    read by ``read_results_file``) are an error naming the frame's file when known: no row is preferred."""
    rows = results[(results["method"] == method) & (results["task"] == task) & (results["split"] == split)]
    if not len(rows) or column not in rows:
        return float("nan")
    values = rows[column].drop_duplicates()
    if len(values) > 1:
        source = results.attrs.get("source", "the results frame")
        raise ResultsError(f"{source}: {len(rows)} rows for method {method!r}, task {task!r}, split {split!r} "
                           f"give {column} = {rows[column].tolist()}; which one is the measurement is ambiguous")
    return float(values.iloc[0]) if pd.notna(values.iloc[0]) else float("nan")
