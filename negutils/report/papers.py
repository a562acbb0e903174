"""The papers' reported numbers as data, each with its table, row, column and a verbatim quote
of the line it was read from (``negutils/report/data/paper_numbers.csv``). ``unit`` says how the paper
prints the value: percent, fraction (AUCs, correlations, cosines), layer (a 1-based index) or z."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

PAPER_NUMBERS = Path(__file__).parent / "data" / "paper_numbers.csv"


@cache
def _read_paper_numbers() -> pd.DataFrame:
    # a verdict table looks up dozens of numbers: the file is read once per process
    return pd.read_csv(PAPER_NUMBERS, dtype={"value": float})


def paper_numbers(benchmark: str | None = None) -> pd.DataFrame:
    frame = _read_paper_numbers().copy()
    return frame if benchmark is None else frame[frame["benchmark"] == benchmark].reset_index(drop=True)


def beside_paper(ours: dict[tuple[str, str], float], label: str = "organism", table: str | None = None,
                 rows: list[str] | None = None) -> pd.DataFrame:
    """Paper numbers next to ours for the same (benchmark, metric), in the paper's unit: ours are
    fractions, so they are shown in % where the paper's ``unit`` is percent. ``table`` and ``rows``
    keep only those paper tables / rows (e.g. one method's row of a method-by-benchmark table)."""
    frame = paper_numbers()
    if table is not None:
        frame = frame[frame["table"] == table]
    if rows is not None:
        frame = frame[frame["row"].isin(rows)]
    frame = frame[[(b, m) in ours for b, m in zip(frame["benchmark"], frame["metric"])]].copy()
    frame[label] = [ours[(b, m)] * (100 if unit == "percent" else 1)
                    for b, m, unit in zip(frame["benchmark"], frame["metric"], frame["unit"])]
    return frame[["benchmark", "metric", "paper", "table", "row", "value", "unit", label]].rename(
        columns={"value": "paper value"})


def methods_beside_paper(results: pd.DataFrame, pairs: list[tuple[str, str, str]]) -> pd.DataFrame:
    """For each (our method, paper table, paper row): that row's reported numbers beside the
    method's own on the same (benchmark, metric), one row per number, in the paper's unit."""
    frames = []
    for method, table, row in pairs:
        ours = our_numbers(results[results["method"] == method])
        frame = beside_paper(ours, label="ours", table=table, rows=[row]).assign(method=method)
        frames.append(frame[["method", "table", "row", "benchmark", "metric", "paper value", "ours"]])
    return pd.concat(frames, ignore_index=True)


# (our split, our task) -> the benchmark name the papers' rows use
BENCHMARK_OF = {("val", "mcq"): "negbench_mcq_coco", ("ood", "mcq"): "negbench_mcq_voc",
                ("val", "retrieval"): "negbench_retrieval_coco",
                ("val", "retrieval_negated"): "negbench_retrieval_negated_coco",
                ("val", "confusion_2c"): "coco_confusion_2c", ("val", "confusion_3c"): "coco_confusion_3c",
                ("val", "factor_operator"): "factor_operator",
                ("val", "retention"): "retention_coco", ("val", "valse_existence"): "valse_existence"}


def our_numbers(results: pd.DataFrame) -> dict[tuple[str, str], float]:
    """{(benchmark, metric): value} from a results frame (its ``split`` and ``task`` name the benchmark)."""
    out = {}
    for row in results.to_dict("records"):
        benchmark = BENCHMARK_OF.get((row["split"], row["task"]))
        if benchmark:
            out.update({(benchmark, m): float(v) for m, v in row.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool) and pd.notna(v)})
    return out


def paper_metric(benchmark: str, metric: str, row: str | None = None) -> float:
    """The one reported number for our (benchmark, metric), e.g. ``("collapse", "l_p")``; ``row``
    picks the model where several report it (LCSE Table 1's polarity AUC per model)."""
    frame = paper_numbers(benchmark)
    hit = frame[(frame["metric"] == metric) & ((frame["row"] == row) if row is not None else True)]
    if len(hit) != 1:
        raise KeyError(f"paper_numbers.csv has {len(hit)} rows for benchmark {benchmark!r} metric {metric!r}"
                       + (f" row {row!r}" if row is not None else "") + " (expected exactly one)")
    return float(hit["value"].iloc[0])


def paper_value(paper: str, table: str, row: str, column: str) -> float:
    """One reported number, looked up by its table, row and column (KeyError naming them if absent)."""
    frame = paper_numbers()
    hit = frame[(frame["paper"] == paper) & (frame["table"] == table) & (frame["row"] == row)
                & (frame["column"] == column)]
    if hit.empty:
        raise KeyError(f"paper_numbers.csv has no {paper} {table} row {row!r} column {column!r}")
    return float(hit["value"].iloc[0])
