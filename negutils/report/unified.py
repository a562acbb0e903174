"""Per-item outcomes (one value per question, query, gallery or sample) and their bootstrap
confidence intervals. Every headline metric of the book is the mean of such an array: MCQ and
pairwise accuracy of 0/1 hits, R@k of per-query hits, mAP of per-gallery AP, retention rho of
per-query rho. Chapters 03-05 save the arrays; chapter 06 resamples them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..benchmarks.suite import evaluate_methods
from ..config import Profile
from ..core.cache import atomic_save
from ..core.results import write_results
from ..core.stats import bootstrap_interval
from ..methods.registry import family, method_label

Key = tuple[str, str, str, str, str]  # (method, dataset, split, task, metric)


def items_path(profile: Profile, name: str) -> Path:
    return profile.results_dir() / f"{name}.npz"


def write_items(items: dict[Key, np.ndarray], profile: Profile, name: str) -> Path:
    """One .npz of float32 arrays; the keys travel as JSON so names with '/' or '|' survive."""
    keys = list(items)
    arrays = {f"a{i}": np.asarray(items[k], dtype=np.float32) for i, k in enumerate(keys)}
    arrays["keys"] = np.array(json.dumps(keys))
    return atomic_save(items_path(profile, name), lambda tmp: np.savez_compressed(tmp, **arrays))


def record_evaluation(session, bench: dict, chapter: str, scorers: dict | list[tuple[dict, tuple | None]],
                      retention_reference=None) -> pd.DataFrame:
    """Evaluate scorers on a chapter's benchmarks and record both outputs under ``name``: the results
    CSV and the per-item outcomes chapter 06 bootstraps (``<chapter>_results``, ``<chapter>_items``).
    ``scorers`` is ``{name: scorer}`` for the full suite, or a list of (scorers, tasks) groups evaluated on
    their own tasks only."""
    groups = [(scorers, None)] if isinstance(scorers, dict) else scorers
    items = {}
    frames = [evaluate_methods(group, bench, session.splits, session.dataset, session.backbone.model_name,
                               session.pretrained_label, retention_reference=retention_reference, items=items,
                               tasks=tasks) for group, tasks in groups if group]
    results = pd.concat(frames, ignore_index=True)
    write_results(results, session.profile, f"{chapter}_results")
    write_items(items, session.profile, f"{chapter}_items")
    return results


def read_items(profile: Profile, names: list[str]) -> dict[Key, np.ndarray]:
    """The outcomes of several chapters; the first chapter to report a (method, dataset, split,
    task, metric) wins (vanilla is scored in chapters 03, 04 and 05 alike). Keys saved before the
    split had its own place, (method, "embedded/val", task, metric), are read in the new shape."""
    out: dict[Key, np.ndarray] = {}
    for name in names:
        path = items_path(profile, name)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: run the chapter that writes {name!r} first "
                                    f"(python -m negutils.run --profile {profile.name})")
        with np.load(path) as data:
            for i, key in enumerate(json.loads(str(data["keys"]))):
                if len(key) == 4:   # (method, "dataset/split", task, metric)
                    dataset, _, split = key[1].rpartition("/")
                    key = [key[0], dataset, split, *key[2:]]
                out.setdefault(tuple(key), data[f"a{i}"].astype(np.float64))
    return out


def bootstrap_ci(values, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the percentile bootstrap interval of the mean of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError(f"bootstrap_ci needs a non-empty 1-D array; got shape {v.shape}")
    mean, low, high = bootstrap_interval(v, n_boot, level, seed)
    return float(mean), float(low), float(high)


# the unified table's columns: label -> (split, task, metric, scale); scale 100 prints %
UNIFIED_COLUMNS = {
    "MCQ val": ("val", "mcq", "accuracy", 100), "MCQ ood": ("ood", "mcq", "accuracy", 100),
    "R@5": ("val", "retrieval", "R@5", 100), "R-Neg@5": ("val", "retrieval_negated", "R@5", 100),
    "Conf-2C": ("val", "confusion_2c", "mAP", 100), "Conf-3C": ("val", "confusion_3c", "mAP", 100),
    "FACTOR op": ("val", "factor_operator", "accuracy", 100),
    "FACTOR nested": ("val", "factor_nested", "accuracy", 100),
    "VALSE": ("val", "valse_existence", "accuracy", 100), "rho": ("val", "retention", "rho", 1),
}


def unified_table(items: dict[Key, np.ndarray], methods: list[str] | None = None, columns: dict | None = None,
                  n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Long frame: one row per (method, benchmark) with the mean and its bootstrap interval, in
    the column's scale. Methods default to every method in ``items``, in first-seen order."""
    columns = columns or UNIFIED_COLUMNS
    by_key = {(m, s, t, metric): v for (m, _, s, t, metric), v in items.items()}
    methods = methods or list(dict.fromkeys(k[0] for k in items))
    rows = []
    for method in methods:
        for label, (split, task, metric, scale) in columns.items():
            values = by_key.get((method, split, task, metric))
            if values is None:
                continue
            mean, low, high = bootstrap_ci(values, n_boot=n_boot, seed=seed)
            rows.append({"method": method, "benchmark": label, "value": scale * mean, "low": scale * low,
                         "high": scale * high, "n": len(values)})
    if not rows:
        raise ValueError(f"no outcomes for methods {methods} on columns {list(columns)}")
    return pd.DataFrame(rows)


def format_unified(long: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """Methods x benchmarks (backbone and method x benchmarks for ``backbone_table``'s frame), each cell
    'mean [low, high]' (rho with 3 decimals)."""
    def cell(r):
        d = 3 if r["benchmark"] == "rho" else digits
        return f"{r['value']:.{d}f} [{r['low']:.{d}f}, {r['high']:.{d}f}]"

    index = ["backbone", "method"] if "backbone" in long else ["method"]
    frame = long.assign(cell=long.apply(cell, axis=1))
    table = frame.pivot(index=index, columns="benchmark", values="cell")
    order = [c for c in UNIFIED_COLUMNS if c in table.columns] + [c for c in table.columns if c not in UNIFIED_COLUMNS]
    keys = long[index].itertuples(index=False, name=None)
    rows = list(dict.fromkeys(key if len(index) > 1 else key[0] for key in keys))
    return table.reindex(index=rows, columns=order).fillna("")


ITEM_TABLES = ("03_items", "04_items", "05_items")


def default_protocol_methods(items: dict[Key, np.ndarray]) -> list[str]:
    """The methods of ``items`` in first-seen order, but those trained on another protocol than the
    default (their names carry it in brackets: chapter 03's protocol table shows them)."""
    return [m for m in dict.fromkeys(key[0] for key in items) if "[" not in m]


def backbone_table(runs: dict[str, Profile], n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """``unified_table`` of every backbone in ``runs`` ({label: profile of that backbone's run}) stacked,
    with a ``backbone`` column: each backbone's methods on each benchmark with its interval."""
    frames = []
    for label, profile in runs.items():
        items = read_items(profile, list(ITEM_TABLES))
        table = unified_table(items, methods=default_protocol_methods(items), n_boot=n_boot, seed=seed)
        frames.append(table.assign(backbone=label))
    if not frames:
        raise ValueError("backbone_table needs at least one backbone's run")
    frame = pd.concat(frames, ignore_index=True)
    return frame[["backbone", *[c for c in frame.columns if c != "backbone"]]]


def paired_difference_ci(a, b, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high) resampling the *same* items for both: the right interval when
    two methods are scored on one benchmark, tighter than comparing their separate intervals."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes must have one value per item each; got {a.shape} and {b.shape}")
    return bootstrap_ci(a - b, n_boot=n_boot, level=level, seed=seed)


def leaders(long: pd.DataFrame, items: dict[Key, np.ndarray] | None = None, reference: str = method_label("vanilla"),
            n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per benchmark, the best method, the methods tied with it (identical value: the same scorer
    on these items), the runner-up, and whether the lead is settled: with ``items``, the paired
    bootstrap interval of leader minus runner-up excludes 0; without, the two intervals are
    disjoint. Where every method ties (or one method alone is scored) there is no runner-up and
    nothing is settled. On ``rho``, retention against ``reference``, the reference is 1 by definition
    and does not compete."""
    by_key = {(m, s, t, metric): v for (m, _, s, t, metric), v in (items or {}).items()}
    rows = []
    for bench, block in long.groupby("benchmark", sort=False):
        if bench == "rho":
            block = block[block["method"] != reference]
        if block.empty:
            continue
        ranked = block.sort_values("value", ascending=False, kind="mergesort")
        first = ranked.iloc[0]
        tied = ranked[np.isclose(ranked["value"], first["value"], rtol=0, atol=1e-9)].iloc[1:]
        others = ranked[~np.isclose(ranked["value"], first["value"], rtol=0, atol=1e-9)]
        digits = 3 if bench == "rho" else 1
        row = {"benchmark": bench, "best": first["method"], "value": round(first["value"], digits),
               "interval": f"[{first['low']:.{digits}f}, {first['high']:.{digits}f}]",
               "tied": ", ".join(tied["method"])}
        if len(others):
            second = others.iloc[0]
            row.update({"runner-up": second["method"], "runner-up value": round(second["value"], digits)})
            split, task, metric, scale = UNIFIED_COLUMNS.get(bench, (None, None, None, 1))
            a, b = (by_key.get((first["method"], split, task, metric)),
                    by_key.get((second["method"], split, task, metric)))
            if a is not None and b is not None:
                diff, low, high = paired_difference_ci(a, b, n_boot=n_boot, seed=seed)
                row.update({"lead": round(scale * diff, digits),
                            "lead interval": f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]",
                            "settled": bool(low > 0)})
            else:
                row["settled"] = bool(second["high"] < first["low"])
        else:
            row["settled"] = False      # a lead over nobody: a tie of all, or a method alone
        rows.append(row)
    return pd.DataFrame(rows)


def _text(cell) -> str:
    """A text cell of a leaders table, "" where it is empty (NaN once read back from CSV)."""
    return "" if pd.isna(cell) else str(cell)


def leader_summary(row) -> dict[str, str]:
    """One row of ``leaders`` (in memory or read back from CSV) in words: the leader (naming the
    methods tied with it), the runner-up, and whether the lead is settled. Where no method is
    ahead of another the leader says so and the runner-up is "none"; an empty or missing
    ``settled`` is never read as settled."""
    best, tied, runner_up = _text(row.get("best")), _text(row.get("tied")), _text(row.get("runner-up"))
    settled = row.get("settled")
    settled = "yes" if runner_up and pd.notna(settled) and bool(settled) else "no"
    if runner_up:
        leader = f"{best} (tied with {tied})" if tied else best
    elif tied:
        leader = f"no leader: {best}, {tied} tie"
    else:
        leader = f"{best} (the only method)"
    return {"leader": leader, "runner-up": runner_up or "none", "settled": settled}


TRAINED = ("fine-tuned encoder", "trained post-hoc")   # registry families that learn from negation data


def unified_findings(long: pd.DataFrame, leads: pd.DataFrame, reference: str = method_label("vanilla")) -> list[str]:
    """Chapter 06's reading of the unified table as sentences, every number from ``long`` (the
    unified table) and ``leads`` (``leaders``): the settled leads, the benchmarks where the lead is
    within noise, and the best trained and training-free methods against ``reference`` on MCQ."""
    lines = []
    settled = leads[leads["settled"].fillna(False).astype(bool)] if "settled" in leads else leads.iloc[:0]
    for _, r in settled.iterrows():
        lines.append(f"{r['benchmark']}: {r['best']} leads at {r['value']:g} {r['interval']}, {r['lead']:+g} "
                     f"{r['lead interval']} over {r['runner-up']}.")
    open_ = leads.loc[~leads.index.isin(settled.index), "benchmark"].tolist()
    if open_:
        lines.append("Within the paired noise (no settled leader): " + ", ".join(open_) + ".")
    mcq = long[long["benchmark"] == "MCQ val"].set_index("method")["value"]
    if reference in mcq:
        trained = mcq[[m for m in mcq.index if family(m) in TRAINED]]
        free = mcq[[m for m in mcq.index if family(m) == "training-free"]]
        for label, block in (("trained", trained), ("training-free", free)):
            if len(block):
                lines.append(f"Best {label} method on MCQ val: {block.idxmax()} at {block.max():.1f} "
                             f"({block.max() - mcq[reference]:+.1f} over {reference}'s {mcq[reference]:.1f}).")
    return lines
