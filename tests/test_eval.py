"""``negbook eval``'s command line: every missing input is an error that names it and how to build it
(the evaluation itself is checked against the chapters on the dry run, tests/test_dry_run.py)."""
import pytest

from negutils import eval as negbook_eval


def test_the_console_script_wants_the_eval_subcommand(capsys):
    assert negbook_eval.cli([]) == 2
    assert "usage: negbook eval" in capsys.readouterr().err


def test_a_data_root_without_coco_names_the_recipe(tmp_path, capsys):
    assert negbook_eval.main(["--model", "ViT-B-32", "--pretrained", "openai", "--data-root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"--data-root {tmp_path} has no coco/annotations/instances_val2017.json" in err
    assert "data_recipes/published_layouts.py" in err


def test_a_missing_checkpoint_is_named(tmp_path, capsys):
    missing = tmp_path / "weights.pt"
    assert negbook_eval.main(["--model", "ViT-B-32", "--checkpoint", str(missing)]) == 1
    assert f"--checkpoint {missing} does not exist" in capsys.readouterr().err


def test_no_data_location_names_the_variable(monkeypatch, capsys):
    for variable in ("COCO_IMAGE_ROOT", "VOC_ROOT", "NEGBENCH_CSV_DIR"):
        monkeypatch.delenv(variable, raising=False)
    assert negbook_eval.main(["--model", "negbook-tiny", "--checkpoint", __file__, "--benchmark", "negbench-mcq"]) == 1
    assert "set $COCO_IMAGE_ROOT" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0.2", "a,b"])
def test_a_malformed_calibration_is_refused(text):
    with pytest.raises(ValueError, match="expected MU,BETA"):
        negbook_eval.calibration("ViT-B-32", text)


def test_lcse_on_a_model_without_published_calibration_asks_for_one_before_loading_anything(tmp_path, capsys):
    code = negbook_eval.main(["--model", "negbook-tiny", "--checkpoint", __file__, "--method", "lcse",
                              "--output", str(tmp_path / "r.jsonl")])
    assert code == 1 and "pass --lcse-calibration MU,BETA" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()
    assert negbook_eval.calibration("ViT-B-32", None).mu == 0.22           # the LCSE paper's for CLIP


def test_a_peakpatch_method_names_its_missing_export_before_loading_anything(tmp_path, capsys):
    missing = tmp_path / "joint.pt"
    code = negbook_eval.main(["--model", "negbook-tiny", "--checkpoint", __file__, "--method", "vanilla",
                              f"peakpatch:{missing}", "--output", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err
    assert code == 1 and f"PeakPatch export {missing} does not exist" in err and "chapter 03" in err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("spec", ["peakpatch:", "peak", "KTN"])
def test_an_unknown_method_is_refused_by_the_command_line(spec, capsys):
    with pytest.raises(SystemExit):
        negbook_eval.parse_arguments(["--model", "ViT-B-32", "--pretrained", "openai", "--method", spec])
    assert "expected one of vanilla, ec, ktn, lcse or peakpatch:FILE" in capsys.readouterr().err
