import dataclasses

import pytest

from negutils.config import get_profile
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
