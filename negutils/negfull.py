"""NegFull: fine-tune the whole CLIP on negation data (NegBench sec. 4), the "encoder
fine-tuning" row of every table.

    L = alpha * L_CLIP + (1 - alpha) * L_MCQ

L_CLIP is the symmetric contrastive loss on (image, affirmative caption) pairs; L_MCQ the 4-way
cross-entropy of each image over its caption, its negated counterpart and two captions of other
images (the same MCQs PeakPatch's SCN trains on). alpha = 1 is plain contrastive fine-tuning on
the same captions, alpha = 0 MCQ only.
"""
from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import open_clip
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .backbone import Backbone, load_backbone, save_checkpoint
from .cache import config_hash
from .coco import CocoSplit
from .negtrain import mcq_options


@dataclass(frozen=True)
class NegFullConfig:
    alpha: float = 0.5
    epochs: int = 1
    batch_size: int = 128
    lr: float = 1e-5
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    bf16: bool = True
    seed: int = 0


def negfull_loss(model, images: torch.Tensor, text: torch.Tensor, n: int, options: np.ndarray, alpha: float):
    """``text`` tokenises n affirmative then n negated captions of the n ``images``."""
    img = F.normalize(model.encode_image(images), dim=-1).float()
    txt = F.normalize(model.encode_text(text), dim=-1).float()
    scale = model.logit_scale.exp()
    loss_clip = open_clip.ClipLoss()(img, txt[:n], scale)
    opt = torch.from_numpy(options)
    mcq_logits = scale * (img[:, None, :] * txt[opt]).sum(-1)
    loss_mcq = F.cross_entropy(mcq_logits, torch.zeros(n, dtype=torch.long))
    return alpha * loss_clip + (1 - alpha) * loss_mcq, loss_clip, loss_mcq


def finetune_negfull(backbone: Backbone, split: CocoSplit, pairs: pd.DataFrame, config: NegFullConfig,
                     progress: bool = True) -> tuple[Backbone, pd.DataFrame]:
    """A fine-tuned copy of ``backbone`` (the original is untouched) and the per-step losses."""
    if not 0.0 <= config.alpha <= 1.0:
        raise ValueError(f"NegFull alpha must be in [0, 1], got {config.alpha}")
    if len(pairs) < max(3, config.batch_size):
        raise ValueError(f"NegFull needs at least batch_size={config.batch_size} pairs, got {len(pairs)}")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = copy.deepcopy(backbone.model)
    tuned = Backbone(model, backbone.model_name, backbone.tokenizer, backbone.report, backbone.device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * (len(pairs) // config.batch_size)
    image_of_row = pairs["image_index"].to_numpy()
    pixels = np.asarray(split.pixels())
    history = []
    bar = tqdm(total=steps, desc=f"NegFull alpha={config.alpha:g}", disable=not progress)
    for step in range(steps):
        if step % (len(pairs) // config.batch_size) == 0:
            order = rng.permutation(len(pairs))
        k = step % (len(pairs) // config.batch_size)
        rows = order[k * config.batch_size:(k + 1) * config.batch_size]
        for group in optimizer.param_groups:
            group["lr"] = config.lr * 0.5 * (1 + math.cos(math.pi * step / max(1, steps)))
        images = tuned.pixels_to_tensor(pixels[image_of_row[rows]])
        text = tuned.tokenize(list(pairs["caption"].iloc[rows]) + list(pairs["negated"].iloc[rows]))
        options = mcq_options(len(rows), image_of_row[rows], rng)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16 and tuned.device.type == "cpu"):
            loss, loss_clip, loss_mcq = negfull_loss(model, images, text, len(rows), options, config.alpha)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        history.append({"alpha": config.alpha, "step": step + 1, "loss": loss.item(),
                        "loss CLIP": loss_clip.item(), "loss MCQ": loss_mcq.item()})
        bar.update()
    bar.close()
    model.eval()
    return tuned, pd.DataFrame(history)


def ensure_negfull(backbone: Backbone, base_key: str, split: CocoSplit, pairs: pd.DataFrame, config: NegFullConfig,
                   artifacts_dir: str | Path, progress: bool = True) -> Backbone:
    """The fine-tuned model for (base model, data, config), trained once and reused by its hash."""
    key = config_hash({"base": base_key, "pairs": pairs.to_dict("list"), "config": asdict(config)})
    path = Path(artifacts_dir) / "negfull" / f"negfull-{key}.pt"
    if not path.exists():
        tuned, history = finetune_negfull(backbone, split, pairs, config, progress)
        save_checkpoint(tuned.model, path, backbone.model_name, extra={"negfull_config": asdict(config),
                                                                       "final_loss": float(history["loss"].iloc[-1])})
    return load_backbone(backbone.model_name, checkpoint=path, device=str(backbone.device))
