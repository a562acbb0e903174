"""Compositional captions: attributes bound to objects, counts, spatial relations and relative
clauses, each stated only where the image's ground truth makes it true.

A list of objects ("a star and a moon") gives a text encoder little syntax to compose. Real alt
text binds attributes to nouns ("a small red star"), counts ("three objects"), relates objects
("a star to the left of a moon") and nests clauses ("a star that is above a moon"). PeakPatch
(sec. 3.2) reads CLIP's mid-layer divergence peak as compositional structure being built and then
overwritten; this grammar gives the organism's captions such structure, so chapter 02 can test
whether it builds a peak.

Truth conditions, on an annotation's box ``(x, y, w, h)`` in an image of side ``image_size``:

* size: "small" when the box's mean side is below ``SMALL_SIDE * image_size``, "large" when above
  ``LARGE_SIDE * image_size``, no size word in between;
* relations: A is "to the left of" B when A's centre lies left of B's by more than half the two
  boxes' mean width and the horizontal offset exceeds the vertical one; "to the right of",
  "above" and "below" alike;
* counts: the number of objects in the image, every one of them named.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..core.phrasing import capitalise, join_phrases, with_article

STRUCTURES: tuple[str, ...] = ("list", "attributes", "relation", "count", "relative clause")
SENTENCE_STRUCTURES: tuple[str, ...] = STRUCTURES[2:]
SMALL_SIDE, LARGE_SIDE = 0.3, 0.45
RELATIONS: tuple[str, ...] = ("to the left of", "to the right of", "above", "below")
NUMBER_WORDS: tuple[str, ...] = ("one", "two", "three", "four", "five", "six")
# A caption longer than this many words and punctuation marks falls back to a plain list, so that
# with a negation appended (PeakPatch's templates add up to six) it fits the 32-token context
# (tests/test_world.py checks the bound with the CLIP tokenizer).
MAX_CAPTION_UNITS = 20

RELATION_FRAMES: tuple[str, ...] = ("{x}{rest}.", "A photo of {x}{rest}.", "An image with {x}{rest}.")
RELATIVE_FRAMES: tuple[str, ...] = ("There is {x}{rest}.", "A photo of {x}{rest}.", "Here we see {x}{rest}.")
COUNT_FRAMES: tuple[str, ...] = ("{n} {objects}: {objs}.", "A picture of {n} {shapes}: {objs}.",
                                 "{n} {things}, namely {objs}.")


class PlacedObject(NamedTuple):
    name: str
    colour: str
    bbox: tuple[float, float, float, float]  # x, y, w, h in pixels


def size_word(obj: PlacedObject, image_size: int) -> str | None:
    side = (obj.bbox[2] + obj.bbox[3]) / 2 / image_size
    if side < SMALL_SIDE:
        return "small"
    if side > LARGE_SIDE:
        return "large"
    return None


def relation(a: PlacedObject, b: PlacedObject) -> str | None:
    """The relation that holds of A with respect to B ("to the left of" ...), or None when the
    boxes are too close to say."""
    ax, ay = a.bbox[0] + a.bbox[2] / 2, a.bbox[1] + a.bbox[3] / 2
    bx, by = b.bbox[0] + b.bbox[2] / 2, b.bbox[1] + b.bbox[3] / 2
    dx, dy = bx - ax, by - ay
    if abs(dx) >= abs(dy) and abs(dx) > (a.bbox[2] + b.bbox[2]) / 4:
        return "to the left of" if dx > 0 else "to the right of"
    if abs(dy) > abs(dx) and abs(dy) > (a.bbox[3] + b.bbox[3]) / 4:
        return "above" if dy > 0 else "below"
    return None


def noun_phrase(obj: PlacedObject, image_size: int, colour: bool, sized: bool) -> str:
    """'a small red star': the size word only where one is true."""
    words = [size_word(obj, image_size) if sized else None, obj.colour if colour else None, obj.name]
    return with_article(" ".join(w for w in words if w))


def caption_units(text: str) -> int:
    """Words and punctuation marks: a cheap upper-bound proxy for CLIP BPE tokens on this vocabulary."""
    return len(re.findall(r"[A-Za-z']+|[^\sA-Za-z']", text))


def _related_pair(objects: list[PlacedObject], rng: np.random.Generator):
    """(i, j, relation) for the first ordered pair, in random order, with a true relation."""
    pairs = [(i, j) for i in range(len(objects)) for j in range(len(objects)) if i != j]
    for k in rng.permutation(len(pairs)):
        i, j = pairs[int(k)]
        found = relation(objects[i], objects[j])
        if found:
            return i, j, found
    return None


def _rest(objects: list[PlacedObject], used: set[int]) -> str:
    others = [with_article(o.name) for k, o in enumerate(objects) if k not in used]
    return f", as well as {join_phrases(others)}" if others else ""


def compose(structure: str, objects: list[PlacedObject], image_size: int, rng: np.random.Generator,
            all_objects_named: bool, colour_rate: float = 0.5) -> str | None:
    """One sentence of a sentence ``structure`` (count, relation, relative clause) naming ``objects``,
    or None where it cannot be stated truthfully (a relation needs two objects in a clear
    arrangement; a count needs every object). Lists and attribute lists are framed by ``alt_text``."""
    if structure == "count":
        if not all_objects_named:
            return None
        n = len(objects)
        nouns = {k: k if n > 1 else k[:-1] for k in ("objects", "shapes", "things")}
        frame = COUNT_FRAMES[int(rng.integers(len(COUNT_FRAMES)))]
        objs = join_phrases([noun_phrase(o, image_size, colour=bool(rng.random() < colour_rate), sized=False)
                             for o in objects])
        text = frame.format(n=NUMBER_WORDS[n - 1], objs=objs, **nouns)
        return capitalise(text)
    if structure in ("relation", "relative clause"):
        found = _related_pair(objects, rng) if len(objects) >= 2 else None
        if found is None:
            return None
        i, j, rel = found
        subject = noun_phrase(objects[i], image_size, colour=bool(rng.random() < colour_rate),
                              sized=bool(rng.random() < 0.5))
        other = noun_phrase(objects[j], image_size, colour=bool(rng.random() < colour_rate), sized=False)
        if structure == "relation":
            x, frames = f"{subject} {rel} {other}", RELATION_FRAMES
        else:
            x, frames = f"{with_article(objects[i].name)} that is {rel} {other}", RELATIVE_FRAMES
        text = frames[int(rng.integers(len(frames)))].format(x=x, rest=_rest(objects, {i, j}))
        return capitalise(text)
    raise ValueError(f"unknown sentence structure {structure!r}; expected one of {SENTENCE_STRUCTURES}")
