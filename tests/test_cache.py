import json

import pytest

from negutils.core.cache import atomic_save, atomic_write_json, build_directory_atomically, config_hash
from negutils.world.generate import WorldConfig


def test_equal_configs_hash_equally_and_any_change_changes_the_key():
    assert config_hash(WorldConfig()) == config_hash(WorldConfig())
    assert config_hash(WorldConfig()) != config_hash(WorldConfig(negation_rate=0.02))
    assert config_hash({"a": 1, "b": 2}) == config_hash({"b": 2, "a": 1})


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "r.csv"
    target.write_text("old")

    def crash(path):
        path.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_save(target, crash)
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_failed_directory_build_leaves_nothing(tmp_path):
    def crash(d):
        atomic_write_json(d / "x.json", {"a": 1})
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_directory_atomically(tmp_path / "world", crash)
    assert list(tmp_path.iterdir()) == []
    done = build_directory_atomically(tmp_path / "world", lambda d: atomic_write_json(d / "x.json", {"a": 1}))
    assert json.loads((done / "x.json").read_text()) == {"a": 1}


def test_atomic_results_get_ordinary_permissions(tmp_path):
    import os
    import stat

    umask = os.umask(0o022)
    try:
        f = atomic_write_json(tmp_path / "r.json", {"a": 1})
        d = build_directory_atomically(tmp_path / "d", lambda p: None)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(f.stat().st_mode) == 0o644
    assert stat.S_IMODE(d.stat().st_mode) == 0o755
