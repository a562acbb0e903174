"""LCSE's analyses (detection AUC, evidence strata, Table 3's layout, the calibration ablation,
parser agreement) on constructed inputs with known answers."""
import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from negutils.benchmarks import results_frame
from negutils.benchmarks.evaluate import result_row
from negutils.benchmarks.factor import FactorConfig, build_factor
from negutils.core.logic import flat, literal, nested
from negutils.diagnosis import ConceptBank
from negutils.methods import (ablation_rows, concept_detection_auc, evidence_strata, operator_table, oracle_parses,
                              parser_agreement)
from negutils.methods.parsing import CaptionParse
from negutils.world.coco import load_split
from negutils.world.coco import CocoSplit

CONCEPTS = ["cat", "dog", "bird", "cup"]


def axis_encoder(captions):
    """Every caption is the one-hot axis of the single concept it names (KTN/LCSE templates)."""
    out = torch.zeros(len(captions), len(CONCEPTS))
    for row, caption in enumerate(captions):
        named = [k for k, c in enumerate(CONCEPTS) if c in caption.split()]
        assert len(named) == 1, caption
        out[row, named[0]] = 1.0
    return out


def toy_split(objects):
    n = len(objects)
    return CocoSplit(name="val", image_root=Path("."), image_ids=list(range(n)),
                     file_names=[f"{i}.png" for i in range(n)],
                     objects=[frozenset(o) for o in objects], captions=[[] for _ in range(n)], categories=CONCEPTS)


def test_concept_detection_auc_known_values():
    split = toy_split([{"cat", "dog", "bird"}, {"dog", "bird"}, {"cat", "dog"}, {"dog"}])
    feats = torch.tensor([[0.9, 1.0, 0.9, 0.0],
                          [0.8, 1.0, 0.1, 0.0],
                          [0.3, 1.0, 0.0, 0.0],
                          [0.1, 1.0, 0.0, 0.0]])
    auc = concept_detection_auc(ConceptBank(axis_encoder), split, feats, CONCEPTS)
    assert list(auc.index) == CONCEPTS
    # cat: positives 0.9 and 0.3 against 0.8 and 0.1: 3 of 4 pairs ordered
    assert auc["cat"] == pytest.approx(0.75)
    # bird: 0.9, 0.1 against 0.0, 0.0: separable
    assert auc["bird"] == 1.0
    # dog is in every image, cup in none: no AUC
    assert np.isnan(auc["dog"]) and np.isnan(auc["cup"])


def test_concept_detection_auc_of_inverted_evidence_is_zero():
    split = toy_split([{"cat"}, {"cat"}, {"dog"}, {"dog"}])
    feats = torch.tensor([[0.1, 0.9, 0, 0], [0.2, 0.8, 0, 0], [0.7, 0.2, 0, 0], [0.9, 0.1, 0, 0]])
    auc = concept_detection_auc(ConceptBank(axis_encoder), split, feats, ["cat", "dog"])
    assert auc.tolist() == [0.0, 0.0]


AUC = pd.Series({"a": 0.95, "b": 0.90, "c": 0.80, "d": 0.75, "e": 0.50})


def test_evidence_strata_bins_by_the_weakest_concept():
    samples = pd.DataFrame({"concepts": [json.dumps(c) for c in
                                         (["a"], ["a", "b"], ["c", "a"], ["d"], ["e", "a"])]})
    correct = {"holistic": np.array([1, 0, 1, 0, 0], dtype=bool), "LCSE": np.array([1, 1, 1, 1, 0], dtype=bool)}
    table = evidence_strata(samples, AUC, correct).set_index("min concept AUC")
    # weakest AUCs 0.95 | 0.90, 0.80 | 0.75, 0.50: the bins' upper edges are inclusive
    assert table["n"].tolist() == [1, 2, 2, 5]
    assert table["holistic"].tolist() == [100.0, 50.0, 0.0, 40.0]
    assert table["LCSE"].tolist() == [100.0, 100.0, 50.0, 80.0]
    assert table.index[-1] == "Overall"


def test_evidence_strata_leaves_empty_bins_empty():
    samples = pd.DataFrame({"concepts": [json.dumps(["a"]), json.dumps(["a", "a"])]})
    table = evidence_strata(samples, AUC, {"m": np.array([True, False])})
    assert table["n"].tolist() == [2, 0, 0, 2]
    assert table["m"].iloc[0] == 50.0 and table["m"].iloc[1:3].isna().all() and table["m"].iloc[3] == 50.0


def test_operator_table_is_table_3s_layout():
    ops = {"NOT": 0.5, "NEITHER": 0.25, "BUT-NOT": 0.75, "AND": 1.0, "OR": 0.125}
    rows = [result_row("embedded", "val", "toy", "test", "factor_operator",
                       {"method": "vanilla", "accuracy": 0.53, **{f"accuracy[{k}]": v for k, v in ops.items()}}),
            result_row("embedded", "val", "toy", "test", "factor_operator",
                       {"method": "LCSE", "accuracy": 0.9, **{f"accuracy[{k}]": 0.9 for k in ops}}),
            result_row("embedded", "val", "toy", "test", "mcq", {"method": "vanilla", "accuracy": 0.1})]
    table = operator_table(results_frame(rows))
    assert list(table.index) == ["vanilla", "LCSE"]
    assert list(table.columns) == ["not A", "not A and not B", "A and not B", "A and B", "A or B", "All"]
    assert table.loc["vanilla"].tolist() == [50.0, 25.0, 75.0, 100.0, 12.5, 53.0]
    assert (table.loc["LCSE"] == 90.0).all()


def test_operator_table_keeps_only_the_operators_measured():
    rows = [result_row("embedded", "val", "toy", "test", "factor_operator",
                       {"method": "vanilla", "accuracy": 0.5, "accuracy[OR]": 0.25, "accuracy[NOT]": 0.75})]
    table = operator_table(results_frame(rows))
    assert list(table.columns) == ["not A", "A or B", "All"] and table.loc["vanilla"].tolist() == [75.0, 25.0, 50.0]


def test_ablation_rows_vary_one_parameter_at_the_others_choice():
    grid = pd.DataFrame([{"mu": mu, "beta": beta, "NOT": mu, "AND": beta / 100, "All": (mu + beta / 100) / 2}
                         for mu in (0.1, 0.2, 0.3) for beta in (10.0, 30.0)])
    table = ablation_rows(grid, mu=0.2, beta=30.0)
    assert list(table.columns) == ["param", "value", "NOT", "AND", "All"]
    assert table["param"].tolist() == ["mu"] * 3 + ["beta"] * 2
    assert table["value"].tolist() == [0.1, 0.2, 0.3, 10.0, 30.0]
    assert table["NOT"].tolist() == [10.0, 20.0, 30.0, 20.0, 20.0]      # in %, NOT reads mu only
    assert table["AND"].tolist() == [30.0, 30.0, 30.0, 10.0, 30.0]


# ------------------------------------------------------------------------------------ parser agreement

def _pair(split, test, first, second):
    return {"split": split, "test": test, "caption_0": first[0], "caption_1": second[0],
            "parse_0": json.dumps(first[1]), "parse_1": json.dumps(second[1])}


NOT_CAT = ("There is no cat.", flat("SINGLE", literal("cat", True)))
CAT_AND_DOG = ("A cat and a dog.", flat("AND", literal("cat"), literal("dog")))
CAT_NO_DOG = ("A cat but no dog.", flat("AND", literal("cat"), literal("dog", True)))
NESTED = ("A cat and a dog, or a cup.", nested("OR", flat("AND", literal("cat"), literal("dog")),
                                               flat("SINGLE", literal("cup"))))
BIRD = ("A bird.", flat("SINGLE", literal("bird")))
FACTOR = pd.DataFrame([_pair("operator", "NOT", NOT_CAT, CAT_AND_DOG), _pair("operator", "BUT-NOT", CAT_NO_DOG, BIRD),
                       _pair("nested", "nested", NESTED, BIRD)])


def as_parses(table: dict) -> dict:
    return {c: CaptionParse(c, p) for c, p in table.items()}


def test_identical_parses_agree_fully():
    agreement = parser_agreement(FACTOR, as_parses(oracle_parses(FACTOR))).set_index("FACTOR split")
    assert list(agreement.index) == ["operator", "nested"]
    assert agreement["captions"].tolist() == [4, 2]
    assert agreement["match oracle"].tolist() == [1.0, 1.0] and agreement["unparsed"].tolist() == [0.0, 0.0]


def test_agreement_ignores_concept_order_but_not_polarity_or_operator():
    parses = copy.deepcopy(oracle_parses(FACTOR))
    parses[CAT_AND_DOG[0]]["concepts"].reverse()                       # same meaning
    parses[NESTED[0]]["children"].reverse()                            # same meaning
    parses[NOT_CAT[0]]["concepts"][0]["negated"] = False               # "a cat": wrong polarity
    parses[CAT_NO_DOG[0]]["operator"] = "OR"                           # wrong operator
    agreement = parser_agreement(FACTOR, as_parses(parses)).set_index("FACTOR split")
    assert agreement.loc["operator", "match oracle"] == 0.5            # 2 of 4 captions
    assert agreement.loc["nested", "match oracle"] == 1.0


def test_unparsed_captions_count_as_misses():
    parses = as_parses(oracle_parses(FACTOR))
    parses[BIRD[0]] = CaptionParse(BIRD[0], None, reason="no concept")   # in both splits
    agreement = parser_agreement(FACTOR, parses).set_index("FACTOR split")
    assert agreement["match oracle"].tolist() == [0.75, 0.5]
    assert agreement["unparsed"].tolist() == [0.25, 0.5]


def test_oracle_parses_of_a_built_factor_bench_agree_with_themselves(tiny_world):
    split = load_split(tiny_world / "val")
    factor = build_factor(split, FactorConfig(operator_samples=10, equivalence_samples=(("De Morgan", 4),),
                                              compound_samples=4, nested_samples=4))
    oracle = oracle_parses(factor)
    assert set(oracle) == set(factor["caption_0"]) | set(factor["caption_1"])
    agreement = parser_agreement(factor, as_parses(oracle))
    assert set(agreement["FACTOR split"]) == set(factor["split"])
    assert (agreement["match oracle"] == 1.0).all() and (agreement["unparsed"] == 0.0).all()
    assert agreement["captions"].sum() == 2 * len(factor)
