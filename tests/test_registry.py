"""The method registry: one id, one display name and one way to build each method's scorer."""
import pytest

from negutils.methods import build_scorer, method_id, method_label, negfull_label, scorer_dict, variant_label
from negutils.methods.registry import METHODS, family
from negutils.methods.registry import FAMILIES, VARIANT_IDS
from negutils.models.backbone import load_backbone
from negutils.report.paper_tables import NEGFULL, ROW_METHOD


def test_every_method_has_one_id_and_one_name_that_map_back():
    names = [m.name for m in METHODS.values()]
    assert len(set(names)) == len(names)
    for mid, m in METHODS.items():
        assert m.family in FAMILIES
        assert method_id(m.name) == mid == method_id(f"{m.name} [mixed]")   # protocol variants keep the id
    assert method_id(negfull_label(0.9)) == "negfull" and negfull_label(0.9, "mixed") == "NegFull alpha=0.9 [mixed]"
    assert family(negfull_label("released")) == "fine-tuned encoder"
    assert variant_label("joint") == method_label("peakpatch_joint") == "PeakPatch (joint)"
    assert {VARIANT_IDS[v] for v in VARIANT_IDS} <= set(METHODS)


def test_unknown_ids_and_labels_are_refused_with_the_registered_ones_named():
    with pytest.raises(KeyError, match="no method registered as 'ktm'.*'ktn'"):
        method_label("ktm")
    with pytest.raises(KeyError, match="'CLIP' names no registered method"):
        method_id("CLIP")


def test_paper_rows_map_to_registered_methods():
    for row, label in ROW_METHOD.items():
        assert label == NEGFULL or method_id(label) in METHODS, row


def test_built_scorers_carry_the_registered_name_and_score_like_their_class():
    backbone = load_backbone("negbook-tiny")
    vanilla = build_scorer("vanilla", backbone)
    ktn = build_scorer("ktn", vanilla, backbone.encode_text, ["cat", "dog"])
    proj = build_scorer("ktn_projection", vanilla, backbone.encode_text, ["cat", "dog"])
    lcse_mixed = build_scorer("negfull", backbone, label=negfull_label(0.5, "mixed"))
    assert (vanilla.name, ktn.name, proj.name, lcse_mixed.name) == (
        "vanilla", "KTN", "KTN (projection only)", "NegFull alpha=0.5 [mixed]")
    assert ktn.rejection and not proj.rejection
    assert list(scorer_dict(vanilla, ktn)) == ["vanilla", "KTN"]
    with pytest.raises(ValueError, match="two scorers are named 'vanilla'"):
        scorer_dict(vanilla, build_scorer("vanilla", backbone))
