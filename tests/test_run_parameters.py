"""The runner's ``-p`` values become the types the chapters' ``parameters`` cells declare, a ``-p`` for a parameter
the runner sets must agree with it, and ``--only`` must name a chapter: each refused before any chapter executes.
No chapter executes here: the runner's staging and execution are replaced by a recorder."""
import re

import pytest

from negutils import run as runner

from background_books import RUNS

BOOK = runner.chapter_parameter_types(runner.notebook_sources())


class Executed(Exception):
    """Raised where the runner would have started a chapter."""


@pytest.fixture
def no_chapter_runs(monkeypatch, tmp_path):
    """``runner.main`` with staging and execution replaced: a run that gets past validation raises
    ``Executed`` with the parameters the chapters would have received."""
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    monkeypatch.setattr(runner, "stage_book", lambda stage, keep_chapters=False: tmp_path)

    def execute(prof, only, params, *args):
        raise Executed(params)

    monkeypatch.setattr(runner, "_execute", execute)


def _tiny_chapter(folder, name, parameters_cell):
    source = folder / f"{name}.md"
    source.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n"
                      f"```{{code-cell}} ipython3\n:tags: [parameters]\n\n{parameters_cell}\n```\n")
    return source


@pytest.mark.parametrize("name,text,value", [
    ("full_sweep", "false", False), ("full_sweep", "False", False), ("full_sweep", "0", False),
    ("full_sweep", "NO", False), ("full_sweep", "true", True), ("full_sweep", "Yes", True), ("full_sweep", "1", True),
    ("real_profile", "gpu-dryrun", "gpu-dryrun"),
    ("backbone", "ViT-B-32", "ViT-B-32"), ("pretrained", "1", "1"),   # None-defaulted: a string, even "1"
    ("checkpoint", "None", None)])
def test_a_parameter_value_takes_the_type_its_parameters_cell_declares(name, text, value):
    typed = runner.typed_parameters({name: text}, BOOK)
    assert typed == {name: value} and type(typed[name]) is type(value)


@pytest.mark.parametrize("parameter,message", [
    ("full_sweep=maybe", r"full_sweep='maybe' is not of type bool \(true/false/1/0/yes/no, any case\), which chapter "
                         r"07_negation_rate declares for it"),
    ("full_sweep=", r"full_sweep='' is not of type bool .* chapter 07_negation_rate declares")])
def test_a_value_not_of_the_declared_type_is_an_error_before_any_chapter_runs(no_chapter_runs, capsys, parameter,
                                                                              message):
    assert runner.main(["--profile", "smoke", "-p", parameter, "--no-book"]) == 1
    assert re.search(message, capsys.readouterr().err)


def test_the_false_full_sweep_reaches_chapter_07_as_false(no_chapter_runs):
    with pytest.raises(Executed) as executed:
        runner.main(["--profile", "smoke", "--only", "07_negation_rate", "-p", "full_sweep=false", "--no-book"])
    assert executed.value.args[0] == {"profile": "smoke", "full_sweep": False}


@pytest.mark.parametrize("text,value,error", [
    ("seed=7", 7, None), ("seed=None", None, None), ("seed=7.5", None, r"seed='7.5' is not of type int or None"),
    ("rate=0.25", 0.25, None), ("rate=1", 1.0, None),
    ("rate=nan", None, r"rate='nan' is not of type float.*not finite"),
    ("rate=None", None, r"rate='None' is not of type float, which chapter 98_a declares"),
    ("steps=3", 3, None), ("steps=true", None, r"steps='true' is not of type int, which chapters 98_a, 99_b declare"),
    ("name=3", "3", None)])
def test_int_float_and_annotated_parameters_convert_by_their_declared_type(tmp_path, text, value, error):
    declared = runner.chapter_parameter_types([
        _tiny_chapter(tmp_path, "98_a", "seed: int | None = None\nrate = 0.5\nsteps = 3\nname = 'x'"),
        _tiny_chapter(tmp_path, "99_b", "steps = 10")])
    name, raw = runner._parse_parameter(text)
    if error:
        with pytest.raises(ValueError, match=error):
            runner.typed_parameters({name: raw}, declared)
    else:
        typed = runner.typed_parameters({name: raw}, declared)[name]
        assert typed == value and type(typed) is type(value)


def test_a_parameter_two_chapters_declare_with_different_types_is_an_error(tmp_path):
    declared = runner.chapter_parameter_types([_tiny_chapter(tmp_path, "98_a", "full_sweep = False"),
                                               _tiny_chapter(tmp_path, "99_b", "full_sweep = 1")])
    with pytest.raises(ValueError, match=r"full_sweep is declared with different types.*bool .* by 98_a; int by 99_b"):
        runner.typed_parameters({"full_sweep": "1"}, declared)


def test_a_parameter_cell_default_of_no_runner_type_is_refused(tmp_path):
    with pytest.raises(runner.NotebookFailed, match=r"98_a\.md's parameter rates is declared as \[0\.1, 0\.2\]"):
        runner.chapter_parameter_types([_tiny_chapter(tmp_path, "98_a", "rates = [0.1, 0.2]")])


def test_a_parameter_the_runner_sets_must_agree_with_its_flag(no_chapter_runs, capsys):
    assert runner.main(["--profile", "smoke", "-p", "profile=cpu", "--only", "06_benchmark_tables", "--no-book"]) == 1
    assert "parameter profile='cpu' disagrees with --profile smoke" in capsys.readouterr().err
    with pytest.raises(Executed) as executed:       # agreeing is harmless
        runner.main(["--profile", "smoke", "-p", "profile=smoke", "--only", "06_benchmark_tables", "--no-book"])
    assert executed.value.args[0] == {"profile": "smoke"}


def test_only_without_a_chapter_name_is_an_error_listing_the_chapters(no_chapter_runs, capsys):
    assert runner.main(["--profile", "smoke", "--only", "--no-book"]) == 1
    err = capsys.readouterr().err
    assert "--only needs at least one chapter name" in err and "'07_negation_rate'" in err
    with pytest.raises(ValueError, match=r"--only needs at least one chapter name; the chapters are \['00_"):
        runner.notebook_sources([])


def test_the_smoke_books_real_profile_parameter_is_accepted(no_chapter_runs):
    profile, arguments, _ = RUNS["smoke"]
    with pytest.raises(Executed) as executed:
        runner.main(["--profile", profile, *arguments, "--no-book"])
    assert executed.value.args[0] == {"profile": "smoke", "real_profile": "gpu-dryrun"}
