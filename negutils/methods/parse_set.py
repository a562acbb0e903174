"""The caption parser measured on a labelled set of parses: exact-match accuracy, and the errors that
matter most to KTN and LCSE, polarity flips: a concept negated that the caption affirms (both would
then reward an image for lacking something the caption asks for), and a concept affirmed that the
caption negates (they would reward an image for showing what the caption excludes).

The set (``tests/data/parse_set.tsv``) writes each parse compactly: ``AND(kite, boat-)``,
``OR(AND(kite, boat), SINGLE(car))``, ``NONE(dog chasing, cat)``, ``-`` marking a negated concept,
or ``UNPARSED`` for a caption the grammar must refuse.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..core.logic import canonical, literals

# the labelled set, committed with the tests (an editable install's chapter 04 and bench/parse_set.py read it there)
PARSE_SET = Path(__file__).resolve().parents[2] / "tests" / "data" / "parse_set.tsv"
OPERATORS = ("SINGLE", "AND", "OR", "NONE")
_CALL = re.compile(r"^\s*([A-Z]+)\((.*)\)\s*$", re.S)


def parse_notation(text: str) -> dict | None:
    """A parse written as ``OP(concept, concept-, OP(...))``; ``UNPARSED`` is None."""
    text = text.strip()
    if text == "UNPARSED":
        return None
    match = _CALL.match(text)
    if not match or match.group(1) not in OPERATORS:
        raise ValueError(f"parse {text!r}: expected OPERATOR(...) with OPERATOR in {OPERATORS}, or UNPARSED")
    operator, body = match.groups()
    parts, depth, start = [], 0, 0
    for k, char in enumerate(body):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    parts = [p.strip() for p in parts if p.strip()]
    if all("(" not in p for p in parts):
        return {"operator": operator, "concepts": [{"name": p.rstrip("-").strip(), "negated": p.endswith("-")}
                                                   for p in parts]}
    if not all("(" in p for p in parts):
        raise ValueError(f"parse {text!r}: mixes concepts and sub-parses under one operator")
    return {"operator": operator, "children": [parse_notation(p) for p in parts]}


def read_parse_set(path: str | os.PathLike) -> pd.DataFrame:
    """The labelled set: ``caption``, ``kind``, ``parse`` (the notation) and ``expected`` (the parse or None)."""
    path = Path(path)
    frame = pd.read_csv(path, sep="\t", comment="#", keep_default_na=False, dtype=str)
    missing = [c for c in ("caption", "kind", "parse") if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected caption, kind, parse (tab-separated)")
    expected = []
    for row, notation in enumerate(frame["parse"]):
        try:
            expected.append(parse_notation(notation))
        except ValueError as err:
            raise ValueError(f"{path}: row {row + 1} ({frame['caption'].iloc[row]!r}): {err}") from err
    return frame.assign(expected=expected)


def _with_polarity(parse: dict | None, negated: bool) -> set[str]:
    return {c["name"] for c in literals(parse) if c["negated"] == negated} if parse else set()


def score_parses(labelled: pd.DataFrame, parse: Callable[[list[str]], dict]) -> pd.DataFrame:
    """Per labelled caption: the parser's parse (``parse(captions)`` -> {caption: CaptionParse}),
    whether it equals the label exactly (up to concept order), the concepts it negates that the
    label does not (a concept negated that the caption affirms, or names at all), and the concepts
    it affirms that the label negates. A refusal flips nothing."""
    parses = parse(list(labelled["caption"]))
    rows = []
    for caption, kind, expected in labelled[["caption", "kind", "expected"]].itertuples(index=False):
        got = parses[caption].parse
        exact = (got is None and expected is None) or (got is not None and expected is not None and
                                                        canonical(got) == canonical(expected))
        rows.append({"caption": caption, "kind": kind, "exact": exact,
                     "wrongly affirmed": ", ".join(sorted(_with_polarity(got, False) & _with_polarity(expected, True))),
                     "wrongly negated": ", ".join(sorted(_with_polarity(got, True) - _with_polarity(expected, True))),
                     "reason": parses[caption].reason})
    return pd.DataFrame(rows)


def parse_set_summary(scored: pd.DataFrame, parser: str) -> dict:
    """Exact-match accuracy and the captions with a polarity flip each way: a concept affirmed that the
    label negates, and a concept negated that the label affirms."""
    return {"parser": parser, "captions": len(scored), "exact match": float(scored["exact"].mean()),
            "captions with a wrongly affirmed concept": int((scored["wrongly affirmed"] != "").sum()),
            "captions with a wrongly negated concept": int((scored["wrongly negated"] != "").sum())}
