"""Alt-text-like captions for the embedded world.

Pretraining captions name a random subset of the objects present, in phrasings that share the
evaluation's wording ("This image features ...", "There is ..."), because a function word that
never occurs in pretraining keeps its random embedding (its row never receives a gradient).
A small fraction of captions is *grounded* negation: it names an object that is absent.
The benchmark templates themselves ("does not feature", "but not", "There is no") are held out
of the negated phrasings so benchmarks never test memorised sentences.
"""
from __future__ import annotations

import numpy as np

from ..core.phrasing import capitalise as _capitalise
from ..core.phrasing import join_phrases, with_article

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


def object_phrases(objects: list[tuple[str, str]], rng: np.random.Generator,
                   colour_rate: float) -> list[str]:
    """'a red star' or 'a star' for each (category, colour), colour named with prob. colour_rate."""
    return [with_article(f"{colour} {name}" if rng.random() < colour_rate else name)
            for name, colour in objects]


def fill(template: str, objs: str, background: str, neg: str | None = None) -> str:
    fields = {"objs": objs, "Objs": _capitalise(objs), "background": BACKGROUND_WORDS[background]}
    if neg is not None:
        fields.update(neg=neg, a_neg=with_article(neg))
    return template.format(**fields)


def make_captions(objects: list[tuple[str, str]], absent: list[str], background: str,
                  rng: np.random.Generator, n_captions: int, negation_rate: float,
                  colour_rate: float) -> list[dict]:
    """Captions for one image. The first always names every object (the retrieval query when
    it is affirmative). Each caption is negated independently with probability ``negation_rate``.

    Returns dicts with ``caption``, ``mentioned`` (categories named as present) and
    ``negated`` (categories named as absent; empty for affirmative captions).
    """
    out = []
    for k in range(n_captions):
        if k == 0 or rng.random() < 0.5:
            chosen = list(range(len(objects)))
        else:
            size = int(rng.integers(1, len(objects) + 1))
            chosen = sorted(rng.choice(len(objects), size=size, replace=False).tolist())
        subset = [objects[i] for i in chosen]
        objs = join_phrases(object_phrases(subset, rng, colour_rate))
        negate = bool(absent) and rng.random() < negation_rate
        if negate:
            neg = absent[int(rng.integers(len(absent)))]
            template = NEGATED_PHRASINGS[int(rng.integers(len(NEGATED_PHRASINGS)))]
            text, negated = fill(template, objs, background, neg), [neg]
        else:
            template = AFFIRMATIVE_PHRASINGS[int(rng.integers(len(AFFIRMATIVE_PHRASINGS)))]
            text, negated = fill(template, objs, background), []
        out.append({"caption": text, "mentioned": [name for name, _ in subset], "negated": negated})
    return out
