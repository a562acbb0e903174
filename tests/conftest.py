"""Shared fixtures. The executed books the notebook tests read run in the background from the session's start
(``book_runs``); their schedule and processes are in ``background_books.py``, which says why."""
import dataclasses
import json
import re
from pathlib import Path

import pytest

from background_books import BOOKS, BookRuns, RUNS, book_environment, last_book_needed, runs_behind
from negutils import run as runner
from negutils.config import get_profile
from negutils.core.workers import torch_threads
from negutils.world.generate import WorldConfig, build_world


@pytest.fixture(scope="session")
def tiny_world_config() -> WorldConfig:
    return WorldConfig(pretrain=160, negtrain=16, val=48, ood=24, seed=3, negation_rate=0.05)


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory, tiny_world_config):
    return build_world(tiny_world_config, tmp_path_factory.mktemp("world") / "w", progress=False)


@pytest.fixture(scope="session")
def smoke_profile():
    return get_profile("smoke")


@pytest.fixture(scope="session")
def tiny_pretrain_config(smoke_profile):
    return dataclasses.replace(smoke_profile.pretrain, samples=3 * 32, batch_size=32, evaluations=1,
                               eval_images=32)


@pytest.fixture(scope="session")
def artifacts_root(tmp_path_factory) -> Path:
    """The session's temporary artifacts root: the executed books write here, never into the repository."""
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="session")
def smoke_artifacts(artifacts_root):
    """``artifacts_root`` as ``$NEGBOOK_ARTIFACTS`` for the rest of the session, restored afterwards. The
    notebook kernels inherit the environment; they run in notebooks/, so PYTHONPATH also points them at
    the negutils these tests import (not at whichever checkout the environment has installed)."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in book_environment(artifacts_root).items():
            mp.setenv(name, value)
        yield artifacts_root


def pytest_collection_modifyitems(session, config, items):
    """The tests that read an executed book run last (each group in its usual order), so the others run
    while ``BookRuns`` executes the books in the background instead of waiting behind the first of them."""
    items.sort(key=lambda item: last_book_needed(item.fixturenames))


@pytest.fixture(scope="session", autouse=True)
def book_runs(request, artifacts_root, tmp_path_factory):
    """Starts the runs behind the books that the collected tests need as the session begins (none for a run
    without them)."""
    last = last_book_needed({name for item in request.session.items for name in item.fixturenames})
    runs = [run for run in RUNS if any(run in runs_behind(BOOKS[book]) for book in list(BOOKS)[:last + 1])]
    if not runs:
        yield None
        return
    outs = {run: tmp_path_factory.mktemp(f"{run}-book") for run in runs if "--no-book" not in RUNS[run][1]}
    books = BookRuns(runs, artifacts_root, outs, tmp_path_factory.mktemp("book-logs"))
    # the tests here take one core, the books the other: two torch threads here beside the books' kernels
    # made a short training test 10x slower than alone (oversubscribed cores), and the whole suite no faster
    with torch_threads(1):
        yield books
    books.stop()


@pytest.fixture(scope="session")
def dry_run_chapters(smoke_artifacts, book_runs):
    """The dry run's chapters but the appendix (``dry_run_book``'s run before its last part), executed: what
    they wrote under the session's artifacts root, and their executed notebooks (``stage``); no book yet."""
    return book_runs.result(BOOKS["dry_run_chapters"])


@pytest.fixture(scope="session")
def dry_run_book(smoke_artifacts, book_runs):
    """The gpu profile's code path on CPU (``gpu-dryrun``): ViT-B-32 with QuickGELU from a random local
    checkpoint, a smoke-sized world's val and ood splits in COCO's, VOC's and NegBench's published
    layouts, every chapter through papermill, and the book built from them."""
    return book_runs.result(BOOKS["dry_run_book"])


def injected_parameters_of_every_chapter(result) -> dict[str, str]:
    """{chapter: its injected-parameters cell} of a ``runner.run`` result, after checking that every
    chapter was executed and no cell of any raised."""
    executed = sorted((result["stage"] / runner.CHAPTER_DIR).glob("*.ipynb"))
    assert [p.stem for p in executed] == [s.stem for s in runner.notebook_sources()]
    injected = {}
    for path in executed:
        nb = json.loads(path.read_text())
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
        cells = [c for c in nb["cells"] if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
        assert cells, f"{path.name} has no injected-parameters cell"
        injected[path.stem] = "".join(cells[0]["source"])
    return injected


def findings_box(html: str) -> str | None:
    """The inner HTML of a built page's Findings admonition (its div carries the class
    ``findings``), or None when the page has none."""
    box = re.search(r'<div class="[^"]*\bfindings\b[^"]*">(.*?)</div>', html, re.S)
    return box.group(1) if box else None
