import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from negutils import run as runner
from negutils.config import REPO_ROOT, get_profile
from negutils.core.workers import torch_threads
from negutils.world import WorldConfig, build_world


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


def book_environment(root: Path) -> dict[str, str]:
    return {"NEGBOOK_ARTIFACTS": str(root),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}


# The suite's two executed books, in the order they run: the smoke book's chapter 06 puts the dry run's
# line beside the papers, so it starts once the dry run has finished. {fixture: (profile, run arguments)}
BOOKS = {"dry_run_book": ("gpu-dryrun", []),
         "smoke_book": ("smoke", ["-p", "real_profile=gpu-dryrun"])}


class BookRuns:
    """The books the collected tests need, executed one after the other by ``python -m negutils.run`` in
    a background process from the session's start, so the other tests run while the chapters execute:
    the books are most of the suite's time, and alone they keep 1.6 (dry run) and 1.5 (smoke) of the 2
    cores busy on average (kernel starts, imports and the book build run on one).
    ``result(profile)`` waits for that book; a failed run fails the tests that need it with the run's
    own message (the notebook and the cell), and the books after it are not started."""

    def __init__(self, profiles: list[str], root: Path, book_outs: dict[str, Path], logs: Path):
        self.root, self.book_outs, self.logs = root, book_outs, logs
        self.started: dict[str, float] = {}
        self.returncodes: dict[str, int | None] = {}
        self.finished = {p: threading.Event() for p in profiles}
        self._running: subprocess.Popen | None = None
        self._stopped = False
        self._lock = threading.Lock()       # a run starts, or the session stops them, not both at once
        # kernels that share the cores with the tests wait passively (negutils.schedule's reason)
        self._environment = {**os.environ, **book_environment(root), "OMP_WAIT_POLICY": "PASSIVE"}
        self._thread = threading.Thread(target=self._run_all, args=(profiles,), daemon=True)
        self._thread.start()

    def _command(self, profile: str) -> list[str]:
        arguments = dict(BOOKS.values())[profile]
        return [sys.executable, "-m", "negutils.run", "--profile", profile, *arguments,
                "--book-out", str(self.book_outs[profile])]

    def _run_all(self, profiles: list[str]) -> None:
        for profile in profiles:
            with self._lock, open(self.logs / f"{profile}.log", "w") as log:
                skip = self._stopped or any(self.returncodes.values())     # a run before it failed
                if not skip:
                    self.started[profile] = time.time()
                    self._running = subprocess.Popen(self._command(profile), stdout=log, stderr=subprocess.STDOUT,
                                                     env=self._environment, cwd=REPO_ROOT, start_new_session=True)
            self.returncodes[profile] = None if skip else self._running.wait()
            self.finished[profile].set()

    def result(self, profile: str) -> tuple[dict, Path]:
        """({"stage": the executed chapters' book source, "index": the built book's index}, the book's
        folder), as ``negutils.run.run`` returns them, once the run has finished."""
        self.finished[profile].wait()
        log = self.logs / f"{profile}.log"
        code = self.returncodes[profile]
        if code is None:
            pytest.fail(f"the {profile} book was not run: a book before it failed (see its log in {self.logs})")
        text = log.read_text()
        if code != 0:
            errors = [line for line in text.splitlines() if line.startswith("[negbook] error")]
            pytest.fail(f"`{' '.join(self._command(profile)[1:])}` exited {code}: "
                        + ("\n".join(errors) or text[-3000:]))
        index = re.findall(r"^\[negbook\] book: (.+)$", text, re.M)
        assert index, f"{log} names no built book"
        return {"stage": get_profile(profile).artifacts_dir(self.root) / "book_src", "index": Path(index[-1])}, \
            self.book_outs[profile]

    def stop(self) -> None:
        """Ends a run still going (a session cut short) and starts no other."""
        with self._lock:
            self._stopped = True
            if self._running is not None and self._running.poll() is None:
                os.killpg(self._running.pid, signal.SIGTERM)


def last_book_needed(fixtures) -> int:
    """The position in ``BOOKS`` of the last book that tests with these ``fixtures`` read, -1 for none."""
    return max((list(BOOKS).index(name) for name in set(fixtures) & set(BOOKS)), default=-1)


def pytest_collection_modifyitems(session, config, items):
    """The tests that read an executed book run last (each group in its usual order), so the others run
    while ``BookRuns`` executes the books in the background instead of waiting behind the first of them."""
    items.sort(key=lambda item: last_book_needed(item.fixturenames))


@pytest.fixture(scope="session", autouse=True)
def book_runs(request, artifacts_root, tmp_path_factory):
    """Starts the books that the collected tests need as the session begins (none for a run without them)."""
    last = last_book_needed({name for item in request.session.items for name in item.fixturenames})
    profiles = [profile for profile, _ in list(BOOKS.values())[:last + 1]]      # each book needs the ones before it
    if not profiles:
        yield None
        return
    outs = {profile: tmp_path_factory.mktemp(f"{profile}-book") for profile in profiles}
    runs = BookRuns(profiles, artifacts_root, outs, tmp_path_factory.mktemp("book-logs"))
    # the tests here take one core, the books the other: two torch threads here beside the books' kernels
    # made a short training test 10x slower than alone (oversubscribed cores), and the whole suite no faster
    with torch_threads(1):
        yield runs
    runs.stop()


@pytest.fixture(scope="session")
def dry_run_book(smoke_artifacts, book_runs):
    """The gpu profile's code path on CPU (``gpu-dryrun``): ViT-B-32 with QuickGELU from a random local
    checkpoint, a smoke-sized world's val and ood splits in COCO's, VOC's and NegBench's published
    layouts, every chapter through papermill, and the book built from them."""
    return book_runs.result("gpu-dryrun")


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
