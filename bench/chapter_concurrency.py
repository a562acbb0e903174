"""What the runner's ``--jobs`` buys: the smoke profile's chapters executed from an empty artifacts root
by ``python -m negutils.run`` one at a time (``--jobs 1``) and two at a time along the chapters'
needs (``--jobs 2``, negutils.schedule), where the runner gives a kernel that may share the cores
OpenMP's passive waits (threads that sleep instead of spinning while they wait); and two at a time
with OMP_WAIT_POLICY=ACTIVE (every kernel's threads spinning), which shows why the runner does that.
Wall seconds and the CPU seconds of every process, as ratios to the one-at-a-time run.

    .venv/bin/python bench/chapter_concurrency.py [--profile smoke]

Runs the profile's chapters three times (each run's wall seconds are in its row); writes
bench/results/chapter_concurrency.csv.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from negutils import run as runner  # noqa: E402
from negutils.config import REPO_ROOT  # noqa: E402


def measure(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=environment, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smoke")
    args = parser.parse_args(argv)
    chapters = [s.stem for s in runner.notebook_sources()]
    command = [sys.executable, "-m", "negutils.run", "--profile", args.profile, "--no-book", "--jobs"]
    modes = [("one at a time", [*command, "1"], {}),
             ("two at a time (the runner)", [*command, "2"], {}),
             ("two at a time, OMP_WAIT_POLICY=ACTIVE", [*command, "2"], {"OMP_WAIT_POLICY": "ACTIVE"})]
    inherited = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}   # the runner's choice unless a mode's
    rows = []
    for mode, run, extra in modes:
        with tempfile.TemporaryDirectory() as root:      # nothing cached: world, model and every chapter
            environment = {**inherited, "NEGBOOK_ARTIFACTS": root, "PYTHONPATH": str(REPO_ROOT), **extra}
            wall, cpu = measure(run, environment)
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
