"""Alt-text-like captions for the embedded world.

Pretraining captions name a random subset of the objects present, in phrasings that share the
evaluation's wording ("This image features ...", "There is ..."), because a function word that
never occurs in pretraining keeps its random embedding (its row never receives a gradient).
A small fraction of captions is *grounded* negation: it names an object that is absent.
The benchmark templates themselves ("does not feature", "but not", "There is no") are held out
of the negated phrasings so benchmarks never test memorised sentences.

Each affirmative caption takes a structure drawn from ``structure_mix`` (``grammar.STRUCTURES``):
a list of objects, a list with every attribute bound to its noun, a count, a spatial relation or
a relative clause; one that cannot be stated truthfully or would not fit the context falls back to
a list. The caption records its structure, so analyses can split by it.
"""
from __future__ import annotations

import numpy as np

from ..core.phrasing import capitalise as _capitalise
from ..core.phrasing import join_phrases, with_article
from .grammar import MAX_CAPTION_UNITS, STRUCTURES, PlacedObject, caption_units, compose, noun_phrase

AFFIRMATIVE_PHRASINGS: tuple[str, ...] = (
    "This image features {objs}.",
    "There is {objs}.",
    "A photo of {objs}.",
    "{Objs}.",
    "An image with {objs}.",
    "A picture showing {objs}.",
    "{Objs} on a {background} background.",
    "Here we see {objs}.",
)

NEGATED_PHRASINGS: tuple[str, ...] = (
    "A photo of {objs}, but no {neg}.",
    "{Objs} without {a_neg}.",
    "{Objs} and no {neg}.",
    "No {neg}, just {objs}.",
    "An image with {objs} and no {neg} in sight.",
)

BACKGROUND_WORDS: dict[str, str] = {
    "plain": "plain", "stripes": "striped", "dots": "dotted", "gradient": "shaded",
    "noise": "grainy", "checker": "checkered", "grid": "gridded", "rings": "ringed",
    "speckle": "speckled",
}


def object_phrases(objects: list[PlacedObject], rng: np.random.Generator, colour_rate: float) -> list[str]:
    """'a red star' or 'a star' for each object, colour named with prob. colour_rate."""
    return [noun_phrase(o, image_size=0, colour=bool(rng.random() < colour_rate), sized=False) for o in objects]


def affirmative_caption(subset: list[PlacedObject], all_objects_named: bool, background: str, image_size: int,
                        rng: np.random.Generator, colour_rate: float, structure_mix: tuple[float, ...]
                        ) -> tuple[str, str]:
    """(caption, structure) for an affirmative caption naming ``subset``."""
    weights = np.asarray(structure_mix, dtype=float)
    structure = STRUCTURES[int(rng.choice(len(STRUCTURES), p=weights / weights.sum()))]
    text = None
    if structure not in ("list", "attributes"):
        text = compose(structure, subset, image_size, rng, all_objects_named, colour_rate)
    elif structure == "attributes":
        objs = join_phrases([noun_phrase(o, image_size, colour=True, sized=True) for o in subset])
        template = AFFIRMATIVE_PHRASINGS[int(rng.integers(len(AFFIRMATIVE_PHRASINGS)))]
        text = fill(template, objs, background)
    if text is None or caption_units(text) > MAX_CAPTION_UNITS:
        structure = "list"
        template = AFFIRMATIVE_PHRASINGS[int(rng.integers(len(AFFIRMATIVE_PHRASINGS)))]
        text = fill(template, join_phrases(object_phrases(subset, rng, colour_rate)), background)
    return text, structure


def fill(template: str, objs: str, background: str, neg: str | None = None) -> str:
    fields = {"objs": objs, "Objs": _capitalise(objs), "background": BACKGROUND_WORDS[background]}
    if neg is not None:
        fields.update(neg=neg, a_neg=with_article(neg))
    return template.format(**fields)


def make_captions(objects: list[PlacedObject], absent: list[str], background: str,
                  rng: np.random.Generator, n_captions: int, negation_rate: float,
                  colour_rate: float, image_size: int, structure_mix: tuple[float, ...]) -> list[dict]:
    """Captions for one image of side ``image_size``. The first always names every object (the retrieval
    query when it is affirmative). Each caption is negated independently with probability
    ``negation_rate``; negated captions are lists.

    Returns dicts with ``caption``, ``mentioned`` (categories named as present), ``negated``
    (categories named as absent; empty for affirmative captions) and ``structure``.
    """
    objects = [PlacedObject(*o) for o in objects]
    out = []
    for k in range(n_captions):
        if k == 0 or rng.random() < 0.5:
            chosen = list(range(len(objects)))
        else:
            n_named = int(rng.integers(1, len(objects) + 1))
            chosen = sorted(rng.choice(len(objects), size=n_named, replace=False).tolist())
        subset = [objects[i] for i in chosen]
        negate = bool(absent) and rng.random() < negation_rate
        if negate:
            neg = absent[int(rng.integers(len(absent)))]
            template = NEGATED_PHRASINGS[int(rng.integers(len(NEGATED_PHRASINGS)))]
            objs = join_phrases(object_phrases(subset, rng, colour_rate))
            text, negated, structure = fill(template, objs, background, neg), [neg], "list"
        else:
            text, structure = affirmative_caption(subset, len(subset) == len(objects), background, image_size, rng,
                                                  colour_rate, structure_mix)
            negated = []
        out.append({"caption": text, "mentioned": [o.name for o in subset], "negated": negated,
                    "structure": structure})
    return out
