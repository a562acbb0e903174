"""What a frozen backbone computes per caption is kept on disk and read by the next process: the
memo round-trips exactly, a damaged chunk is reported and recomputed, and a second backbone with the
same key encodes nothing."""
import warnings

import numpy as np
import pytest
import torch

from negutils.models.memo import READS_VARIABLE, WRITER_VARIABLE, DiskMemo, chunk_writer


def test_a_memo_round_trips_ragged_fields_exactly(tmp_path):
    memo = DiskMemo(tmp_path, fields=2)
    memo.update({"a cat": (torch.tensor([1.0, 2.0]), torch.ones(3, 4, dtype=torch.float16)),
                 "no dog": (torch.tensor([3.0, 4.0]), torch.full((1, 4), 0.5, dtype=torch.float16))})
    memo.update(zip(["a kite"], [(torch.tensor([5.0, 6.0]), torch.zeros(7, 4, dtype=torch.float16))]))
    memo.update({"a cat": (torch.zeros(2), torch.zeros(1, 4))})          # known: neither replaced nor written
    assert len(list(tmp_path.glob("chunk-*.npz"))) == 2
    again = DiskMemo(tmp_path, fields=2)
    assert sorted(again) == ["a cat", "a kite", "no dog"]
    for caption, (first, tokens) in memo.items():
        assert torch.equal(again[caption][0], first) and torch.equal(again[caption][1], tokens)
        assert again[caption][1].dtype == torch.float16 and again[caption][1].shape == tokens.shape

    single = DiskMemo(tmp_path / "text")
    single.update(zip(["x", "y"], torch.eye(2)))
    assert torch.equal(DiskMemo(tmp_path / "text")["y"], torch.tensor([0.0, 1.0]))


def test_a_chapter_reads_only_the_chunks_of_the_chapters_it_waits_for(tmp_path, monkeypatch):
    """The runner names each kernel's chapter and the chapters it may read: a sibling's encoding of
    the same caption (other batch, other last bits) is not read, so its numbers cannot depend on
    which sibling ran first."""
    monkeypatch.delenv(READS_VARIABLE, raising=False)
    for chapter, caption in [("03_x", "a cat"), ("04_y", "no dog"), ("05_z", "a cat and no dog")]:
        monkeypatch.setenv(WRITER_VARIABLE, chapter)
        DiskMemo(tmp_path).update({caption: torch.ones(2)})
    monkeypatch.delenv(WRITER_VARIABLE)
    DiskMemo(tmp_path).update({"a kite": torch.ones(2)})                  # outside the runner: no chapter
    assert sorted(chunk_writer(c) for c in tmp_path.glob("chunk-*.npz")) == ["", "03_x", "04_y", "05_z"]
    monkeypatch.setenv(READS_VARIABLE, "03_x,05_z")
    assert sorted(DiskMemo(tmp_path)) == ["a cat", "a cat and no dog"]
    monkeypatch.delenv(READS_VARIABLE)
    assert sorted(DiskMemo(tmp_path)) == ["a cat", "a cat and no dog", "a kite", "no dog"]   # JupyterLab reads all


@pytest.mark.parametrize("damage", ["truncated", "rows"])
def test_a_damaged_chunk_is_reported_deleted_and_its_captions_recomputed(tmp_path, damage):
    memo = DiskMemo(tmp_path)
    memo.update({"a cat": torch.ones(4), "no dog": torch.zeros(4)})
    memo.update({"a kite": torch.full((4,), 2.0)})
    first, second = sorted(tmp_path.glob("chunk-*.npz"), key=lambda p: p.stat().st_mtime_ns)
    if damage == "truncated":
        first.write_bytes(first.read_bytes()[:-40])                       # a half-written file
    else:                                                                 # captions and rows disagree
        with np.load(first) as blob:
            arrays = dict(blob)
        arrays["keys"] = arrays["keys"][:1]
        np.savez(first, **arrays)
    with pytest.warns(UserWarning, match=first.name):
        again = DiskMemo(tmp_path)
    assert sorted(again) == ["a kite"] and not first.exists() and second.exists()


def test_a_second_backbone_with_the_same_key_reads_what_the_first_encoded(tmp_path, monkeypatch):
    from negutils.methods.peakpatch.scorer import PeakTaps
    from negutils.models.backbone import load_backbone
    from negutils.models.backbone import Backbone

    first = load_backbone("negbook-tiny")
    folder = first.keep_on_disk(tmp_path)
    captions = ["a cat on a table", "there is no dog", "a kite but no bird"]
    text = first.encode_text(captions)
    taps = PeakTaps(first, 6, 3).batch(captions)

    second = load_backbone("negbook-tiny")
    assert second.keep_on_disk(tmp_path) == folder
    monkeypatch.setattr(Backbone, "_encode_text", lambda *a: pytest.fail("encoded a caption on disk"))
    monkeypatch.setattr(Backbone, "encode_text_layers", lambda *a, **k: pytest.fail("tapped a caption on disk"))
    assert torch.equal(second.encode_text(captions), text)
    assert all(torch.equal(PeakTaps(second, 6, 3).batch(captions)[k], v) for k, v in taps.items())
    other = load_backbone("negbook-tiny", seed=1)                          # other weights: another folder
    assert other.keep_on_disk(tmp_path) != folder

    training = Backbone(first.model, "negbook-tiny", first.tokenizer, first.report)
    with pytest.raises(ValueError, match="only a frozen backbone"):
        training.keep_on_disk(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DiskMemo(folder / "text")                                          # nothing damaged: no warning


def test_image_embeddings_are_kept_on_disk_per_file_and_an_image_replaced_in_place_is_encoded_again(
        tmp_path, tiny_world, monkeypatch):
    import os

    from negutils.benchmarks import ClipScorer
    from negutils.models.backbone import load_backbone
    from negutils.models.backbone import Backbone
    from negutils.world.coco import load_split

    split = load_split(tiny_world / "val")
    first = load_backbone("negbook-tiny")
    first.keep_on_disk(tmp_path)
    plain, flipped = ClipScorer(first).image_features(split, [0, 1, 2]), \
        ClipScorer(first, flip_average=True).image_features(split, [2, 0])

    second = load_backbone("negbook-tiny")                                 # the next chapter's process
    second.keep_on_disk(tmp_path)
    encode = Backbone.encode_images
    monkeypatch.setattr(Backbone, "encode_images", lambda *a, **k: pytest.fail("encoded an image on disk"))
    assert torch.equal(ClipScorer(second).image_features(split, [0, 1, 2]), plain)
    assert torch.equal(ClipScorer(second, flip_average=True).image_features(split, [2, 0]), flipped)

    path = split.image_path(1)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))            # the file replaced in place
    encoded = []
    monkeypatch.setattr(Backbone, "encode_images", lambda self, images, **k: encoded.append(len(images)) or
                        encode(self, images, **k))
    try:
        again = ClipScorer(second).image_features(split, [0, 1, 2])
        assert encoded == [1]
        assert torch.equal(again[[0, 2]], plain[[0, 2]])                 # read from disk
        # encoded alone rather than in a batch of three: on some CPUs (this one with AMX) the kernels a batch of
        # one takes round differently, by 6e-8 measured
        torch.testing.assert_close(again[1], plain[1], rtol=0, atol=1e-6)
    finally:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))            # the shared world as it was
