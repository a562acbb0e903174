import json

import pandas as pd
import pytest

from negutils.benchmarks.negbench import (MCQ_COLUMNS, BenchmarkFileError, MCQConfig, build_mcq, build_retrieval,
                                          claims_hold, read_mcq_csv, write_mcq_csv)
from negutils.benchmarks.paraphrase import PHRASINGS, paraphrase
from negutils.world.coco import load_split


@pytest.fixture(scope="module")
def val(tiny_world):
    return load_split(tiny_world / "val")


@pytest.fixture(scope="module")
def mcq(val):
    return build_mcq(val, MCQConfig(seed=1))


def test_schema_and_one_question_per_image_as_negbench_builds_it(mcq, val):
    assert list(mcq.columns[:len(MCQ_COLUMNS)]) == MCQ_COLUMNS
    assert mcq["image_id"].is_unique and len(mcq) == len(val)
    assert set(mcq["correct_answer_template"]) == {"positive", "negative", "hybrid"}
    three = build_mcq(val, MCQConfig(seed=1, questions_per_image=3))
    assert three.groupby("image_id").size().max() == 3 and three.groupby("image_id")[
        "correct_answer_template"].nunique().max() == 3


def test_exactly_one_option_is_true_under_the_ground_truth(mcq, val):
    objects = dict(zip(val.image_ids, val.objects))
    for row in mcq.itertuples():
        truth = [claims_hold(json.loads(getattr(row, f"caption_{k}_claims")), objects[row.image_id]) for k in range(4)]
        assert truth == [k == row.correct_answer for k in range(4)], row


def test_option_types_follow_negbench(mcq):
    for row in mcq.itertuples():
        types = [getattr(row, f"caption_{k}_type") for k in range(4)]
        assert types[row.correct_answer] == "correct"
        assert sorted(t for t in types if t != "correct") == ["hybrid", "negative", "positive"]


def test_correct_positions_are_balanced(mcq):
    counts = mcq["correct_answer"].value_counts()
    assert set(counts.index) == {0, 1, 2, 3} and counts.max() - counts.min() <= 1


def test_construction_is_deterministic_by_seed(val, tmp_path):
    a = write_mcq_csv(build_mcq(val, MCQConfig(seed=1)), tmp_path / "a.csv")
    b = write_mcq_csv(build_mcq(val, MCQConfig(seed=1)), tmp_path / "b.csv")
    c = write_mcq_csv(build_mcq(val, MCQConfig(seed=2)), tmp_path / "c.csv")
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_csv_round_trip_and_image_root(mcq, val, tmp_path):
    path = write_mcq_csv(mcq, tmp_path / "mcq.csv")
    back = read_mcq_csv(path, image_root=val.image_root, check_images=True)
    pd.testing.assert_frame_equal(back.drop(columns="image_path"), mcq.drop(columns="image_path"), check_dtype=False)
    assert all(p.startswith(str(val.image_root)) for p in back["image_path"])


def test_published_negbench_layout_loads_with_remapped_absolute_paths(val, tmp_path):
    # NegBench's published CSVs: absolute paths from the authors' machine, correct answer first,
    # an index column, no type columns.
    name = val.file_names[0]
    published = pd.DataFrame({"Unnamed: 0": [0], "image_path": [f"/home/someone/data/{name}"], "correct_answer": [0],
                              "caption_0": ["This image features a cup."], "caption_1": ["x"], "caption_2": ["y"],
                              "caption_3": ["z"], "correct_answer_template": ["positive"]})
    published.to_csv(tmp_path / "COCO_val_mcq_llama3.1_rephrased.csv", index=False)
    frame = read_mcq_csv(tmp_path / "COCO_val_mcq_llama3.1_rephrased.csv", image_root=val.image_root, check_images=True)
    assert frame["image_path"].iloc[0] == str(val.image_root / name)
    assert [frame[f"caption_{k}_type"].iloc[0] for k in range(4)] == ["correct", "hybrid", "positive", "negative"]


@pytest.mark.parametrize("mutate, message", [
    (lambda f: f.drop(columns="caption_2"), r"missing column\(s\) \['caption_2'\]"),
    (lambda f: f.assign(correct_answer_template="affirmative"), r"row 0 has correct_answer_template 'affirmative'"),
    (lambda f: f.assign(correct_answer=7), r"row 0 has correct_answer '7'"),
    (lambda f: f.assign(caption_1=""), r"row 0 has an empty caption in column caption_1"),
])
def test_bad_csv_names_file_and_field(mcq, tmp_path, mutate, message):
    path = tmp_path / "bad.csv"
    mutate(mcq.head(3)).to_csv(path, index=False)
    with pytest.raises(BenchmarkFileError, match=rf"bad\.csv: {message}"):
        read_mcq_csv(path)


def test_missing_images_are_counted_and_listed(mcq, tmp_path):
    path = write_mcq_csv(mcq.head(4), tmp_path / "mcq.csv")
    with pytest.raises(FileNotFoundError, match=r"mcq\.csv: 4 of 4 images are missing \(or not files\) under .*e\.g\."):
        read_mcq_csv(path, image_root=tmp_path / "nowhere", check_images=True)


def test_paraphraser_has_several_phrasings_and_a_hook():
    assert all(len(v) >= 5 for v in PHRASINGS.values())
    slots = {"A": "a cup", "B": "a star", "N": "a moon", "n": "moon"}
    assert paraphrase("hybrid", slots, None) == "This image features a star, but not a moon."
    assert paraphrase("negative", slots, None,
                      rephraser=lambda c, s: c.upper()) == "THIS IMAGE DOES NOT FEATURE A MOON."
    with pytest.raises(ValueError, match="rephraser returned an empty caption"):
        paraphrase("negative", slots, None, rephraser=lambda c, s: " ")
    with pytest.raises(ValueError, match="unknown template kind 'affirmative'"):
        paraphrase("affirmative", slots, None)


def test_retrieval_neg_ground_truth(val):
    affirmative, negated = build_retrieval(val, seed=0)
    assert len(affirmative) == len(val)
    objects = dict(zip(val.image_ids, val.objects))
    for row in negated.itertuples():
        assert row.negated_object not in objects[row.image_id]
        assert row.query.endswith(f"There is no {row.negated_object}.") or \
            row.query.startswith(f"There is no {row.negated_object} in the image.")
        positives = json.loads(row.positives)
        assert row.image_id in positives
        assert all(row.negated_object not in objects[i] for i in positives)
    assert set(negated["template"]) == {"suffix", "prefix"}
