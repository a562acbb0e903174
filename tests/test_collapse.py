"""LCD, alignment, the layer-selection rule and the probe, on encoders whose answers are known."""
import zlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from negutils.diagnosis import build_diagnostic_set, lcd_analysis
from negutils.diagnosis.collapse import (bootstrap_layer_means, curve_shape, divergence_per_item, probe_accuracy,
                                         select_layers)
from negutils.diagnosis.diagnostic import reword

DIM = 32
CUES = {"no", "not", "without"}
# how much the negation cue moves layer l's EOS state: peaks at layer 5
CUE_WEIGHT = (0.05, 0.1, 0.2, 0.4, 0.9, 0.3, 0.1, 0.05)
# how image-like (content vs a shared syntax vector) layer l is: jumps at layer 4
CONTENT_MIX = (0.1, 0.12, 0.14, 0.7, 0.8, 0.85, 0.9, 0.95)


def word_vector(word: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(word.encode()))
    return F.normalize(torch.randn(DIM, generator=g), dim=0)


class FakeLayeredEncoder:
    """Layer l's EOS state is mix_l * content + (1 - mix_l) * syntax + w_l * cue, so the
    affirmative/negated divergence peaks where w_l does and alignment jumps where mix_l does."""
    syntax = word_vector("<syntax>")

    @staticmethod
    def content(caption: str) -> torch.Tensor:
        words = [w for w in caption.lower().strip(".").replace(",", "").split() if w not in CUES]
        return F.normalize(sum(word_vector(w) for w in words), dim=0)

    def encode_text_layers(self, captions, batch_size=256):
        layers = []
        for mix, weight in zip(CONTENT_MIX, CUE_WEIGHT):
            rows = []
            for c in captions:
                cues = sum(word_vector(w) for w in c.lower().split() if w in CUES) if set(c.lower().split()) & CUES \
                    else torch.zeros(DIM)
                rows.append(F.normalize(mix * self.content(c) + (1 - mix) * self.syntax + weight * cues, dim=0))
            layers.append(torch.stack(rows))
        return SimpleNamespace(eos=torch.stack(layers))


def fake_diagnostic(n=40):
    names = [f"thing{k}" for k in range(12)]
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        a, b, c = rng.choice(names, 3, replace=False)
        aff = f"a {a} and a {b}"
        rows.append({"image_index": i, "affirmative": aff, "negated": f"{aff} without a {c}",
                     "affirmed": f"{aff} with a {c}", "paraphrase": reword(aff), "random": ""})
    frame = pd.DataFrame(rows)
    frame["random"] = np.roll(frame["affirmative"].to_numpy(), 1)
    return frame


def test_fake_encoder_with_a_known_divergence_peak_yields_that_layer():
    diag = fake_diagnostic()
    images = torch.stack([FakeLayeredEncoder.content(c) for c in diag["affirmative"]])
    lcd = lcd_analysis(FakeLayeredEncoder(), diag, images, n_boot=50)
    assert lcd.choice.l_p == 5
    assert lcd.choice.ascent == 4            # the content mix jumps at layer 4
    assert lcd.choice.l_a == 3               # latest rising layer before the ascent
    assert curve_shape(lcd.curve("negated")) == "rise-and-fall"
    assert curve_shape(lcd.curve("minimal pair")) == "rise-and-fall"     # only the cue differs
    assert lcd.curve("paraphrase")["mean"].max() < 0.5 * lcd.curve("negated")["mean"].max()
    assert "l_p = 5" in lcd.choice.reason and "fallback" not in lcd.choice.reason
    alignment = lcd.curve("affirmative", "A")["mean"].to_numpy()
    assert alignment[3] - alignment[2] == pytest.approx(np.diff(alignment).max())


def test_select_layers_on_hand_curves():
    choice = select_layers([0.1, 0.2, 0.3, 0.25], [0.1, 0.1, 0.5, 0.6])
    assert (choice.l_a, choice.l_p, choice.ascent) == (2, 3, 3)


def test_select_layers_falls_back_and_says_so():
    falling = select_layers([0.3, 0.2, 0.1], [0.1, 0.2, 0.3])
    assert (falling.l_a, falling.l_p) == (1, 1) and "fallback" in falling.reason
    early_ascent = select_layers([0.2, 0.1, 0.3, 0.1], [0.0, 0.9, 0.9, 0.9])
    assert (early_ascent.l_a, early_ascent.l_p) == (2, 3) and "fallback" in early_ascent.reason
    assert "no collapse" in select_layers([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]).reason


@pytest.mark.parametrize("lcd, alignment, message", [
    ([0.1, 0.2], [0.1], "one length"),
    ([0.1], [0.1], "one length >= 2"),
    ([0.1, float("nan")], [0.1, 0.2], "finite"),
])
def test_select_layers_rejects_bad_curves(lcd, alignment, message):
    with pytest.raises(ValueError, match=message):
        select_layers(lcd, alignment)


def test_divergence_is_zero_for_identical_and_two_for_opposite():
    a = F.normalize(torch.randn(3, 5, 8), dim=-1)
    assert np.allclose(divergence_per_item(a, a), 0, atol=1e-6)
    assert np.allclose(divergence_per_item(a, -a), 2, atol=1e-6)
    with pytest.raises(ValueError, match="one shape"):
        divergence_per_item(a, a[:, :4])


def test_bootstrap_interval_contains_the_mean_and_is_deterministic():
    values = np.random.default_rng(1).normal(size=(4, 200))
    first, again = bootstrap_layer_means(values, 200, seed=7), bootstrap_layer_means(values, 200, seed=7)
    pd.testing.assert_frame_equal(first, again)
    assert ((first["lo"] <= first["mean"]) & (first["mean"] <= first["hi"])).all()
    constant = bootstrap_layer_means(np.full((2, 10), 0.3), 50)
    assert np.allclose(constant[["mean", "lo", "hi"]], 0.3)


def test_curve_shapes():
    def curve(means, width=0.01):
        means = np.asarray(means)
        return pd.DataFrame({"layer": np.arange(1, len(means) + 1), "mean": means, "lo": means - width,
                             "hi": means + width})
    assert curve_shape(curve([0.1, 0.3, 0.5, 0.2])) == "rise-and-fall"
    assert curve_shape(curve([0.1, 0.3, 0.5, 0.6])) == "rising"
    assert curve_shape(curve([0.5, 0.3, 0.2, 0.1])) == "flat/falling"
    assert curve_shape(curve([0.1, 0.3, 0.5, 0.2], width=0.5)) == "flat/falling"   # within noise


def test_probe_separates_separable_and_not_identical_embeddings():
    torch.manual_seed(0)
    aff = F.normalize(torch.randn(2, 100, 8), dim=-1)
    aff[..., 0], negated = -1.0, aff.clone()
    negated[..., 0] = 1.0
    accuracy = probe_accuracy(aff, negated)
    assert accuracy.shape == (2,) and (accuracy == 1.0).all()
    assert (probe_accuracy(aff, aff) == 0.5).all()


def test_reword_keeps_meaning_and_case():
    assert reword("This image features a red star.") == "This picture shows a red star."
    assert reword("a photo of a cat") == "a picture of a cat"
    assert reword("A red star.") == "A picture of a red star."
    with pytest.raises(ValueError, match="empty caption"):
        reword("  ")


def test_diagnostic_set_negates_an_absent_object(tiny_world):
    from negutils.core.phrasing import has_negation_cue
    from negutils.world.coco import load_split

    val = load_split(tiny_world / "val")
    diag = build_diagnostic_set(val, 20, seed=1)
    assert len(diag) == 20 and diag["image_index"].is_unique
    for row in diag.itertuples():
        cue_free = set(row.affirmed.lower().split()) - set(row.negated.lower().split())
        assert not has_negation_cue(row.affirmed) and cue_free <= {"with", "also", "a", "an", "is"}, row
        added = row.negated.lower().replace(row.affirmative.rstrip(".").lower(), "")
        negated_objects = [c for c in val.categories if c in added]
        assert negated_objects and not set(negated_objects) & set(val.objects[row.image_index]), row
        assert row.random != row.affirmative or (diag["affirmative"] == row.affirmative).sum() > 1
    pd.testing.assert_frame_equal(diag, build_diagnostic_set(val, 20, seed=1))
    with pytest.raises(ValueError, match="at least 2"):
        build_diagnostic_set(val, 1)


def test_layer_choice_round_trips_through_the_results_file(tmp_path, monkeypatch):
    from negutils.config import get_profile
    from negutils.core.results import write_results
    from negutils.diagnosis import load_layer_choice

    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    profile = get_profile("smoke")
    with pytest.raises(FileNotFoundError, match="02_layer_selection"):
        load_layer_choice(profile)
    choice = select_layers([0.1, 0.2, 0.3, 0.25], [0.1, 0.1, 0.5, 0.6])
    write_results(pd.DataFrame([vars(choice)]), profile, "02_layer_selection")
    assert load_layer_choice(profile) == choice


def _analysis(d_means, probe):
    layers = np.arange(1, len(d_means) + 1)
    curves = pd.DataFrame({"condition": "negated", "quantity": "D_LCD", "layer": layers, "mean": d_means,
                           "lo": d_means, "hi": d_means})
    from negutils.diagnosis.collapse import LcdAnalysis
    return LcdAnalysis(curves, select_layers(d_means, np.linspace(0, 1, len(d_means))),
                       pd.DataFrame({"layer": layers, "probe accuracy": probe}))


def test_against_untrained_is_the_per_layer_ratio():
    from negutils.diagnosis import against_untrained

    table = against_untrained(_analysis(np.array([0.2, 0.1, 0.05]), [0.9, 0.8, 0.7]),
                              _analysis(np.array([0.4, 0.2, 0.2]), [1.0, 1.0, 1.0]))
    assert np.allclose(table["retained"], [0.5, 0.5, 0.25])
    assert list(table["probe untrained"]) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="differ in depth"):
        against_untrained(_analysis(np.array([0.2, 0.1]), [0.9, 0.8]), _analysis(np.array([0.4, 0.2, 0.2]), [1, 1, 1]))


def test_lcd_by_structure_finds_the_peak_per_structure_and_matches_the_whole_set_analysis():
    from negutils.diagnosis.collapse import lcd_by_structure, peak_with_rising_alignment

    diag = fake_diagnostic(60)
    diag["structure"] = ["list"] * 40 + ["relation"] * 15 + ["count"] * 5
    images = torch.stack([FakeLayeredEncoder.content(c) for c in diag["affirmative"]])
    curves, summary = lcd_by_structure(FakeLayeredEncoder(), diag, images, n_boot=50, min_rows=10)
    assert list(summary["structure"]) == ["list", "relation"]             # count: 5 rows < min_rows
    assert list(summary["pairs"]) == [40, 15] and list(summary["peak layer"]) == [5, 5]
    assert summary["interior peak with rising A"].all()
    # one structure holding every row reproduces lcd_analysis's curves exactly
    whole, _ = lcd_by_structure(FakeLayeredEncoder(), diag.assign(structure="list"), images, n_boot=50)
    lcd = lcd_analysis(FakeLayeredEncoder(), diag, images, n_boot=50)
    for quantity, condition in (("D_LCD", "negated"), ("A", "affirmative")):
        mine = whole[whole["quantity"] == quantity]["mean"].to_numpy()
        np.testing.assert_allclose(mine, lcd.curve(condition, quantity)["mean"].to_numpy())
    assert peak_with_rising_alignment(lcd.curve("negated"), lcd.curve("affirmative", "A"))
    assert not peak_with_rising_alignment(lcd.curve("affirmative", "A"), lcd.curve("affirmative", "A"))
    with pytest.raises(ValueError, match="no caption structure has 100"):
        lcd_by_structure(FakeLayeredEncoder(), diag, images, n_boot=10, min_rows=100)
    with pytest.raises(KeyError, match="structure"):
        lcd_by_structure(FakeLayeredEncoder(), diag.drop(columns="structure"), images)


def test_the_diagnostic_set_records_the_structure_of_its_affirmative_caption(tiny_world):
    from negutils.world.coco import load_split
    from negutils.world.grammar import STRUCTURES

    val = load_split(tiny_world / "val")
    diag = build_diagnostic_set(val, 30, seed=0)
    assert set(diag["structure"]) <= set(STRUCTURES) and diag["structure"].nunique() >= 2
    for row in diag.itertuples():
        recorded = {c["caption"]: c["structure"] for c in val.captions[row.image_index]}
        assert recorded[row.affirmative] == row.structure
