"""Tap overhead: the tapped text pass (all layers' EOS projections, optionally token sequences)
against plain encode_text, as ratios measured in one run on the same captions.

    .venv/bin/python bench/tap_overhead.py [--captions 1024] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from common import write_result
from negutils.core.phrasing import with_article
from negutils.models.backbone import load_backbone
from negutils.world.glyphs import CATEGORY_NAMES

TEMPLATES = ["This image features {a} and {b}.", "This image does not feature {n}.",
             "This image features {b}, but not {n}.", "There is no {n} in the image."]


def negbench_like_captions(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b, c = rng.choice(CATEGORY_NAMES, size=3, replace=False)
        out.append(TEMPLATES[i % len(TEMPLATES)].format(a=with_article(a), b=with_article(b), n=with_article(c)))
    return out


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captions", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=["negbook-organism", "ViT-B-32"])
    args = parser.parse_args()
    captions = negbench_like_captions(args.captions)
    rows = []
    for name in args.models:
        bb = load_backbone(name)
        bb.encode_text(captions[:64])  # warm-up
        plain = best_of(lambda: bb.encode_text(captions), args.repeats)
        tapped = best_of(lambda: bb.encode_text_layers(captions), args.repeats)
        mid = bb.n_layers * 2 // 3
        with_tokens = best_of(lambda: bb.encode_text_layers(captions, token_layers=[mid]), args.repeats)
        rows.append({"model": name, "captions": len(captions), "threads": torch.get_num_threads(),
                     "encode_text_s": round(plain, 3), "taps_s": round(tapped, 3),
                     "taps_plus_tokens_s": round(with_tokens, 3),
                     "taps_ratio": round(tapped / plain, 3), "taps_plus_tokens_ratio": round(with_tokens / plain, 3)})
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows)
    write_result(frame, "tap_overhead")


if __name__ == "__main__":
    main()
