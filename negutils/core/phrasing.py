"""Noun phrases for category names: articles, plurals and joined lists.

Real COCO names ("traffic light", "hair drier") and the embedded world's glyph names go through
the same helpers, so every benchmark builder words captions the same way.
"""
from __future__ import annotations

import re

import numpy as np

# Plurals the suffix rules get wrong, for COCO's 80 names and the glyphs.
_IRREGULAR_PLURALS = {
    "person": "people", "mouse": "mice", "sheep": "sheep", "fish": "fish", "skis": "skis",
    "scissors": "scissors", "sports ball": "sports balls", "knife": "knives", "wine glass": "wine glasses",
    "bus": "buses", "hair drier": "hair driers", "couch": "couches", "bench": "benches", "sandwich": "sandwiches",
    "tv": "tvs", "glass": "glasses", "hourglass": "hourglasses",
}


def with_article(phrase: str) -> str:
    """'a star', 'an orange star', 'an hourglass'."""
    vowel_sound = phrase[:1].lower() in "aeiou" or phrase.lower().startswith("hour")
    return ("an " if vowel_sound else "a ") + phrase


def plural(noun: str) -> str:
    """'stars', 'boxes', 'fish', 'traffic lights', 'people'."""
    if noun in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[noun]
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR_PLURALS:
        return f"{head} {_IRREGULAR_PLURALS[last]}".strip()
    if last.endswith(("s", "x", "z", "ch", "sh")):
        word = last + "es"
    elif last.endswith("y") and last[-2:-1] not in tuple("aeiou"):
        word = last[:-1] + "ies"
    else:
        word = last + "s"
    return f"{head} {word}".strip()


def join_phrases(phrases: list[str], conjunction: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    if not phrases:
        raise ValueError("join_phrases needs at least one phrase")
    if len(phrases) == 1:
        return phrases[0]
    return ", ".join(phrases[:-1]) + f" {conjunction} " + phrases[-1]


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


NEGATION_CUES = ("no", "not", "without", "never", "none", "nothing", "nobody", "neither", "nor", "n't",
                 "lacking", "absent", "missing")
# the words of the caption parser's other negating constructions (``negutils.methods.parsing``): exceptions,
# substitutions, quantity negators, absence nouns, "lacks", and "-free" (the hyphen splits it off its noun). A
# caption holding one already negates something, so it is never the affirmative side of a minimal pair.
DERIVED_NEGATION_CUES = ("lack", "lacks", "lacked", "absence", "except", "excluding", "instead", "hardly", "barely",
                         "scarcely", "free")


NEGATION_TEMPLATES = ("{caption} without {a_obj}", "{caption}, but no {obj}", "{caption} with no {obj}",
                      "{caption}, and there is no {obj}", "no {obj} in {caption_lower}")


# the same sentences with the cue removed: "X without a cup" <-> "X with a cup" (a minimal pair)
AFFIRMED_TEMPLATES = ("{caption} with {a_obj}", "{caption}, but also {a_obj}", "{caption} with {a_obj}",
                      "{caption}, and there is {a_obj}", "{a_obj} in {caption_lower}")


def has_negation_cue(text: str) -> bool:
    """Whether ``text`` holds a word that negates, by ``NEGATION_CUES`` or ``DERIVED_NEGATION_CUES``."""
    words = re.findall(r"[a-z']+", text.lower())
    return any(w in NEGATION_CUES or w in DERIVED_NEGATION_CUES or w.endswith("n't") for w in words)


def negate_caption(caption: str, absent_object: str, rng: np.random.Generator) -> str | None:
    """A negated counterpart naming one absent object (PeakPatch App. 0.J's protocol without the
    LLM); ``None`` when the round-trip check fails (the caption already negates, or no cue was
    added)."""
    pair = negation_pair(caption, absent_object, rng)
    return pair[0] if pair else None


def negation_pair(caption: str, absent_object: str, rng: np.random.Generator) -> tuple[str, str] | None:
    """(negated, affirmed) extensions of ``caption`` by one object that differ only in the negation
    cue, e.g. ("A dog without a collar", "A dog with a collar"); ``None`` as for ``negate_caption``."""
    caption = caption.strip().rstrip(".")
    if not caption or has_negation_cue(caption) or absent_object.lower() in caption.lower():
        return None
    k = int(rng.integers(len(NEGATION_TEMPLATES)))
    fields = dict(caption=caption, caption_lower=caption[:1].lower() + caption[1:],
                  a_obj=with_article(absent_object), obj=absent_object)
    negated, affirmed = NEGATION_TEMPLATES[k].format(**fields), AFFIRMED_TEMPLATES[k].format(**fields)
    return (negated, affirmed) if has_negation_cue(negated) and negated != caption else None
