"""COCO-Confusion, FACTOR-Bench and VALSE-style pairs: definitions hold on every sample."""
import dataclasses
import json

import pytest

from negutils.benchmarks import confusing_density, excluded_category, verification_report
from negutils.benchmarks.confusion import ConfusionConfig, build_confusion
from negutils.benchmarks.factor import FORMS, FactorConfig, build_factor
from negutils.benchmarks.valse import build_existence
from negutils.core.logic import flat, holds, literal, nested
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    # a denser world than the shared fixture, so that 2C and 3C galleries exist
    root = build_world(WorldConfig(pretrain=4, negtrain=4, val=600, ood=4, seed=5), tmp_path_factory.mktemp("w") / "w",
                       progress=False)
    return load_split(root / "val")


@pytest.mark.parametrize("kind", ["2C", "3C"])
def test_confusion_galleries_satisfy_their_definitions(split, kind):
    cfg = ConfusionConfig(m_min=5, m_max=12)
    galleries = build_confusion(split, kind, cfg)
    assert len(galleries) > 0
    objects = dict(zip(split.image_ids, split.objects))
    for g in galleries.itertuples():
        positives = json.loads(g.positives)
        assert len(positives) == (1 if kind == "2C" else 2)
        correct, confusing = json.loads(g.correct_ids), json.loads(g.confusing_ids)
        assert cfg.m_min <= len(correct) <= cfg.m_max and cfg.m_min <= len(confusing) <= cfg.m_max
        assert all(set(positives) <= objects[i] and g.negative not in objects[i] for i in correct)
        assert all(set(positives) <= objects[i] and g.negative in objects[i] for i in confusing)
        assert g.query.endswith(f"present but no {g.negative}.")


def test_confusion_is_deterministic_and_a_verifier_filters(split):
    cfg = ConfusionConfig(m_min=5, m_max=12)
    a, b = build_confusion(split, "2C", cfg), build_confusion(split, "2C", cfg)
    assert a.equals(b)
    # a detector that never sees the negated concept empties every confusing set: no gallery survives
    blind = build_confusion(split, "2C", cfg,
                            verifier=lambda i, concepts: {c: 0.9 for c in concepts[:-1]} | {concepts[-1]: 0.0})
    assert len(blind) == 0
    exact = build_confusion(split, "2C", cfg,
                            verifier=lambda i, concepts: {c: float(c in split.objects[i]) for c in concepts})
    assert exact.equals(a)
    assert "no detector verification is needed" in verification_report(None, "embedded")


def test_curated_galleries_are_denser_in_confusing_images(split):
    density = confusing_density(build_confusion(split, "2C", ConfusionConfig(m_min=5, m_max=12)), split)
    assert (density["confusing density (curated)"] > density["confusing density (standard retrieval)"]).all()


def test_bad_kind_is_rejected(split):
    with pytest.raises(ValueError, match="'2C' or '3C'"):
        build_confusion(split, "4C")


def test_logic_truth_tables():
    a_but_not_b = flat("AND", literal("a"), literal("b", True))
    assert holds(a_but_not_b, {"a"}) and not holds(a_but_not_b, {"a", "b"})
    assert holds(flat("OR", literal("a"), literal("b")), {"b"})
    tree = nested("OR", flat("AND", literal("a"), literal("b")), flat("SINGLE", literal("c")))
    assert holds(tree, {"c"}) and not holds(tree, {"a"})


@pytest.fixture(scope="module")
def factor(split):
    return build_factor(split, FactorConfig(operator_samples=40, equivalence_samples=(("De Morgan", 10),
                        ("double negation", 10), ("commutativity", 10)), compound_samples=20, nested_samples=10))


def test_every_factor_sample_is_decided_by_its_oracle_parse(factor, split):
    objects = dict(zip(split.image_ids, split.objects))
    for s in factor.itertuples():
        truth = [holds(json.loads(getattr(s, f"parse_{k}")), objects[s.image_id]) for k in (0, 1)]
        assert truth == [k == s.correct for k in (0, 1)], s


def test_factor_covers_every_split_and_operator(factor, split):
    assert set(factor["split"]) == {"operator", "equivalence", "compound", "nested"}
    assert set(factor[factor.split == "operator"]["test"]) == {"NOT", "AND", "OR", "BUT-NOT", "NEITHER"}
    dropped = excluded_category(split)
    assert not any(dropped in json.loads(c) for c in factor["concepts"])
    assert all(len(v) >= 5 for v in FORMS.values())


def test_factor_caps_polarity_and_positions(factor):
    ops = factor[factor.split == "operator"]
    for test, group in ops.groupby("test"):
        per_concept = {}
        for c in group["concepts"]:
            for name in json.loads(c):
                per_concept[name] = per_concept.get(name, 0) + 1
        assert max(per_concept.values()) <= 10, test
        pairs = group["concepts"].map(lambda c: frozenset(json.loads(c))).value_counts()
        assert pairs.max() <= 5, test
    negation = ops[ops.test.isin(["NOT", "BUT-NOT", "NEITHER"])]
    negated_correct = [('"negated": true' in (s.parse_0 if s.correct == 0 else s.parse_1))
                       for s in negation.itertuples()]
    assert 0.35 <= sum(negated_correct) / len(negated_correct) <= 0.65
    assert 0.3 <= factor["correct"].mean() <= 0.7


def test_factor_is_deterministic(split, factor):
    again = build_factor(split, FactorConfig(operator_samples=40, equivalence_samples=(("De Morgan", 10),
                         ("double negation", 10), ("commutativity", 10)), compound_samples=20, nested_samples=10))
    assert again.equals(factor)


def test_existence_pairs(split):
    pairs = build_existence(split, n_samples=100, seed=0)
    objects = dict(zip(split.image_ids, split.objects))
    for s in pairs.itertuples():
        right = getattr(s, f"caption_{s.correct}")
        assert ("There are no " in right) == (s.concept not in objects[s.image_id])
    assert 0.4 <= pairs["negated_is_correct"].mean() <= 0.6


def test_benchmark_files_are_byte_identical_and_cached(split, tmp_path):
    from negutils.benchmarks.suite import NAMES, BenchmarkConfig, ensure_benchmarks

    cfg = BenchmarkConfig(confusion=ConfusionConfig(m_min=5, m_max=12),
                          factor=FactorConfig(operator_samples=10, equivalence_samples=(("De Morgan", 4),),
                                              compound_samples=4, nested_samples=4), existence_samples=40)
    a = ensure_benchmarks(split, cfg, tmp_path / "a", "key")
    b = ensure_benchmarks(split, cfg, tmp_path / "b", "key")
    for name in NAMES:
        assert (a.root / f"{name}.csv").read_bytes() == (b.root / f"{name}.csv").read_bytes(), name
    mtime = (a.root / "mcq.csv").stat().st_mtime_ns
    again = ensure_benchmarks(split, cfg, tmp_path / "a", "key")
    assert (again.root / "mcq.csv").stat().st_mtime_ns == mtime and again.mcq.equals(a.mcq)
    assert ensure_benchmarks(split, cfg, tmp_path / "a", "other-world").root != a.root


def test_cpu_factor_operator_counts_follow_lcse_table_3(tmp_path):
    """LCSE Table 3's "All" weights operators by their sample counts; the cpu profile's operator
    split has exactly those counts, so our "All" is the same weighted mean."""
    from negutils.benchmarks.factor import PAPER_OPERATOR_COUNTS
    from negutils.config import get_profile

    cpu = get_profile("cpu")
    root = build_world(dataclasses.replace(cpu.world, pretrain=4, negtrain=4, ood=4), tmp_path / "w", progress=False)
    frame = build_factor(load_split(root / "val"), cpu.benchmarks.factor)
    counts = frame[frame["split"] == "operator"]["test"].value_counts().to_dict()
    assert counts == dict(PAPER_OPERATOR_COUNTS)
    with pytest.raises(ValueError, match="unknown operators"):
        build_factor(load_split(root / "val"), FactorConfig(operator_samples=(("XOR", 5),)))
