"""How the LCD curve forms during pretraining (chapter 02): D_LCD(l) and A(l) of the organism at the snapshots
its pretraining saved (``models.pretrain.snapshot_checkpoints``), on chapter 02's diagnostic set. None of the
papers could run this (their encoders' pretraining is not theirs to replay); the organism's is the book's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..models.backbone import load_backbone
from .collapse import (alignment_per_item, bootstrap_layer_means, curve_shape, divergence_per_item,
                       layer_embeddings)


def snapshot_curves(encoder, diagnostic: pd.DataFrame, image_features: torch.Tensor, n_boot: int = 1000,
                    seed: int = 0, batch_size: int = 256) -> pd.DataFrame:
    """D_LCD (affirmative against negated caption) and A(l) (affirmative caption against its image) per
    layer with bootstrap intervals: ``quantity, layer, mean, lo, hi``."""
    affirmative = layer_embeddings(encoder, diagnostic["affirmative"].tolist(), batch_size)
    negated = layer_embeddings(encoder, diagnostic["negated"].tolist(), batch_size)
    d_lcd = bootstrap_layer_means(divergence_per_item(affirmative, negated), n_boot, seed=seed)
    alignment = bootstrap_layer_means(alignment_per_item(affirmative, image_features.float()), n_boot, seed=seed)
    return pd.concat([d_lcd.assign(quantity="D_LCD"), alignment.assign(quantity="A")],
                     ignore_index=True)[["quantity", "layer", "mean", "lo", "hi"]]


def lcd_through_pretraining(snapshots: dict[int, Path], diagnostic: pd.DataFrame, split, batch_size: int,
                            n_boot: int = 1000, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """``snapshot_curves`` of each pretraining snapshot ({step: checkpoint}), with ``step``; the images are
    ``split``'s rows of the diagnostic set, encoded by each snapshot's own image tower."""
    if not snapshots:
        raise ValueError("no pretraining snapshots: the organism was pretrained with snapshots=0 (its profile's "
                         "PretrainConfig.snapshots); a real backbone has none")
    index = diagnostic["image_index"].to_numpy()
    frames = []
    for step, path in tqdm(sorted(snapshots.items()), desc="snapshots", disable=not progress):
        encoder = load_backbone(checkpoint=str(path))
        images = encoder.encode_images(split.images(index.tolist()), batch_size=batch_size)
        frames.append(snapshot_curves(encoder, diagnostic, images, n_boot, seed, batch_size).assign(step=step))
    frame = pd.concat(frames, ignore_index=True)
    return frame[["step", "quantity", "layer", "mean", "lo", "hi"]]


def formation_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per snapshot: D_LCD's peak layer and shape (``curve_shape``), D_LCD at the first, peak and
    last layer, A at the first and last layer, and whether D_LCD has an interior peak above both ends."""
    rows = []
    for step, block in curves.groupby("step", sort=True):
        d = block[block["quantity"] == "D_LCD"].sort_values("layer").reset_index(drop=True)
        a = block[block["quantity"] == "A"].sort_values("layer").reset_index(drop=True)
        peak = int(np.argmax(d["mean"].to_numpy()))
        shape = curve_shape(d)
        rows.append({"step": int(step), "D_LCD peak layer": int(d["layer"][peak]), "D_LCD shape": shape,
                     "D_LCD first layer": float(d["mean"].iloc[0]), "D_LCD at peak": float(d["mean"][peak]),
                     "D_LCD last layer": float(d["mean"].iloc[-1]), "A first layer": float(a["mean"].iloc[0]),
                     "A last layer": float(a["mean"].iloc[-1]), "interior peak": shape == "rise-and-fall"})
    return pd.DataFrame(rows)


def formation_findings(summary: pd.DataFrame) -> list[str]:
    """Chapter 02's reading of ``formation_summary`` as sentences: when the first-layer maximum forms (and
    holds to the end), whether an interior peak appears at any snapshot, and how the last layer's
    divergence moves as its alignment rises."""
    summary = summary.sort_values("step").reset_index(drop=True)
    first_layer = summary["D_LCD peak layer"] == summary["D_LCD peak layer"].min()
    holds = first_layer[::-1].cumprod()[::-1].astype(bool)        # from this snapshot to the end
    lines = []
    if holds.any():
        since = summary.loc[holds.idxmax()]
        lines.append(f"D_LCD peaks at layer {int(since['D_LCD peak layer'])} from step {int(since['step'])} "
                     f"to the end of pretraining ({int(holds.sum())} of {len(summary)} snapshots).")
    interior = summary[summary["interior peak"]]
    lines.append("An interior D_LCD peak above both ends appears at no snapshot." if interior.empty else
                 "An interior D_LCD peak above both ends appears at step(s) "
                 + ", ".join(str(int(s)) for s in interior["step"])
                 + f" (layer {', '.join(str(int(x)) for x in interior['D_LCD peak layer'])}).")
    start, end = summary.iloc[0], summary.iloc[-1]
    lines.append(f"From step {int(start['step'])} to {int(end['step'])} the last layer's D_LCD moves from "
                 f"{start['D_LCD last layer']:.3f} to {end['D_LCD last layer']:.3f} while its A moves from "
                 f"{start['A last layer']:.3f} to {end['A last layer']:.3f}.")
    return lines
