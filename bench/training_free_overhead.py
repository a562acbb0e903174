"""Retrieval-time cost of the training-free methods: scoring Q negated queries against a gallery
of N images with vanilla cosine, Embedding Correction, KTN and LCSE, all with text and concept
embeddings already cached (LCSE App. K's "pre-cached concept embeddings" condition), so the
ratio is the price of the extra dimension / the score edit, not of extra encoder passes.
Random unit image features stand in for a gallery (timing does not depend on their content), and
the image x concept matrix is computed once per gallery before timing (a cache, like the text).
Holistic cost grows with the embedding width d and the edits do not, so the ratio is measured on
the cpu organism (d = 256) and on ViT-B-32's architecture (d = 512, random weights: no download).

Vanilla scores with one matrix product, ``image @ text.T``. KTN and LCSE score with one product too:
the gallery's image features with its K edit columns appended (each plan's edit, computed on the
gallery's first call, and a column of ones where a query adds a constant) against each query's text
vector with its weights on those columns appended. An edit column costs what one more embedding
dimension does, so the expected ratio is about (d + K) / d (the column "(d + K) / d"). The column
"matrix product x vanilla" times each method's text vectors alone, without the appended columns, and
"edits x vanilla" the rest; the last two time the first call on a new gallery (a copy of it), which
computes the image x concept matrix and every edit column once, text and parses already cached.
Each scorer reads a copy of the gallery of its own, as KTN and LCSE read their columns alone, and
the runs take turns, so a slow spell of the shared machine slows every method rather than one.

A second table (``training_free_widths.csv``) times holistic scoring's product alone with k more
columns on both sides, random data, at the bench's galleries up to 100K: what appending K edit
columns costs by itself.

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
from negutils.methods.ktn import EmbeddingCorrectionScorer, KtnScorer
from negutils.methods.lcse import Calibration, LcseScorer  # noqa: E402
from negutils.models.backbone import load_backbone  # noqa: E402
from negutils.world.glyphs import CATEGORY_NAMES  # noqa: E402

REPEATS = 25        # best of: on 2 shared cores single timings of a few milliseconds vary widely
FIRST_CALLS = 3
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


def best_of_interleaved(runs: dict, repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` timings of each run, the runs taking turns."""
    best = {name: float("inf") for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


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
                          "seconds": t, "x no columns": t / timed[0], "(d + k) / d": (embed_dim + k) / embed_dim}
                         for k, t in timed.items()])


def overheads(model_name: str, captions: list[str], galleries: list[int]) -> pd.DataFrame:
    torch.manual_seed(0)
    backbone = load_backbone(model_name)
    vanilla = ClipScorer(backbone)
    scorers = {"vanilla": vanilla,
               "EC": EmbeddingCorrectionScorer(vanilla, backbone.encode_text),
               "KTN": KtnScorer(vanilla, backbone.encode_text, CATEGORY_NAMES),
               "LCSE": LcseScorer(vanilla, backbone.encode_text, Calibration(0.22, 30))}
    rows = []
    for n in galleries:
        gallery = torch.nn.functional.normalize(torch.randn(n, backbone.embed_dim), dim=-1)
        own = {name: gallery.clone() for name in scorers}
        for name, scorer in scorers.items():
            scorer.score(own[name], captions)              # warm: text, parses, concept and edit columns
        runs = {name: (lambda s=scorer, g=own[name]: s.score(g, captions)) for name, scorer in scorers.items()}
        # the product of each method's text vectors alone, without the edit columns
        runs.update({f"{name} product": (lambda s=scorer, g=own[name]: s.product_scores(g, captions))
                     for name, scorer in scorers.items() if hasattr(scorer, "product_scores")})
        timed = best_of_interleaved(runs, REPEATS)
        for name, scorer in scorers.items():
            seconds, product = timed[name], timed.get(f"{name} product", timed[name])
            columns = scorer.edit_columns(own[name]) if hasattr(scorer, "edit_columns") else 0
            first = first_call_seconds(scorer, own[name], captions)
            rows.append({"model": model_name, "embed dim": backbone.embed_dim, "gallery": n,
                         "queries": len(captions), "method": name, "edit columns": columns,
                         "(d + K) / d": (backbone.embed_dim + columns) / backbone.embed_dim,
                         "seconds": seconds, "x vanilla": seconds / timed["vanilla"],
                         "matrix product x vanilla": product / timed["vanilla"],
                         "edits x vanilla": (seconds - product) / timed["vanilla"],
                         "first call on a new gallery s": first, "first call x vanilla": first / timed["vanilla"]})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
