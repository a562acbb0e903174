"""The performance appendix: the ratios the ``bench/`` scripts measured (each within one run)
gathered into one table, and the notebooks' wall times per profile."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..config import REPO_ROOT, get_profile
from ..methods.registry import method_label

BENCH_RESULTS = REPO_ROOT / "bench" / "results"
BENCH_SCRIPTS = {"tap_overhead": "bench/tap_overhead.py", "feature_cache": "bench/feature_cache.py",
                 "peakpatch_training": "bench/peakpatch_training.py",
                 "training_free_overhead": "bench/training_free_overhead.py"}


def read_bench(name: str, folder: Path = BENCH_RESULTS) -> pd.DataFrame:
    path = Path(folder) / f"{name}.csv"
    if not path.exists():
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
    latency = read_bench("training_free_overhead", folder)
    for r in latency.to_dict("records"):
        if r["method"] != method_label("vanilla"):
            rows.append(("query latency", f"{r['method']} vs holistic, {r['gallery']:,} images", r["x vanilla"],
                         "seconds over holistic cosine's"))
    return pd.DataFrame(rows, columns=["area", "measure", "ratio", "ratio of"])


def notebook_times(profiles=("smoke", "cpu", "gpu")) -> pd.DataFrame:
    """Each notebook's wall seconds from the last run of every profile that has run here."""
    frames = []
    for name in profiles:
        path = get_profile(name).artifacts_dir() / "results" / "notebook_times.csv"
        if path.exists():
            frames.append(pd.read_csv(path))
    if not frames:
        raise FileNotFoundError("no notebook_times.csv under artifacts/<profile>/results: run `make book` first")
    return pd.concat(frames, ignore_index=True)
