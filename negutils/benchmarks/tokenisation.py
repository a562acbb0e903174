"""What a backbone's tokenizer does to a benchmark: how many captions it cuts at its context length,
and how many option sets it makes identical.

A caption longer than the context is scored on its first tokens only; when two options of a
question differ only after the cut (a long NegBench MCQ whose options diverge at the end), the
model receives the same input twice and gives both the same score. Such a question measures
nothing: it is reported, and refused unless the caller accepts it (scoring then splits the tie,
``negutils.core.metrics.choice_credit``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..core.cache import atomic_save, config_hash

# the text each benchmark scores; the benchmarks whose rows are option sets compare their options
TEXT_COLUMNS = {"mcq": [f"caption_{k}" for k in range(4)], "retrieval_affirmative": ["query"],
                "retrieval_negated": ["query"], "confusion_2c": ["query"], "confusion_3c": ["query"],
                "factor": ["caption_0", "caption_1"], "existence": ["caption_0", "caption_1"]}
OPTION_SETS = ("mcq", "factor", "existence")
REPORT_VERSION = 2


class IdenticalOptionsError(ValueError):
    """Two options of one question reach the model as the same tokens."""


def file_identity(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def tokenisation_report(bench, backbone) -> pd.DataFrame:
    """Per benchmark file of ``bench``: its captions, how many ``backbone``'s tokenizer cuts at the
    context length, and (for option sets) how many questions have two options that tokenise
    identically, with the first such question as an example. Cached beside the benchmark files,
    keyed by the files and the tokenizer."""
    files = {name: bench.file(name) for name in TEXT_COLUMNS}
    key = config_hash([REPORT_VERSION, backbone.model_name, backbone.context_length,
                       {n: file_identity(f) for n, f in files.items() if f.exists()}])
    cached = Path(bench.root) / f"tokenisation-{key}.csv"
    if cached.exists():
        return pd.read_csv(cached, keep_default_na=False).astype({"example": str})
    rows = []
    for name, columns in TEXT_COLUMNS.items():
        frame = getattr(bench, name)
        texts = frame[columns].to_numpy(dtype=object) if len(frame) else np.empty((0, len(columns)), dtype=object)
        distinct = list(dict.fromkeys(texts.ravel().tolist()))
        tokens = backbone.tokenizer(distinct) if distinct else None
        cut = backbone.truncated(distinct, tokens) if distinct else np.zeros(0, dtype=bool)
        identical, example = 0, ""
        if name in OPTION_SETS and distinct:
            row_of = {c: k for k, c in enumerate(distinct)}
            ids = tokens.numpy()[np.vectorize(row_of.get, otypes=[int])(texts)]           # [Q, K, context]
            same = (ids[:, :, None, :] == ids[:, None, :, :]).all(-1)                        # [Q, K, K]
            same &= ~np.eye(len(columns), dtype=bool)
            clash = same.any(axis=(1, 2))
            identical = int(clash.sum())
            if identical:
                q = int(clash.argmax())
                example = f"row {q}: " + " | ".join(repr(t) for t in texts[q])
        rows.append({"split": bench.split, "benchmark": name, "file": str(files[name]), "captions": len(distinct),
                     "over context": int(cut.sum()), "context": backbone.context_length,
                     "identical option sets": identical, "example": example})
    report = pd.DataFrame(rows)
    atomic_save(cached, lambda tmp: report.to_csv(tmp, index=False))
    return report


def check_tokenisation(report: pd.DataFrame, accept_identical_options: bool = False) -> pd.DataFrame:
    """``report`` unchanged, or ``IdenticalOptionsError`` naming each file with option sets that
    tokenise identically (``accept_identical_options``: score them, ties split)."""
    clashes = report[report["identical option sets"] > 0]
    if len(clashes) and not accept_identical_options:
        lines = "; ".join(f"{r['file']}: {r['identical option sets']} of its questions, e.g. {r['example']}"
                          for r in clashes.to_dict("records"))
        raise IdenticalOptionsError(
            f"options that become identical after tokenisation at the context length "
            f"{int(clashes['context'].iloc[0])} ({lines}). Such a question cannot be answered; pass "
            "accept_identical_options=True (negbook eval: --accept-identical-options) to score it as a tie")
    return report


def tokenisation_summary(report: pd.DataFrame) -> str:
    """One line per split: captions cut at the context and identical option sets, per file where any."""
    lines = []
    for split, group in report.groupby("split", sort=False):
        detail = [f"{r['benchmark']}: {r['over context']} cut"
                  + (f", {r['identical option sets']} identical option sets" if r["identical option sets"] else "")
                  for r in group.to_dict("records") if r["over context"] or r["identical option sets"]]
        lines.append(f"[benchmarks {split}] {int(group['over context'].sum())} of {int(group['captions'].sum())} "
                     f"captions exceed the {int(group['context'].iloc[0])}-token context; "
                     f"{int(group['identical option sets'].sum())} option sets tokenise identically"
                     + (f" ({'; '.join(detail)})" if detail else ""))
    return "\n".join(lines)
