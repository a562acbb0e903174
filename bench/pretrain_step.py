"""One pretraining step of the cpu organism (batch 128, CLIP loss under bf16 autocast) by each way
``PretrainConfig`` can run it: the step of PRETRAIN_VERSION 2 (PyTorch's CPU flash attention kernel,
foreach AdamW), math attention, fused AdamW, and both (today's default); and, not an option of the
config, the image tower's weights in channels-last memory. The variants take turns step by step on
their own copies of the organism, on 2 torch threads (chapter 00's pretraining) and on 1 (chapter 07's
rates, one per worker process), so a slow spell of the shared machine slows all of them; the median
step is reported with its ratio to version 2's. The last column is how far each variant's weights are
from version 2's after the timed steps (0: the same run bit for bit; anything else retrains the organism).

    .venv/bin/python bench/pretrain_step.py [--steps 12] [--threads 2 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import open_clip
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.config import get_profile  # noqa: E402
from negutils.core.workers import torch_threads  # noqa: E402
from negutils.models.backbone import Backbone, create_model, get_tokenizer  # noqa: E402
from negutils.models.pretrain import make_optimizer, training_step  # noqa: E402
from negutils.models.weights import LoadReport  # noqa: E402

VERSION_2 = {"attention": "default", "optimizer": "foreach"}
CHANNELS_LAST = "channels_last"      # a variant's own flag, not PretrainConfig's
VARIANTS = {"version 2: flash attention, foreach AdamW": {},
            "channels-last image tower": {CHANNELS_LAST: True},
            "math attention": {"attention": "math"},
            "fused AdamW": {"optimizer": "fused"},
            "math attention and fused AdamW (the default)": {"attention": "math", "optimizer": "fused"}}
WARMUP = 2


def batches(config, image_size: int, count: int) -> list[tuple[np.ndarray, list[str]]]:
    """Seeded uint8 NHWC images (the layout the world's pixels come in) and world-like captions."""
    rng = np.random.default_rng(0)
    nouns = ["cat", "dog", "tree", "house", "boat", "fish", "car", "bird"]
    return [(rng.integers(0, 256, (config.batch_size, image_size, image_size, 3), dtype=np.uint8),
             [f"a {rng.choice(['small', 'large', 'red'])} {rng.choice(nouns)} next to a {rng.choice(nouns)} "
              f"on a {rng.choice(['grassy', 'striped', 'dotted'])} background" for _ in range(config.batch_size)])
            for _ in range(count)]


def trainer(base, overrides: dict):
    overrides = dict(overrides)
    channels_last = overrides.pop(CHANNELS_LAST, False)
    config = dataclasses.replace(base, **{**VERSION_2, **overrides})
    model = create_model(config.model_name, seed=config.seed).train()
    backbone = Backbone(model, config.model_name, get_tokenizer(config.model_name),
                        report=LoadReport(config.model_name, "in training"))
    if channels_last:       # the pixels arrive NHWC already (``pixels_to_tensor`` permutes a view of them)
        model.visual.to(memory_format=torch.channels_last)
    optimizer, loss_fn = make_optimizer(model, config), open_clip.ClipLoss()

    def step(pixels, captions) -> float:
        started = time.perf_counter()
        training_step(backbone, optimizer, loss_fn, backbone.pixels_to_tensor(pixels), backbone.tokenizer(captions),
                      config)
        return time.perf_counter() - started
    return model, step


def measure(base, threads: int, steps: int) -> list[dict]:
    data = batches(base, 64, 4)
    with torch_threads(threads):
        trainers = {name: trainer(base, overrides) for name, overrides in VARIANTS.items()}
        seconds = {name: [] for name in VARIANTS}
        for k in range(WARMUP + steps):
            for name, (_, step) in trainers.items():
                took = step(*data[k % len(data)])
                if k >= WARMUP:
                    seconds[name].append(took)
    reference_name = next(iter(VARIANTS))
    reference = [p.detach() for p in trainers[reference_name][0].parameters()]
    median = {name: float(np.median(s)) for name, s in seconds.items()}
    return [{"torch threads": threads, "variant": name, "batch": base.batch_size, "steps timed": steps,
             "s per step (median)": median[name], "x version 2": median[name] / median[reference_name],
             "max abs weight difference from version 2": max(
                 float((p.detach().float() - r.float()).abs().max())
                 for p, r in zip(trainers[name][0].parameters(), reference))}
            for name in VARIANTS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    args = parser.parse_args()
    base = get_profile("cpu").pretrain
    rows = [row for threads in args.threads for row in measure(base, threads, args.steps)]
    write_result(pd.DataFrame(rows), "pretrain_step", digits=4)


if __name__ == "__main__":
    main()
