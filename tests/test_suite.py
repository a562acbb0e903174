"""``evaluate_methods`` on a small built benchmark with two toy scorers whose results are known:
an oracle that scores 1 exactly when a caption is true of an image under the benchmarks' own
annotations, and its mirror image (-1 when true), which ranks every true caption last."""
import json

import numpy as np
import pytest
import torch

from negutils.benchmarks.negbench import claims_hold
from negutils.benchmarks.suite import ensure_benchmarks, evaluate_methods
from negutils.config import get_profile
from negutils.core.logic import holds
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world

TASKS = ("mcq", "retrieval", "confusion_2c", "factor_operator", "valse_existence", "retention")


class Oracle:
    """Image features are (split number, index); a caption's truth comes from ``truth``."""

    def __init__(self, splits, truth, sign=1.0):
        self.splits, self.truth, self.sign = splits, truth, sign
        self.name = "unnamed"

    def image_features(self, split, indices):
        which = [s.name for s in self.splits].index(split.name)
        idx = torch.as_tensor(np.asarray(indices), dtype=torch.float32)
        return torch.stack([torch.full_like(idx, which), idx], dim=1)

    def score(self, feats, captions):
        rows = []
        for which, i in feats.long().tolist():
            split = self.splits[which]
            rows.append([float(self.truth[c](split.objects[i], split.image_ids[i])) for c in captions])
        return self.sign * torch.tensor(rows)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = build_world(WorldConfig(pretrain=4, negtrain=4, val=150, ood=40, seed=9),
                       tmp_path_factory.mktemp("suite") / "w", progress=False)
    splits = {s: load_split(root / s) for s in ("val", "ood")}
    config = get_profile("smoke").benchmarks
    bench = {s: ensure_benchmarks(splits[s], config, tmp_path_factory.mktemp(f"bench-{s}"), "suite-world")
             for s in splits}
    truth = {}
    for s in splits:
        mcq = bench[s].mcq
        for k in range(4):
            for caption, claims in zip(mcq[f"caption_{k}"], mcq[f"caption_{k}_claims"]):
                truth.setdefault(caption, lambda o, i, c=json.loads(claims): claims_hold(c, o))
        for frame in (bench[s].factor, bench[s].existence):
            for k in (0, 1):
                for caption, parse in zip(frame[f"caption_{k}"], frame[f"parse_{k}"]):
                    truth.setdefault(caption, lambda o, i, p=json.loads(parse): holds(p, o))
        for g in bench[s].confusion_2c.itertuples():
            truth.setdefault(g.query, lambda o, i, p=json.loads(g.positives), n=g.negative: set(p) <= o and n not in o)
    # an affirmative retrieval query that no other benchmark phrases is true of its positives (of all
    # of them when several images share the caption)
    ids = {}
    for q, positives in zip(bench["val"].retrieval_affirmative["query"],
                            bench["val"].retrieval_affirmative["positives"]):
        ids.setdefault(q, set()).update(json.loads(positives))
    for q, members in ids.items():
        truth.setdefault(q, lambda o, i, m=frozenset(members): i in m)
    ordered = [splits["val"], splits["ood"]]
    return splits, bench, truth, Oracle(ordered, truth), Oracle(ordered, truth, sign=-1.0)


def _row(results, method, task, split="val"):
    rows = results[(results["method"] == method) & (results["task"] == task)
                   & (results["split"] == split)]
    assert len(rows) == 1, (method, task, split, len(rows))
    return rows.iloc[0]


def test_oracle_and_mirror_score_as_the_benchmarks_define(suite):
    splits, bench, truth, oracle, mirror = suite
    items = {}
    results = evaluate_methods({"oracle": oracle, "mirror": mirror}, bench, splits, "embedded", "toy", "test",
                               retention_reference=oracle, items=items, tasks=TASKS)
    assert (oracle.name, mirror.name) == ("oracle", "mirror")          # the dict keys name the scorers
    assert set(results["dataset"]) == {"embedded"}
    assert sorted(set(zip(results["method"], results["task"], results["split"]))) == sorted(
        [(m, t, "val") for m in ("oracle", "mirror") for t in TASKS] +
        [(m, "mcq", "ood") for m in ("oracle", "mirror")])

    val = splits["val"]
    affirmative = bench["val"].retrieval_affirmative
    own = [set(json.loads(p)) for p in affirmative["positives"]]
    # the oracle ties a query's other true images with its positives; ties count against the positives
    assert all(truth[q](val.objects[val.image_ids.index(i)], i) for q, p in zip(affirmative["query"], own) for i in p)
    oracle_rank = np.array([sum(truth[q](o, i) for o, i in zip(val.objects, val.image_ids) if i not in p)
                            for q, p in zip(affirmative["query"], own)])
    mirror_rank = np.array([len(val) - len(p) for p in own])             # every other image ranks first
    galleries = bench["val"].confusion_2c
    sizes = [(len(json.loads(c)), len(json.loads(n)))
             for c, n in zip(galleries["correct_ids"], galleries["confusing_ids"])]
    # the mirror ranks every correct image below every confusing one, all tied at -1: tied scores
    # share one threshold, so each gallery's AP is its share of correct images (chance)
    tied_last_ap = np.mean([p / (p + n) for p, n in sizes])

    for method, perfect in (("oracle", True), ("mirror", False)):
        for split in ("val", "ood"):
            assert _row(results, method, "mcq", split)["accuracy"] == (1.0 if perfect else 0.0)
            assert _row(results, method, "mcq", split)["questions"] == len(bench[split].mcq)
        operator = _row(results, method, "factor_operator")
        per_test = [c for c in results.columns if c.startswith("accuracy[")]
        assert {"accuracy[NOT]", "accuracy[NEITHER]", "accuracy[BUT-NOT]", "accuracy[AND]",
                "accuracy[OR]"} <= set(per_test)
        assert operator["accuracy"] == (1.0 if perfect else 0.0)
        assert (operator[[c for c in per_test if c in ("accuracy[NOT]", "accuracy[AND]", "accuracy[OR]",
                                                        "accuracy[NEITHER]", "accuracy[BUT-NOT]")]]
                == (1.0 if perfect else 0.0)).all()
        assert _row(results, method, "valse_existence")["accuracy"] == (1.0 if perfect else 0.0)
        rank = oracle_rank if perfect else mirror_rank
        retrieval = _row(results, method, "retrieval")
        for k in (1, 5, 10):
            assert retrieval[f"R@{k}"] == pytest.approx(float((rank < k).mean()))
        confusion = _row(results, method, "confusion_2c")
        assert confusion["mAP"] == pytest.approx(1.0 if perfect else tied_last_ap)
        assert confusion["chance mAP"] == pytest.approx(tied_last_ap) and confusion["galleries"] == len(galleries)
        retention = _row(results, method, "retention")
        assert retention["rho"] == pytest.approx(1.0 if perfect else -1.0)
        assert retention["R@5"] == pytest.approx(retrieval["R@5"])

    assert oracle_rank.max() >= 10 and _row(results, "oracle", "retrieval")["R@10"] < 1.0   # the tie rule is exercised
    # per-item outcomes under (method, dataset, task, metric), one per question
    mcq_items = items[("oracle", "embedded", "val", "mcq", "accuracy")]
    assert len(mcq_items) == len(bench["val"].mcq) and (mcq_items == 1).all()
    assert (items[("mirror", "embedded", "ood", "mcq", "accuracy")] == 0).all()
    assert np.allclose(items[("mirror", "embedded", "val", "retention", "rho")], -1.0)
    assert items[("oracle", "embedded", "val", "confusion_2c", "mAP")].shape == (len(galleries),)


def test_only_the_tasks_asked_for_and_no_ood_without_ood_tasks(suite):
    splits, bench, _, oracle, mirror = suite
    results = evaluate_methods({"a": oracle, "b": mirror}, bench, splits, "embedded", "toy", "test",
                               ood_tasks=(), tasks=("mcq", "retention"))
    # retention needs a reference scorer: none given, no retention row
    assert sorted(zip(results["method"], results["task"], results["split"])) == [("a", "mcq", "val"),
                                                                                  ("b", "mcq", "val")]
    assert results.set_index("method")["accuracy"].to_dict() == {"a": 1.0, "b": 0.0}
