"""Training throughput of PeakPatch (on cached features, the encoder never runs) against NegFull
(the whole CLIP fine-tuned: image and text towers forward and backward), in samples/s measured
in one run. Synthetic tensors of the cached shapes stand in for the feature cache, random pixels
and NegBench-like captions for NegFull's batch: timing does not depend on their content. A batch
is laid out as the ``negbench`` protocol lays it out: per image one positive caption and one
NegMCQ question of four other captions (``training_data.ProtocolView.batch``).

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

from negutils.methods import PeakPatchConfig
from negutils.methods.negfull import negfull_loss
from negutils.methods.peakpatch.model import PeakPatch
from negutils.methods.peakpatch.train import losses  # noqa: E402
from negutils.models.backbone import load_backbone  # noqa: E402


def batch_layout(images: int) -> dict:
    """Caption indices of a ``negbench`` batch: positives 0..B-1, then each image's four MCQ options."""
    return {"captions": np.arange(5 * images), "positives": np.arange(images),
            "negatives": np.array([], dtype=np.int64),
            "mcq": images + np.arange(4 * images).reshape(images, 4), "mcq_rows": np.arange(images),
            "mcq_correct": np.zeros(images, dtype=np.int64)}


def synthetic_batch(images: int, width: int, dim: int, tokens: int, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """Features shaped like ``peakpatch_train.feature_batch`` for a ``batch_layout`` batch, and the images."""
    g = torch.Generator().manual_seed(seed)
    n = 5 * images
    unit = lambda *shape: torch.nn.functional.normalize(torch.randn(*shape, generator=g), dim=-1)  # noqa: E731
    batch = {"final": unit(n, dim), "proj_lp": unit(n, dim), "eos_lp": torch.randn(n, width, generator=g),
             "eos_la": torch.randn(n, width, generator=g), "tokens": torch.randn(n, tokens, width, generator=g),
             "mask": torch.ones(n, tokens, dtype=torch.bool)}
    return batch, unit(images, dim)


def steps_per_second(step, steps: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def peakpatch_rate(variant: str, width: int, dim: int, batch_images: int, tokens: int, steps: int) -> float:
    torch.manual_seed(0)
    model = PeakPatch(width, dim, variant)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    features, images = synthetic_batch(batch_images, width, dim, tokens)
    layout = batch_layout(batch_images)
    config = PeakPatchConfig(variant=variant)

    def step():
        terms = losses(model, features, images, layout, config)
        optimizer.zero_grad()
        terms["total"].backward()
        optimizer.step()

    return batch_images * steps_per_second(step, steps)


def negfull_rate(name: str, batch_images: int, steps: int) -> float:
    torch.manual_seed(0)
    bb = load_backbone(name)
    model = bb.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    size = bb.image_size
    pixels = np.random.default_rng(0).integers(0, 255, size=(batch_images, size, size, 3), dtype=np.uint8)
    images = bb.pixels_to_tensor(pixels)
    text = bb.tokenize(negbench_like_captions(5 * batch_images))
    layout = batch_layout(batch_images)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bb.device.type == "cpu"):
            loss, _, _ = negfull_loss(bb, images, text, layout, 0.5)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return batch_images * steps_per_second(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="images per step (each with 5 captions)")
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
