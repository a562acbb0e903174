"""A first look at negation blindness: does "no X" land next to "a X"?"""
from __future__ import annotations

import itertools

import pandas as pd

from ..core.phrasing import with_article
from ..models.backbone import Backbone


def negation_cosines(backbone: Backbone, categories: list[str], affirmative: str = "a photo of {a_x}",
                     negated: str = "a photo of no {x}") -> pd.DataFrame:
    """cos(f(affirmative X), f(negated X)) per category, beside cos(f(a X), f(a Y)) for X != Y.

    A negation-aware encoder puts "no X" far from "a X" (low cosine); a blind one puts it closer
    than any other category's prompt.
    """
    aff = backbone.encode_text([affirmative.format(a_x=with_article(c), x=c) for c in categories])
    neg = backbone.encode_text([negated.format(a_x=with_article(c), x=c) for c in categories])
    rows = [{"pair": "a X vs no X", "x": c, "y": c, "cosine": float(aff[i] @ neg[i])}
            for i, c in enumerate(categories)]
    rows += [{"pair": "a X vs a Y", "x": categories[i], "y": categories[j], "cosine": float(aff[i] @ aff[j])}
             for i, j in itertools.combinations(range(len(categories)), 2)]
    return pd.DataFrame(rows)
