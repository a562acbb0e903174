"""``negbook eval``'s command line: every argument is checked before any data or weights load, an input is never
overwritten, the model loads in the activation its weights were trained with, and every missing input is an error
that names it (the evaluation itself is checked against the chapters on the dry run, tests/test_dry_run.py)."""
import dataclasses
import json

import pandas as pd
import pytest
import torch

from negutils import eval as negbook_eval
from negutils.benchmarks.published import RETRIEVAL_COLUMNS, RETRIEVAL_FILES
from negutils.models.backbone import create_model, save_checkpoint, save_training_checkpoint

DATA_VARIABLES = ("COCO_IMAGE_ROOT", "VOC_ROOT", "NEGBENCH_CSV_DIR", "CC12M_NEGATION_DIR")


def saved_tiny(tmp_path_factory, seed: int, name: str):
    """negbook-tiny's random weights (``seed``) as this project saves them: the model name and GELU recorded."""
    return save_checkpoint(create_model("negbook-tiny", seed=seed), tmp_path_factory.mktemp(name) / f"{name}.pt",
                           "negbook-tiny")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    return saved_tiny(tmp_path_factory, 1, "tiny")


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


# ----------------------------------------------------------------------------- several models, --skip-existing

@pytest.fixture(scope="module")
def second_checkpoint(tmp_path_factory):
    """Other random weights of negbook-tiny (seed 4), saved as ``tiny_checkpoint`` is."""
    return saved_tiny(tmp_path_factory, 4, "second")


@pytest.fixture(scope="module")
def nan_checkpoint(tmp_path_factory):
    """negbook-tiny with one NaN weight: its arguments check (the activation is recorded), its load fails."""
    model = create_model("negbook-tiny", seed=5)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    return save_checkpoint(model, tmp_path_factory.mktemp("diverged") / "diverged.pt", "negbook-tiny")


def scoring(coco_root, output) -> list:
    """Two methods on two one-task benchmarks of the tiny COCO val: four rows a model."""
    return ["--profile", "gpu-dryrun", "--data-root", coco_root, "--benchmark", "negbench-mcq", "valse",
            "--method", "vanilla", "ec", "--accept-identical-options", "--output", output]


def read_rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_cell(rows) -> list[dict]:
    return sorted(rows, key=lambda r: (r["model"], r["pretrained"], r["method"], r["split"], r["task"]))


def models_file(path, *rows, header="model,pretrained,checkpoint,activation"):
    """A --models FILE with ``rows`` under ``header``."""
    path.write_text(f"{header}\n" + "".join(f"{row}\n" for row in rows))
    return path


def loads_only(monkeypatch, allowed) -> list:
    """Patches the loader to fail for any checkpoint but ``allowed``; returns the list of those loaded."""
    loaded, real = [], negbook_eval.load_backbone

    def load(model, pretrained=None, checkpoint=None, **kwargs):
        if str(checkpoint) not in map(str, allowed):
            pytest.fail(f"negbook eval loaded {checkpoint}, whose rows are complete")
        loaded.append(str(checkpoint))
        return real(model, pretrained, checkpoint=checkpoint, **kwargs)

    monkeypatch.setattr(negbook_eval, "load_backbone", load)
    return loaded


@pytest.mark.parametrize("form", ["--model with --checkpoint", "--models FILE"])
def test_two_checkpoints_in_one_run_give_the_rows_of_two_one_model_runs(form, coco_root, tiny_checkpoint,
                                                                        second_checkpoint, tmp_path, capsys,
                                                                        monkeypatch):
    reads, real = [], negbook_eval.load_splits
    monkeypatch.setattr(negbook_eval, "load_splits", lambda *a, **k: reads.append(a) or real(*a, **k))
    models = ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", tiny_checkpoint, second_checkpoint]
    if form == "--models FILE":
        models = ["--models", models_file(tmp_path / "models.csv", f"negbook-tiny,,{tiny_checkpoint},",
                                          f"negbook-tiny,,{second_checkpoint},gelu")]
    code, out, err = run(capsys, *models, *scoring(coco_root, tmp_path / "both.jsonl"))
    assert code == 0, err
    assert len(reads) == 1                                       # the data are read once for both models
    assert out.index(f"checkpoint {tiny_checkpoint}") < out.index(f"checkpoint {second_checkpoint}")
    both = read_rows(tmp_path / "both.jsonl")
    alone = []
    for checkpoint in (tiny_checkpoint, second_checkpoint):
        assert run(capsys, "--model", "negbook-tiny", "--checkpoint", checkpoint,
                   *scoring(coco_root, tmp_path / "alone.jsonl"))[0] == 0
        alone += read_rows(tmp_path / "alone.jsonl")
    assert len(both) == 8 and by_cell(both) == by_cell(alone)     # every row and value of the one-model runs
    assert [r["pretrained"] for r in both] == [str(tiny_checkpoint)] * 4 + [str(second_checkpoint)] * 4
    accuracy = {(r["pretrained"], r["method"], r["task"]): r["metrics"]["accuracy"] for r in both}
    assert any(accuracy[(str(tiny_checkpoint), *cell)] != accuracy[(str(second_checkpoint), *cell)]
               for cell in [("vanilla", "mcq"), ("vanilla", "valse_existence"), ("EC", "mcq")])   # two models


BAD_SECOND_MODEL = {
    "a missing checkpoint": (lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"],
                                        c["missing"]],
                             "model 2 of 2 (negbook-tiny, --checkpoint {missing}): --checkpoint {missing} does not "
                             "exist"),
    "no activation recorded or given": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"], c["released"]],
        "model 2 of 2 (negbook-tiny, --checkpoint {released}): --checkpoint {released} records no activation"),
    "the first model again": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"], c["tiny_respelt"]],
        "model 2 of 2 (negbook-tiny, --checkpoint {tiny_respelt}) repeats model 1 of 2: the same model and weights"),
    "one checkpoint for two models": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"]],
        "--checkpoint gives 1 file for 2 --model (negbook-tiny negbook-tiny): give one per model"),
    "three activations for two models": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"], c["released"],
                   "--activation", "gelu", "quickgelu", "gelu"],
        "--activation gives 3 values for 2 --model"),
    "--output is its checkpoint": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"], c["second"],
                   "--output", c["second"]],
        "--output {second} is the --checkpoint of model 2 of 2 (negbook-tiny, --checkpoint {second})"),
    "one (mu, beta) for two backbones": (
        lambda c: ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint", c["tiny"], c["second"],
                   "--method", "lcse", "--lcse-calibration", "0.2,30"],
        "--lcse-calibration 0.2,30 is one backbone's (mu, beta), and 2 models are given"),
    "LCSE without calibration, in a file": (
        lambda c: ["--models", models_file(c["csv"], "ViT-B-32,openai,,", f"negbook-tiny,,{c['tiny']},"),
                   "--method", "lcse"],
        "--models {csv} line 3 (negbook-tiny, column checkpoint {tiny}): LCSE has no published (mu, beta) for "
        "negbook-tiny: pass --lcse-calibration fit"),
    "a contradicted activation, in a file": (
        lambda c: ["--models", models_file(c["csv"], f"negbook-tiny,,{c['tiny']},",
                                           f"negbook-tiny,,{c['second']},quickgelu")],
        "--models {csv} line 3 (negbook-tiny, column checkpoint {second}): --activation quickgelu: --checkpoint "
        "{second} was trained with GELU"),
    "a tag and a checkpoint, in a file": (
        lambda c: ["--models", models_file(c["csv"], f"negbook-tiny,,{c['tiny']},",
                                           f"negbook-tiny,openai,{c['second']},")],
        "--models {csv} line 3 (negbook-tiny): give column pretrained (an open_clip tag) or column checkpoint "
        "(a weights file), not both"),
    "an unknown column, in a file": (
        lambda c: ["--models", models_file(c["csv"], "negbook-tiny,x.pt", header="model,weights")],
        "--models {csv} line 1 has unknown column 'weights': expected the header "
        "model,pretrained,checkpoint,activation"),
}


@pytest.mark.parametrize("case", BAD_SECOND_MODEL)
def test_a_bad_model_is_refused_naming_it_before_the_first_loads(case, tiny_checkpoint, second_checkpoint,
                                                                 released_checkpoint, tmp_path, capsys, nothing_loads):
    files = {"tiny": tiny_checkpoint, "second": second_checkpoint, "released": released_checkpoint,
             "missing": tmp_path / "missing.pt", "csv": tmp_path / "models.csv",
             "tiny_respelt": tiny_checkpoint.parent / ".." / tiny_checkpoint.parent.name / tiny_checkpoint.name}
    args, expected = BAD_SECOND_MODEL[case]
    argv = args(files)
    output = [] if "--output" in argv else ["--output", tmp_path / "r.jsonl"]
    code, _, err = run(capsys, *argv, *output)
    assert code == 1 and expected.format(**files) in err, err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("flags, expected", [
    (["--models", "m.csv", "--model", "ViT-B-32"], "drop --model, or drop --models"),
    (["--benchmark", "valse"], "required: --model (or --models FILE)"),
    (["--model", "ViT-B-32"], "one of the arguments --pretrained --checkpoint is required")])
def test_the_forms_of_the_model_arguments_are_checked_by_the_command_line(flags, expected, capsys):
    with pytest.raises(SystemExit):
        negbook_eval.parse_arguments(flags)
    assert expected in capsys.readouterr().err


def test_skip_existing_skips_a_finished_model_and_completes_a_partial_one(coco_root, tiny_checkpoint,
                                                                         second_checkpoint, tmp_path, capsys,
                                                                         monkeypatch):
    """A model is complete when --output has a row for every requested (method, split, task); the second model
    lost one (a run cut short, a row deleted), and a row of a model not requested stands beside them."""
    output, models = tmp_path / "r.jsonl", ["--model", "negbook-tiny", "negbook-tiny", "--checkpoint",
                                            tiny_checkpoint, second_checkpoint]
    assert run(capsys, *models, *scoring(coco_root, output))[0] == 0
    full = read_rows(output)
    other = {"dataset": "coco", "split": "val", "model": "ViT-B-32", "pretrained": "openai", "task": "mcq",
             "method": "vanilla", "metrics": {"accuracy": 0.5}}
    lost = (str(second_checkpoint), "EC", "mcq")
    output.write_text("".join(json.dumps(r) + "\n" for r in [other] + full
                              if (r["pretrained"], r["method"], r["task"]) != lost))
    loaded = loads_only(monkeypatch, [second_checkpoint])
    code, out, err = run(capsys, *models, *scoring(coco_root, output), "--skip-existing")
    assert code == 0, err
    assert loaded == [str(second_checkpoint)]
    assert f"model 1 of 2 (negbook-tiny, --checkpoint {tiny_checkpoint}): its 4 rows in {output} are complete; " \
           "skipped" in out
    assert f"model 2 of 2 (negbook-tiny, --checkpoint {second_checkpoint}): 1 of its 4 rows are missing from " \
           f"{output} (EC val mcq); evaluating it again" in out
    rows = read_rows(output)
    assert rows[0] == other and by_cell(rows[1:]) == by_cell(full)     # the lost row is back, with its value
    loaded.clear()
    code, out, _ = run(capsys, *models, *scoring(coco_root, output), "--skip-existing")
    assert code == 0 and loaded == [] and "nothing evaluated" in out and read_rows(output) == rows


def test_the_rows_of_finished_models_survive_a_later_models_failure(coco_root, tiny_checkpoint, nan_checkpoint,
                                                                    second_checkpoint, tmp_path, capsys,
                                                                    monkeypatch):
    output = tmp_path / "r.jsonl"
    output.write_text('{"earlier": true}\n')           # replaced: no --skip-existing
    code, out, err = run(capsys, "--model", "negbook-tiny", "negbook-tiny", "--checkpoint", tiny_checkpoint,
                         nan_checkpoint, *scoring(coco_root, output))
    assert code == 1
    assert f"model 2 of 2 (negbook-tiny, --checkpoint {nan_checkpoint}): checkpoint {nan_checkpoint} has " \
           "non-finite values" in err
    assert f"{output} holds the rows of the 1 model before it (--skip-existing goes on from there)" in err
    rows = read_rows(output)
    assert len(rows) == 4 and {r["pretrained"] for r in rows} == {str(tiny_checkpoint)}
    loaded = loads_only(monkeypatch, [second_checkpoint])         # go on, with other weights for the second
    code, _, err = run(capsys, "--model", "negbook-tiny", "negbook-tiny", "--checkpoint", tiny_checkpoint,
                       second_checkpoint, *scoring(coco_root, output), "--skip-existing")
    assert code == 0, err
    assert loaded == [str(second_checkpoint)] and read_rows(output)[:4] == rows and len(read_rows(output)) == 8


ROW = '{"model": "m", "pretrained": "p", "dataset": "coco", "split": "val", "task": "mcq", "method": "EC"}\n'


@pytest.mark.parametrize("text, expected", [
    (ROW + "not json\n", "line 2 is not JSON"),
    ("[1, 2]\n", "line 1 is a JSON list, not a result row"),
    (ROW + "\n" + ROW.replace('"task": "mcq", ', ""), "line 3 is not a result row of negbook eval: no task"),
    (ROW * 2, "line 2 repeats line 1's model m, pretrained p, dataset coco, split val, task mcq, method EC")])
def test_skip_existing_refuses_a_malformed_output_naming_its_line_before_anything_loads(text, expected, tiny_checkpoint,
                                                                                       tmp_path, capsys,
                                                                                       nothing_loads):
    output = tmp_path / "r.jsonl"
    output.write_text(text)
    code, _, err = run(capsys, "--model", "negbook-tiny", "--checkpoint", tiny_checkpoint, "--output", output,
                       "--skip-existing")
    assert code == 1 and f"--output {output} {expected}" in err, err
    assert "drop --skip-existing to replace the file" in err and output.read_text() == text


def test_the_data_session_reads_the_benchmark_cache_of_every_models_session(tiny_world, tiny_checkpoint):
    """``data_session`` (the benchmarks read once, before any model) keys its data as ``model_session`` does."""
    from negutils.config import get_profile
    from negutils.models.backbone import load_backbone
    from negutils.session import model_session
    from negutils.world.coco import load_split

    profile, splits = get_profile("gpu-dryrun"), {"val": load_split(tiny_world / "val")}
    backbone = load_backbone("negbook-tiny", checkpoint=tiny_checkpoint)
    assert negbook_eval.data_session(profile, splits).data_key == \
        model_session(profile, splits, backbone, str(tiny_checkpoint)).data_key


def test_a_models_new_rows_replace_its_rows_of_the_same_cells_and_keep_its_others(tmp_path):
    """A model evaluated again for some methods keeps its rows of the others, and other models' rows stay."""
    def row(model, method, accuracy):
        return {"dataset": "coco", "split": "val", "model": model, "pretrained": "p", "task": "mcq",
                "method": method, "metrics": {"accuracy": accuracy}}

    output = tmp_path / "r.jsonl"
    results = negbook_eval.Results(output, (row("a", "vanilla", 0.1), row("a", "EC", 0.2), row("b", "vanilla", 0.3)))
    assert results.replace(("a", "p"), [row("a", "vanilla", 0.9)]) == 3
    assert read_rows(output) == [row("a", "EC", 0.2), row("a", "vanilla", 0.9), row("b", "vanilla", 0.3)]
