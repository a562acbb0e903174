"""The install's byte-compiling, the two ways `make install` could do it: pip's own (each package's files
compiled one at a time as pip installs it) against `pip install --no-compile` and one `compileall` pass over
the environment on every core afterwards (what the Makefile does). Both install the Makefile's two steps,
torch and torchvision, then this project with its book and dev extras, into new virtual environments side
by side in a temporary folder; the wheels are read once first, so neither way pays for a cold disk. The
.pyc column counts the compiled files each way leaves, within one of each other (both skip the one file this
Python cannot compile, a test helper of torch's in Python 3.12's syntax).

    .venv/bin/python bench/install_compile.py        # two full installs: minutes, and scratch space for both
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TORCH = ["torch==2.14.1", "torchvision==0.29.1"]          # the Makefile's pins
COMPILE_ALL = ("import compileall, sysconfig; "
               "compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)")
WAYS = {"pip's byte-compiling": [], "--no-compile, then compileall on every core": ["--no-compile"]}


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def install(venv: Path, flags: list[str]) -> dict:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    row = {"torch s": timed([python, "-m", "pip", "install", "--quiet", *flags, *TORCH]),
           "project s": timed([python, "-m", "pip", "install", "--quiet", *flags, "-e", ".[book,dev]"]),
           "compileall s": timed([python, "-c", COMPILE_ALL]) if flags else 0.0}
    row["seconds"] = sum(row.values())
    row[".pyc files"] = sum(1 for _ in venv.rglob("*.pyc"))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        # pip's download of the pins into a folder reads every wheel once, so both installs then read them from
        # the page cache (they install from pip's configured indexes, not from this folder)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", f"{scratch}/wheels", *TORCH],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = [{"way": way, **install(Path(scratch) / f"venv{k}", flags)}
                for k, (way, flags) in enumerate(WAYS.items())]
    frame = pd.DataFrame(rows)
    frame["x pip's"] = frame["seconds"] / frame["seconds"].iloc[0]
    write_result(frame, "install_compile", digits=3)


if __name__ == "__main__":
    main()
