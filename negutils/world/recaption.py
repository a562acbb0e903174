"""Recaptioning a world split at a chosen rate of grounded negated captions (chapter 07): the same
images, captions rebuilt from the split's annotations by ``alt_text.make_captions``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import alt_text
from .generate import WorldConfig
from .glyphs import CATEGORY_NAMES


def recaption(split_dir: str | Path, negation_rate: float, seed: int = 0, world: WorldConfig | None = None
              ) -> list[list[dict]]:
    """New alt-text captions for every image of a world split, from its ``instances.json``
    (objects with colours and boxes, background), with grounded negations at ``negation_rate`` and
    the rest of the caption mix (captions per image, colour rate, structures) from ``world``."""
    world = world or WorldConfig()
    if not 0.0 <= negation_rate <= 1.0:
        raise ValueError(f"negation_rate must be in [0, 1], got {negation_rate}")
    path = Path(split_dir) / "instances.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: recaptioning needs an embedded-world split")
    inst = json.loads(path.read_text())
    names = {c["id"]: c["name"] for c in inst["categories"]}
    objects: dict[int, list[tuple]] = {im["id"]: [] for im in inst["images"]}
    for ann in sorted(inst["annotations"], key=lambda a: a["id"]):
        if "colour" not in ann:
            raise ValueError(f"{path}: annotation "
                             f"{ann['id']} has no 'colour'; only embedded-world splits can be recaptioned")
        placed = (names[ann["category_id"]], ann["colour"], tuple(ann["bbox"]))
        objects[ann["image_id"]].append(placed)
    # one stream per (seed, rate): the same rate always gives the same captions
    rng = np.random.default_rng([seed, round(negation_rate * 1_000_000), 7])
    out = []
    for im in sorted(inst["images"], key=lambda i: i["id"]):
        present = {o[0] for o in objects[im["id"]]}
        absent = [c for c in CATEGORY_NAMES if c not in present]
        out.append(alt_text.make_captions(objects[im["id"]], absent, im["background"], rng, world.captions_per_image,
                                          negation_rate, world.colour_mention_rate, im["width"],
                                          world.structure_mix))
    return out


def negation_share(captions: list[list[dict]]) -> float:
    """The share of captions that negate something."""
    flat = [c for per_image in captions for c in per_image]
    return sum(bool(c["negated"]) for c in flat) / len(flat)


def false_negations(captions: list[list[dict]], objects: list[frozenset[str]]) -> list[str]:
    """Negated captions that deny an object the image contains (should be none)."""
    return [c["caption"] for per_image, present in zip(captions, objects) for c in per_image
            if set(c["negated"]) & set(present)]
