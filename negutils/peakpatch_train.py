"""Joint training of PeakPatch on cached frozen features (PeakPatch sec. 3.4, App. 0.I).

    L = L_ECN + lambda_SCN * L_SCN
    L_ECN: symmetric InfoNCE at logit scale 100; image -> text normalises over all 2B corrected
           captions of the batch (each image's affirmative and negated caption), so the negated
           captions are hard negatives; text -> image over the B images, for affirmative captions.
    L_SCN: 4-way cross-entropy over cos(f_I, f_hat) + Delta s of each in-batch MCQ (its caption,
           its negated caption, two captions of other images) plus mean (Delta s)^2.

AdamW (weight decay 0.01) with separate learning rates for the ECN and the SCN, cosine annealing
to 1% of each, gradient clipping at 1.0; the checkpoint kept is the epoch with the best held-out
MCQ accuracy.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .features import TextFeatures
from .negtrain import mcq_options
from .peakpatch import PeakPatch


@dataclass(frozen=True)
class PeakPatchConfig:
    variant: str = "joint"
    epochs: int = 10
    batch_size: int = 1024
    lr_ecn: float = 1e-5
    lr_scn: float = 1e-4
    weight_decay: float = 0.01
    lambda_scn: float = 1.0
    logit_scale: float = 100.0
    grad_clip: float = 1.0
    final_lr_fraction: float = 0.01
    dropout: float = 0.1
    seed: int = 0

    @classmethod
    def from_settings(cls, settings) -> "PeakPatchConfig":
        """The budget of a profile's ``PeakPatchSettings`` (chapter 03's runs, and the joint model
        chapters 04 and 05 stack on)."""
        return cls(epochs=settings.epochs, batch_size=settings.batch_size, lr_ecn=settings.lr_ecn,
                   lr_scn=settings.lr_scn)


def feature_batch(features: TextFeatures, indices) -> dict:
    """float32 tensors of the cached features of the given captions, tokens padded and masked."""
    idx = np.asarray(indices, dtype=np.int64)
    batch = {name: torch.from_numpy(np.asarray(features[name][idx], dtype=np.float32))
             for name in ("final", "proj_lp", "eos_lp", "eos_la")}
    batch["tokens"], batch["mask"] = features.padded_tokens(idx)
    return batch


def losses(model: PeakPatch, batch: dict, images: torch.Tensor, options: np.ndarray, config: PeakPatchConfig
           ) -> dict[str, torch.Tensor]:
    """The loss terms for one batch: ``batch`` holds B affirmative then B negated captions,
    ``images`` the B images, ``options`` [B, 4] MCQ option rows (column 0 correct)."""
    n = len(images)
    corrected = model.corrected(batch)
    out = {}
    if model.ecn is not None:
        logits = config.logit_scale * images @ corrected.T                          # [B, 2B]
        targets = torch.arange(n)
        out["ecn"] = (F.cross_entropy(logits, targets) + F.cross_entropy(logits[:, :n].T, targets)) / 2
    if model.scn is not None:
        opt = torch.from_numpy(options)
        rows = torch.arange(n)[:, None].expand_as(opt)
        image = images[rows]                                                          # [B, 4, d]
        options_text = model.scn_view(corrected)[opt]
        delta = model.delta(options_text, batch["proj_lp"][opt], image)
        scores = (image * options_text).sum(-1) + delta
        ce = F.cross_entropy(config.logit_scale * scores, torch.zeros(n, dtype=torch.long))
        out["scn"] = ce + (delta ** 2).mean()
    out["total"] = out.get("ecn", 0.0) + config.lambda_scn * out.get("scn", 0.0)
    return out


@torch.no_grad()
def mcq_accuracy(model: PeakPatch, features: TextFeatures, rows: np.ndarray, n_pairs: int, images: torch.Tensor,
                 image_of_row: np.ndarray, seed: int = 0, batch_size: int = 512) -> float:
    """Held-out 4-way accuracy: each row's caption against its negated counterpart and two
    captions of other held-out images (ties count as wrong)."""
    model.eval()
    options = mcq_options(len(rows), image_of_row[rows], np.random.default_rng(seed))
    caption_ids = np.concatenate([rows, rows + n_pairs])
    corrected, peak = [], []
    for k in range(0, len(caption_ids), batch_size):
        batch = feature_batch(features, caption_ids[k:k + batch_size])
        corrected.append(model.corrected(batch))
        peak.append(batch["proj_lp"])
    corrected, peak = torch.cat(corrected), torch.cat(peak)
    opt = torch.from_numpy(options)
    image = images[image_of_row[rows]][:, None, :].expand(-1, 4, -1)
    scores = (image * corrected[opt]).sum(-1) + model.delta(corrected[opt], peak[opt], image)
    best_other = scores[:, 1:].max(dim=1).values
    return float((scores[:, 0] > best_other).float().mean())


def _lr_lambda(total_steps: int, final_fraction: float):
    def factor(step: int) -> float:
        progress = min(step / max(1, total_steps), 1.0)
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def train_peakpatch(features: TextFeatures, image_features: torch.Tensor, pairs: pd.DataFrame,
                    train_rows: np.ndarray, held_rows: np.ndarray, config: PeakPatchConfig,
                    progress: bool = True) -> tuple[PeakPatch, pd.DataFrame]:
    """Train one variant. ``features`` caches the captions ``list(pairs.caption) + list(pairs.negated)``;
    ``image_features`` [n_images, d] is indexed by ``pairs.image_index``. Returns the best model (by
    held-out MCQ accuracy) and the per-epoch history."""
    n_pairs = len(pairs)
    if len(features) != 2 * n_pairs:
        raise ValueError(f"the feature cache holds {len(features)} captions, expected 2 x {n_pairs} pairs")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    image_of_row = pairs["image_index"].to_numpy()
    width, dim = int(features.index["width"]), int(features.index["embed_dim"])
    model = PeakPatch(width, dim, config.variant, dropout=config.dropout)
    groups = [{"params": list(m.parameters()), "lr": lr}
              for m, lr in ((model.ecn, config.lr_ecn), (model.scn, config.lr_scn)) if m is not None]
    optimizer = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    steps_per_epoch = max(1, len(train_rows) // config.batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _lr_lambda(config.epochs * steps_per_epoch, config.final_lr_fraction))
    history, best, best_state = [], -1.0, None
    bar = tqdm(total=config.epochs * steps_per_epoch, desc=f"PeakPatch {config.variant}", disable=not progress)
    for epoch in range(1, config.epochs + 1):
        started = time.perf_counter()
        model.train()
        order = rng.permutation(train_rows)
        sums: dict[str, float] = {}
        for step in range(steps_per_epoch):
            rows = order[step * config.batch_size:(step + 1) * config.batch_size]
            batch = feature_batch(features, np.concatenate([rows, rows + n_pairs]))
            options = mcq_options(len(rows), image_of_row[rows], rng)
            terms = losses(model, batch, image_features[image_of_row[rows]], options, config)
            optimizer.zero_grad()
            terms["total"].backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            scheduler.step()
            for k, v in terms.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach())
            bar.update()
        seconds = time.perf_counter() - started      # training only, before the held-out evaluation
        accuracy = mcq_accuracy(model, features, held_rows, n_pairs, image_features, image_of_row, config.seed)
        history.append({"variant": config.variant, "epoch": epoch, "held-out MCQ accuracy": accuracy,
                        **{f"loss {k}": v / steps_per_epoch for k, v in sums.items()},
                        "samples/s": steps_per_epoch * config.batch_size / seconds})
        if accuracy > best:
            best, best_state = accuracy, copy.deepcopy(model.state_dict())
    bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return model, pd.DataFrame(history)


def train_variants(features: TextFeatures, data, variants, base: PeakPatchConfig, progress: bool = True
                   ) -> tuple[dict[str, PeakPatch], pd.DataFrame]:
    """Every Table 5 variant with the same data, budget and seed."""
    models, histories = {}, []
    for variant in variants:
        config = PeakPatchConfig(**{**base.__dict__, "variant": variant})
        models[variant], history = train_peakpatch(features, data.images, data.pairs, data.train_rows,
                                                   data.held_rows, config, progress)
        histories.append(history)
    return models, pd.concat(histories, ignore_index=True)


def layer_sweep(folders: dict, data, base: PeakPatchConfig, progress: bool = True) -> pd.DataFrame:
    """Held-out MCQ accuracy of the joint model per (l_p, l_a) (PeakPatch Fig. 4)."""
    rows = []
    for (l_p, l_a), folder in tqdm(sorted(folders.items()), desc="layer sweep", disable=not progress):
        _, history = train_peakpatch(TextFeatures(folder), data.images, data.pairs, data.train_rows,
                                     data.held_rows, base, progress=False)
        rows.append({"l_p": l_p, "l_a": l_a, "held-out MCQ accuracy": history["held-out MCQ accuracy"].max()})
    return pd.DataFrame(rows)


def ensure_peakpatch(features: TextFeatures, data, config: PeakPatchConfig, root, progress: bool = True
                     ) -> PeakPatch:
    """Train ``config.variant`` once and keep its weights under ``root``, keyed by the feature cache
    and the config; later chapters (KTN and LCSE on ECN embeddings) load them instead of retraining."""
    from pathlib import Path

    from .cache import atomic_save, config_hash

    key = config_hash({"features": features.folder.name, "config": config,
                       "pairs": len(data.pairs)})
    path = Path(root) / f"peakpatch-{config.variant}-{key}.pt"
    width, dim = int(features.index["width"]), int(features.index["embed_dim"])
    if path.exists():
        model = PeakPatch(width, dim, config.variant, dropout=config.dropout)
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return model.eval()
    model, _ = train_peakpatch(features, data.images, data.pairs, data.train_rows, data.held_rows, config, progress)
    atomic_save(path, lambda tmp: torch.save(model.state_dict(), tmp))
    return model
