"""The template paraphraser behind NegBench-style captions.

NegBench rewrites every templated option with LLaMA 3.1 so that models cannot match one fixed
sentence. Here each template kind has a documented list of hand-written phrasings (the first is
NegBench's canonical template), one is drawn per caption with the benchmark's seeded generator,
and a ``rephraser`` hook can replace the result, e.g. with an LLM on a GPU runner:

    def llm(caption: str, slots: dict) -> str: ...
    build_mcq(split, rephraser=llm)

The hook receives the drawn caption and its slots (``kind`` and the object phrases) and must
return a caption that keeps the meaning; the builder refuses an empty one.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core.phrasing import capitalise

Rephraser = Callable[[str, dict], str]

# {A}, {B}: present objects; {N}: an absent object. Objects arrive with their article ("a cup").
PHRASINGS: dict[str, tuple[str, ...]] = {
    # correct or wrong, these four kinds are the whole NegBench MCQ vocabulary
    "positive": (
        "This image features {A} and {B}.",
        "This image shows {A} and {B}.",
        "{A} and {B} are present in this image.",
        "There is {A} and {B} in this image.",
        "This image depicts {A} and {B}.",
        "The picture contains {A} and {B}.",
    ),
    "positive_single": (
        "This image features {A}.",
        "This image shows {A}.",
        "{A} is present in this image.",
        "There is {A} in this image.",
        "This image depicts {A}.",
        "The picture contains {A}.",
    ),
    "negative": (
        "This image does not feature {N}.",
        "There is no {n} in this image.",
        "No {n} appears in this image.",
        "{N} is not present in this image.",
        "This image does not show {N}.",
        "The picture contains no {n}.",
    ),
    "hybrid": (
        "This image features {B}, but not {N}.",
        "{B} is present, but there is no {n}.",
        "This image shows {B}, but no {n}.",
        "There is {B} but no {n} in this image.",
        "The picture contains {B}, without {N}.",
        "{B} is included, but there's no {n}.",
    ),
}


def fill_phrasing(template: str, slots: dict[str, str]) -> str:
    """Fill ``{A}``/``{B}``/``{N}`` with article phrases and ``{n}`` with the bare noun of N,
    capitalising the first letter."""
    return capitalise(template.format(**slots))


def paraphrase(kind: str, slots: dict[str, str], rng: np.random.Generator | None,
               rephraser: Rephraser | None = None) -> str:
    """A caption of template ``kind``: the canonical phrasing when ``rng`` is None, else a
    seeded draw among the phrasings, then the optional hook."""
    if kind not in PHRASINGS:
        raise ValueError(f"unknown template kind {kind!r}; known kinds: {sorted(PHRASINGS)}")
    options = PHRASINGS[kind]
    template = options[0] if rng is None else options[int(rng.integers(len(options)))]
    caption = fill_phrasing(template, slots)
    if rephraser is not None:
        rewritten = rephraser(caption, {"kind": kind, **slots})
        if not isinstance(rewritten, str) or not rewritten.strip():
            raise ValueError(f"the rephraser returned an empty caption for {caption!r}")
        caption = rewritten.strip()
    return caption
