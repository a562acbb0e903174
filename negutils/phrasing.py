"""Noun phrases for category names: articles, plurals and joined lists.

Real COCO names ("traffic light", "hair drier") and the embedded world's glyph names go through
the same helpers, so every benchmark builder words captions the same way.
"""
from __future__ import annotations

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
