"""Result tables: pandas DataFrames written atomically as CSV under artifacts/<profile>/results/."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .cache import atomic_save
from .profiles import Profile


def write_results(frame: pd.DataFrame, profile: Profile, name: str) -> Path:
    path = profile.artifacts_dir() / "results" / f"{name}.csv"
    return atomic_save(path, lambda tmp: frame.to_csv(tmp, index=False))


def read_results(profile: Profile, name: str) -> pd.DataFrame:
    path = profile.artifacts_dir() / "results" / f"{name}.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the chapter that writes {name!r} first "
                                f"(python -m negutils.run --profile {profile.name})")
    return pd.read_csv(path)
