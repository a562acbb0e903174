"""The executed books behind the notebook tests, run beside the rest of the suite.

Why beside: the two books (the smoke profile's and the gpu-dryrun's, each every chapter through papermill and a
Jupyter Book build) are most of ``make test``'s time, and alone they keep only part of the 2 cores busy (kernel
starts, imports and the book build run on one). So ``BookRuns`` starts them in background processes of
``python -m negutils.run`` as the session begins, while the unit tests run on the other core, and the tests that
read a book (fixtures ``dry_run_chapters``, ``dry_run_book``, ``smoke_book``) are ordered last and wait for it.
conftest.py holds the fixtures; this module the schedule (``RUNS``) and the process handling.
"""
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


def book_environment(root: Path) -> dict[str, str]:
    return {"NEGBOOK_ARTIFACTS": str(root),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}


# The runs of ``python -m negutils.run`` behind the suite's two executed books: {run: (profile, runner arguments,
# the runs it waits for)}. The smoke book's chapter 06 puts the dry run's line beside the papers, and each book's
# appendix reports every chapter's time, so each book runs in two parts: its chapters but the appendix (the smoke
# book's 06 too) from the session's start, side by side; then each book's last part (the appendix, and the smoke
# book's 06 once the dry run's chapters have written their results) and its build, the two also side by side.
SMOKE_LAST = ("06_benchmark_tables", "90_performance")
DRY_RUN_LAST = ("90_performance",)


def _all_but(last: tuple[str, ...]) -> list[str]:
    return [s.stem for s in runner.notebook_sources() if s.stem not in last]


# the dry run's second backbone: a real open_clip architecture of another family than ViT-B-32's (ModifiedResNet
# image tower) at tiny size, from its own random checkpoint, so the dry run covers a backbone list
# (``-p backbones``): its chapters 00-05 run into their own folder and chapter 06 tables both backbones
DRY_RUN_BACKBONES = ("ViT-B-32", "negbook-tiny-rn")
RUNS = {"gpu-dryrun chapters": ("gpu-dryrun", ["--only", *_all_but(DRY_RUN_LAST), "--no-book",
                                               "-p", f"backbones={','.join(DRY_RUN_BACKBONES)}"], ()),
        "smoke chapters": ("smoke", ["--only", *_all_but(SMOKE_LAST), "--no-book"], ()),
        "gpu-dryrun": ("gpu-dryrun", ["--only", *DRY_RUN_LAST], ("gpu-dryrun chapters",)),
        "smoke": ("smoke", ["--only", *SMOKE_LAST, "-p", "real_profile=gpu-dryrun"],
                  ("gpu-dryrun chapters", "smoke chapters"))}
# {fixture: the run behind it}, in the order they finish: the dry run's chapters (what the tests of its code path
# read), then each book (what the tests of a whole book read), so the tests of the chapters run beside the books'
# last parts instead of after them
BOOKS = {"dry_run_chapters": "gpu-dryrun chapters", "dry_run_book": "gpu-dryrun", "smoke_book": "smoke"}


def runs_behind(run: str) -> list[str]:
    """``run`` and every run it waits for, directly or not, in ``RUNS`` order."""
    needed, stack = set(), [run]
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack += RUNS[name][2]
    return [name for name in RUNS if name in needed]


class BookRuns:
    """The runs behind the books the collected tests need, started by ``python -m negutils.run`` in background
    processes from the session's start, each as soon as the runs it waits for have finished, so the other tests
    run while the chapters execute: the books are most of the suite's time, and alone they keep 1.6 (dry run)
    and 1.5 (smoke) of the 2 cores busy on average (kernel starts, imports and the book build run on one).
    ``result(run)`` waits for that run; a failed run fails the tests that need it with the run's own message
    (the notebook and the cell), and the runs waiting for it are not started."""

    def __init__(self, runs: list[str], root: Path, book_outs: dict[str, Path], logs: Path):
        self.root, self.book_outs, self.logs = root, book_outs, logs
        self.started: dict[str, float] = {}
        self.returncodes: dict[str, int | None] = {}
        self.finished = {run: threading.Event() for run in runs}
        self._running: dict[str, subprocess.Popen] = {}
        self._stopped = False
        self._lock = threading.Lock()       # a run starts, or the session stops them, not both at once
        # four kernels (two chapters of each book) and the tests share 2 cores: each kernel computes on one thread
        # (a small model's products do more work per CPU-second on one thread than split over two, and the cores
        # are never idle here: bench/thread_scaling.py), and waits passively (negutils.schedule's reason)
        self._environment = {**os.environ, **book_environment(root), "OMP_WAIT_POLICY": "PASSIVE",
                             "OMP_NUM_THREADS": "1"}
        self._threads = [threading.Thread(target=self._run, args=(run,), daemon=True) for run in runs]
        for thread in self._threads:
            thread.start()

    def _command(self, run: str) -> list[str]:
        profile, arguments, _ = RUNS[run]
        out = [] if "--no-book" in arguments else ["--book-out", str(self.book_outs[run])]
        return [sys.executable, "-m", "negutils.run", "--profile", profile, *arguments, *out]

    def _run(self, run: str) -> None:
        for before in RUNS[run][2]:
            self.finished[before].wait()
        with self._lock, open(self.logs / f"{run}.log", "w") as log:
            skip = self._stopped or any(self.returncodes[before] != 0 for before in RUNS[run][2])
            if not skip:
                self.started[run] = time.time()
                self._running[run] = subprocess.Popen(self._command(run), stdout=log, stderr=subprocess.STDOUT,
                                                      env=self._environment, cwd=REPO_ROOT, start_new_session=True)
        self.returncodes[run] = None if skip else self._running[run].wait()
        self.finished[run].set()

    def result(self, run: str) -> tuple[dict, Path | None]:
        """({"stage": the executed chapters' book source, "index": the built book's index}, the book's
        folder), as ``negutils.run.run`` returns them, once ``run`` and the runs it waits for have finished;
        a run that builds no book (``--no-book``) has neither index nor folder (None)."""
        for name in runs_behind(run):
            self.finished[name].wait()
            self._check(name)
        stage = get_profile(RUNS[run][0]).artifacts_dir(self.root) / "book_src"
        if "--no-book" in RUNS[run][1]:
            return {"stage": stage, "index": None}, None
        text = (self.logs / f"{run}.log").read_text()
        index = re.findall(r"^\[negbook\] book: (.+)$", text, re.M)
        assert index, f"{self.logs / run}.log names no built book"
        return {"stage": stage, "index": Path(index[-1])}, self.book_outs[run]

    def _check(self, run: str) -> None:
        code = self.returncodes[run]
        if code is None:
            pytest.fail(f"the run {run!r} was not started: the session stopped (see the logs in {self.logs})")
        if code != 0:
            text = (self.logs / f"{run}.log").read_text()
            errors = [line for line in text.splitlines() if line.startswith("[negbook] error")]
            pytest.fail(f"`{' '.join(self._command(run)[1:])}` exited {code}: " + ("\n".join(errors) or text[-3000:]))

    def first_started(self, profile: str) -> float:
        """When the first run of ``profile`` started (``time.time()``)."""
        return min(t for run, t in self.started.items() if RUNS[run][0] == profile)

    def stop(self) -> None:
        """Ends the runs still going (a session cut short) and starts no other."""
        with self._lock:
            self._stopped = True
            for process in self._running.values():
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)


def last_book_needed(fixtures) -> int:
    """The position in ``BOOKS`` of the last book that tests with these ``fixtures`` read, -1 for none."""
    return max((list(BOOKS).index(name) for name in set(fixtures) & set(BOOKS)), default=-1)
