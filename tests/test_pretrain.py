import dataclasses
import json

import pandas as pd
import pytest
import torch

from negutils.config import get_profile
from negutils.models.backbone import load_backbone
from negutils.models.pretrain import PretrainConfig, ensure_pretrained, pretrain
from negutils.models.pretrain import attention_kernel
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world


def test_pretraining_is_deterministic_and_moves_the_weights(tiny_world, tiny_pretrain_config, tmp_path):
    split = load_split(tiny_world / "pretrain")
    a = pretrain(split, tiny_pretrain_config, tmp_path / "a.pt", progress=False)
    b = pretrain(split, tiny_pretrain_config, tmp_path / "b.pt", progress=False)
    sa, sb = _weights(a), _weights(b)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.history["loss"].tolist() == b.history["loss"].tolist()
    untrained = load_backbone(tiny_pretrain_config.model_name, seed=tiny_pretrain_config.seed).model.state_dict()
    assert not torch.equal(sa["ln_final.weight"], untrained["ln_final.weight"])


def _weights(result) -> dict[str, torch.Tensor]:
    return torch.load(result.checkpoint, weights_only=True)["state_dict"]


def test_the_step_options_are_runs_of_their_own_and_version_2s_step_is_kept(tiny_world, tiny_pretrain_config,
                                                                           tmp_path, monkeypatch):
    # math attention and the fused AdamW each round differently (so each is in the config, and its key); attention
    # "default" with foreach is version 2's step, whose foreach AdamW matches PyTorch's for-loop bit for bit
    split = load_split(tiny_world / "pretrain")
    version_2 = dataclasses.replace(tiny_pretrain_config, attention="default", optimizer="foreach", evaluations=0)
    runs = {name: _weights(pretrain(split, dataclasses.replace(version_2, **change), tmp_path / f"{name}.pt",
                                    progress=False))
            for name, change in {"v2": {}, "math": {"attention": "math"}, "fused": {"optimizer": "fused"}}.items()}
    adamw = torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *args, **kwargs: adamw(*args, **{**kwargs, "foreach": False}))
    for_loop = _weights(pretrain(split, version_2, tmp_path / "for_loop.pt", progress=False))
    assert all(torch.equal(runs["v2"][k], for_loop[k]) for k in for_loop)
    for name in ("math", "fused"):
        assert not all(torch.equal(runs["v2"][k], runs[name][k]) for k in for_loop), name


@pytest.mark.parametrize("field, value", [("attention", "flash"), ("optimizer", "sgd")])
def test_an_unknown_step_option_is_refused_before_training(field, value):
    with pytest.raises(ValueError, match=rf"PretrainConfig\.{field} must be .* not '{value}'"):
        PretrainConfig(**{field: value})


def test_short_run_lowers_the_loss_on_a_fixed_batch(tmp_path):
    # A 16-image world with one caption each is one fixed batch: overfitting it is the
    # loss-goes-down check that does not depend on luck.
    world = build_world(WorldConfig(pretrain=16, negtrain=1, val=1, ood=1, captions_per_image=1), tmp_path / "w",
                        progress=False)
    split = load_split(world / "pretrain")
    cfg = PretrainConfig(model_name="negbook-tiny", samples=40 * 16, batch_size=16, lr=1e-3, evaluations=0,
                         warmup_fraction=0.1)
    hist = pretrain(split, cfg, tmp_path / "m.pt", progress=False).history
    assert hist["loss"].tail(5).mean() < 0.5 * hist["loss"].head(5).mean()


def test_ensure_pretrained_reuses_the_cache_and_rekeys_on_change(tiny_world, tiny_pretrain_config, tmp_path):
    first = ensure_pretrained(tiny_world, tiny_pretrain_config, tmp_path, progress=False)
    mtime = first.checkpoint.stat().st_mtime_ns
    again = ensure_pretrained(tiny_world, tiny_pretrain_config, tmp_path, progress=False)
    assert again.checkpoint == first.checkpoint and again.checkpoint.stat().st_mtime_ns == mtime
    assert isinstance(again.evaluations, pd.DataFrame) and {"t2i_R@5", "chance_R@5"} <= set(again.evaluations)
    other = ensure_pretrained(tiny_world, dataclasses.replace(tiny_pretrain_config, seed=1), tmp_path, progress=False)
    assert other.checkpoint.parent != first.checkpoint.parent
    summary = json.loads((first.checkpoint.parent / "summary.json").read_text())
    assert summary["config"]["model_name"] == tiny_pretrain_config.model_name
    assert load_backbone(checkpoint=first.checkpoint).report.n_tensors_loaded > 0
    clean = torch.load(first.checkpoint, weights_only=True)["state_dict"]
    data = first.checkpoint.read_bytes()
    first.checkpoint.write_bytes(data[: len(data) // 2])           # cut: pretrained again, never loaded
    with pytest.warns(UserWarning, match=r"pretrained organism .* is not whole \(.*bytes, its record"):
        rebuilt = ensure_pretrained(tiny_world, tiny_pretrain_config, tmp_path, progress=False)
    state = torch.load(rebuilt.checkpoint, weights_only=True)["state_dict"]
    assert all(torch.equal(state[k], clean[k]) for k in clean)


def test_an_organism_pretrained_before_records_is_adopted_not_retrained(tiny_world, tiny_pretrain_config, tmp_path):
    from negutils.core.cache import record_path

    first = ensure_pretrained(tiny_world, tiny_pretrain_config, tmp_path, progress=False)
    for f in first.checkpoint.parent.glob("*.record.json"):
        f.unlink()
    mtime = first.checkpoint.stat().st_mtime_ns
    again = ensure_pretrained(tiny_world, tiny_pretrain_config, tmp_path, progress=False)
    assert again.checkpoint.stat().st_mtime_ns == mtime and record_path(first.checkpoint).exists()


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_the_profiles_resnet_organism_loads_taps_and_trains(tmp_path, profile):
    # the conv image tower bench/organism_probe.py chose (open_clip's ModifiedResNet) beside a 12-layer text tower
    from open_clip.modified_resnet import ModifiedResNet

    model_name = get_profile(profile).pretrain.model_name
    world = build_world(WorldConfig(pretrain=16, negtrain=1, val=4, ood=1, captions_per_image=1), tmp_path / "w",
                        progress=False)
    split = load_split(world / "pretrain")
    fresh = load_backbone(model_name)
    assert isinstance(fresh.model.visual, ModifiedResNet)
    assert fresh.n_layers == 12 and fresh.encode_images(split.images([0, 1])).shape == (2, fresh.embed_dim)
    taps = fresh.encode_text_layers(["a small red star to the left of a moon"]).eos
    assert taps.shape == (12, 1, fresh.embed_dim)
    cfg = PretrainConfig(model_name=model_name, samples=3 * 16, batch_size=16, lr=1e-3, evaluations=0)
    result = pretrain(split, cfg, tmp_path / "rn.pt", progress=False)
    trained = load_backbone(model_name, checkpoint=str(result.checkpoint))
    assert not torch.equal(trained.model.visual.conv1.weight, fresh.model.visual.conv1.weight)
    assert len(result.history) == 3 and result.history["loss"].notna().all()


def test_the_math_attention_kernel_is_chosen_on_cpu_only():
    # a GPU run keeps PyTorch's fused kernels: only the CPU's flash backward is slow on short captions
    with attention_kernel("math", "cpu"):
        assert not torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()
    for attention, device in (("math", "cuda"), ("default", "cpu")):
        with attention_kernel(attention, device):
            assert torch.backends.cuda.flash_sdp_enabled(), (attention, device)
    assert torch.backends.cuda.flash_sdp_enabled()       # restored on leaving
    with pytest.raises(ValueError, match="attention must be 'math' or 'default', not 'flash'"):
        attention_kernel("flash")
