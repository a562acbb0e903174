"""One AdamW step over the cpu organism's parameters (the CSV counts their tensors), as pretraining takes
880 of them: PyTorch's for-loop implementation (its default on CPU), ``foreach`` and ``fused``. Each is
timed stepping the same weights with the same gradients (median of ``--steps``), then trains a copy of
the organism for ``--train-steps`` real steps (CLIP loss under bf16 autocast, global-norm clipping, on
seeded random images and captions); the last column is the largest difference of its weights from the
for-loop's after them (0: the same run bit for bit).

    .venv/bin/python bench/optimizer_step.py [--steps 20] [--train-steps 6]
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import open_clip
import pandas as pd
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils.config import get_profile  # noqa: E402
from negutils.models.backbone import create_model  # noqa: E402
from negutils.models.pretrain import _param_groups  # noqa: E402

IMPLEMENTATIONS = {"for-loop (CPU default)": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def optimizer(model, config, choice):
    return torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.98), eps=1e-6,
                             **choice)


def step_seconds(model, config, choice, gradients) -> float:
    stepped = copy.deepcopy(model)
    adamw, seconds = optimizer(stepped, config, choice), []
    for step in gradients:
        for parameter, gradient in zip(stepped.parameters(), step):
            parameter.grad = gradient.clone()
        started = time.perf_counter()
        adamw.step()
        seconds.append(time.perf_counter() - started)
    return sorted(seconds)[len(seconds) // 2]


def trained_weights(model, config, choice, batches) -> list[torch.Tensor]:
    trained = copy.deepcopy(model).train()
    adamw, loss_fn = optimizer(trained, config, choice), open_clip.ClipLoss()
    for images, text in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            loss = loss_fn(F.normalize(trained.encode_image(images), dim=-1).float(),
                           F.normalize(trained.encode_text(text), dim=-1).float(), trained.logit_scale.exp())
        adamw.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained.parameters(), config.grad_clip)
        adamw.step()
    return [p.detach().clone() for p in trained.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--train-steps", type=int, default=6)
    args = parser.parse_args()
    config = get_profile("cpu").pretrain
    model = create_model(config.model_name, seed=0)
    generator = torch.Generator().manual_seed(0)
    gradients = [[torch.randn(p.shape, generator=generator) * 1e-3 for p in model.parameters()]
                 for _ in range(args.steps)]
    tokenizer, size = open_clip.get_tokenizer(config.model_name), model.visual.image_size
    size = size if isinstance(size, int) else size[0]
    batches = [(torch.randn(32, 3, size, size, generator=generator),
                tokenizer([f"a photo of {k} dogs and no cat {step}" for k in range(32)]))
               for step in range(args.train_steps)]
    timings = {name: step_seconds(model, config, choice, gradients) for name, choice in IMPLEMENTATIONS.items()}
    weights = {name: trained_weights(model, config, choice, batches) for name, choice in IMPLEMENTATIONS.items()}
    reference = "for-loop (CPU default)"
    frame = pd.DataFrame([{"tensors": len(weights[reference]), "implementation": name,
                           "ms per step (median)": 1000 * timings[name],
                           "x for-loop": timings[name] / timings[reference],
                           "training steps compared": args.train_steps,
                           "max abs weight difference": max(float((a - b).abs().max())
                                                            for a, b in zip(weights[name], weights[reference]))}
                          for name in IMPLEMENTATIONS])
    write_result(frame, "optimizer_step", digits=6)


if __name__ == "__main__":
    main()
