"""The ragged fp16 feature cache: exact round trip, keys that force recomputation, and the shard bounds a
torchrun extraction splits it by (the two-process run itself is tests/test_dry_run.py's, on ViT-B-32)."""
import json

import numpy as np
import pytest
import torch

from negutils.models.backbone import load_backbone
from negutils.models.features import TextFeatures, extract_text_features, shard_bounds

CAPTIONS = ["a cat", "a dog without a cat", "there is no star in this image", "a red boat and a cup",
            "A picture of a house.", "no fish", "an hourglass without a flag"]


@pytest.fixture(scope="module")
def tiny():
    return load_backbone("negbook-tiny")


def test_cache_round_trips_exactly_in_float16(tiny, tmp_path):
    folder = extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:seed0", batch_size=3, progress=False)
    cache = TextFeatures(folder)
    assert len(cache) == len(CAPTIONS)
    for start in range(0, len(CAPTIONS), 3):      # the cache is written one batch at a time
        taps = tiny.encode_text_layers(CAPTIONS[start:start + 3], token_layers=[3, 5], batch_size=3)
        rows, block = np.arange(len(taps.final)), slice(start, start + 3)
        assert np.array_equal(cache["final"][block], taps.final.half().numpy())
        assert np.array_equal(cache["proj_lp"][block], taps.layer(5).half().numpy())
        assert np.array_equal(cache["eos_lp"][block], taps.tokens[5][rows, taps.eos_index].half().numpy())
        assert np.array_equal(cache["eos_la"][block], taps.tokens[3][rows, taps.eos_index].half().numpy())
        for i in rows:
            real = taps.tokens[5][i][taps.mask[i]].half().numpy()
            assert np.array_equal(cache.tokens(start + i), real) and len(real) == int(taps.eos_index[i]) + 1
    order = [len(CAPTIONS) - 1, 0, 2, 0, 4]             # across shards, repeated, out of order
    padded, mask = cache.padded_tokens(order)
    assert padded.dtype == torch.float32 and padded.shape[1] == mask.sum(dim=1).max()
    for k, i in enumerate(order):
        real = torch.from_numpy(cache.tokens(i).astype(np.float32))
        assert int(mask[k].sum()) == len(real) and mask[k, :len(real)].all()
        assert torch.equal(padded[k, :len(real)], real) and not padded[k, len(real):].any()


def test_changed_layers_or_captions_get_a_new_cache(tiny, tmp_path):
    first = extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:seed0", progress=False)
    assert extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:seed0", progress=False) == first
    assert extract_text_features(tiny, CAPTIONS, 6, 3, tmp_path, "tiny:seed0", progress=False) != first
    assert extract_text_features(tiny, CAPTIONS[:-1], 5, 3, tmp_path, "tiny:seed0", progress=False) != first
    assert extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:other", progress=False) != first


def test_an_interrupted_cache_is_recomputed_not_reused(tiny, tmp_path):
    folder = extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:seed0", progress=False)
    reference = np.array(TextFeatures(folder)["final"])
    (folder / "index.json").unlink()
    np.save(folder / "shard-00000" / "final.npy", np.zeros_like(reference))   # stale, half-written
    with pytest.raises(FileNotFoundError, match="never completed"):
        TextFeatures(folder)
    again = extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "tiny:seed0", progress=False)
    assert again == folder and np.array_equal(TextFeatures(again)["final"], reference)


def test_bad_input_is_named(tiny, tmp_path):
    with pytest.raises(ValueError, match="caption 1 is empty"):
        extract_text_features(tiny, ["a cat", " "], 5, 3, tmp_path, "x", progress=False)
    with pytest.raises(ValueError, match="l_p=13 is outside"):
        extract_text_features(tiny, CAPTIONS, 13, 3, tmp_path, "x", progress=False)
    folder = extract_text_features(tiny, CAPTIONS, 5, 3, tmp_path, "x", progress=False)
    index = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(json.dumps({**index, "version": 0}))
    with pytest.raises(ValueError, match="index.json has format 0 without array records"):
        TextFeatures(folder)


def test_shard_bounds_cover_everything_once_on_batch_boundaries():
    assert shard_bounds(21, 2, align=4) == [(0, 12), (12, 21)]
    bounds = shard_bounds(10, 3)
    assert bounds[0][0] == 0 and bounds[-1][1] == 10 and all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert shard_bounds(3, 4, align=2)[-1] == (3, 3)           # more ranks than batches: empty shards


def test_one_pass_sweep_equals_separate_extractions(tiny, tmp_path):
    from negutils.models.features import extract_layer_sweep

    sweep = extract_layer_sweep(tiny, CAPTIONS, [(5, 3), (8, 2)], tmp_path / "sweep", "tiny:seed0", batch_size=4,
                                progress=False)
    alone = extract_text_features(tiny, CAPTIONS, 8, 2, tmp_path / "alone", "tiny:seed0", batch_size=4,
                                  progress=False)
    for name in ("final", "proj_lp", "eos_lp", "eos_la", "tokens", "offsets"):
        assert np.array_equal(TextFeatures(sweep[(8, 2)])[name], TextFeatures(alone)[name]), name
    assert not np.array_equal(TextFeatures(sweep[(5, 3)])["tokens"], TextFeatures(alone)["tokens"])
