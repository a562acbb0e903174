"""Build (or reuse) the embedded world of a profile and print the checksums of its files.

    .venv/bin/python data_recipes/embedded_world.py --profile cpu
"""
from __future__ import annotations

import argparse
import hashlib

from negutils.config import get_profile
from negutils.world.generate import SPLITS, ensure_world


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args()
    profile = get_profile(args.profile)
    root = ensure_world(profile.world, profile.artifacts_dir())
    print(f"world {root}")
    for split in SPLITS:
        for name in ("instances.json", "captions.json"):
            print(f"  {sha256(root / split / name)}  {split}/{name}")


if __name__ == "__main__":
    main()
