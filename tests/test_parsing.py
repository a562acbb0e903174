"""The caption parser on every example the seeds print, on each benchmark's templates, and on
captions it must refuse rather than guess."""
import json
from types import SimpleNamespace

import pytest

from negutils.core.logic import canonical
from negutils.methods import parse_captions
from negutils.methods.parsing import fallback_rate, parse_ktn, parse_lcse


def flat(op, *lits):
    return {"operator": op, "concepts": [{"name": n.rstrip("-"), "negated": n.endswith("-")} for n in lits]}


# LCSE Table 7, verbatim captions; "-" marks a negated concept
TABLE_7 = [("a dog and a cat", flat("AND", "dog", "cat")),
           ("a dog chasing a cat", flat("NONE", "dog chasing", "cat")),
           ("no dog", flat("SINGLE", "dog-")),
           ("dog but not cat", flat("AND", "dog", "cat-")),
           ("neither dog nor cat", flat("AND", "dog-", "cat-")),
           ("a man with a beard", flat("SINGLE", "man with beard")),
           ("no smoking sign", flat("SINGLE", "no smoking sign"))]

# the other captions the seeds print: KTN sec. 1-3 and App. D, LCSE sec. 5.1's FACTOR sample
SEED_EXAMPLES = [("a cat without a dog", flat("AND", "cat", "dog-")),
                 ("A photo of a cat without a dog", flat("AND", "cat", "dog-")),
                 ("a car without a traffic light", flat("AND", "car", "traffic light-")),
                 ("a car is present but no traffic light", flat("AND", "car", "traffic light-")),
                 ("an apple and banana are present but no bowl.", flat("AND", "apple", "banana", "bowl-")),
                 ("a cat is present but no dog.", flat("AND", "cat", "dog-")),
                 ("car", flat("SINGLE", "car")), ("car and bicycle", flat("AND", "car", "bicycle")),
                 ("no bicycle", flat("SINGLE", "bicycle-")), ("car or bicycle", flat("OR", "car", "bicycle"))]

BENCHMARK_TEMPLATES = [
    ("This image does not feature a cup.", flat("SINGLE", "cup-")),                       # NegBench negative
    ("This image features a house, but not a fish.", flat("AND", "house", "fish-")),      # NegBench hybrid
    ("This image features a kite and a boat.", flat("AND", "kite", "boat")),              # NegBench positive
    ("A frame is not present in this image.", flat("SINGLE", "frame-")),
    ("A house is included, but there's no heart.", flat("AND", "house", "heart-")),
    ("The picture contains a ring, without a tree.", flat("AND", "ring", "tree-")),
    ("There is no kite in the image. this image features an umbrella and a black bolt.",
     flat("AND", "kite-", "umbrella", "black bolt")),                                      # Retrieval-Neg
    ("A car is present but no traffic light.", flat("AND", "car", "traffic light-")),     # COCO-Confusion 2C
    ("A kite and a boat are present but no car.", flat("AND", "kite", "boat", "car-")),   # 3C
    ("There are no boats.", flat("SINGLE", "boat-")),                                     # VALSE existence
    ("Without a kite or a boat.", flat("AND", "kite-", "boat-")),                         # FACTOR NEITHER
    ("Either a kite or a boat.", flat("OR", "kite", "boat")),
    ("A kite is not missing.", flat("SINGLE", "kite")),                                   # double negation
    ("It is not true that there is no kite.", flat("SINGLE", "kite")),
    ("A kite is lacking from the scene.", flat("SINGLE", "kite-")),
    ("Not a tent, and not a tree either.", flat("AND", "tent-", "tree-")),                # De Morgan
    ("Either a kite and a boat, or a car.",
     {"operator": "OR", "children": [flat("AND", "kite", "boat"), flat("SINGLE", "car")]}),
    ("There is a car and either a kite or a boat.",
     {"operator": "AND", "children": [flat("SINGLE", "car"), flat("OR", "kite", "boat")]}),
]


@pytest.mark.parametrize("caption,expected", TABLE_7 + SEED_EXAMPLES + BENCHMARK_TEMPLATES)
def test_parses_match_the_seed_examples_and_templates(caption, expected):
    parsed = parse_lcse(caption)
    assert parsed.parsed, parsed.reason
    assert canonical(parsed.parse) == canonical(expected)


def test_ktn_view_of_the_app_b3_example():
    parsed = parse_ktn("A car is present but no traffic light")
    assert parsed.negated == ["traffic light"] and parsed.affirmed == ["car"]
    assert parsed.stripped == "A car is present"


@pytest.mark.parametrize("caption,reason", [("", "empty"), ("   ", "empty"), ("the image.", "no concept"),
                                            ("no", "no concept in its scope"),
                                            ("A kite and a boat or a car.", "mixed")])
def test_unparsable_and_empty_captions_are_refused_not_guessed(caption, reason):
    parsed = parse_lcse(caption)
    assert not parsed.parsed and reason in parsed.reason and parsed.negated == []


def test_fallback_rate_counts_distinct_unparsed_captions():
    parses = parse_captions(["no dog", "no dog", "", "a cat"])
    assert len(parses) == 3 and fallback_rate(parses) == pytest.approx(1 / 3)


def test_rule_based_fallback_agrees_on_the_templates():
    captions = [c for c, _ in BENCHMARK_TEMPLATES if "traffic" not in c]
    spacy_parses = parse_captions(captions)
    rule_parses = parse_captions(captions, nlp=None)
    agree = [canonical(spacy_parses[c].parse) == canonical(rule_parses[c].parse)
             for c in captions if rule_parses[c].parsed]
    assert sum(agree) >= len(captions) - 2


def test_factor_oracle_parses_are_recovered(tiny_world):
    from negutils.benchmarks.factor import FactorConfig, build_factor
    from negutils.world.coco import load_split

    frame = build_factor(load_split(tiny_world / "val"), FactorConfig(operator_samples=10, compound_samples=5,
                                                                      nested_samples=0))
    operator = frame[frame["split"] == "operator"]
    parses = parse_captions(list(operator["caption_0"]) + list(operator["caption_1"]))
    pairs = (list(zip(operator["caption_0"], operator["parse_0"])) +
             list(zip(operator["caption_1"], operator["parse_1"])))
    assert len(pairs) >= 20
    for caption, oracle in pairs:
        assert parses[caption].parsed and canonical(parses[caption].parse) == canonical(json.loads(oracle)), caption


def test_the_parsers_cues_are_the_one_cue_list_by_role():
    from negutils.core.phrasing import NEGATION_CUES
    from negutils.methods.parsing import PREDICATE_CUES, PREFIX_CUES

    assert (PREFIX_CUES | PREDICATE_CUES) - {"nowhere"} <= set(NEGATION_CUES)


def test_parses_kept_on_disk_are_read_by_the_next_process_and_a_damaged_chunk_is_parsed_again(tmp_path, monkeypatch):
    from negutils.methods import keep_parses_on_disk, parse_captions
    from negutils.methods import parsing

    monkeypatch.setattr(parsing, "_PARSED", {})
    monkeypatch.setattr(parsing, "_ON_DISK", None)
    captions = ["A cat but no dog.", "There is no kite in the image.", "A dog next to a table."]
    folder = keep_parses_on_disk(tmp_path)
    first = parse_captions(captions[:2])
    parse_captions(captions)                                   # one new caption: a second chunk
    chunks = sorted(folder.glob("chunk-*.json"))
    assert len(chunks) == 2 and folder.name == f"parses-{parsing.parser_key()}"

    monkeypatch.setattr(parsing, "_PARSED", {})               # the next chapter's process
    monkeypatch.setattr(parsing, "tokenize", lambda *a, **k: pytest.fail("parsed again instead of read"))
    keep_parses_on_disk(tmp_path)
    again = parse_captions(captions[:2])
    assert again == first and all(p.parsed for p in again.values())

    damaged = next(c for c in chunks if captions[0] in json.loads(c.read_text()))
    damaged.write_text(damaged.read_text()[:20])              # half-written, by a killed process
    monkeypatch.setattr(parsing, "_PARSED", {})
    with pytest.warns(UserWarning, match="could not be read"):
        keep_parses_on_disk(tmp_path)
    assert not damaged.exists() and set(parsing._PARSED) == {captions[2]}    # the rest is parsed when asked


def test_the_labelled_parse_set_is_parsed_exactly_and_never_negates_what_a_caption_affirms():
    from negutils.methods import PARSE_SET, parse_set_summary, read_parse_set, score_parses

    labelled = read_parse_set(PARSE_SET)
    assert len(labelled) >= 150
    kinds = " ".join(labelled["kind"])
    for kind in ("LCSE Table 7", "NegBench MCQ", "Retrieval-Neg", "COCO-Confusion", "VALSE", "FACTOR", "nested",
                 "compound", "predicate after comma", "lacking", "free of", "devoid of", "with no", "without any",
                 "nothing", "nobody", "no one", "no-one", "none of", "foreign language", "knotted", "no smoking",
                 "serial comma list after a prefix cue", "exception phrase", "substitution phrase", "quantity negator",
                 "nominal negation", "verbal negation", "derived negation", "none of with a predicate",
                 "none of bare", "none of with a relation refused", "prefix scope ends at a comma before a clause"):
        assert kind in kinds, kind
    scored = score_parses(labelled, parse_captions)
    summary = parse_set_summary(scored, "this checkout")
    assert summary["exact match"] >= 0.97, scored[~scored["exact"]]
    assert summary["captions with a wrongly negated concept"] == 0, scored[scored["wrongly negated"] != ""]
    assert summary["captions with a wrongly affirmed concept"] == 0, scored[scored["wrongly affirmed"] != ""]


def test_the_parse_set_score_counts_polarity_flips_in_both_directions(tmp_path):
    from negutils.methods import read_parse_set, score_parses

    path = tmp_path / "set.tsv"
    path.write_text("caption\tkind\tparse\nno dog\tprefix\tSINGLE(dog-)\na cat\taffirmative\tSINGLE(cat)\n"
                    "no bird\trefused\tUNPARSED\n")
    flipped = {"no dog": flat("SINGLE", "dog"), "a cat": flat("SINGLE", "cat-"), "no bird": None}
    parse = lambda captions: {c: SimpleNamespace(parse=flipped[c], reason="") for c in captions}  # noqa: E731
    scored = score_parses(read_parse_set(path), parse).set_index("caption")
    assert list(scored["wrongly affirmed"]) == ["dog", "", ""]
    assert list(scored["wrongly negated"]) == ["", "cat", ""]


def polarity(caption: str) -> dict[str, bool]:
    """{concept: negated} of a caption the parser must read (it fails the test if refused)."""
    parsed = parse_lcse(caption)
    assert parsed.parsed, f"{caption!r} refused: {parsed.reason}"
    return {**{c: False for c in parsed.affirmed}, **{c: True for c in parsed.negated}}


@pytest.mark.parametrize("caption,expected", [
    ("no dogs, cats, or birds", {"dog": True, "cat": True, "bird": True}),
    ("There are no cups, plates, and forks on the table.", {"cup": True, "plate": True, "fork": True, "table": False}),
    ("A street without a car, a bus, or a bike.", {"street": False, "car": True, "bus": True, "bike": True})])
def test_a_prefix_cue_negates_every_member_of_a_serial_comma_list(caption, expected):
    assert polarity(caption) == expected


def test_a_serial_comma_list_keeps_its_one_connective():
    assert canonical(parse_lcse("A cup, a plate, or a fork.").parse) == canonical(flat("OR", "cup", "plate", "fork"))


@pytest.mark.parametrize("caption,expected", [
    ("everything except a dog", {"dog": True}),
    ("A room with everything except a bed.", {"room": False, "bed": True}),
    ("Everything but the cats and the birds.", {"cat": True, "bird": True})])
def test_an_exception_after_everything_negates_the_excepted_concepts(caption, expected):
    assert polarity(caption) == expected


@pytest.mark.parametrize("caption", ["All the animals except the dog are sleeping.", "Nothing except a cup.",
                                     "Everyone except the man is smiling."])
def test_an_exception_that_leaves_its_concept_present_is_refused(caption):
    parsed = parse_lcse(caption)
    assert not parsed.parsed and "exception" in parsed.reason


@pytest.mark.parametrize("caption,expected", [
    ("a cat instead of a dog", {"cat": False, "dog": True}),
    ("The room has a bed rather than a sofa.", {"room": False, "bed": False, "sofa": True}),
    ("Instead of a dog, a cat sits on the sofa.", {"dog": True, "cat": False, "sofa": False})])
def test_a_substitution_negates_the_replaced_concept_and_affirms_its_substitute(caption, expected):
    assert polarity(caption) == expected


def test_a_list_after_a_substitution_is_refused():
    parsed = parse_lcse("A cat instead of a dog, a bird and a fish.")
    assert not parsed.parsed and "substitution" in parsed.reason


@pytest.mark.parametrize("caption,expected", [
    ("hardly any dogs", {"dog": True}), ("A street with barely any cars.", {"street": False, "car": True}),
    ("There are scarcely any people on the beach.", {"people": True, "beach": False}),
    ("Few, if any, boats on the lake.", {"boat": True, "lake": False}),
    ("A shelf with little or no books.", {"shelf": False, "book": True})])
def test_a_quantity_negator_reads_as_absence(caption, expected):
    assert polarity(caption) == expected


@pytest.mark.parametrize("caption,expected", [
    ("the absence of a dog", {"dog": True}), ("No sign of a dog.", {"dog": True}),
    ("a sofa that lacks a dog", {"sofa": False, "dog": True}),
    ("The room lacks chairs and tables.", {"room": False, "chair": True, "table": True}),
    ("a dog-free sofa", {"sofa": False, "dog": True}), ("The sofa is dog-free.", {"sofa": False, "dog": True}),
    ("A dog-free sofa and a cat.", {"sofa": False, "dog": True, "cat": False})])
def test_nominal_verbal_and_derived_negation_negate_their_concept(caption, expected):
    assert polarity(caption) == expected


@pytest.mark.parametrize("caption,expected", [
    ("None of the dogs have collars.", {"dog": False, "collar": True}),
    ("None of the people are wearing hats.", {"people": False, "hat": True}),
    ("None of the men wear hats or glasses.", {"man": False, "hat": True, "glass": True}),
    ("A yard with none of the dogs.", {"yard": False, "dog": True}), ("None of the plates.", {"plate": True})])
def test_none_of_negates_a_predicates_object_and_only_a_bare_none_of_negates_its_set(caption, expected):
    assert polarity(caption) == expected


@pytest.mark.parametrize("caption", ["None of the dogs are on the sofa.", "None of the dogs are sleeping."])
def test_none_of_with_a_predicate_that_has_no_object_is_refused(caption):
    parsed = parse_lcse(caption)
    assert not parsed.parsed and "none of" in parsed.reason


@pytest.mark.parametrize("caption,expected", [
    ("Without a leash, a dog runs in the park.", {"leash": True, "dog": False, "park": False}),
    ("There is no cat, the dog is sleeping.", {"cat": True, "dog": False})])
def test_a_comma_before_a_clause_ends_a_prefix_cues_scope(caption, expected):
    assert polarity(caption) == expected


@pytest.mark.parametrize("caption,reason", [("Un perro sin correa.", "not English"),
                                            ("There is nothing on the shelf but a plate.", "nothing ... but")])
def test_other_languages_and_exceptions_are_refused_with_a_reason(caption, reason):
    parsed = parse_lcse(caption)
    assert not parsed.parsed and reason in parsed.reason


def test_a_malformed_label_names_the_file_and_row(tmp_path):
    from negutils.methods import read_parse_set

    path = tmp_path / "set.tsv"
    path.write_text("caption\tkind\tparse\na dog\taffirmative\tSINGLE(dog)\nno cat\tprefix\tMAYBE(cat-)\n")
    with pytest.raises(ValueError, match=r"set.tsv: row 2 \('no cat'\): parse 'MAYBE\(cat-\)'"):
        read_parse_set(path)
