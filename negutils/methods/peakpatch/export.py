"""A trained PeakPatch as one self-describing file, so a model trained by chapter 03 (or anywhere)
can be evaluated later without the chapter's configuration: ``negbook eval --method peakpatch:FILE``.

The training cache (``ensure_peakpatch``) keeps bare state dicts keyed by a hash of the run; they
cannot be rebuilt without knowing the variant, the widths and the tapped layers. An export records
those, and a fingerprint of the frozen backbone it was trained on: the backbone's embeddings of a
few fixed captions and of a few fixed images (PeakPatch reads both towers: an image tower changed under
the same text tower moves every score). A PeakPatch applied to another backbone of the same shape runs
and returns numbers of the right range, all wrong; the fingerprint turns that into an error.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ...core.cache import atomic_save
from .model import PeakPatch
from .scorer import PeakPatchScorer

EXPORT_FORMAT = "negbook-peakpatch"
EXPORT_VERSION = 2      # 2: the fingerprint holds images too
# fixed captions whose embeddings identify the frozen backbone (affirmative and negated, short and long)
FINGERPRINT_CAPTIONS = ("a photo of a dog.", "There is no cat in this image.",
                        "A red car parked next to a tree, with no people around.")
# largest per-coordinate difference of the normalised fingerprint embeddings still called the same backbone:
# well above the float rounding between thread counts and devices, well below what fine-tuning moves
FINGERPRINT_TOLERANCE = 5e-3


FINGERPRINT_IMAGE_SEED = 0


def fingerprint_images() -> np.ndarray:
    """Two fixed 64 x 64 RGB images, the same on every machine: seeded noise and a colour gradient
    (the backbone's preprocessing resizes them to its own input size)."""
    noise = np.random.default_rng(FINGERPRINT_IMAGE_SEED).integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    ramp = np.linspace(0, 255, 64, dtype=np.float64)
    gradient = np.stack(np.broadcast_arrays(ramp[:, None], ramp[None, :], ramp[::-1, None]), axis=-1)
    return np.stack([noise, gradient.astype(np.uint8)])


def backbone_fingerprint(backbone) -> torch.Tensor:
    """[len(FINGERPRINT_CAPTIONS) + 2, d] normalised embeddings identifying ``backbone``'s weights: the
    fingerprint captions through its text tower, then ``fingerprint_images`` through its image tower."""
    with torch.no_grad():
        text = backbone.encode_text(list(FINGERPRINT_CAPTIONS)).float().cpu()
        images = backbone.encode_images(fingerprint_images()).float().cpu()
    return torch.nn.functional.normalize(torch.cat([text, images]), dim=-1)


def text_width(backbone) -> int:
    return int(backbone.text_tower.transformer.width)


def export_peakpatch(scorer: PeakPatchScorer, path: str | os.PathLike, training: dict | None = None) -> Path:
    """Write ``scorer``'s PeakPatch with everything ``load_peakpatch`` needs to rebuild it on the same
    backbone: variant, widths, tapped layers (l_p, l_a), the results name, the backbone's name and a
    fingerprint of its weights, and (``training``) the training configuration, for the record."""
    backbone = scorer.backbone
    blob = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "name": scorer.name,
            "variant": scorer.model.variant, "width": text_width(backbone), "embed_dim": backbone.embed_dim,
            "l_p": scorer.l_p, "l_a": scorer.l_a,
            "backbone": {"model_name": backbone.model_name, "quick_gelu": bool(backbone.report.quick_gelu),
                         "key": backbone.key, "n_layers": backbone.n_layers},
            "fingerprint": backbone_fingerprint(backbone), "training": dict(training or {}),
            "state_dict": scorer.model.state_dict()}
    return atomic_save(path, lambda tmp: torch.save(blob, tmp))


def read_export(path: str | os.PathLike) -> dict:
    """The export's record, checked for its format and for finite weights."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PeakPatch export {path} does not exist: chapter 03 writes the joint model's to "
                                "artifacts/<profile>/peakpatch/export/, export_peakpatch writes any other")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or blob.get("format") != EXPORT_FORMAT:
        raise ValueError(f"{path} is not a PeakPatch export (no 'format': {EXPORT_FORMAT!r}); a training "
                         "checkpoint of ensure_peakpatch lacks the variant, widths and layers: write one with "
                         "negutils.methods.peakpatch.export.export_peakpatch")
    if blob.get("version") != EXPORT_VERSION:
        raise ValueError(f"{path}: PeakPatch export version {blob.get('version')}, this negbook reads {EXPORT_VERSION} "
                         "(version 1 fingerprinted the text tower only): export it again with export_peakpatch")
    bad = [name for name, tensor in blob["state_dict"].items()
           if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        raise ValueError(f"{path}: non-finite values in {len(bad)} tensors: {bad[:5]}{' ...' if len(bad) > 5 else ''}")
    return blob


def load_peakpatch(path: str | os.PathLike, backbone, **scorer_options) -> PeakPatchScorer:
    """The exported PeakPatch as a scorer on ``backbone``, refused (with the reason) when ``backbone``
    is not the one it was trained on: another text width, embedding size or depth, or other weights."""
    blob = read_export(path)
    trained_on = blob["backbone"]
    shape = {"text width": (blob["width"], text_width(backbone)), "embedding size": (blob["embed_dim"],
             backbone.embed_dim), "text layers": (trained_on["n_layers"], backbone.n_layers)}
    wrong = {what: pair for what, pair in shape.items() if pair[0] != pair[1]}
    if wrong:
        differences = ", ".join(f"{w} {a} there, {b} here" for w, (a, b) in wrong.items())
        raise ValueError(f"{path} was trained on {trained_on['model_name']} and does not fit "
                         f"{backbone.model_name}: {differences}")
    drift = (backbone_fingerprint(backbone) - blob["fingerprint"]).abs().amax(dim=1)
    n_text = len(FINGERPRINT_CAPTIONS)
    towers = {"text": float(drift[:n_text].max()), "image": float(drift[n_text:].max())}
    moved = {tower: value for tower, value in towers.items() if value > FINGERPRINT_TOLERANCE}
    if moved:
        differences = ", ".join(f"its {tower} tower's by up to {value:.3g}" for tower, value in moved.items())
        raise ValueError(f"{path} was trained on other weights ({trained_on['key']}): this backbone's embeddings of "
                         f"the fingerprint captions and images differ, {differences} (tolerance "
                         f"{FINGERPRINT_TOLERANCE:g}); load the backbone the PeakPatch was trained on")
    model = PeakPatch(blob["width"], blob["embed_dim"], blob["variant"])
    missing, unexpected = model.load_state_dict(blob["state_dict"], strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: the {blob['variant']} PeakPatch's weights do not match its record: "
                         f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    return PeakPatchScorer(backbone, model.eval(), blob["l_p"], blob["l_a"], name=blob["name"], **scorer_options)
