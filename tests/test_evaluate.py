"""The evaluation entry point: an oracle scorer that knows the ground truth must score perfectly,
and the vanilla scorer must equal plain cosine similarity."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from negutils.benchmarks import ClipScorer, evaluate_retention, results_frame
from negutils.benchmarks.confusion import ConfusionConfig, build_confusion
from negutils.benchmarks.evaluate import (evaluate_confusion, evaluate_mcq, evaluate_pairwise, evaluate_retrieval,
                                          result_row)
from negutils.benchmarks.factor import FactorConfig, build_factor
from negutils.benchmarks.negbench import MCQConfig, build_mcq, build_retrieval, claims_hold
from negutils.benchmarks.suite import Benchmarks, evaluate_methods
from negutils.config import Profile
from negutils.core.logic import holds
from negutils.core.results import method_table, read_results, write_results
from negutils.core.results import result_value
from negutils.models.backbone import load_backbone
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world


class OracleScorer:
    """Scores 1 when the caption is true of the image under the benchmark's own annotations."""
    name = "oracle"

    def __init__(self, split, truth):
        self.split, self.truth = split, truth   # truth: caption -> (objects -> bool)

    def image_features(self, split, indices):
        return torch.as_tensor(np.asarray(indices), dtype=torch.float32)[:, None]

    def score(self, feats, captions):
        objects = [self.split.objects[int(i)] for i in feats[:, 0]]
        return torch.tensor([[float(self.truth[c](o)) for c in captions] for o in objects])


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = build_world(WorldConfig(pretrain=4, negtrain=4, val=300, ood=4, seed=9), tmp_path_factory.mktemp("w") / "w",
                       progress=False)
    return load_split(root / "val")


def oracle_truth(mcq) -> dict:
    """{caption: whether it holds for an image's objects}, from the claims each MCQ option carries."""
    truth = {}
    for row in mcq.itertuples():
        for k in range(4):
            claims = json.loads(getattr(row, f"caption_{k}_claims"))
            truth[getattr(row, f"caption_{k}")] = lambda o, c=claims: claims_hold(c, o)
    return truth


def test_oracle_answers_every_mcq(split):
    mcq = build_mcq(split, MCQConfig(seed=0))
    metrics = evaluate_mcq(OracleScorer(split, oracle_truth(mcq)), mcq, split)
    assert metrics["accuracy"] == 1.0 and metrics["questions"] == len(mcq)


def test_oracle_answers_every_factor_sample(split):
    factor = build_factor(split, FactorConfig(operator_samples=20, equivalence_samples=(("De Morgan", 5),),
                                              compound_samples=5, nested_samples=5))
    truth = {}
    for s in factor.itertuples():
        for k in (0, 1):
            parse = json.loads(getattr(s, f"parse_{k}"))
            truth[getattr(s, f"caption_{k}")] = lambda o, p=parse: holds(p, o)
    metrics = evaluate_pairwise(OracleScorer(split, truth), factor, split, group="test")
    assert metrics["accuracy"] == 1.0 and metrics["accuracy[NOT]"] == 1.0


def test_oracle_ranks_correct_above_confusing(split):
    galleries = build_confusion(split, "2C", ConfusionConfig(m_min=3, m_max=8))
    truth = {g.query: (lambda o, p=json.loads(g.positives)[0], n=g.negative: p in o and n not in o)
             for g in galleries.itertuples()}
    metrics = evaluate_confusion(OracleScorer(split, truth), galleries, split)
    assert metrics["mAP"] == 1.0 and metrics["chance mAP"] < 1.0


def test_oracle_retrieves_a_positive_first(split):
    _, negated = build_retrieval(split, seed=0)
    truth = {}
    for row in negated.itertuples():
        ids = set(json.loads(row.positives))
        truth[row.query] = lambda o, ids=ids: False  # replaced below by image-id lookup
    id_of = dict(enumerate(split.image_ids))

    class ById(OracleScorer):
        def score(self, feats, captions):
            pos = {row.query: set(json.loads(row.positives)) for row in negated.itertuples()}
            return torch.tensor([[float(id_of[int(i)] in pos[c]) for c in captions] for i in feats[:, 0]])

    assert evaluate_retrieval(ById(split, truth), negated, split)["R@1"] == 1.0


def test_clip_scorer_is_cosine_similarity_and_caches(split):
    bb = load_backbone("negbook-tiny")
    scorer = ClipScorer(bb)
    feats = scorer.image_features(split, [0, 3, 5])
    caps = ["There is a cup.", "No star."]
    expected = bb.encode_images(split.images([0, 3, 5])) @ bb.encode_text(caps).T
    assert torch.allclose(scorer.score(feats, caps), expected, atol=1e-5)
    assert set(scorer._text) == set(caps)


def test_empty_caption_is_named(split):
    mcq = build_mcq(split, MCQConfig(seed=0)).head(2).copy()
    mcq.loc[mcq.index[1], "caption_2"] = " "
    with pytest.raises(ValueError, match="MCQ: caption 6 is empty"):
        evaluate_mcq(ClipScorer(load_backbone("negbook-tiny")), mcq, split)


def test_results_have_clip_benchmark_keys_and_the_split_beside_the_dataset():
    row = result_row("embedded", "val", "negbook-organism", "negbook-pretrain", "mcq", {"accuracy": 0.5})
    assert set(row) == {"dataset", "split", "model", "pretrained", "task", "metrics"}
    frame = results_frame([row])
    assert list(frame.columns) == ["dataset", "split", "model", "pretrained", "task", "accuracy"]
    with pytest.raises(ValueError, match="embedded/val"):
        result_row("embedded/val", "val", "negbook-organism", "negbook-pretrain", "mcq", {"accuracy": 0.5})


def test_evaluated_rows_carry_the_split_in_its_own_column(split, tmp_path):
    mcq = build_mcq(split, MCQConfig(seed=0))
    truth = oracle_truth(mcq)
    empty = pd.DataFrame(columns=["split"])
    bench = {name: Benchmarks(split=name, root=tmp_path, mcq=questions, retrieval_affirmative=empty,
                              retrieval_negated=empty, confusion_2c=empty, confusion_3c=empty, factor=empty,
                              existence=empty)
             for name, questions in (("val", mcq), ("ood", mcq.iloc[:10]))}
    items = {}
    results = evaluate_methods({"oracle": OracleScorer(split, truth)}, bench, {"val": split, "ood": split},
                               "embedded", "negbook-tiny", "none", items=items, tasks=("mcq",))
    assert list(results.columns[:5]) == ["dataset", "split", "model", "pretrained", "task"]
    assert set(results["dataset"]) == {"embedded"} and list(results["split"]) == ["val", "ood"]
    assert result_value(results, "oracle", "mcq", "questions", "val") == len(mcq)
    assert result_value(results, "oracle", "mcq", "questions", "ood") == 10
    assert np.isnan(result_value(results, "oracle", "mcq", "questions", "negtrain"))
    assert {k[:3] for k in items} == {("oracle", "embedded", "val"), ("oracle", "embedded", "ood")}


def test_results_written_with_the_split_in_the_dataset_are_read_in_the_new_shape(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    prof = Profile(name="test")
    old = pd.DataFrame([{"dataset": "embedded/val", "model": "m", "pretrained": "p", "task": "mcq", "method": "a",
                         "accuracy": 0.5},
                        {"dataset": "embedded/ood", "model": "m", "pretrained": "p", "task": "mcq", "method": "a",
                         "accuracy": 0.25}])
    write_results(old, prof, "03_results")
    results = read_results(prof, "03_results")
    assert list(results.columns) == ["dataset", "split", "model", "pretrained", "task", "method", "accuracy"]
    assert list(results["dataset"]) == ["embedded", "embedded"] and list(results["split"]) == ["val", "ood"]
    assert result_value(results, "a", "mcq", "accuracy", "ood") == 0.25
    # tables that are not result rows come back as written
    write_results(pd.DataFrame({"method": ["a"], "value": [1.0]}), prof, "03_near_ties")
    assert list(read_results(prof, "03_near_ties").columns) == ["method", "value"]


def test_source_only_retrieval_counts_only_the_source_image(split):
    _, negated = build_retrieval(split, seed=0)
    id_of = dict(enumerate(split.image_ids))
    any_positive = {row.query: set(json.loads(row.positives)) - {row.image_id} for row in negated.itertuples()}

    class OtherPositives(OracleScorer):
        def score(self, feats, captions):  # ranks every satisfying image except the source first
            return torch.tensor([[float(id_of[int(i)] in any_positive[c]) for c in captions] for i in feats[:, 0]])

    queries = negated[[len(any_positive[q]) >= 10 for q in negated["query"]]]
    scorer = OtherPositives(split, {})
    assert evaluate_retrieval(scorer, queries, split, ks=(1,))["R@1"] == 1.0
    assert evaluate_retrieval(scorer, queries, split, ks=(1,), source_only=True)["R@1"] == 0.0


def test_method_table_scales_percent_but_not_correlations():

    results = pd.DataFrame([{"dataset": "embedded", "split": "val", "method": "a", "task": "retention", "R@5": 0.5,
                             "rho": 0.9991},
                            {"dataset": "embedded", "split": "val", "method": "b", "task": "retention", "R@5": 0.25,
                             "rho": 1.0},
                            {"dataset": "embedded", "split": "ood", "method": "a", "task": "retention", "R@5": 0.9,
                             "rho": 0.5}])
    table = method_table(results, {("retention", "val", "R@5"): "R@5", ("retention", "val", "rho"): "rho",
                                   ("mcq", "val", "accuracy"): "MCQ"})
    assert table.loc["a", "R@5"] == 50.0 and table.loc["b", "R@5"] == 25.0
    assert table.loc["a", "rho"] == 0.999 and table["MCQ"].isna().all()


def test_per_item_outcomes_average_to_the_headline_metric(split):
    # chapter 06 bootstraps these arrays, so their mean must be the number the tables print
    scorer = ClipScorer(load_backbone("negbook-tiny"))
    mcq = build_mcq(split, MCQConfig(seed=0))
    affirmative, negated = build_retrieval(split, seed=0)
    galleries = build_confusion(split, "2C", ConfusionConfig(m_min=3, m_max=8))
    factor = build_factor(split, FactorConfig(operator_samples=20, equivalence_samples=(("De Morgan", 5),),
                                              compound_samples=5, nested_samples=5))
    cases = [(evaluate_mcq, (scorer, mcq, split), {}, "accuracy", len(mcq)),
             (evaluate_retrieval, (scorer, negated, split), {"source_only": True}, "R@5", len(negated)),
             (evaluate_retrieval, (scorer, affirmative, split), {}, "R@1", len(affirmative)),
             (evaluate_confusion, (scorer, galleries, split), {}, "mAP", len(galleries)),
             (evaluate_pairwise, (scorer, factor, split), {"group": "test"}, "accuracy", len(factor))]
    for evaluate, args, kwargs, metric, n in cases:
        items = {}
        metrics = evaluate(*args, **kwargs, items=items)
        assert len(items[metric]) == n, evaluate.__name__
        assert items[metric].mean() == pytest.approx(metrics[metric]), evaluate.__name__
    items = {}
    retention = evaluate_retention(scorer, scorer, affirmative, split, items=items)
    assert retention["rho"] == pytest.approx(1.0) and items["rho"] == pytest.approx(np.ones(len(affirmative)))
    assert items["R@5"].mean() == pytest.approx(retention["R@5"])
