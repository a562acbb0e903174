import dataclasses
import json
import os
import re

import pytest

from negutils import run as runner
from negutils.config import REPO_ROOT, get_profile
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
def smoke_artifacts(tmp_path_factory):
    """A temporary artifacts root for the whole session, restored afterwards. The notebook kernels
    inherit the environment; they run in notebooks/, so PYTHONPATH also points them at the negutils
    these tests import (not at whichever checkout the environment has installed)."""
    root = tmp_path_factory.mktemp("artifacts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEGBOOK_ARTIFACTS", str(root))
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        yield root


@pytest.fixture(scope="session")
def dry_run_book(smoke_artifacts, tmp_path_factory):
    """The gpu profile's code path on CPU (``gpu-dryrun``): ViT-B-32 with QuickGELU from a random local
    checkpoint, the smoke world's val and ood splits in COCO's, VOC's and NegBench's published
    layouts, every chapter through papermill, and the book built from them."""
    out = tmp_path_factory.mktemp("dry-run-book")
    return runner.run("gpu-dryrun", book_out=out), out


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
