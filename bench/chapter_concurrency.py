"""Whether the runner should execute independent chapters side by side. The smoke profile's
chapters 00-07 run from an empty artifacts root four ways: one at a time in the runner's order
(what `negutils.run` does) and two at a time along the chapters' dependencies (a chapter starts
once every chapter whose files it reads has finished), each with OpenMP's default wait policy and
with OMP_WAIT_POLICY=PASSIVE (threads that sleep instead of spinning while they wait). Wall
seconds and the CPU seconds of every process, as ratios to the serial run. Chapter 90 is left out:
it reads the runner's record of the others' times.

    .venv/bin/python bench/chapter_concurrency.py [--profile smoke]

Takes about 12 minutes on 2 cores; writes bench/results/chapter_concurrency.csv.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils import run as runner  # noqa: E402
from negutils.config import REPO_ROOT, get_profile  # noqa: E402

# the chapters whose results or trained models each chapter reads (02's layers, 03's PeakPatch and
# design, 01's benchmark files, which 03 would otherwise build at the same time)
NEEDS = {"00": (), "01": ("00",), "02": ("00",), "03": ("01", "02"), "04": ("03",), "05": ("03",),
         "06": ("03", "04", "05"), "07": ("03",)}
# the longer chain first when two chapters are ready
ORDER = ("00", "02", "01", "03", "07", "04", "05", "06")


def run_side_by_side(profile: str, jobs: int) -> None:
    """Chapters 00-07 of ``profile``, ``jobs`` at a time along NEEDS (in this process's children)."""
    prof = get_profile(profile)
    stage = runner.stage_book(prof.artifacts_dir() / "book_src")
    sources = {s.stem[:2]: s for s in runner.notebook_sources() if s.stem[:2] in NEEDS}
    done, running = set(), {}
    with ProcessPoolExecutor(jobs) as pool:
        while len(done) < len(sources):
            for key in ORDER:
                ready = all(n in done for n in NEEDS[key])
                if key not in done and key not in running.values() and ready and len(running) < jobs:
                    output = stage / runner.CHAPTER_DIR / f"{sources[key].stem}.ipynb"
                    running[pool.submit(runner.execute_notebook, sources[key], output, {"profile": profile},
                                        progress=False)] = key
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()
                done.add(running.pop(future))


def measure(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env={**os.environ, **environment}, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--side-by-side", type=int, metavar="JOBS", help=argparse.SUPPRESS)   # the child's job
    args = parser.parse_args(argv)
    if args.side_by_side:
        run_side_by_side(args.profile, args.side_by_side)
        return 0
    chapters = [s.stem for s in runner.notebook_sources() if s.stem[:2] in NEEDS]
    serial = [sys.executable, "-m", "negutils.run", "--profile", args.profile, "--no-book", "--only", *chapters]
    paired = [sys.executable, __file__, "--profile", args.profile, "--side-by-side", "2"]
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    modes = [("one at a time", serial, {}), ("one at a time, OMP_WAIT_POLICY=PASSIVE", serial, passive),
             ("two at a time", paired, {}), ("two at a time, OMP_WAIT_POLICY=PASSIVE", paired, passive)]
    rows = []
    for mode, command, extra in modes:
        with tempfile.TemporaryDirectory() as root:      # nothing cached: world, model and every chapter
            environment = {"NEGBOOK_ARTIFACTS": root, "PYTHONPATH": str(REPO_ROOT), **extra}
            wall, cpu = measure(command, environment)
        rows.append({"profile": args.profile, "chapters": len(chapters), "mode": mode, "wall s": wall,
                     "cpu s": cpu, "cores busy": cpu / wall})
        print(f"{mode}: {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    frame = pd.DataFrame(rows)
    frame["wall x serial"] = frame["wall s"] / frame["wall s"].iloc[0]
    frame["cpu x serial"] = frame["cpu s"] / frame["cpu s"].iloc[0]
    write_result(frame, "chapter_concurrency", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
