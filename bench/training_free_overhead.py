"""Retrieval-time cost of the training-free methods: scoring Q negated queries against a gallery
of N images with vanilla cosine, Embedding Correction, KTN and LCSE, all with text and concept
embeddings already cached (LCSE App. K's "pre-cached concept embeddings" condition), so the
ratio is the price of the extra dimension / the score edit, not of extra encoder passes.
Random unit image features stand in for a gallery (timing does not depend on their content), and
the image x concept matrix is computed once per gallery before timing (a cache, like the text).
Holistic cost grows with the embedding width d and the edits do not, so the ratio is measured on
the cpu organism (d = 256) and on ViT-B-32's architecture (d = 512, random weights: no download).
Edits that read one column per concept ride in the cosine's matrix product; the two last columns
split each method's time into that product and the elementwise edits that combine concepts.

    .venv/bin/python bench/training_free_overhead.py [--queries 64] [--galleries 10000 100000 500000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import best_of, negbench_like_captions  # noqa: E402

from negutils.benchmarks import ClipScorer  # noqa: E402
from negutils.methods import Calibration, EmbeddingCorrectionScorer, KtnScorer, LcseScorer  # noqa: E402
from negutils.models import load_backbone  # noqa: E402
from negutils.world import CATEGORY_NAMES  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--galleries", type=int, nargs="+", default=[10000, 100000, 500000])
    parser.add_argument("--models", nargs="+", default=["negbook-organism-rn-t128", "ViT-B-32-quickgelu"])
    args = parser.parse_args()
    captions = [c for c in negbench_like_captions(4 * args.queries) if " not " in c or " no " in c][:args.queries]
    frame = pd.concat([overheads(name, captions, args.galleries) for name in args.models], ignore_index=True)
    write_result(frame, "training_free_overhead", digits=4)
    growth = frame.pivot_table(index=["model", "method"], columns="gallery", values="seconds")
    print("seconds at the largest gallery / the smallest:")
    print((growth[growth.columns.max()] / growth[growth.columns.min()]).round(1).to_string())


def overheads(model_name: str, captions: list[str], galleries: list[int]) -> pd.DataFrame:
    torch.manual_seed(0)
    backbone = load_backbone(model_name)
    vanilla = ClipScorer(backbone)
    scorers = {"vanilla": vanilla, "EC": EmbeddingCorrectionScorer(vanilla, backbone.encode_text),
               "KTN": KtnScorer(vanilla, backbone.encode_text, CATEGORY_NAMES),
               "LCSE": LcseScorer(vanilla, backbone.encode_text, Calibration(0.22, 30))}
    rows = []
    for n in galleries:
        gallery = torch.nn.functional.normalize(torch.randn(n, backbone.embed_dim), dim=-1)
        for scorer in scorers.values():
            scorer.score(gallery, captions)              # warm: text, parses, concept columns
        seconds = {name: best_of(lambda s=scorer: s.score(gallery, captions), 3) for name, scorer in scorers.items()}
        # the one matrix product with every folded edit, without the elementwise ones (KTN with C+, LCSE's AND)
        product = {name: best_of(lambda s=scorer: s.folded_scores(gallery, captions, n), 3)
                   if hasattr(scorer, "folded_scores") else seconds[name] for name, scorer in scorers.items()}
        rows += [{"model": model_name, "embed dim": backbone.embed_dim, "gallery": n, "queries": len(captions),
                  "method": name, "seconds": t, "x vanilla": t / seconds["vanilla"],
                  "matrix product x vanilla": product[name] / seconds["vanilla"],
                  "elementwise edits x vanilla": (t - product[name]) / seconds["vanilla"]}
                 for name, t in seconds.items()]
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
