"""Retrieval-time cost of the training-free methods: scoring Q negated queries against a gallery
of N images with vanilla cosine, Embedding Correction, KTN and LCSE, all with text and concept
embeddings already cached (LCSE App. K's "pre-cached concept embeddings" condition), so the
ratio is the price of the extra dimension / the score edit, not of extra encoder passes.
Random unit image features stand in for a gallery (timing does not depend on their content), and
the image x concept matrix is computed once per gallery before timing (a cache, like the text).
Holistic cost grows with the embedding width d and the edits do not, so the ratio is measured on
the cpu organism (d = 256) and on ViT-B-32's architecture (d = 512, random weights: no download).
Vanilla scores with one matrix product, ``image @ text.T``. KTN and LCSE add per-gallery edit columns
to their cosines (each plan's edit, computed on the gallery's first call, and a column of ones where a
query adds a constant), each query a few of them with its weights, in one of three ways (the column
"edits added by"): by ``column_kernel`` where it runs (the rows "KTN" and "LCSE" here), the cosines
and each query's columns added block by block in one pass; "columns appended", the gallery's image
features with all K columns appended against each query's text vector with its weights appended, one
matrix product in which an edit column costs what one more embedding dimension does (the scorers' path
without the kernel); "columns gathered", the product one cache-sized block of images at a time with
each block's rows of the edit columns gathered per query and column (without the kernel, when the
appended columns would cost more, as with thousands of distinct plans; ``GATHERED_PAIR_COST``).
Each scorer reads a copy of the gallery of its own, as KTN and LCSE read their columns alone: the runs
take turns, and data another run reads too stays in cache between a run's turns (at 10K images
vanilla measured 1.24x faster on a gallery six other rows read than on a copy of its own, in this
bench's run before the copies). The row "vanilla, on the blocked row's gallery" keeps that effect in
view; "vanilla, in blocks" is the product in the gathered rows' blocks (``scores_in_blocks``), and
"vanilla, by the column kernel" the kernel's product with no column added (its blocks, MKL's sgemm on
each, the next block prefetched), which shows what of the kernel rows' ratio is the product. Two
columns split each method's time into the product of its (corrected) text vectors alone and the edits
added to it; the last two time the first call on a new gallery (a copy of it), which computes the
image x concept matrix and every edit column once (and, appending, the appended gallery), text and
parses already cached.

A second table (``training_free_widths.csv``) times holistic scoring's product alone with k more
columns on both sides, random data, at the bench's galleries up to 100K: what appending K edit
columns costs by itself, the floor under KTN's and LCSE's ratios in this design.

    .venv/bin/python bench/training_free_overhead.py [--queries 64] [--galleries 10000 100000 500000]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import negbench_like_captions  # noqa: E402

from negutils.benchmarks import ClipScorer  # noqa: E402
from negutils.benchmarks.evaluate import scores_in_blocks  # noqa: E402
from negutils.methods import Calibration, EmbeddingCorrectionScorer, KtnScorer, LcseScorer  # noqa: E402
from negutils.methods import column_kernel, parsed_scorer  # noqa: E402
from negutils.models import load_backbone  # noqa: E402
from negutils.report.performance import BLOCKED_PRODUCT, KERNEL_PRODUCT, SHARED_GALLERY, VANILLA_CONTROLS  # noqa: E402
from negutils.world import CATEGORY_NAMES  # noqa: E402

REPEATS = 25        # best of: on 2 shared cores single timings vary by 5-20%, and best of 9 still by 10%
FIRST_CALLS = 3
# rows timing a method's scores with its edit columns added the PyTorch ways: {row: (method, how)}
OTHER_PATHS = {f"{name}, columns {how}": (name, how) for how in ("appended", "gathered") for name in ("KTN", "LCSE")}
ADDED_BY = {"kernel": "column kernel", "appended": "appended to the product", "gathered": "gathered in blocks"}
APPENDED_WIDTHS = (0, 8, 16, 24, 32, 40, 48, 64)
WIDTHS_UP_TO = 100000         # images: a gallery per width, 1.7 GB in all at 100K and d = 512


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--galleries", type=int, nargs="+", default=[10000, 100000, 500000])
    parser.add_argument("--models", nargs="+", default=["negbook-organism-rn-t128", "ViT-B-32-quickgelu"])
    args = parser.parse_args()
    captions = [c for c in negbench_like_captions(4 * args.queries) if " not " in c or " no " in c][:args.queries]
    frame = pd.concat([overheads(name, captions, args.galleries) for name in args.models], ignore_index=True)
    write_result(frame, "training_free_overhead", digits=4)
    widths = pd.concat([appended_width_costs(int(d), n, args.queries) for d in sorted(frame["embed dim"].unique())
                        for n in args.galleries if n <= WIDTHS_UP_TO], ignore_index=True)
    write_result(widths, "training_free_widths", digits=4)
    growth = frame.pivot_table(index=["model", "method"], columns="gallery", values="seconds")
    print("seconds at the largest gallery / the smallest:")
    print((growth[growth.columns.max()] / growth[growth.columns.min()]).round(1).to_string())


def best_of_interleaved(runs: dict, repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` timings of each run, the runs taking turns, so a slow spell of the
    shared machine slows every method rather than one."""
    best = {name: float("inf") for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def on_path(run, how: str):
    """``run`` with the kernel switched off and every per-gallery edit column appended to the matrix product
    (``how`` "appended") or gathered per (query, column) pair in blocks of images ("gathered")."""
    def without_kernel():
        saved = parsed_scorer.GATHERED_PAIR_COST
        parsed_scorer.GATHERED_PAIR_COST = 0 if how == "gathered" else 10 ** 12
        try:
            with column_kernel.switched_off():
                return run()
        finally:
            parsed_scorer.GATHERED_PAIR_COST = saved
    return without_kernel


def first_call_seconds(scorer, gallery: torch.Tensor, captions: list[str]) -> float:
    """The fastest of ``FIRST_CALLS`` scorings of a fresh copy of ``gallery``: what a new gallery costs
    once (its image x concept matrix and edit columns), the text and parses already cached."""
    best = float("inf")
    for _ in range(FIRST_CALLS):
        fresh = gallery.clone()
        started = time.perf_counter()
        scorer.score(fresh, captions)
        best = min(best, time.perf_counter() - started)
    return best


def appended_width_costs(embed_dim: int, gallery: int, queries: int) -> pd.DataFrame:
    """[gallery, d + k] @ [queries, d + k].T for each k of ``APPENDED_WIDTHS``, each operand contiguous,
    timed in turns, as multiples of k = 0."""
    generator = torch.Generator().manual_seed(embed_dim)
    operands = {k: (torch.randn(gallery, embed_dim + k, generator=generator),
                    torch.randn(queries, embed_dim + k, generator=generator)) for k in APPENDED_WIDTHS}
    timed = best_of_interleaved({k: (lambda a=a, b=b: a @ b.T) for k, (a, b) in operands.items()}, REPEATS)
    return pd.DataFrame([{"embed dim": embed_dim, "gallery": gallery, "queries": queries, "appended columns": k,
                          "seconds": t, "x no columns": t / timed[0]} for k, t in timed.items()])


def overheads(model_name: str, captions: list[str], galleries: list[int]) -> pd.DataFrame:
    torch.manual_seed(0)
    backbone = load_backbone(model_name)
    vanilla = ClipScorer(backbone)

    def training_free():
        return {"EC": EmbeddingCorrectionScorer(vanilla, backbone.encode_text),
                "KTN": KtnScorer(vanilla, backbone.encode_text, CATEGORY_NAMES),
                "LCSE": LcseScorer(vanilla, backbone.encode_text, Calibration(0.22, 30))}
    scorers = {"vanilla": vanilla, **training_free()}
    # the other paths on scorers of their own: a scorer keeps the path of its last call, not each
    others = {row: training_free()[name] for row, (name, _) in OTHER_PATHS.items()}
    kernel = column_kernel.available()
    print(f"{model_name}: column kernel " + ("in use" if kernel is None else f"not in use ({kernel})"))
    rows = []
    for n in galleries:
        gallery = torch.nn.functional.normalize(torch.randn(n, backbone.embed_dim), dim=-1)
        # each scorer reads a copy of the gallery of its own, as KTN and LCSE read their edit columns alone:
        # data that other runs read too can stay in cache between a run's turns (SHARED_GALLERY's row)
        own = {name: gallery.clone() for name in [*scorers, *others, KERNEL_PRODUCT]}
        for name, scorer in scorers.items():
            scorer.score(own[name], captions)              # warm: text, parses, concept and edit columns
        other_runs = {row: on_path(lambda s=scorer, g=own[row]: s.score(g, captions), OTHER_PATHS[row][1])
                      for row, scorer in others.items()}
        for run in other_runs.values():
            run()
        text = vanilla.text_features(captions)
        runs = {name: (lambda s=scorer, g=own[name]: s.score(g, captions)) for name, scorer in scorers.items()}
        runs[BLOCKED_PRODUCT] = lambda: scores_in_blocks(gallery, text)
        runs[SHARED_GALLERY] = lambda: vanilla.score(gallery, captions)
        if column_kernel.available() is None:          # the kernel's product with no columns added
            no_slots = torch.zeros(0, len(captions), dtype=torch.int32), torch.zeros(0, len(captions))
            runs[KERNEL_PRODUCT] = lambda g=own[KERNEL_PRODUCT], o=torch.ones(n, 1): (
                column_kernel.scores_with_columns(g, text, o, *no_slots))
        # the scorers' other ways to add the edit columns, timed so the kernel's and GATHERED_PAIR_COST's choices show
        runs.update(other_runs)
        # the product of each method's text vectors alone, without the edit columns
        runs.update({f"{name} product": (lambda s=scorer, g=own[name]: s.product_scores(g, captions))
                     for name, scorer in scorers.items() if hasattr(scorer, "product_scores")})
        timed = best_of_interleaved(runs, REPEATS)
        seconds = {name: timed[name] for name in [*scorers, *VANILLA_CONTROLS, *OTHER_PATHS] if name in timed}
        method = {name: OTHER_PATHS.get(name, (name,))[0] for name in seconds}
        product = {name: timed.get(f"{method[name]} product", t) for name, t in seconds.items()}
        columns = {name: scorer.edit_columns(own[name]) for name, scorer in {**scorers, **others}.items()
                   if hasattr(scorer, "edit_columns")}
        added_by = {name: ADDED_BY[OTHER_PATHS[name][1] if name in OTHER_PATHS else
                                   "kernel" if column_kernel.available(columns[name]) is None else "appended"]
                    for name in seconds if columns.get(name)}
        first = {name: first_call_seconds(scorer, own[name], captions) for name, scorer in scorers.items()}
        first.update({name: float("nan") for name in seconds if name not in first})    # not a method of its own
        rows += [{"model": model_name, "embed dim": backbone.embed_dim, "gallery": n, "queries": len(captions),
                  "method": name, "edit columns": columns.get(name, 0), "edits added by": added_by.get(name, ""),
                  "seconds": t, "x vanilla": t / seconds["vanilla"],
                  "matrix product x vanilla": product[name] / seconds["vanilla"],
                  "edits x vanilla": (t - product[name]) / seconds["vanilla"],
                  "first call on a new gallery s": first[name],
                  "first call x vanilla": first[name] / seconds["vanilla"]}
                 for name, t in seconds.items()]
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
