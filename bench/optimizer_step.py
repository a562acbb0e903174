"""One AdamW step over the cpu organism's parameters (216 tensors, 14.2M values), as pretraining takes
880 of them: PyTorch's for-loop implementation (its default on CPU), ``foreach`` and ``fused``, from the
same weights and gradients, each then stepped 20 more times; and the largest difference of each's
weights from the for-loop's after those steps (0: the same values bit for bit).

    .venv/bin/python bench/optimizer_step.py [--steps 20]
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.config import get_profile  # noqa: E402
from negutils.models.backbone import create_model  # noqa: E402
from negutils.models.pretrain import _param_groups  # noqa: E402

IMPLEMENTATIONS = {"for-loop (CPU default)": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    config = get_profile("cpu").pretrain
    model = create_model(config.model_name, seed=0)
    generator = torch.Generator().manual_seed(0)
    gradients = [[torch.randn(p.shape, generator=generator) * 1e-3 for p in model.parameters()]
                 for _ in range(args.steps)]
    timings, weights = {}, {}
    for name, choice in IMPLEMENTATIONS.items():
        trained = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(_param_groups(trained, config.weight_decay), lr=config.lr, betas=(0.9, 0.98),
                                      eps=1e-6, **choice)
        seconds = []
        for step in gradients:
            for parameter, gradient in zip(trained.parameters(), step):
                parameter.grad = gradient.clone()
            started = time.perf_counter()
            optimizer.step()
            seconds.append(time.perf_counter() - started)
        timings[name] = sorted(seconds)[len(seconds) // 2]
        weights[name] = [p.detach().clone() for p in trained.parameters()]
    reference = "for-loop (CPU default)"
    frame = pd.DataFrame([{"implementation": name, "ms per step (median)": 1000 * timings[name],
                           "x for-loop": timings[name] / timings[reference],
                           "max abs weight difference": max(float((a - b).abs().max())
                                                            for a, b in zip(weights[name], weights[reference]))}
                          for name in IMPLEMENTATIONS])
    frame.insert(0, "steps", args.steps)
    frame.insert(0, "tensors", len(weights[reference]))
    write_result(frame, "optimizer_step", digits=6)


if __name__ == "__main__":
    main()
