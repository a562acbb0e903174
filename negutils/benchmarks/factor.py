"""FACTOR-Bench (LCSE App. B) from any COCO-format split: pairwise caption choice with oracle parses.

Each sample is an image and two captions over the same concepts that differ in their logical
operator; exactly one is true of the image. Splits:

* ``operator``: NOT, AND, OR, BUT-NOT, NEITHER. Per operator two rows of image conditions (below),
  alternated, so negation operators have the negated caption correct about half the time.
* ``equivalence``: De Morgan ("not A and not B" for "neither A nor B"), double negation
  ("A is not missing"), commutativity ("B and A"); each sample also carries the equivalent
  canonical caption, so score consistency can be measured beside accuracy.
* ``compound``: 3-4 concepts with mixed polarity; the wrong caption flips one literal.
* ``nested``: (A and B) or C against (A or B) and C. Note: (A or B) and C implies (A and B) or C,
  so on every image where exactly one holds it is the first; the correct position is randomised,
  but a text-only preference for the first form would score 100%.

Pairs come from the split's categories minus the most ubiquitous one (the paper drops "person"),
at most ``per_pair`` samples per unordered pair and ``per_concept`` per concept within a split
(paper: 5 and 10), with every caption phrased by one of >= 5 templates per form.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.logic import flat, holds, literal, nested
from ..core.phrasing import capitalise, join_phrases, with_article
from ..world.coco import CocoSplit

# Caption forms: ``{a}`` / ``{b}`` are article phrases, ``{A}`` / ``{B}`` bare nouns.
FORMS: dict[str, tuple[str, ...]] = {
    "A": ("{a}", "a photo of {a}", "there is {a}", "an image with {a}", "{a} is present"),
    "not A": ("no {A}", "without {a}", "a scene lacking {a}", "there is no {A}", "an image with no {A}"),
    "A and B": ("{a} and {b}", "both {a} and {b}", "{a} together with {b}", "{a} as well as {b}",
                "there is {a} and {b}"),
    "A or B": ("{a} or {b}", "either {a} or {b}", "{a} or else {b}", "at least one of {a} or {b}",
               "there is {a} or {b}"),
    "A but not B": ("{a} but no {B}", "{a} without {b}", "{a} and no {B}", "there is {a} but not {b}",
                    "{a}, lacking {b}"),
    "neither A nor B": ("neither {a} nor {b}", "no {A} and no {B}", "without {a} or {b}",
                        "there is no {A} and no {B}", "a scene lacking both {a} and {b}"),
    # equivalence split
    "not A and not B": ("not {a} and not {b}", "there is not {a} and not {b}", "not {a}, and not {b} either",
                        "this is not {a} and not {b}", "not {a} and also not {b}"),
    "A is not missing": ("{a} is not missing", "{a} is not absent", "it is not true that there is no {A}",
                         "{a} is not lacking from the scene", "no {A} is not the case"),
    "A is missing": ("{a} is missing", "{a} is absent", "{a} is lacking from the scene",
                     "{a} is nowhere to be seen", "{a} is not there"),
    # nested split
    "(A and B) or C": ("either {a} and {b}, or {c}", "{a} with {b}, or else {c}", "both {a} and {b}, or {c}",
                       "there is {a} and {b}, or there is {c}", "{c}, or {a} together with {b}"),
    "(A or B) and C": ("{a} or {b}, and also {c}", "either {a} or {b}, together with {c}",
                       "{c} with {a} or {b}", "there is {c} and either {a} or {b}", "{a} or {b}, as well as {c}"),
}

PARSES = {
    "A": lambda A, B: flat("SINGLE", literal(A)),
    "not A": lambda A, B: flat("SINGLE", literal(A, True)),
    "A and B": lambda A, B: flat("AND", literal(A), literal(B)),
    "A or B": lambda A, B: flat("OR", literal(A), literal(B)),
    "A but not B": lambda A, B: flat("AND", literal(A), literal(B, True)),
    "neither A nor B": lambda A, B: flat("AND", literal(A, True), literal(B, True)),
    "not A and not B": lambda A, B: flat("AND", literal(A, True), literal(B, True)),
    "A is not missing": lambda A, B: flat("SINGLE", literal(A)),
    "A is missing": lambda A, B: flat("SINGLE", literal(A, True)),
}

# compound captions with both polarities: {p} the affirmed article phrases joined, {n_no} the
# negated nouns joined by " and no ", {n_without} the negated article phrases joined by "or"
COMPOUND_FORMS = ("{p} but no {n_no}", "{p}, without {n_without}", "there is {p} but no {n_no}",
                  "{p} and no {n_no}", "an image with {p} and no {n_no}")

# operator -> rows of (image condition on (A, B), correct form, wrong form); rows alternate.
OPERATOR_ROWS: dict[str, tuple[tuple[tuple[bool, bool], str, str], ...]] = {
    "NOT": (((True, None), "A", "not A"), ((False, None), "not A", "A")),
    "AND": (((True, False), "A", "A and B"), ((True, True), "A and B", "A but not B")),
    "OR": (((True, False), "A or B", "A and B"), ((False, True), "A or B", "A and B")),
    "BUT-NOT": (((True, False), "A but not B", "A and B"), ((True, True), "A and B", "A but not B")),
    "NEITHER": (((False, False), "neither A nor B", "A or B"), ((True, False), "A or B", "neither A nor B")),
}

# test -> rows of (condition, correct form, wrong form, canonical equivalent of the correct form)
EQUIVALENCE_ROWS = {
    "De Morgan": (((False, False), "not A and not B", "A or B", "neither A nor B"),
                  ((True, False), "A or B", "not A and not B", "A or B")),
    "double negation": (((True, None), "A is not missing", "A is missing", "A"),
                        ((False, None), "A is missing", "A is not missing", "not A")),
    "commutativity": (((True, True), "B and A", "B but not A", "A and B"),),
}


PAPER_OPERATOR_COUNTS = (("NOT", 300), ("AND", 150), ("OR", 150), ("BUT-NOT", 250), ("NEITHER", 250))


@dataclass(frozen=True)
class FactorConfig:
    seed: int = 0
    per_pair: int = 5            # paper: at most 5 samples per pair
    per_concept: int = 10        # paper: at most 10 per concept
    # per operator: one count for all, or (operator, count) pairs; the default is LCSE Table 3's
    # 1,100 (NOT 300, AND 150, OR 150, BUT-NOT 250, NEITHER 250), whose "All" weights by them
    operator_samples: int | tuple[tuple[str, int], ...] = PAPER_OPERATOR_COUNTS
    # the operator split's caps (None: per_pair, per_concept); a one-concept test (NOT) counts a
    # concept as its own "pair", so per_pair also caps its samples per concept
    operator_per_pair: int | None = None
    operator_per_concept: int | None = None
    equivalence_samples: tuple[tuple[str, int], ...] = (("De Morgan", 50), ("double negation", 100),
                                                         ("commutativity", 300))
    compound_samples: int = 145
    nested_samples: int = 150

    def operator_counts(self) -> dict[str, int]:
        """Samples per operator of the operator split."""
        if isinstance(self.operator_samples, (tuple, list)):
            counts = dict(self.operator_samples)
            unknown = set(counts) - set(OPERATOR_ROWS)
            if unknown:
                raise ValueError(f"FactorConfig.operator_samples names unknown operators {sorted(unknown)}; "
                                 f"FACTOR's operators are {list(OPERATOR_ROWS)}")
            return counts
        return {op: self.operator_samples for op in OPERATOR_ROWS}


def _phrase(form: str, rng: np.random.Generator, A: str, B: str | None = None, C: str | None = None) -> str:
    if form == "B and A":
        form, A, B = "A and B", B, A
    elif form == "B but not A":
        form, A, B = "A but not B", B, A
    template = FORMS[form][int(rng.integers(len(FORMS[form])))]
    fields = {"a": with_article(A), "A": A}
    if B is not None:
        fields.update(b=with_article(B), B=B)
    if C is not None:
        fields.update(c=with_article(C), C=C)
    return capitalise(template.format(**fields)) + "."


def _parse(form: str, A: str, B: str | None) -> dict:
    if form == "B and A":
        return PARSES["A and B"](B, A)
    if form == "B but not A":
        return PARSES["A but not B"](B, A)
    return PARSES[form](A, B)


def _matches(objects: frozenset[str], A: str, B: str | None, condition: tuple) -> bool:
    want_a, want_b = condition
    return (A in objects) == want_a and (want_b is None or B is None or (B in objects) == want_b)


def excluded_category(split: CocoSplit) -> str:
    """The most ubiquitous category (the paper excludes 'person')."""
    counts = {c: sum(c in o for o in split.objects) for c in split.categories}
    return max(split.categories, key=lambda c: (counts[c], c))


class _Caps:
    def __init__(self, per_pair: int, per_concept: int):
        self.per_pair, self.per_concept = per_pair, per_concept
        self.pairs: dict[frozenset, int] = {}
        self.concepts: dict[str, int] = {}

    def allows(self, *concepts: str) -> bool:
        key = frozenset(concepts)
        return self.pairs.get(key, 0) < self.per_pair and all(self.concepts.get(c, 0) < self.per_concept
                                                              for c in concepts)

    def take(self, *concepts: str) -> None:
        key = frozenset(concepts)
        self.pairs[key] = self.pairs.get(key, 0) + 1
        for c in concepts:
            self.concepts[c] = self.concepts.get(c, 0) + 1


def pairwise_fields(rng: np.random.Generator, caption_true: str, caption_false: str, parse_true: dict,
                    parse_false: dict) -> dict:
    """The two captions at a random position (``correct`` says which) with their oracle parses."""
    correct = int(rng.integers(2))
    captions = [caption_false, caption_false]
    parses = [parse_false, parse_false]
    captions[correct], parses[correct] = caption_true, parse_true
    return {"caption_0": captions[0], "caption_1": captions[1], "correct": correct,
            "parse_0": json.dumps(parses[0], sort_keys=True), "parse_1": json.dumps(parses[1], sort_keys=True)}


def _sample(split_name, test, image, caption_true, caption_false, parse_true, parse_false, rng, **extra) -> dict:
    return {"split": split_name, "test": test, "image_index": image,
            **pairwise_fields(rng, caption_true, caption_false, parse_true, parse_false), **extra}


def _pairwise_split(split: CocoSplit, rows_by_test: dict, counts: dict[str, int], split_name: str,
                    rng: np.random.Generator, config: FactorConfig, concepts: list[str]) -> list[dict]:
    samples = []
    for test, rows in rows_by_test.items():
        if not counts.get(test):
            continue
        caps = _Caps(config.per_pair, config.per_concept)
        pairs = [tuple(p) for p in itertools.permutations(concepts, 2)]
        order = rng.permutation(len(pairs))
        made = 0
        for k in order:
            if made >= counts[test]:
                break
            A, B = pairs[int(k)]
            row = rows[made % len(rows)]
            condition, true_form, false_form = row[:3]
            uses_b = condition[1] is not None or any("B" in f for f in (true_form, false_form))
            used = (A, B) if uses_b else (A,)
            if not caps.allows(*used):
                continue
            pool = [i for i, objs in enumerate(split.objects) if _matches(objs, A, B, condition)]
            if not pool:
                continue
            image = pool[int(rng.integers(len(pool)))]
            extra = {"concepts": json.dumps(list(used))}
            if len(row) > 3:
                extra["equivalent_caption"] = _phrase(row[3], rng, A, B)
            samples.append(_sample(split_name, test, image, _phrase(true_form, rng, A, B),
                                   _phrase(false_form, rng, A, B), _parse(true_form, A, B),
                                   _parse(false_form, A, B), rng, **extra))
            caps.take(*used)
            made += 1
    return samples


def _compound_caption(lits: list[tuple[str, bool]], rng: np.random.Generator) -> str:
    pos = [with_article(c) for c, neg in lits if not neg]
    negs = [c for c, neg in lits if neg]
    if not pos:
        text = " and ".join(f"no {c}" for c in negs)
    elif not negs:
        text = join_phrases(pos)
    else:
        style = int(rng.integers(len(COMPOUND_FORMS)))
        p, n_no, n_without = (join_phrases(pos), " and no ".join(negs),
                              join_phrases([with_article(c) for c in negs], "or"))
        text = COMPOUND_FORMS[style].format(p=p, n_no=n_no, n_without=n_without)
    return capitalise(text) + "."


def _compound_split(split, rng, config, concepts) -> list[dict]:
    samples, caps = [], _Caps(config.per_pair, config.per_concept)
    attempts = 0
    while len(samples) < config.compound_samples and attempts < 50 * config.compound_samples:
        attempts += 1
        k = 3 + int(rng.integers(2))
        chosen = [concepts[int(j)] for j in rng.choice(len(concepts), size=k, replace=False)]
        image = int(rng.integers(len(split)))
        lits = [(c, c not in split.objects[image]) for c in chosen]
        if all(n for _, n in lits) or not any(n for _, n in lits) or not caps.allows(*chosen):
            continue
        flip = int(rng.integers(k))
        wrong = [(c, (not n) if j == flip else n) for j, (c, n) in enumerate(lits)]
        parse = lambda ls: flat("AND", *(literal(c, n) for c, n in ls))  # noqa: E731
        samples.append(_sample("compound", f"{k} concepts", image, _compound_caption(lits, rng),
                               _compound_caption(wrong, rng), parse(lits), parse(wrong), rng,
                               concepts=json.dumps(chosen)))
        caps.take(*chosen)
    return samples


def _nested_split(split, rng, config, concepts) -> list[dict]:
    samples, caps = [], _Caps(config.per_pair, config.per_concept)
    triples = list(itertools.permutations(concepts, 3))
    for k in rng.permutation(len(triples)):
        if len(samples) >= config.nested_samples:
            break
        A, B, C = triples[int(k)]
        if not caps.allows(A, B, C):
            continue
        and_or = nested("OR", flat("AND", literal(A), literal(B)), flat("SINGLE", literal(C)))
        or_and = nested("AND", flat("OR", literal(A), literal(B)), flat("SINGLE", literal(C)))
        pool = [i for i, objs in enumerate(split.objects) if holds(and_or, objs) != holds(or_and, objs)]
        if not pool:
            continue
        image = pool[int(rng.integers(len(pool)))]
        true_form, false_form = ("(A and B) or C", "(A or B) and C") if holds(and_or, split.objects[image]) \
            else ("(A or B) and C", "(A and B) or C")
        parses = {"(A and B) or C": and_or, "(A or B) and C": or_and}
        samples.append(_sample("nested", "(A and B) or C vs (A or B) and C", image,
                               _phrase(true_form, rng, A, B, C), _phrase(false_form, rng, A, B, C),
                               parses[true_form], parses[false_form], rng, concepts=json.dumps([A, B, C])))
        caps.take(A, B, C)
    return samples


def build_factor(split: CocoSplit, config: FactorConfig = FactorConfig()) -> pd.DataFrame:
    """All four splits as one frame (column ``split``), with oracle parses per caption."""
    rng = np.random.default_rng([config.seed, 0xFAC7])
    dropped = excluded_category(split)
    concepts = [c for c in split.categories if c != dropped]
    counts = config.operator_counts()
    operator_config = dataclasses.replace(config, per_pair=config.operator_per_pair or config.per_pair,
                                          per_concept=config.operator_per_concept or config.per_concept)
    samples = _pairwise_split(split, OPERATOR_ROWS, counts, "operator", rng, operator_config, concepts)
    samples += _pairwise_split(split, EQUIVALENCE_ROWS, dict(config.equivalence_samples), "equivalence", rng,
                               config, concepts)
    samples += _compound_split(split, rng, config, concepts)
    samples += _nested_split(split, rng, config, concepts)
    frame = pd.DataFrame(samples)
    frame.insert(3, "image_id", [split.image_ids[i] for i in frame["image_index"]])
    frame.insert(4, "image_path", [split.file_names[i] for i in frame["image_index"]])
    frame.attrs["excluded_category"] = dropped
    return frame.drop(columns=["image_index"])
