"""Chapter 00's diagnoses (object recognition, negation cosines) with a fake backbone whose
embeddings are chosen by hand, so every AUC, accuracy and cosine is known."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from negutils.diagnosis import negation_cosines, object_recognition
from negutils.world.coco import CocoSplit

CATEGORIES = ["cat", "dog", "star", "owl"]
E = {c: torch.eye(len(CATEGORIES) + 1)[k] for k, c in enumerate(CATEGORIES)}
NO = torch.eye(len(CATEGORIES) + 1)[len(CATEGORIES)]      # an extra axis for the word "no"


class FakeBackbone:
    """encode_text looks captions up in ``text`` (an unknown caption is an error, so the prompts
    the diagnosis builds are checked too); encode_images returns ``images`` whatever it is given."""

    def __init__(self, text: dict, images: torch.Tensor | None = None):
        self.text, self.images, self.seen = text, images, []

    def encode_text(self, captions):
        self.seen += list(captions)
        return torch.stack([F.normalize(self.text[c], dim=0) for c in captions])

    def encode_images(self, images, **kwargs):
        return self.images


# images: 0 cat, 1 dog, 2 star, 3 cat and dog, 4 star (drawn faintly, mostly looks like a cat), 5 dog; no owl anywhere
IMAGES = torch.stack([E["cat"], E["dog"], E["star"], E["cat"] + E["dog"], 0.2 * E["star"] + 0.6 * E["cat"], E["dog"]])
OBJECTS = [{"cat"}, {"dog"}, {"star"}, {"cat", "dog"}, {"star"}, {"dog"}]
PROMPTS = {"This image features a cat.": E["cat"], "This image features a dog.": E["dog"],
           "This image features a star.": E["star"] + E["cat"],          # the star prompt also matches cats
           "This image features an owl.": E["owl"]}


@pytest.fixture
def split():
    n = len(OBJECTS)
    return CocoSplit(name="val", image_root=Path("."), image_ids=list(range(n)),
                     file_names=[f"{i}.png" for i in range(n)],
                     objects=[frozenset(o) for o in OBJECTS], captions=[[] for _ in range(n)], categories=CATEGORIES)


def test_object_recognition_known_auc_and_accuracy(split):
    backbone = FakeBackbone(PROMPTS)
    table, summary = object_recognition(backbone, split, image_embeddings=IMAGES)
    assert backbone.seen == list(PROMPTS)
    table = table.set_index("category")
    assert table["images with it"].tolist() == [2, 3, 2, 0]
    # star column: 0.707 (0), 0 (1), 0.707 (2), 0.707 (3), 0.566 (4), 0 (5); star images 2 and 4 against
    # 0, 1, 3, 5: 0.707 ties twice and beats two zeros, 0.566 beats the zeros -> (0.5 + 1 + 0.5 + 1 + 1 + 1) / 8
    assert table.loc["cat", "detection AUC"] == 1.0 and table.loc["dog", "detection AUC"] == 1.0
    assert table.loc["star", "detection AUC"] == pytest.approx(0.625)
    assert np.isnan(table.loc["owl", "detection AUC"])                   # no image has an owl
    # one-object images 0, 1, 2, 4, 5; image 4 scores cat 0.6 above star 0.8 / sqrt(2) = 0.566
    col = "zero-shot accuracy (one-object images)"
    assert table.loc[["cat", "dog", "star"], col].tolist() == [1.0, 1.0, 0.5] and np.isnan(table.loc["owl", col])
    assert summary["zero-shot accuracy"] == 0.8 and summary["one-object images"] == 5
    assert summary["mean detection AUC"] == pytest.approx(2.625 / 3)
    assert summary["chance accuracy"] == 0.25 and summary["split"] == "val"


def test_object_recognition_encodes_the_split_when_no_embeddings_are_given(split):
    given = object_recognition(FakeBackbone(PROMPTS), split, image_embeddings=IMAGES)
    encoded = object_recognition(FakeBackbone(PROMPTS, images=IMAGES), split)
    pd.testing.assert_frame_equal(given[0], encoded[0])
    assert given[1] == encoded[1]


def test_object_recognition_uses_the_template(split):
    text = {f"{c} here": v for c, v in (("cat", E["cat"]), ("dog", E["dog"]), ("star", E["star"]), ("owl", E["owl"]))}
    table, summary = object_recognition(FakeBackbone(text), split, template="{x} here", image_embeddings=IMAGES)
    # with a clean star prompt image 4 is still read as a cat (0.6 > 0.2), the others are right
    assert summary["template"] == "{x} here" and summary["zero-shot accuracy"] == 0.8
    assert table.set_index("category").loc["star", "detection AUC"] == 1.0


def _cosine_encoder(negated_axis):
    text = {}
    for c in ["cat", "dog", "apple"]:
        e = torch.zeros(5)
        e[["cat", "dog", "apple"].index(c)] = 1.0
        article = "an" if c == "apple" else "a"
        text[f"a photo of {article} {c}"] = e
        text[f"a photo of no {c}"] = negated_axis(e)
    return FakeBackbone(text)


def test_a_negation_blind_encoder_puts_no_x_next_to_a_x():
    blind = _cosine_encoder(lambda e: e + torch.eye(5)[4])             # "no X" = X plus a shared "no" direction
    frame = negation_cosines(blind, ["cat", "dog", "apple"])
    same = frame[frame["pair"] == "a X vs no X"]
    other = frame[frame["pair"] == "a X vs a Y"]
    assert same["x"].tolist() == ["cat", "dog", "apple"] and (same["x"] == same["y"]).all()
    assert np.allclose(same["cosine"], 1 / np.sqrt(2))
    assert sorted(zip(other["x"], other["y"])) == [("cat", "apple"), ("cat", "dog"), ("dog", "apple")]
    assert np.allclose(other["cosine"], 0.0)


def test_a_negation_aware_encoder_puts_no_x_opposite_a_x():
    aware = _cosine_encoder(lambda e: -e)
    frame = negation_cosines(aware, ["cat", "dog", "apple"])
    assert np.allclose(frame.loc[frame["pair"] == "a X vs no X", "cosine"], -1.0)


def test_negation_cosines_follow_the_templates():
    text = {"cat!": E["cat"], "dog!": E["cat"] + E["dog"], "not cat": E["dog"], "not dog": E["dog"]}
    frame = negation_cosines(FakeBackbone(text), ["cat", "dog"], affirmative="{x}!", negated="not {x}")
    # cat! . not cat = 0; dog! . not dog = 1/sqrt(2); cat! . dog! = 1/sqrt(2)
    assert frame["pair"].tolist() == ["a X vs no X", "a X vs no X", "a X vs a Y"]
    assert np.allclose(frame["cosine"], [0.0, 1 / np.sqrt(2), 1 / np.sqrt(2)])


def test_organism_targets_judge_each_measure_and_convergence():
    from negutils.diagnosis import organism_targets

    recognition = {"mean detection AUC": 0.86, "zero-shot accuracy": 0.79}
    curve = pd.DataFrame({"samples": [0, 100, 200], "t2i_R@5": [0.01, 0.40, 0.405]})
    table = organism_targets(recognition, {"t2i_R@5": 0.45}, curve).set_index("measure")
    assert table.loc["mean detection AUC", "met"] and not table.loc["zero-shot accuracy", "met"]
    assert table.loc["t2i_R@5", "met"]                                # the bound is inclusive
    converged = table.loc["held-out R@5 change, last two evaluations"]
    assert converged["value"] == pytest.approx(0.005) and converged["met"]
    rising = organism_targets(recognition, {"t2i_R@5": 0.3}, curve.assign(**{"t2i_R@5": [0.0, 0.2, 0.3]}))
    assert not rising.set_index("measure").loc["held-out R@5 change, last two evaluations", "met"]
    loaded = organism_targets(recognition, {"t2i_R@5": 0.3}, None).iloc[-1]
    assert np.isnan(loaded["value"]) and loaded["met"] is None         # a loaded checkpoint: not measured
    with pytest.raises(KeyError, match="t2i_R@5"):
        organism_targets(recognition, {}, curve)
