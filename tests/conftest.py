import dataclasses
import os

import pytest

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
    from negutils import run as runner

    out = tmp_path_factory.mktemp("dry-run-book")
    return runner.run("gpu-dryrun", book_out=out), out
