"""Two cores, one run or two: samples per second of the organism's pretraining steps with torch on
2 threads in one process, on 1 thread, and as two 1-thread processes side by side (their sum). When
two 1-thread runs together beat one 2-thread run, independent trainings (chapter 07's rates) go
faster side by side than one after the other.

    .venv/bin/python bench/thread_scaling.py [--profile cpu] [--steps 30]

Writes bench/results/thread_scaling.csv. Needs the profile's world (chapter 00 builds it).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def one_run(profile: str, steps: int, threads: int) -> float:
    """Pretraining samples/s of ``steps`` steps on ``threads`` torch threads (the step loop only)."""
    import torch

    torch.set_num_threads(threads)
    from negutils.config import get_profile
    from negutils.models.pretrain import pretrain
    from negutils.session import load_splits

    prof = get_profile(profile)
    config = dataclasses.replace(prof.pretrain, samples=steps * prof.pretrain.batch_size, evaluations=0)
    split = load_splits(prof, ("pretrain",), progress=False)["pretrain"]
    with tempfile.TemporaryDirectory() as tmp:
        return pretrain(split, config, Path(tmp) / "model.pt", progress=False).samples_per_second


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_threads:
        print(json.dumps(one_run(args.profile, args.steps, args.child_threads)))
        return 0
    command = [sys.executable, __file__, "--profile", args.profile, "--steps", str(args.steps), "--child-threads"]

    def measured(threads: int, processes: int) -> float:
        running = [subprocess.Popen(command + [str(threads)], stdout=subprocess.PIPE, text=True)
                   for _ in range(processes)]
        return sum(json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in running)

    rows = [{"setting": "1 process, 2 threads", "samples/s": measured(2, 1)},
            {"setting": "1 process, 1 thread", "samples/s": measured(1, 1)},
            {"setting": "2 processes, 1 thread each (sum)", "samples/s": measured(1, 2)}]
    table = pd.DataFrame(rows)
    table["x 1 process, 2 threads"] = table["samples/s"] / table["samples/s"].iloc[0]
    table.insert(0, "work", f"{args.profile} organism pretraining, {args.steps} steps")
    write_result(table, "thread_scaling", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
