"""Training throughput of PeakPatch (on cached features, the encoder never runs) against NegFull
(the whole CLIP fine-tuned: image and text towers forward and backward), in samples/s measured
in one run. Synthetic tensors of the cached shapes stand in for the feature cache, random pixels
and NegBench-like captions for NegFull's batch: timing does not depend on their content.

    .venv/bin/python bench/peakpatch_training.py [--steps 5] [--models negbook-organism ViT-B-32]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402
from tap_overhead import negbench_like_captions  # noqa: E402

from negutils.backbone import load_backbone  # noqa: E402
from negutils.negfull import negfull_loss  # noqa: E402
from negutils.negtrain import mcq_options  # noqa: E402
from negutils.peakpatch import PeakPatch  # noqa: E402
from negutils.peakpatch_train import PeakPatchConfig, losses  # noqa: E402


def synthetic_batch(pairs: int, width: int, dim: int, tokens: int, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """A batch shaped like ``peakpatch_train.feature_batch``: 2 x pairs captions, then pairs images."""
    g = torch.Generator().manual_seed(seed)
    n = 2 * pairs
    unit = lambda *shape: torch.nn.functional.normalize(torch.randn(*shape, generator=g), dim=-1)  # noqa: E731
    batch = {"final": unit(n, dim), "proj_lp": unit(n, dim), "eos_lp": torch.randn(n, width, generator=g),
             "eos_la": torch.randn(n, width, generator=g), "tokens": torch.randn(n, tokens, width, generator=g),
             "mask": torch.ones(n, tokens, dtype=torch.bool)}
    return batch, unit(pairs, dim)


def steps_per_second(step, steps: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def peakpatch_rate(variant: str, width: int, dim: int, batch_pairs: int, tokens: int, steps: int) -> float:
    torch.manual_seed(0)
    model = PeakPatch(width, dim, variant)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, images = synthetic_batch(batch_pairs, width, dim, tokens)
    options = mcq_options(batch_pairs, np.arange(batch_pairs), np.random.default_rng(0))
    config = PeakPatchConfig(variant=variant)

    def step():
        terms = losses(model, batch, images, options, config)
        optimizer.zero_grad()
        terms["total"].backward()
        optimizer.step()

    return batch_pairs * steps_per_second(step, steps)


def negfull_rate(name: str, batch_pairs: int, steps: int) -> float:
    torch.manual_seed(0)
    bb = load_backbone(name)
    model = bb.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    size = bb.image_size
    pixels = np.random.default_rng(0).integers(0, 255, size=(batch_pairs, size, size, 3), dtype=np.uint8)
    images = bb.pixels_to_tensor(pixels)
    captions = negbench_like_captions(2 * batch_pairs)
    text = bb.tokenize(captions)
    options = mcq_options(batch_pairs, np.arange(batch_pairs), np.random.default_rng(0))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bb.device.type == "cpu"):
            loss, _, _ = negfull_loss(model, images, text, batch_pairs, options, 0.5)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return batch_pairs * steps_per_second(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="image-caption pairs per step")
    parser.add_argument("--tokens", type=int, default=12, help="real tokens per cached caption")
    parser.add_argument("--models", nargs="*", default=["negbook-organism", "ViT-B-32"])
    args = parser.parse_args()
    rows = []
    for name in args.models:
        bb = load_backbone(name)
        width, dim = int(bb.text_tower.transformer.width), bb.embed_dim
        negfull = negfull_rate(name, args.batch, args.steps)
        rows.append({"model": name, "method": "NegFull (whole CLIP)", "samples/s": negfull, "x NegFull": 1.0})
        for variant in ("joint", "ecn_only", "scn_only"):
            rate = peakpatch_rate(variant, width, dim, args.batch, args.tokens, args.steps)
            rows.append({"model": name, "method": f"PeakPatch {variant} (cached features)", "samples/s": rate,
                         "x NegFull": rate / negfull})
    frame = pd.DataFrame(rows)
    frame["threads"] = torch.get_num_threads()
    write_result(frame, "peakpatch_training", digits=2)


if __name__ == "__main__":
    main()
