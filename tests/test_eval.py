"""``negbook eval``'s command line: every argument is checked before any data or weights load, an input is never
overwritten, the model loads in the activation its weights were trained with, and every missing input is an error
that names it (the evaluation itself is checked against the chapters on the dry run, tests/test_dry_run.py)."""
import dataclasses

import pandas as pd
import pytest

from negutils import eval as negbook_eval
from negutils.benchmarks.published import RETRIEVAL_COLUMNS, RETRIEVAL_FILES
from negutils.models.backbone import create_model, save_checkpoint, save_training_checkpoint

DATA_VARIABLES = ("COCO_IMAGE_ROOT", "VOC_ROOT", "NEGBENCH_CSV_DIR", "CC12M_NEGATION_DIR")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """negbook-tiny's random weights as this project saves them: the model name and GELU recorded."""
    return save_checkpoint(create_model("negbook-tiny", seed=1), tmp_path_factory.mktemp("weights") / "tiny.pt",
                           "negbook-tiny")


@pytest.fixture(scope="module")
def released_checkpoint(tmp_path_factory):
    """negbook-tiny fine-tuned from QuickGELU weights, in open_clip's training format: no activation recorded."""
    return save_training_checkpoint(create_model("negbook-tiny", quick_gelu=True, seed=2),
                                    tmp_path_factory.mktemp("released") / "finetuned_checkpoint.pt", "negfull")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No dataset variables (each restored after the test, including those ``main`` sets from --data-root), and
    artifacts under the test's folder."""
    for variable in DATA_VARIABLES:
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path / "artifacts"))


@pytest.fixture
def nothing_loads(monkeypatch):
    """Fails the test if ``negbook eval`` loads weights or data."""
    def refuse(*args, **kwargs):
        pytest.fail("negbook eval loaded weights or data before refusing its arguments")

    monkeypatch.setattr(negbook_eval, "load_backbone", refuse)
    monkeypatch.setattr(negbook_eval, "load_splits", refuse)


def run(capsys, *args) -> tuple[int, str, str]:
    code = negbook_eval.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_console_script_wants_the_eval_subcommand(capsys):
    assert negbook_eval.cli([]) == 2
    assert "usage: negbook eval" in capsys.readouterr().err


def test_a_data_root_without_coco_names_the_recipe(tmp_path, capsys):
    code, _, err = run(capsys, "--model", "ViT-B-32", "--pretrained", "openai", "--profile", "gpu-dryrun",
                       "--data-root", tmp_path)
    assert code == 1 and f"--data-root {tmp_path} has no coco/annotations/instances_val2017.json" in err
    assert "data_recipes/published_layouts.py" in err


def test_a_missing_checkpoint_is_named(tmp_path, capsys):
    missing = tmp_path / "weights.pt"
    code, _, err = run(capsys, "--model", "ViT-B-32", "--checkpoint", missing)
    assert code == 1 and f"--checkpoint {missing} does not exist" in err


def test_the_load_report_is_printed_before_the_data_is_read(tiny_checkpoint, tmp_path, capsys):
    code, out, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--benchmark",
                         "negbench-mcq", "--output", tmp_path / "r.jsonl")
    assert code == 1 and "set $COCO_IMAGE_ROOT" in err                   # the data, read after the weights
    assert f"loaded negbook-tiny: checkpoint {tiny_checkpoint}" in out
    assert "tensors loaded" in out and "activation GELU (recorded in the checkpoint)" in out


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_a_batch_size_below_one_is_refused_by_the_command_line(value, capsys):
    with pytest.raises(SystemExit):
        negbook_eval.parse_arguments(["--model", "ViT-B-32", "--pretrained", "openai", "--batch-size", value])
    assert "argument --batch-size" in capsys.readouterr().err


@pytest.mark.parametrize("text, why", [("0.2", "expected MU,BETA"), ("a,b", "expected MU,BETA"),
                                       ("0.2,-30", "beta = -30 is not a finite positive"),
                                       ("0.2,0", "beta = 0 is not a finite positive"),
                                       ("0.2,nan", "beta = nan"), ("0.2,inf", "beta = inf"),
                                       ("inf,30", "mu = inf is not a cosine similarity in \\[-1, 1\\]"),
                                       ("nan,30", "mu = nan"), ("1.5,30", "mu = 1.5")])
def test_an_lcse_calibration_that_is_not_finite_or_out_of_range_is_refused_naming_the_flag(text, why, capsys):
    with pytest.raises(SystemExit):
        negbook_eval.parse_arguments(["--model", "ViT-B-32", "--pretrained", "openai", "--lcse-calibration", text])
    err = capsys.readouterr().err
    assert "argument --lcse-calibration" in err
    with pytest.raises(Exception, match=why):
        negbook_eval.calibration_spec(text)


def test_a_calibration_in_range_or_fit_is_taken():
    assert negbook_eval.calibration_spec("-0.1,30") == negbook_eval.Calibration(-0.1, 30.0, "--lcse-calibration")
    assert negbook_eval.calibration_spec("fit") == negbook_eval.FIT
    assert negbook_eval.calibration("ViT-B-32", None).mu == 0.22           # the LCSE paper's for CLIP


@pytest.mark.parametrize("flags, named", [
    (["--benchmark", "valse", "negbench-mcq", "valse"], "--benchmark names valse"),
    (["--method", "vanilla", "ktn", "vanilla"], "--method names vanilla"),
    (["--method", "peakpatch:x/joint.pt", "peakpatch:x/../x/joint.pt"],
     "--method names peakpatch:x/../x/joint.pt, peakpatch:x/joint.pt"),
    (["--benchmark", "all", "valse"], "--benchmark all already includes valse")])
def test_a_benchmark_or_method_named_twice_is_refused_before_anything_loads(flags, named, tiny_checkpoint, tmp_path,
                                                                            capsys, nothing_loads):
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, *flags,
                       "--output", tmp_path / "r.jsonl")
    assert code == 1 and named in err
    assert not (tmp_path / "r.jsonl").exists()


def test_lcse_on_a_model_without_published_calibration_asks_for_one_before_loading_anything(tiny_checkpoint, tmp_path,
                                                                                           capsys, nothing_loads):
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--method", "lcse",
                       "--output", tmp_path / "r.jsonl")
    assert code == 1 and "pass --lcse-calibration MU,BETA" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_a_peakpatch_method_names_its_missing_export_before_loading_anything(tiny_checkpoint, tmp_path, capsys,
                                                                            nothing_loads):
    missing = tmp_path / "joint.pt"
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--method", "vanilla",
                       f"peakpatch:{missing}", "--output", tmp_path / "r.jsonl")
    assert code == 1 and f"PeakPatch export {missing} does not exist" in err and "chapter 03" in err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("spec", ["peakpatch:", "peak", "KTN"])
def test_an_unknown_method_is_refused_by_the_command_line(spec, capsys):
    with pytest.raises(SystemExit):
        negbook_eval.parse_arguments(["--model", "ViT-B-32", "--pretrained", "openai", "--method", spec])
    assert "expected one of vanilla, ec, ktn, lcse or peakpatch:FILE" in capsys.readouterr().err


# ----------------------------------------------------------------------------- --output

@pytest.fixture
def data_root(tmp_path):
    """A --data-root as far as the arguments' checks read it: COCO's annotation file."""
    annotations = tmp_path / "data" / "coco" / "annotations"
    annotations.mkdir(parents=True)
    (annotations / "instances_val2017.json").write_text('{"images": []}')
    return tmp_path / "data"


@pytest.mark.parametrize("which", ["checkpoint", "annotations", "annotations, by a symbolic link"])
def test_an_output_that_is_an_input_is_refused_and_left_as_it_was(which, tiny_checkpoint, data_root, tmp_path, capsys,
                                                                  nothing_loads):
    target = tiny_checkpoint if which == "checkpoint" else data_root / "coco" / "annotations" / "instances_val2017.json"
    output = target
    if "link" in which:
        output = tmp_path / "results.jsonl"
        output.symlink_to(target)
    before = target.read_bytes()
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--profile", "gpu-dryrun",
                       "--data-root", data_root, "--output", output)
    named = "is the --checkpoint" if which == "checkpoint" else "is a file of the data in $COCO_IMAGE_ROOT"
    assert code == 1 and f"--output {output} {named}" in err and "would overwrite it" in err
    assert target.read_bytes() == before


@pytest.mark.parametrize("which", ["a folder", "in a missing folder", "in a file"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_loads(which, tiny_checkpoint, tmp_path, capsys,
                                                                          nothing_loads):
    (tmp_path / "file.txt").write_text("x")
    output = {"a folder": tmp_path, "in a missing folder": tmp_path / "missing" / "r.jsonl",
              "in a file": tmp_path / "file.txt" / "r.jsonl"}
    expected = {"a folder": f"--output {tmp_path} is a folder",
                "in a missing folder": f"its folder {tmp_path / 'missing'} does not exist",
                "in a file": f"its folder {tmp_path / 'file.txt'} does not exist (it is a file)"}
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--output", output[which])
    assert code == 1 and expected[which] in err


# ----------------------------------------------------------------------------- the weights

@pytest.mark.parametrize("what, expected", [("folder", "is a folder; expected a weights file"),
                                            ("empty", "is empty \\(0 bytes\\); expected a weights file"),
                                            ("text", "cannot be read \\(.*\\); expected a weights file")])
def test_a_checkpoint_that_is_no_weights_file_is_named_with_what_was_expected(what, expected, tmp_path, capsys,
                                                                             nothing_loads):
    import re

    path = tmp_path / "weights.pt"
    if what == "folder":
        path.mkdir()
    else:
        path.write_text("" if what == "empty" else "step,loss\n1,0.5\n")
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", path, "--output", tmp_path / "r.jsonl")
    assert code == 1 and re.search(f"negbook eval: error: checkpoint {path} {expected}", err), err


def test_a_checkpoint_without_a_recorded_activation_needs_the_flag(released_checkpoint, tmp_path, capsys,
                                                                   nothing_loads):
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", released_checkpoint,
                       "--output", tmp_path / "r.jsonl")
    assert code == 1 and f"--checkpoint {released_checkpoint} records no activation" in err
    assert "pass --activation quickgelu if its weights descend from OpenAI's CLIP" in err


@pytest.mark.parametrize("weights, flag, expected", [
    ("recorded", "quickgelu", "--activation quickgelu: --checkpoint {path} was trained with GELU"),
    ("tag", "gelu", "--activation gelu: tag 'openai' of ViT-B-32 was trained with QuickGELU")])
def test_an_activation_that_contradicts_the_weights_is_refused(weights, flag, expected, tiny_checkpoint, tmp_path,
                                                               capsys, nothing_loads):
    model = ["--model", "negbook-tiny", "--checkpoint", tiny_checkpoint] if weights == "recorded" else \
        ["--model", "ViT-B-32", "--pretrained", "openai"]
    code, _, err = run(capsys, *model, "--activation", flag, "--output", tmp_path / "r.jsonl")
    assert code == 1 and expected.format(path=tiny_checkpoint) in err


def test_a_released_checkpoint_loads_in_the_activation_given_and_says_so(released_checkpoint, tmp_path, capsys):
    code, out, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", released_checkpoint,
                         "--activation", "quickgelu", "--output", tmp_path / "r.jsonl")
    assert code == 1 and "set $COCO_IMAGE_ROOT" in err
    assert "activation QuickGELU (as requested; the checkpoint records none)" in out


# ----------------------------------------------------------------------------- the data

def test_a_data_root_with_a_profile_that_reads_no_coco_is_refused_naming_both(tiny_checkpoint, data_root, capsys,
                                                                              nothing_loads):
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--profile", "smoke",
                       "--data-root", data_root)
    assert code == 1 and f"--data-root {data_root} is for a profile of the coco dataset; --profile smoke" in err


@pytest.fixture
def coco_root(tiny_world, tmp_path):
    """The tiny world's val split as COCO val2017 under a --data-root."""
    from negutils.world.coco import load_split
    from negutils.world.published import write_coco_layout

    write_coco_layout(load_split(tiny_world / "val"), tmp_path / "data" / "coco")
    return tmp_path / "data"


def write_published_val(root):
    """NegBench's published files of COCO val2017 under ``root``/negbench, built from ``root``/coco."""
    from negutils.benchmarks.negbench import build_mcq, build_retrieval
    from negutils.benchmarks.published import write_published
    from negutils.config import get_profile
    from negutils.world.published import coco_file_name, read_coco_val

    val = read_coco_val(root / "coco")
    affirmative, negated = build_retrieval(val)
    frames = {"mcq": build_mcq(val, get_profile("gpu-dryrun").benchmarks.mcq), "retrieval_affirmative": affirmative,
              "retrieval_negated": negated}
    write_published(frames, "val", root / "negbench", lambda i: f"/elsewhere/coco/val2017/{coco_file_name(i)}")


@pytest.mark.parametrize("broken, benchmark, expected", [
    ("negated retrieval CSV", "negbench-retrieval",
     "negbench-retrieval on split val is empty (retrieval_negated): {csv} has no rows"),
    ("captions", "negbench-retrieval", "negbench-retrieval on split val is empty (retrieval_affirmative): the split "
     "has no captions (on COCO: annotations/captions_val2017.json is missing or empty)"),
    ("nothing", "coco-confusion-3c", "coco-confusion-3c on split val is empty (confusion_3c): the book's builder "
     "finds none in its 48 images")])
def test_a_requested_benchmark_without_items_is_an_error_before_scoring(broken, benchmark, expected, coco_root,
                                                                        tiny_checkpoint, tmp_path, capsys,
                                                                        monkeypatch):
    csv = coco_root / "negbench" / RETRIEVAL_FILES["val"]["retrieval_negated"]
    if broken == "negated retrieval CSV":
        write_published_val(coco_root)
        pd.DataFrame(columns=RETRIEVAL_COLUMNS).to_csv(csv, index=False)
    if broken == "captions":
        (coco_root / "coco" / "annotations" / "captions_val2017.json").unlink()
    monkeypatch.setattr(negbook_eval, "scorers", lambda *a, **k: pytest.fail("scoring started"))
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--profile", "gpu-dryrun",
                       "--data-root", coco_root, "--benchmark", benchmark, "--accept-identical-options",
                       "--output", tmp_path / "r.jsonl")
    assert code == 1 and expected.format(csv=csv) in err and "nothing was scored" in err
    assert not (tmp_path / "r.jsonl").exists()


def test_all_benchmarks_scores_those_with_items_and_names_the_others(tiny_world, tmp_path, capsys):
    """``--benchmark all`` is every benchmark the data has: a small split without 3-concept galleries, or VOC2007
    without captions, is a printed note, not an error; a benchmark named alone without items anywhere is one."""
    from negutils.benchmarks.suite import ensure_benchmarks
    from negutils.config import get_profile
    from negutils.world.coco import load_split

    val = load_split(tiny_world / "val")
    bench = ensure_benchmarks(val, get_profile("gpu-dryrun").benchmarks, tmp_path, "tiny")
    ood = dataclasses.replace(val, name="ood", captions=[[] for _ in val.captions])
    captionless = dataclasses.replace(bench, split="ood", retrieval_affirmative=bench.retrieval_affirmative[:0],
                                      retrieval_negated=bench.retrieval_negated[:0])
    plan = negbook_eval.benchmarks_to_score({"val": bench, "ood": captionless}, {"val": val, "ood": ood}, ["all"])
    assert "coco-confusion-3c" not in plan["val"] and "negbench-retrieval" in plan["val"]
    assert "negbench-retrieval" not in plan["ood"] and "negbench-mcq" in plan["ood"]
    notes = capsys.readouterr().out
    assert "note: coco-confusion-3c on split val is empty (confusion_3c)" in notes
    assert "note: negbench-retrieval on split ood is empty (retrieval_affirmative): the split has no captions " \
           "(VOC2007 has none)" in notes
    plan = negbook_eval.benchmarks_to_score({"val": bench, "ood": captionless}, {"val": val, "ood": ood},
                                            ["negbench-retrieval"])
    assert plan == {"val": ["negbench-retrieval"], "ood": []}        # items on val: the ood split is a note
    with pytest.raises(ValueError, match="coco-confusion-3c on split val is empty"):
        negbook_eval.benchmarks_to_score({"val": bench}, {"val": val}, ["coco-confusion-3c"])


def test_a_rerun_replaces_its_earlier_results_with_one_row_per_method_split_and_task(coco_root, tiny_checkpoint,
                                                                                     tmp_path, capsys):
    import json

    output = tmp_path / "results.jsonl"
    output.write_text('{"earlier": true}\n')
    code, out, _ = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--profile", "gpu-dryrun",
                       "--data-root", coco_root, "--benchmark", "negbench-mcq", "valse", "--method", "vanilla", "ec",
                       "--accept-identical-options", "--output", output)
    assert code == 0 and out.index("loaded negbook-tiny") < out.index("rows written")
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted((r["method"], r["split"], r["task"]) for r in rows) == sorted(
        (m, "val", t) for m in ("vanilla", "EC") for t in ("mcq", "valse_existence"))


def test_the_extraction_runner_takes_the_same_activation_rule(released_checkpoint, tmp_path, capsys):
    """``python -m negutils.models.features`` (the multi-GPU runner) refuses a checkpoint that records no
    activation without --activation, as negbook eval does, and extracts with the one given."""
    from negutils.models.features import main as extract

    captions = tmp_path / "captions.txt"
    captions.write_text("There is no dog.\nA cat.\n")
    args = [str(captions), "--model", "negbook-tiny", "--checkpoint", str(released_checkpoint), "--l-p", "2",
            "--l-a", "1", "--out", str(tmp_path / "cache")]
    with pytest.raises(SystemExit):
        extract(args)
    assert f"--checkpoint {released_checkpoint} records no activation" in capsys.readouterr().err
    assert extract([*args, "--activation", "quickgelu"]) == 0
