"""The performance appendix: the ratios the ``bench/`` scripts measured (each within one run)
gathered into one table, and the notebooks' wall times per profile."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..config import PROFILES, REPO_ROOT, get_profile
from ..methods.registry import method_label

BENCH_RESULTS = REPO_ROOT / "bench" / "results"
BENCH_SCRIPTS = {"tap_overhead": "bench/tap_overhead.py", "feature_cache": "bench/feature_cache.py",
                 "peakpatch_training": "bench/peakpatch_training.py",
                 "training_free_overhead": "bench/training_free_overhead.py",
                 "training_free_widths": "bench/training_free_overhead.py",
                 "main_job_notebooks": "bench/main_job_profile.py", "main_job_cells": "bench/main_job_profile.py",
                 "negation_sweep": "bench/negation_sweep.py", "negation_sweep_verdicts": "bench/negation_sweep.py",
                 "thread_scaling": "bench/thread_scaling.py",
                 "scn_pairwise": "bench/scn_pairwise.py", "optimizer_step": "bench/optimizer_step.py",
                 "pretrain_step": "bench/pretrain_step.py"}


def read_bench(name: str, folder: Path = BENCH_RESULTS, missing_ok: bool = False) -> pd.DataFrame | None:
    """``bench/results/<name>.csv``; a missing one is an error naming the script that writes it, or with
    ``missing_ok`` None (an opt-in run a chapter shows when it has been committed)."""
    path = Path(folder) / f"{name}.csv"
    if not path.exists():
        if missing_ok:
            return None
        script = BENCH_SCRIPTS.get(name, f"bench/{name}.py")
        raise FileNotFoundError(f"{path} does not exist: run `.venv/bin/python {script}` (or `make bench`)")
    return pd.read_csv(path)


def ratio_summary(folder: Path = BENCH_RESULTS) -> pd.DataFrame:
    """One row per measured ratio: area, measure, ratio, and what the ratio divides."""
    rows = []
    taps = read_bench("tap_overhead", folder)
    for r in taps.to_dict("records"):
        rows.append(("text encoder", f"{r['model']}: all-layer taps vs encode_text", r["taps_ratio"],
                     "tapped / plain seconds"))
        rows.append(("text encoder", f"{r['model']}: taps + token states vs encode_text", r["taps_plus_tokens_ratio"],
                     "tapped / plain seconds"))
    cache = read_bench("feature_cache", folder)
    for r in cache.to_dict("records"):
        for dense in ("fp32", "fp16"):
            rows.append(("feature cache", f"{r['model']}: dense {dense} vs ragged fp16 tokens",
                         r[f"dense {dense} / ragged"], "dense / ragged bytes"))
    training = read_bench("peakpatch_training", folder)
    for r in training.to_dict("records"):
        if not r["method"].startswith("NegFull"):
            rows.append(("training", f"{r['model']}: {r['method']} vs NegFull", r["x NegFull"],
                         "samples/s over NegFull's samples/s"))
    steps = read_bench("optimizer_step", folder)
    for r in steps[steps["x for-loop"] != 1].to_dict("records"):
        same = ("the same weights" if r["max abs weight difference"] == 0 else
                f"weights {r['max abs weight difference']:.0e} apart")
        rows.append(("training", f"one AdamW step of the organism: {r['implementation']} vs for-loop ({same} after "
                     f"{r['training steps compared']} training steps)", r["x for-loop"],
                     "seconds over the for-loop's (PyTorch's CPU default)"))
    pretraining = read_bench("pretrain_step", folder)
    for r in pretraining[pretraining["x version 2"] != 1].to_dict("records"):
        apart = r["max abs weight difference from version 2"]
        same = "the same weights" if apart == 0 else f"weights {apart:.0e} apart"
        threads = f"{r['torch threads']} thread" + ("s" if r["torch threads"] > 1 else "")
        rows.append(("training", f"one pretraining step of the organism on {threads}: "
                     f"{r['variant']} vs version 2's ({same} after {r['steps timed']} steps)", r["x version 2"],
                     "seconds over version 2's step (flash attention, foreach AdamW)"))
    tiles = read_bench("scn_pairwise", folder)
    for r in tiles[tiles["x whole columns"] != 1].to_dict("records"):
        rows.append(("scoring", f"SCN pairwise, d = {r['embed dim']}, {r['images']:,} images: {r['tiling']} vs "
                     "whole columns", r["x whole columns"], "seconds over whole columns of images'"))
    latency = read_bench("training_free_overhead", folder)
    for r in latency.to_dict("records"):
        if r["method"] != method_label("vanilla"):
            rows.append(("query latency", f"{r['method']} vs holistic, {r['gallery']:,} images", r["x vanilla"],
                         "seconds over holistic cosine's"))
    cores = read_bench("thread_scaling", folder)
    for r in cores[cores["setting"] != "1 process, 2 threads"].to_dict("records"):
        rows.append(("cores", f"{r['work']}: {r['setting']} vs 1 process, 2 threads", r["x 1 process, 2 threads"],
                     "samples/s over one 2-thread process's"))
    chapters = read_bench("chapter_concurrency", folder)
    for r in chapters[chapters["mode"] != "one at a time"].to_dict("records"):
        rows.append(("cores", f"{r['profile']} chapters: {r['mode']} vs one at a time", r["wall x serial"],
                     "wall seconds over the runner's, one chapter at a time"))
    return pd.DataFrame(rows, columns=["area", "measure", "ratio", "ratio of"])


SWEEP_PRETRAINING_WALL = "pretraining wall s, all rates side by side (this run)"


def sweep_summary(sweep: pd.DataFrame) -> str:
    """One line on ``bench/negation_sweep.py``'s table: rates, budget, and the wall time of the run
    that made it (pretraining side by side, then each rate's measurement); a table from before the
    rates trained side by side gives the recorded seconds of each run, one after the other."""
    head = f"{len(sweep)} rates at {int(sweep['samples'].iloc[0]):,} pretraining pairs each: "
    if SWEEP_PRETRAINING_WALL in sweep:
        pretraining = float(sweep[SWEEP_PRETRAINING_WALL].iloc[0])
        measuring = float(sweep["measure wall s (this run)"].sum())
        return (head + f"{(pretraining + measuring) / 60:.1f} min wall on this machine: {pretraining / 60:.1f} min "
                f"pretraining every rate side by side, then {measuring / 60:.1f} min measuring")
    made = sweep["pretrain s"] + sweep["measure s"]
    return (head + f"{made.sum() / 60:.1f} min on this machine, one rate after the other "
            f"({sweep['pretrain s'].sum() / 60:.1f} of pretraining)")


def notebook_times(profiles=tuple(PROFILES)) -> pd.DataFrame:
    """Each notebook's wall seconds from the last run of every profile that has run here."""
    frames = []
    for name in profiles:
        path = get_profile(name).results_dir() / "notebook_times.csv"
        if path.exists():
            frames.append(pd.read_csv(path))
    if not frames:
        raise FileNotFoundError("no notebook_times.csv under artifacts/<profile>/results: run `make book` first")
    return pd.concat(frames, ignore_index=True)


# The target for `make book` from a fresh clone on 2 cores: world, pretraining and every chapter.
BOOK_BUDGET_SECONDS = 25 * 60


def cell_times(executed: str | Path) -> pd.DataFrame:
    """Wall seconds of every code cell of a notebook papermill executed (its per-cell
    ``metadata.papermill.duration``): notebook, cell (1-based among code cells), the cell's first
    line, seconds. A notebook papermill did not execute is refused, not read as zero seconds."""
    import nbformat  # the [book] extra: the library imports without it

    path = Path(executed)
    notebook = nbformat.read(path, as_version=4)
    rows = []
    for k, cell in enumerate((c for c in notebook.cells if c.cell_type == "code"), start=1):
        duration = cell.metadata.get("papermill", {}).get("duration")
        if duration is None:
            raise ValueError(f"{path}: code cell {k} has no papermill duration; execute the notebook with "
                             "`python -m negutils.run` first")
        first = next((line.strip() for line in cell.source.splitlines()
                      if line.strip() and not line.startswith(("#", ":"))), "")
        rows.append({"notebook": path.stem, "cell": k, "first line": first[:90], "seconds": float(duration)})
    return pd.DataFrame(rows, columns=["notebook", "cell", "first line", "seconds"])


def notebook_span(executed: str | Path) -> tuple[pd.Timestamp, pd.Timestamp]:
    """When papermill started and finished executing a notebook (its ``metadata.papermill``)."""
    import nbformat  # the [book] extra: the library imports without it

    record = nbformat.read(Path(executed), as_version=4).metadata.get("papermill", {})
    if not record.get("start_time") or not record.get("end_time"):
        raise ValueError(f"{executed}: no papermill start and end time; execute the notebook with "
                         "`python -m negutils.run` first")
    return pd.Timestamp(record["start_time"]), pd.Timestamp(record["end_time"])


def main_job_profile(executed: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where the book's time goes: (per notebook: seconds in code cells, share of the total, the
    slowest cell, and when it started and ended in seconds from the first notebook's start, so two
    chapters run side by side show as overlapping spans; per cell: every cell, slowest first, with
    its share of the total) from executed notebooks."""
    cells = pd.concat([cell_times(p) for p in executed], ignore_index=True)
    total = cells["seconds"].sum()
    cells = cells.assign(share=cells["seconds"] / total).sort_values("seconds", ascending=False, ignore_index=True)
    slowest = cells.drop_duplicates("notebook").set_index("notebook")
    notebooks = cells.groupby("notebook")["seconds"].sum().to_frame()
    notebooks["share"] = notebooks["seconds"] / total
    notebooks["slowest cell"] = slowest["cell"]
    notebooks["slowest cell seconds"] = slowest["seconds"]
    notebooks["slowest cell first line"] = slowest["first line"]
    spans = {Path(p).stem: notebook_span(p) for p in executed}
    first = min(start for start, _ in spans.values())
    notebooks["started s"] = [(spans[n][0] - first).total_seconds() for n in notebooks.index]
    notebooks["ended s"] = [(spans[n][1] - first).total_seconds() for n in notebooks.index]
    return notebooks.reset_index(), cells
