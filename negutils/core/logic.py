"""Oracle parses: the structured meaning of a caption, and its truth on an image's object set.

The format is LCSE's (sec. 4, Table 7): a flat parse names an operator (SINGLE, AND, OR) and its
concepts, each with an ``negated`` flag; a nested parse has ``children`` instead of concepts.

    {"operator": "AND", "concepts": [{"name": "car", "negated": false},
                                      {"name": "bicycle", "negated": true}]}      # a car but no bicycle
    {"operator": "OR", "children": [{"operator": "AND", "concepts": [...]},
                                     {"operator": "SINGLE", "concepts": [...]}]}  # (A and B) or C
"""
from __future__ import annotations

OPERATORS = ("SINGLE", "AND", "OR")          # a parser may also return NONE: concepts with no connective


def literal(name: str, negated: bool = False) -> dict:
    return {"name": name, "negated": bool(negated)}


def flat(operator: str, *concepts: dict) -> dict:
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; expected one of {OPERATORS}")
    if operator == "SINGLE" and len(concepts) != 1:
        raise ValueError(f"SINGLE takes one concept, got {len(concepts)}")
    return {"operator": operator, "concepts": list(concepts)}


def nested(operator: str, *children: dict) -> dict:
    if operator not in ("AND", "OR"):
        raise ValueError(f"a nested parse combines children with AND or OR, not {operator!r}")
    return {"operator": operator, "children": list(children)}


def holds(parse: dict, present) -> bool:
    """Truth of ``parse`` on an image whose present categories are ``present``."""
    if "children" in parse:
        values = [holds(child, present) for child in parse["children"]]
    else:
        values = [(c["name"] in present) != c["negated"] for c in parse["concepts"]]
    if parse["operator"] == "OR":
        return any(values)
    return all(values)  # SINGLE and AND


def literals(parse: dict) -> list[dict]:
    """Every concept of a (possibly nested) parse, left to right, with its ``negated`` flag."""
    if "children" in parse:
        return [c for child in parse["children"] for c in literals(child)]
    return list(parse["concepts"])


def canonical(parse: dict):
    """A hashable form in which two parses are equal when they mean the same up to concept order."""
    if "children" in parse:
        return (parse["operator"], frozenset(canonical(c) for c in parse["children"]))
    return (parse["operator"], frozenset((c["name"], c["negated"]) for c in parse["concepts"]))
