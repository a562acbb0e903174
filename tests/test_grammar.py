"""The caption grammar states only what the image shows, fits the text context, and is deterministic."""
import json
import re
from collections import Counter

import numpy as np
import pytest

from negutils.benchmarks.negbench import RETRIEVAL_TEMPLATES
from negutils.core.phrasing import NEGATION_TEMPLATES
from negutils.models.backbone import get_tokenizer
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, generate_split
from negutils.world.glyphs import CATEGORY_NAMES
from negutils.world import alt_text
from negutils.world.glyphs import COLOURS
from negutils.world.grammar import STRUCTURES

NOUN = "|".join(sorted(CATEGORY_NAMES, key=len, reverse=True))
COLOUR = "|".join(COLOURS)
PHRASE = re.compile(rf"\b(?:a|an)\s+(?:(small|large)\s+)?(?:({COLOUR})\s+)?({NOUN})\b", re.IGNORECASE)
COUNT = re.compile(r"\b(one|two|three|four|five|six)\s+(?:objects?|shapes?|things?)\b", re.IGNORECASE)
RELATION = re.compile(rf"\b({NOUN})\s+(?:that is\s+)?(to the left of|to the right of|above|below)\s+"
                      rf"(?:a|an)\s+(?:(?:small|large|{COLOUR})\s+)*({NOUN})\b")
NUMBERS = ("one", "two", "three", "four", "five", "six")


@pytest.fixture(scope="module")
def structured_split(tmp_path_factory):
    # every structure at once, on images with up to four objects
    config = WorldConfig(pretrain=400, negtrain=4, val=4, ood=4, seed=11, structure_mix=(1, 1, 1, 1, 1))
    out = tmp_path_factory.mktemp("grammar") / "pretrain"
    generate_split(config, "pretrain", out, progress=False)
    split = load_split(out)
    # per image: category -> (colour, centre x, centre y, mean side, w, h), from instances.json
    instances = json.loads((out / "instances.json").read_text())
    names = {c["id"]: c["name"] for c in instances["categories"]}
    truth = {im["id"]: {} for im in instances["images"]}
    for ann in instances["annotations"]:
        x, y, w, h = ann["bbox"]
        truth[ann["image_id"]][names[ann["category_id"]]] = (ann["colour"], x + w / 2, y + h / 2, (w + h) / 2, w, h)
    split.truth = [truth[image_id] for image_id in split.image_ids]
    return config, split


def test_every_structure_occurs_and_is_recorded(structured_split):
    _, split = structured_split
    counts = Counter(c["structure"] for per in split.captions for c in per)
    assert set(counts) == set(STRUCTURES), counts
    assert all(counts[s] >= 100 for s in STRUCTURES), counts


def test_every_stated_attribute_count_and_relation_holds(structured_split):
    config, split = structured_split
    size = config.image_size
    checked = Counter()
    for i, captions in enumerate(split.captions):
        truth = split.truth[i]
        for cap in captions:
            text = cap["caption"]
            for size_word, colour, noun in PHRASE.findall(text):
                if noun in cap["negated"]:
                    continue
                assert noun in truth, (text, noun)
                if colour:
                    assert truth[noun][0] == colour, (text, truth)
                    checked["colour"] += 1
                if size_word == "small":
                    assert truth[noun][3] < 0.3 * size, (text, truth[noun])
                    checked["size"] += 1
                if size_word == "large":
                    assert truth[noun][3] > 0.45 * size, (text, truth[noun])
                    checked["size"] += 1
            for number in COUNT.findall(text):
                assert NUMBERS.index(number.lower()) + 1 == len(truth), (text, truth)
                checked["count"] += 1
            for a, rel, b in RELATION.findall(text):
                _, ax, ay, _, aw, ah = truth[a]
                _, bx, by, _, bw, bh = truth[b]
                holds = {"to the left of": bx - ax > (aw + bw) / 4, "to the right of": ax - bx > (aw + bw) / 4,
                         "above": by - ay > (ah + bh) / 4, "below": ay - by > (ah + bh) / 4}[rel]
                assert holds, (text, truth)
                checked["relation"] += 1
    assert min(checked[k] for k in ("colour", "size", "count", "relation")) >= 100, checked


def test_relative_clauses_and_relations_name_every_object_of_the_first_caption(structured_split):
    _, split = structured_split
    for i, captions in enumerate(split.captions):
        first = captions[0]
        if first["negated"]:
            continue
        named = {noun for *_, noun in PHRASE.findall(first["caption"])}
        assert named == set(split.objects[i]), first


def test_captions_fit_the_context_with_any_negation_appended(structured_split):
    _, split = structured_split
    tokenizer = get_tokenizer("negbook-tiny")
    longest_noun = max(CATEGORY_NAMES, key=lambda n: len(tokenizer.encode(n)))
    worst = 0
    for per in split.captions:
        for cap in per:
            # PeakPatch's negations (training data, the diagnostic set) and NegBench's Retrieval-Neg queries
            for template in NEGATION_TEMPLATES + tuple(RETRIEVAL_TEMPLATES.values()):
                text = template.format(caption=cap["caption"].rstrip("."), caption_lower=cap["caption"],
                                       a_obj=f"an {longest_noun}", obj=longest_noun, n=longest_noun)
                worst = max(worst, len(tokenizer.encode(text)) + 2)
    assert worst <= 32, worst


def test_same_seed_same_captions_and_a_structure_nobody_can_state_falls_back_to_a_list():
    objects = [("star", "red", (2.0, 20.0, 18.0, 18.0)), ("moon", "blue", (40.0, 22.0, 18.0, 18.0))]

    def captions(seed, mix):
        return alt_text.make_captions(objects, ["cup"], "plain", np.random.default_rng(seed), 20, 0.0, 0.5, 64, mix)

    assert captions(1, (1, 1, 1, 1, 1)) == captions(1, (1, 1, 1, 1, 1))
    assert captions(1, (1, 1, 1, 1, 1)) != captions(2, (1, 1, 1, 1, 1))
    relations = captions(3, (0, 0, 1, 0, 0))
    assert all(c["structure"] == "relation" for c in relations if len(c["mentioned"]) == 2)
    assert all("star to the left of" in c["caption"] or "moon to the right of" in c["caption"]
               for c in relations if len(c["mentioned"]) == 2)
    # a relation between overlapping boxes is never stated: the caption is a list instead
    overlapping = [("star", "red", (20.0, 20.0, 18.0, 18.0)), ("moon", "blue", (22.0, 21.0, 18.0, 18.0))]
    fallback = alt_text.make_captions(overlapping, ["cup"], "plain", np.random.default_rng(0), 10, 0.0, 0.5, 64,
                                      (0, 0, 1, 0, 0))
    assert {c["structure"] for c in fallback} == {"list"}


def test_a_structure_mix_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="structure_mix"):
        WorldConfig(structure_mix=(1.0, 0.0))


def test_caption_structures_are_percent_shares_of_each_split(structured_split):
    from negutils.world import caption_structures

    _, split = structured_split
    table = caption_structures({"pretrain": split})
    counts = Counter(c["structure"] for per in split.captions for c in per)
    total = sum(counts.values())
    assert table.loc["pretrain"].sum() == pytest.approx(100, abs=0.3)
    for structure, n in counts.items():
        assert table.loc["pretrain", structure] == pytest.approx(100 * n / total, abs=0.051)   # rounded to 0.1
