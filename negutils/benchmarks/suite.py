"""Every benchmark of the book for one split, built once and cached by a hash of what made it.

    bench = ensure_benchmarks(splits["val"], profile.benchmarks, artifacts_dir / "benchmarks")
    bench.mcq, bench.retrieval_negated, bench.confusion_2c, bench.factor, ...

Files (NegBench CSV schema for the MCQ; CSV for the rest) live under
``<artifacts>/benchmarks-<key>/<split>/`` and are written atomically; same seed, same bytes.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ..core.cache import atomic_save, atomic_write_json, config_hash, file_record, record_problems
from ..world.coco import CocoSplit
from .confusion import ConfusionConfig, build_confusion
from .evaluate import (
    evaluate_confusion,
    evaluate_mcq,
    evaluate_pairwise,
    evaluate_retention,
    evaluate_retrieval,
    result_row,
    results_frame,
    retrieval_scores,
)
from .factor import FactorConfig, build_factor
from .negbench import MCQConfig, build_mcq, build_retrieval, read_mcq_csv, write_mcq_csv
from .valse import build_existence

# Bump when a builder changes what it writes.
BENCHMARK_VERSION = 1
NAMES = ("mcq", "retrieval_affirmative", "retrieval_negated", "confusion_2c", "confusion_3c", "factor", "existence")


@dataclass(frozen=True)
class BenchmarkConfig:
    mcq: MCQConfig = field(default_factory=MCQConfig)
    retrieval_seed: int = 0
    confusion: ConfusionConfig = field(default_factory=ConfusionConfig)
    factor: FactorConfig = field(default_factory=FactorConfig)
    existence_samples: int = 500
    existence_seed: int = 0


@dataclass
class Benchmarks:
    split: str
    root: Path
    mcq: pd.DataFrame
    retrieval_affirmative: pd.DataFrame
    retrieval_negated: pd.DataFrame
    confusion_2c: pd.DataFrame
    confusion_3c: pd.DataFrame
    factor: pd.DataFrame
    existence: pd.DataFrame
    # the file a benchmark was read from where it is not ``root / <name>.csv`` (NegBench's published CSVs)
    files: dict[str, Path] = field(default_factory=dict)
    # per file, the captions a backbone's tokenizer cuts and the option sets it makes identical
    # (``negutils.benchmarks.tokenisation``; set by ``Session.benchmarks``)
    tokenisation: pd.DataFrame | None = None

    def file(self, name: str) -> Path:
        """The file benchmark ``name`` was read from."""
        return Path(self.files.get(name, Path(self.root) / f"{name}.csv"))

    def source(self, name: str) -> str:
        """Where benchmark ``name``'s items come from, as every result row on it records: a published file's
        name (NegBench's CSVs), or ``built`` (the book's own construction from the split's annotations)."""
        return self.files[name].name if name in self.files else "built"

    def sizes(self) -> pd.DataFrame:
        return pd.DataFrame([{"split": self.split, "benchmark": n, "samples": len(getattr(self, n))} for n in NAMES])


def build_benchmarks(split: CocoSplit, config: BenchmarkConfig) -> dict[str, pd.DataFrame]:
    affirmative, negated = build_retrieval(split, config.retrieval_seed)
    return {"mcq": build_mcq(split, config.mcq), "retrieval_affirmative": affirmative,
            "retrieval_negated": negated, "confusion_2c": build_confusion(split, "2C", config.confusion),
            "confusion_3c": build_confusion(split, "3C", config.confusion),
            "factor": build_factor(split, config.factor),
            "existence": build_existence(split, config.existence_samples, config.existence_seed)}


def _manifest_problems(manifest: Path) -> list[str]:
    """Why the cache ``manifest`` describes cannot be used: no manifest (never finished), a manifest
    without file records (written before they were kept), or files that differ from their records."""
    try:
        records = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError):
        return [f"{manifest} is missing, unreadable or has no file records"]
    return record_problems(manifest.parent, records)


def ensure_benchmarks(split: CocoSplit, config: BenchmarkConfig, out_dir: str | Path, data_key: str) -> Benchmarks:
    """Build the benchmarks of ``split`` (identified by ``data_key``, e.g. the world hash) or
    reuse the cached files."""
    key = config_hash({"data": data_key, "split": split.name, "config": config, "version": BENCHMARK_VERSION})
    root = Path(out_dir) / f"benchmarks-{key}" / split.name
    done = root / "manifest.json"
    problems = _manifest_problems(done)
    if problems:
        if done.exists():       # a file cut, zeroed or overwritten since: say what, and build again
            warnings.warn(f"benchmark cache {root} is not whole ({'; '.join(problems[:3])}); rebuilding it")
        frames = build_benchmarks(split, config)
        write_mcq_csv(frames["mcq"], root / "mcq.csv")
        for name, frame in frames.items():
            if name != "mcq":
                atomic_save(root / f"{name}.csv", lambda p, f=frame: f.to_csv(p, index=False, lineterminator="\n"))
        atomic_write_json(done, {"key": key, "split": split.name, "config": asdict(config),
                                 "sizes": {n: len(f) for n, f in frames.items()},
                                 "files": {f"{n}.csv": file_record(root / f"{n}.csv") for n in NAMES}})
    frames = {n: pd.read_csv(root / f"{n}.csv", keep_default_na=False) if n != "mcq" else read_mcq_csv(root / "mcq.csv")
              for n in NAMES}
    return Benchmarks(split=split.name, root=root, **frames)


def evaluate_benchmarks(scorer, bench: Benchmarks, split: CocoSplit, dataset: str, model: str,
                        pretrained: str, items: dict | None = None, tasks=None,
                        retrieval: dict | None = None, split_name: str | None = None) -> list[dict]:
    """Every benchmark of ``bench`` (or only the task names in ``tasks``) scored by ``scorer``:
    CLIP_benchmark-shaped result rows, ``dataset`` the dataset's name (``embedded``) and ``split``
    ``split_name`` (default: the split ``bench`` was built on). With ``items`` (a dict) the per-item
    outcomes land there, keyed (method, dataset, split, task, metric). Each retrieval query set is
    scored once for all its metrics; ``retrieval`` (a dict), when given, receives those score
    matrices by query-set name."""

    split_name = bench.split if split_name is None else split_name
    rows = []

    def run(task, benchmark, evaluate, *args, **kwargs):
        if tasks is not None and task not in tasks:
            return
        outcomes = {}
        rows.append(result_row(dataset, split_name, model, pretrained, task,
                               {"method": scorer.name, **evaluate(*args, **kwargs, items=outcomes)},
                               source=bench.source(benchmark)))
        if items is not None:
            items.update({(scorer.name, dataset, split_name, task, metric): v for metric, v in outcomes.items()})

    # a split without captions (VOC2007) has no retrieval queries: those tasks are absent, not zero
    wanted = lambda *names: tasks is None or any(n in tasks for n in names)  # noqa: E731
    scores = {} if retrieval is None else retrieval
    affirmative, negated = len(bench.retrieval_affirmative) > 0, len(bench.retrieval_negated) > 0
    if affirmative and wanted("retrieval", "retention"):
        scores["retrieval_affirmative"] = retrieval_scores(scorer, bench.retrieval_affirmative, split)
    if negated and wanted("retrieval_negated", "retrieval_negated_any"):
        scores["retrieval_negated"] = retrieval_scores(scorer, bench.retrieval_negated, split)
    run("mcq", "mcq", evaluate_mcq, scorer, bench.mcq, split)
    if affirmative:
        run("retrieval", "retrieval_affirmative", evaluate_retrieval, scorer, bench.retrieval_affirmative, split,
            scores=scores.get("retrieval_affirmative"))
    if negated:
        run("retrieval_negated", "retrieval_negated", evaluate_retrieval, scorer, bench.retrieval_negated, split,
            source_only=True, scores=scores.get("retrieval_negated"))
        run("retrieval_negated_any", "retrieval_negated", evaluate_retrieval, scorer, bench.retrieval_negated, split,
            scores=scores.get("retrieval_negated"))
    for name, frame in (("confusion_2c", bench.confusion_2c), ("confusion_3c", bench.confusion_3c)):
        if len(frame):
            run(name, name, evaluate_confusion, scorer, frame, split)
    for name, frame in bench.factor.groupby("split", sort=False):
        run(f"factor_{name}", "factor", evaluate_pairwise, scorer, frame, split, group="test")
    run("valse_existence", "existence", evaluate_pairwise, scorer, bench.existence, split, group="negated_is_correct")
    return rows


def evaluate_methods(scorers: dict, bench: dict, splits: dict, dataset: str, model: str, pretrained: str,
                     ood_tasks: tuple[str, ...] = ("mcq",), retention_reference=None,
                     items: dict | None = None, tasks=None) -> pd.DataFrame:
    """Every scorer on the full ``val`` suite (or only ``tasks``) and, on ``ood``, the tasks in
    ``ood_tasks`` (the papers report VOC for MCQ only): one results frame, ``method`` naming the
    scorer. With ``retention_reference`` (the vanilla scorer) a ``retention`` row adds LCSE's
    Spearman rho. ``dataset``: the dataset's name (``embedded``), each row's ``split`` its own column.
    ``items`` (a dict) receives the per-item outcomes, keyed (method, dataset, split, task, metric)."""

    rows, reference_scores = [], {}

    def add(name, split_name, task, metrics, outcomes, benchmark):
        rows.append(result_row(dataset, split_name, model, pretrained, task, {"method": name, **metrics},
                               source=bench[split_name].source(benchmark)))
        if items is not None:
            items.update({(name, dataset, split_name, task, m): v for m, v in outcomes.items()})

    for name, scorer in scorers.items():
        scorer.name = name
        scores = {}
        rows += evaluate_benchmarks(scorer, bench["val"], splits["val"], dataset, model, pretrained,
                                    items=items, tasks=tasks, retrieval=scores, split_name="val")
        if retention_reference is not None and (tasks is None or "retention" in tasks):
            queries = bench["val"].retrieval_affirmative
            if scorer is retention_reference:
                reference_scores.setdefault("affirmative", scores.get("retrieval_affirmative"))
            if reference_scores.get("affirmative") is None:
                reference_scores["affirmative"] = retrieval_scores(retention_reference, queries, splits["val"])
            outcomes = {}
            add(name, "val", "retention", evaluate_retention(scorer, retention_reference, queries, splits["val"],
                                                             items=outcomes, scores=scores.get("retrieval_affirmative"),
                                                             reference_scores=reference_scores["affirmative"]),
                outcomes, "retrieval_affirmative")
        if "ood" in bench and "mcq" in ood_tasks:
            outcomes = {}
            add(name, "ood", "mcq", evaluate_mcq(scorer, bench["ood"].mcq, splits["ood"], items=outcomes), outcomes,
                "mcq")
    return results_frame(rows)
