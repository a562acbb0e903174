"""Negation training data: the three protocols, their truth under the ground truth, balance,
determinism, and that no training caption uses a benchmark's phrasing."""
import json

import numpy as np
import pytest

from negutils.core.metrics import NonFiniteScores
from negutils.benchmarks.confusion import ConfusionConfig
from negutils.benchmarks.factor import FactorConfig
from negutils.benchmarks.suite import BenchmarkConfig, build_benchmarks
from negutils.methods import benchmark_phrasing, check_truth
from negutils.methods.training_data import PROTOCOLS, build_negation_data, mcq_accuracy, protocol_view
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = build_world(WorldConfig(pretrain=4, negtrain=400, val=4, ood=4, seed=11),
                       tmp_path_factory.mktemp("w") / "w", progress=False)
    return load_split(root / "negtrain")


@pytest.fixture(scope="module")
def data(split):
    return build_negation_data(split, seed=0)


def test_negcap_is_true_present_object_negations_false_and_one_true_option_per_negmcq(data):
    assert check_truth(data) == {"NegCap captions false of their image": 0,
                                 "present-object negations true of their image": 0,
                                 "NegMCQ questions without exactly one true option": 0}
    objects = data.split.objects
    assert len(data.negcap) > 2 * len(data.affirmative) and len(data.false_negation) > 100
    for row in data.negcap.itertuples():
        assert row.object not in objects[row.image_index] and row.object in data.captions[row.caption]
    for row in data.false_negation.itertuples():
        assert row.object in objects[row.image_index]
    # App. 0.J's question: the correct option is the affirmative caption, its negation is among the rest
    negated = dict(zip(data.false_negation["image_index"], data.false_negation["caption"]))
    for row in data.counterpart_mcq.itertuples():
        options = [getattr(row, f"option_{k}") for k in range(4)]
        assert negated[row.image_index] in options and options[row.correct] != negated[row.image_index]


def test_check_truth_catches_a_false_negcap_caption(data):
    broken = build_negation_data(data.split, seed=0)
    present = next(iter(broken.split.objects[int(broken.negcap["image_index"].iloc[0])]))
    broken.negcap.loc[0, "object"] = present
    assert check_truth(broken)["NegCap captions false of their image"] == 1


def test_negmcq_templates_and_positions_are_balanced_within_binomial_error(data):
    n = len(data.negmcq)
    for column, values in (("template", ("positive", "negative", "hybrid")), ("correct", (0, 1, 2, 3))):
        p = 1 / len(values)
        counts = data.negmcq[column].value_counts()
        for v in values:
            assert abs(counts.get(v, 0) - n * p) <= 4 * np.sqrt(n * p * (1 - p)), (column, v, counts.to_dict())
    assert data.negmcq["image_index"].is_unique            # NegBench: one question per image


def test_no_training_caption_uses_a_benchmark_phrasing(data, split):
    hits = [(c, benchmark_phrasing(c, split.categories)) for c in data.captions]
    assert [h for h in hits if h[1]] == []


def test_the_phrasing_check_finds_every_benchmark_caption(tmp_path_factory):
    root = build_world(WorldConfig(pretrain=4, negtrain=4, val=400, ood=4, seed=12),
                       tmp_path_factory.mktemp("w") / "w", progress=False)
    val = load_split(root / "val")
    frames = build_benchmarks(val, BenchmarkConfig(confusion=ConfusionConfig(m_min=2, m_max=40),
                                                   factor=FactorConfig(operator_samples=20)))
    captions = {
        "MCQ": [c for k in range(4) for c in frames["mcq"][f"caption_{k}"]],
        "Retrieval-Neg": list(frames["retrieval_negated"]["query"]),
        "COCO-Confusion": list(frames["confusion_2c"]["query"]) + list(frames["confusion_3c"]["query"]),
        "FACTOR": list(frames["factor"]["caption_0"]) + list(frames["factor"]["caption_1"]),
        "VALSE": list(frames["existence"]["caption_0"]) + list(frames["existence"]["caption_1"]),
    }
    for name, texts in captions.items():
        assert texts, name
        missed = [t for t in texts if benchmark_phrasing(t, val.categories) is None]
        assert missed == [], (name, missed[:3])


def test_protocols_differ_exactly_in_what_they_train_on(data):
    negcap, affirmative = set(data.negcap["caption"]), set(data.affirmative["caption"])
    false = set(data.false_negation["caption"])
    views = {name: protocol_view(data, name) for name in PROTOCOLS}
    for name, view in views.items():
        positives, negatives = set(view.positive_ids.tolist()), set(view.negative_ids.tolist())
        assert affirmative & positives and not positives & false
        assert bool(positives & negcap) == PROTOCOLS[name].negcap_positives
        assert (negatives == (false & negatives) and bool(negatives)) == PROTOCOLS[name].hard_negatives
        assert set(view.images.tolist()) <= set(data.train_images.tolist())
    negmcq = set(data.negmcq[[f"option_{k}" for k in range(4)]].to_numpy().ravel().tolist())
    assert set(views["negbench"].mcq_options[views["negbench"].mcq_correct >= 0].ravel().tolist()) <= negmcq
    assert (views["hard-negatives"].mcq_correct >= 0).sum() < len(views["hard-negatives"].images)


def test_a_batch_indexes_its_own_captions(data):
    view = protocol_view(data, "mixed")
    batch = view.batch(np.arange(32), np.random.default_rng(0))
    ids = batch["captions"]
    assert len(batch["positives"]) == 32 and len(set(ids.tolist())) == len(ids)
    for k, row in enumerate(range(32)):
        lo, hi = view.positive_offsets[row], view.positive_offsets[row + 1]
        assert ids[batch["positives"][k]] in view.positive_ids[lo:hi]
    for q, row in enumerate(batch["mcq_rows"]):
        assert list(ids[batch["mcq"][q]]) == list(view.mcq_options[row])


def test_held_out_images_are_disjoint_and_same_seed_same_data(data, split):
    assert not set(data.train_images) & set(data.held_images)
    assert len(data.held_out_mcq()) == len(data.held_images)
    again, other = build_negation_data(split, seed=0), build_negation_data(split, seed=1)
    assert again.captions == data.captions and again.negmcq.equals(data.negmcq)
    assert other.captions != data.captions


def test_subset_keeps_rows_and_captions_consistent(data):
    images = data.train_images[:50].tolist() + data.held_images[:10].tolist()
    sub = data.subset(images)
    assert set(sub.affirmative["image_index"]) <= set(images) and len(sub.held_images) == 10
    for name in ("affirmative", "negcap"):
        full, part = getattr(data, name), getattr(sub, name)
        full = full[full["image_index"].isin(images)]
        assert [data.captions[c] for c in full["caption"]] == [sub.captions[c] for c in part["caption"]]
    for a, b in zip(sub.negmcq.itertuples(), data.negmcq[data.negmcq["image_index"].isin(images)].itertuples()):
        assert [sub.captions[getattr(a, f"option_{k}")] for k in range(4)] == \
               [data.captions[getattr(b, f"option_{k}")] for k in range(4)]
    assert json.loads(sub.negmcq["claims_0"].iloc[0])


def test_mcq_accuracy_splits_ties_and_refuses_nan():
    scores = np.array([[0.5, 0.1, 0.1, 0.1], [0.3, 0.3, 0.1, 0.0], [0.1, 0.9, 0.2, 0.2]])
    assert mcq_accuracy(scores, [0, 0, 1]) == pytest.approx(2.5 / 3)
    assert mcq_accuracy(np.ones((4, 4)), [0, 0, 0, 0]) == 0.25        # indifference is chance, in column 0 too
    with pytest.raises(NonFiniteScores, match="first rows \\[0\\]"):
        mcq_accuracy(np.array([[np.nan, 0.1, 0.1, 0.1]]), [0])
