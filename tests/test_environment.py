"""environment.yml (conda) must describe the same packages as pyproject.toml (pip)."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch-gpu": "torch", "pytorch": "torch"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_packages() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    return {_name(s) for s in specs}


def _conda_packages() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {_name(s) for s in dep["pip"]}
        elif _name(dep) not in {"python", "pip"}:
            names.add(CONDA_TO_PIP.get(_name(dep.split("=")[0]), _name(dep.split("=")[0])))
    return names


def test_environment_yml_names_the_same_packages_as_pyproject():
    assert _conda_packages() == _pyproject_packages()


def test_torch_pins_agree():
    pyproject = (ROOT / "pyproject.toml").read_text()
    env = (ROOT / "environment.yml").read_text()
    assert '"torch==2.14.1"' in pyproject and "pytorch-gpu=2.14.1" in env
    assert '"torchvision==0.29.1"' in pyproject and "torchvision=0.29.1" in env
