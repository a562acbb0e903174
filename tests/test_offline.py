import socket

import pytest

from negutils.models import weights
from negutils.models.backbone import load_backbone
from negutils.models.weights import WeightsUnavailableError


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: the offline path must not even try."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network touched: {args}")
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_offline_uncached_tag_fails_without_touching_the_network(tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsUnavailableError) as err:
        load_backbone("ViT-B-32", "openai", cache_dir=str(tmp_path))
    message = str(err.value)
    for needle in ("'ViT-B-32'", "'openai'", "HF_HUB_OFFLINE", "HF_HOME", "checkpoint="):
        assert needle in message, needle


def test_unreachable_network_fails_after_one_probe(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("NEGBOOK_OFFLINE", raising=False)
    probes = []
    monkeypatch.setattr(weights, "network_reachable", lambda *a, **k: probes.append(1) or False)
    with pytest.raises(WeightsUnavailableError, match="network is unreachable"):
        weights.resolve_pretrained("ViT-B-32", "openai", cache_dir=str(tmp_path))
    assert probes == [1]


def test_probe_reports_unreachable_host():
    assert weights.network_reachable("127.0.0.1", port=9, timeout=0.5) is False


def test_unknown_tag_lists_known_tags():
    with pytest.raises(ValueError, match="known tags: .*openai"):
        weights.resolve_pretrained("ViT-B-32", "no-such-tag")


def test_cached_file_is_found_without_network(tmp_path, monkeypatch, no_network):
    # Lay out a Hugging Face cache entry by hand, as huggingface_hub would.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = weights.open_clip.get_pretrained_cfg("ViT-B-32", "openai")
    repo_id, filename = cfg["hf_hub"].rstrip("/").rsplit("/", 1) if not cfg["hf_hub"].endswith("/") \
        else (cfg["hf_hub"].rstrip("/"), "open_clip_pytorch_model.bin")
    repo_dir = tmp_path / ("models--" + repo_id.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text("abc123")
    snap = repo_dir / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / filename).write_bytes(b"weights")
    path, _ = weights.resolve_pretrained("ViT-B-32", "openai", cache_dir=str(tmp_path))
    assert path is not None and path.endswith(filename)
