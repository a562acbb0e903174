"""PeakPatch's learning curve in training data: chapter 03's protocol (``negbench``, its chosen layers and
design, the full epoch budget) at several negtrain sizes, for the ECN alone, the SCN alone, the joint
model and the detached SCN, every model on the same benchmarks. The world is procedural, so a larger
negtrain is the world's own negtrain stream drawn further (``world.generate.ensure_extra_split``): the
first n images of every size are the same, and the size equal to the world's negtrain is the book's own
run (the same data, features and cached checkpoints). ``bench/peakpatch_learning_curve.py`` runs it and
commits the table chapter 03 shows; the question it answers is whether the organism's PeakPatch is what
its few thousand training images make of it.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ...benchmarks.suite import evaluate_methods
from ...config import get_profile
from ...models.features import extract_text_features, TextFeatures
from ...world.coco import CocoSplit, load_split
from ...world.generate import ensure_extra_split, ensure_world
from ..registry import build_scorer, method_id, variant_label
from ..training_data import DEFAULT_PROTOCOL, prepare_negation_data
from .scorer import PeakTaps
from .train import PeakPatchConfig, train_variants

VARIANTS = ("ecn_only", "scn_only", "joint", "detached")
# what the curve reports: the ones chapter 03's protocol table does, on val
TASKS = ("mcq", "retrieval", "retrieval_negated", "retention", "factor_operator", "valse_existence")
# label -> (split, task, metric, scale): report.unified_table's columns for the curve, each with its interval
COLUMNS = {"MCQ": ("val", "mcq", "accuracy", 100), "Aff": ("val", "mcq", "positive_accuracy", 100),
           "Neg": ("val", "mcq", "negative_accuracy", 100), "Hyb": ("val", "mcq", "hybrid_accuracy", 100),
           "R-Neg@5": ("val", "retrieval_negated", "R@5", 100), "R@5": ("val", "retrieval", "R@5", 100),
           "rho": ("val", "retention", "rho", 1), "VALSE": ("val", "valse_existence", "accuracy", 100),
           "FACTOR op": ("val", "factor_operator", "accuracy", 100)}


def negtrain_of_size(profile, n_images: int) -> CocoSplit:
    """The first ``n_images`` of the world's negtrain stream: the world's own negtrain at its size, the
    stream drawn to ``n_images`` (the same first images) at any other."""
    world = profile.world
    if n_images < 1:
        raise ValueError(f"a learning-curve size must be a positive number of images, got {n_images}")
    if n_images == world.negtrain:
        return load_split(ensure_world(world, profile.artifacts_dir()) / "negtrain")
    return load_split(ensure_extra_split(world, "negtrain", "negtrain", n_images, profile.artifacts_dir()))


def sized_label(variant: str, n_images: int) -> str:
    return f"{variant_label(variant)} @ {n_images} images"


def curve_runs(session, split: CocoSplit, layers: tuple[int, int], design: dict, feature_root, model_root,
               variants=VARIANTS) -> dict:
    """Every variant trained on ``split`` (a ``negtrain_of_size``) under chapter 03's protocol and design:
    ``{variant: PeakPatch model}``."""
    settings = session.profile.peakpatch
    data = prepare_negation_data(session.backbone, split, session.features_key, feature_root)
    features = TextFeatures(extract_text_features(session.backbone, data.captions, *layers, feature_root,
                                                  session.features_key))
    base = replace(PeakPatchConfig.from_settings(settings, protocol=DEFAULT_PROTOCOL), **design)
    runs = {variant_label(v): replace(base, variant=v) for v in variants}
    models, _ = train_variants(features, data, runs, model_root)
    return {variant: models[variant_label(variant)] for variant in variants}


def learning_curve(session, sizes, layers: tuple[int, int], design: dict, feature_root, model_root,
                   variants=VARIANTS) -> tuple[pd.DataFrame, dict]:
    """The curve's results frame (one row per method and task, ``images`` the training size, 0 for the
    frozen model) and its per-item outcomes (for intervals), over ``sizes`` negtrain images."""
    bench = session.benchmarks()
    vanilla = build_scorer("vanilla", session.backbone)
    taps = PeakTaps(session.backbone, *layers)
    scorers, images_of = {vanilla.name: vanilla}, {vanilla.name: 0}
    for n in sizes:
        models = curve_runs(session, negtrain_of_size(session.profile, n), layers, design, feature_root,
                            model_root, variants)
        for variant, model in models.items():
            label = sized_label(variant, n)
            scorers[label] = build_scorer(method_id(variant_label(variant)), session.backbone, model, *layers,
                                          label=label, taps=taps, image_scorer=vanilla)
            images_of[label] = n
    items = {}
    results = evaluate_methods(scorers, bench, session.splits, session.dataset, session.backbone.model_name,
                               session.pretrained_label, ood_tasks=(), retention_reference=vanilla, items=items,
                               tasks=TASKS)
    return results.assign(images=results["method"].map(images_of)), items


def curve_findings(curve: pd.DataFrame) -> list[str]:
    """Per variant, how MCQ, negated and affirmative retrieval move from the book's training size (the
    negtrain of the profile the curve ran on) to the curve's largest, and whether the joint model's
    retrieval still falls below the frozen model's at the largest size (its interval entirely under the
    frozen one's)."""
    book_images = get_profile(str(curve["profile"].iloc[0])).world.negtrain
    largest = int(curve["negtrain images"].max())
    frozen = curve[curve["negtrain images"] == 0].set_index("benchmark")
    if largest <= book_images or frozen.empty:
        return [f"The committed curve reaches {largest} images, no more than the book's {book_images}: "
                "run bench/peakpatch_learning_curve.py with larger --sizes."]
    lines = []
    for variant, block in curve[curve["negtrain images"] > 0].groupby("variant", sort=False):
        at = {n: b.set_index("benchmark") for n, b in block.groupby("negtrain images")}
        if book_images not in at:
            continue
        moves = ", ".join(f"{b} {at[book_images].loc[b, 'value']:.1f} -> {at[largest].loc[b, 'value']:.1f}"
                          for b in ("MCQ", "R-Neg@5", "R@5"))
        lines.append(f"{variant}, {book_images} -> {largest} images: {moves}.")
    joint = curve[(curve["negtrain images"] == largest) & curve["variant"].str.contains("joint")]
    joint = joint.set_index("benchmark")
    if "R@5" in joint.index:
        below = joint.loc["R@5", "high"] < frozen.loc["R@5", "low"]
        lines.append(f"At {largest} images the joint model's R@5 is {joint.loc['R@5', 'value']:.1f} "
                     f"[{joint.loc['R@5', 'low']:.1f}, {joint.loc['R@5', 'high']:.1f}] against the frozen "
                     f"model's {frozen.loc['R@5', 'value']:.1f}: the retrieval collapse "
                     + ("persists with more data." if below else "is gone within the intervals."))
    return lines
