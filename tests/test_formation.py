"""Chapter 02's LCD through pretraining: the organism's snapshots, and the reading of their curves."""
import dataclasses

import pandas as pd
import pytest
import torch

from negutils.diagnosis import build_diagnostic_set
from negutils.diagnosis.formation import formation_findings, formation_summary, lcd_through_pretraining
from negutils.models.pretrain import PretrainConfig, pretrain, snapshot_checkpoints
from negutils.world.coco import load_split


def _curve(step, d_lcd, alignment):
    rows = []
    for quantity, values in (("D_LCD", d_lcd), ("A", alignment)):
        rows += [{"step": step, "quantity": quantity, "layer": i + 1, "mean": v, "lo": v - 0.01, "hi": v + 0.01}
                 for i, v in enumerate(values)]
    return rows


def test_the_summary_finds_when_the_first_layer_maximum_forms_and_an_interior_peak_on_the_way():
    curves = pd.DataFrame(_curve(0, [0.10, 0.15, 0.11], [0.0, 0.0, 0.0])       # interior peak at layer 2
                          + _curve(50, [0.30, 0.20, 0.10], [0.0, 0.1, 0.2])
                          + _curve(100, [0.40, 0.20, 0.05], [0.0, 0.2, 0.4]))
    summary = formation_summary(curves)
    assert list(summary["D_LCD peak layer"]) == [2, 1, 1]
    assert list(summary["interior peak"]) == [True, False, False]
    lines = formation_findings(summary)
    assert lines[0] == "D_LCD peaks at layer 1 from step 50 to the end of pretraining (2 of 3 snapshots)."
    assert lines[1] == "An interior D_LCD peak above both ends appears at step(s) 0 (layer 2)."
    assert lines[2] == ("From step 0 to 100 the last layer's D_LCD moves from 0.110 to 0.050 while its A moves "
                        "from 0.000 to 0.400.")


def test_pretraining_saves_its_snapshots_without_changing_the_weights_it_trains(tiny_world, tmp_path):
    split, val = load_split(tiny_world / "pretrain"), load_split(tiny_world / "val")
    config = PretrainConfig(model_name="negbook-tiny", samples=4 * 32, batch_size=32, evaluations=0, bf16=False)
    plain = pretrain(split, config, tmp_path / "plain" / "model.pt", progress=False)
    saved = pretrain(split, dataclasses.replace(config, snapshots=2), tmp_path / "snap" / "model.pt", progress=False)
    snapshots = snapshot_checkpoints(saved)
    assert list(snapshots) == [0, 2, 4] and snapshot_checkpoints(plain) == {}
    final, reference = (torch.load(r.checkpoint, weights_only=True)["state_dict"] for r in (saved, plain))
    assert all(torch.equal(v, reference[k]) for k, v in final.items())
    diagnostic = build_diagnostic_set(val, 20, seed=0)
    curves = lcd_through_pretraining(snapshots, diagnostic, val, batch_size=16, n_boot=20, progress=False)
    assert sorted(curves["step"].unique()) == [0, 2, 4] and set(curves["quantity"]) == {"D_LCD", "A"}
    assert (curves["lo"] <= curves["mean"] + 1e-12).all()
    with pytest.raises(ValueError, match="no pretraining snapshots"):
        lcd_through_pretraining({}, diagnostic, val, batch_size=16)
