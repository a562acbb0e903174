"""The diagnostic set of PeakPatch sec. 3.2 and the pairs of its control experiment (sec. 4.4).

One row per image: its affirmative caption T+ and three partners,

* ``negated``: T+ with one absent object negated (``core.phrasing.negate_caption``, the protocol
  PeakPatch's training data uses, App. 0.J): the pair whose divergence is D_LCD;
* ``affirmed``: the same extension of T+ without the cue ("... with a cup" for "... without a
  cup"), so (affirmed, negated) is a minimal pair that differs only in the negation word;
* ``paraphrase``: T+ reworded with synonyms, meaning unchanged (the control that should stay low);
* ``random``: the affirmative caption of another image (the control that should rise).

``structure`` names T+'s grammatical structure where the world recorded one (list, attributes,
relation, count, relative clause), so D_LCD can be compared across them.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..core.phrasing import has_negation_cue, negation_pair
from ..world.coco import CocoSplit

# Meaning-preserving rewordings; the first that matches is applied (whole words, case kept).
SYNONYMS: tuple[tuple[str, str], ...] = (
    ("This image features", "This picture shows"),
    ("There is", "Here is"),
    ("There are", "Here are"),
    ("A photo of", "A picture of"),
    ("An image with", "A picture with"),
    ("A picture showing", "A photo showing"),
    ("Here we see", "Here we find"),
    ("photo", "picture"),
    ("image", "picture"),
    ("picture", "photo"),
    ("man", "guy"),
    ("woman", "lady"),
    ("large", "big"),
    ("big", "large"),
    ("small", "little"),
    ("little", "small"),
    ("sitting", "seated"),
    ("street", "road"),
)
FALLBACK_PREFIX = "A picture of "


def reword(caption: str) -> str:
    """A paraphrase of ``caption``: the first synonym in ``SYNONYMS`` that occurs is swapped in;
    a caption with none gets the neutral frame 'A picture of ...'."""
    text = caption.strip()
    if not text:
        raise ValueError("reword: empty caption")
    for old, new in SYNONYMS:
        match = re.search(rf"\b{re.escape(old)}\b", text, flags=re.IGNORECASE)
        if match:
            found = match.group(0)
            replacement = new if found[:1].isupper() == new[:1].isupper() else (
                new[:1].upper() + new[1:] if found[:1].isupper() else new[:1].lower() + new[1:])
            return text[:match.start()] + replacement + text[match.end():]
    return FALLBACK_PREFIX + text[:1].lower() + text[1:]


def build_diagnostic_set(split: CocoSplit, n: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Up to ``n`` (image, T+, T-, affirmed, paraphrase, random) rows from ``split``: T+ is the image's first
    affirmative caption and T- negates one category absent from the image. Images whose captions
    all negate already, or that contain every category, are skipped."""
    if n < 2:
        raise ValueError(f"a diagnostic set needs at least 2 rows, got n={n}")
    rng = np.random.default_rng(seed)
    rows = []
    for i in rng.permutation(len(split)):
        i = int(i)
        first = next((c for c in split.captions[i] if not has_negation_cue(c["caption"])), None)
        absent = split.absent_categories(i)
        if first is None or not absent:
            continue
        affirmative = first["caption"]
        pair = negation_pair(affirmative, absent[int(rng.integers(len(absent)))], rng)
        if pair is None:
            continue
        rows.append({"image_index": i, "image_id": split.image_ids[i], "affirmative": affirmative,
                     "negated": pair[0], "affirmed": pair[1], "paraphrase": reword(affirmative),
                     # the world's captions record their grammar (world.grammar); real captions do not
                     "structure": first.get("structure", "unrecorded")})
        if len(rows) == n:
            break
    if len(rows) < 2:
        raise ValueError(f"split {split.name!r}: only {len(rows)} image(s) have an affirmative caption and an "
                         "absent category to negate; a diagnostic set needs at least 2")
    frame = pd.DataFrame(rows)
    # a derangement: every row's random partner is another image's caption
    shift = int(rng.integers(1, len(frame)))
    frame["random"] = np.roll(frame["affirmative"].to_numpy(), shift)
    return frame
