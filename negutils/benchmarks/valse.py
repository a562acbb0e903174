"""VALSE-Existence-style pairs: "There are Xs." against "There are no Xs." (PeakPatch App. 0.G).

Half the samples show an X (the affirmative caption is true), half do not (the negated one is);
the metric is pairwise accuracy. The correct position is randomised.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.logic import flat, literal
from ..core.phrasing import plural
from ..world.coco import CocoSplit
from .factor import pairwise_fields

# the affirmative and the negated caption of a pair; {X} is the plural noun
EXISTENCE_TEMPLATES = ("There are {X}.", "There are no {X}.")


def build_existence(split: CocoSplit, n_samples: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng([seed, 0x5A15E])
    rows = []
    order = rng.permutation(len(split))
    for k, i in enumerate(order[:n_samples]):
        i = int(i)
        present = sorted(split.objects[i])
        absent = split.absent_categories(i)
        want_present = k % 2 == 0
        pool = present if want_present else absent
        if not pool:
            continue
        concept = pool[int(rng.integers(len(pool)))]
        affirmative, negated = (t.format(X=plural(concept)) for t in EXISTENCE_TEMPLATES)
        true, false = (affirmative, negated) if want_present else (negated, affirmative)
        parse_true = flat("SINGLE", literal(concept, not want_present))
        parse_false = flat("SINGLE", literal(concept, want_present))
        rows.append({"image_id": split.image_ids[i], "image_path": split.file_names[i], "concept": concept,
                     **pairwise_fields(rng, true, false, parse_true, parse_false),
                     "negated_is_correct": not want_present})
    return pd.DataFrame(rows, columns=["image_id", "image_path", "concept", "caption_0", "caption_1", "correct",
                                       "negated_is_correct", "parse_0", "parse_1"])
