import numpy as np
import pytest
import torch
import torch.nn.functional as F

from negutils.models.backbone import load_backbone, save_checkpoint
from negutils.models.weights import CheckpointMismatchError, tag_needs_quick_gelu

CAPTIONS = ["a star", "This image features a red star and a blue moon.",
            "There is a cup, but no umbrella in this picture.", ""]


@pytest.fixture(scope="module")
def tiny():
    return load_backbone("negbook-tiny")


@pytest.fixture(scope="module")
def vit_b32():
    return load_backbone("ViT-B-32")  # randomly initialised, nothing downloads


@pytest.mark.parametrize("which", ["tiny", "vit_b32"])
def test_last_tapped_layer_equals_encode_text(which, request):
    bb = request.getfixturevalue(which)
    out = bb.encode_text_layers(CAPTIONS)
    assert out.eos.shape == (12, len(CAPTIONS), bb.embed_dim)
    reference = F.normalize(bb.model.encode_text(bb.tokenize(CAPTIONS)), dim=-1)
    assert torch.allclose(out.layer(12), reference, atol=1e-5)
    assert torch.allclose(out.final, reference, atol=1e-5)


def test_every_tapped_layer_is_unit_norm_and_layers_differ(tiny):
    out = tiny.encode_text_layers(CAPTIONS)
    assert torch.allclose(out.eos.norm(dim=-1), torch.ones(12, len(CAPTIONS)), atol=1e-5)
    assert not torch.allclose(out.layer(6), out.layer(12))


def test_eos_index_and_mask_follow_caption_length(tiny):
    lengths = [len(tiny.tokenizer.encode(c)) for c in CAPTIONS]
    out = tiny.encode_text_layers(CAPTIONS, token_layers=[8, 12])
    assert out.eos_index.tolist() == [n + 1 for n in lengths]  # SOT, n tokens, then EOT
    assert out.mask.sum(dim=1).tolist() == [n + 2 for n in lengths]
    # positions after the longest caption's EOS are never computed: a causal tower cannot use them
    assert out.tokens[8].shape == (len(CAPTIONS), max(lengths) + 2, 64)
    # the token sequence after ln_final, projected at EOS, is the final embedding
    rows = torch.arange(len(CAPTIONS))
    eos_tokens = out.tokens[12][rows, out.eos_index]
    assert torch.allclose(F.normalize(eos_tokens @ tiny.model.text_projection, dim=-1), out.final, atol=1e-5)


def test_taps_do_not_depend_on_batch_composition(tiny):
    alone = tiny.encode_text_layers(CAPTIONS[1:2])
    batched = tiny.encode_text_layers(CAPTIONS, batch_size=2)
    assert torch.allclose(alone.eos[:, 0], batched.eos[:, 1], atol=1e-5)


def test_layer_numbering_is_one_based(tiny):
    out = tiny.encode_text_layers(CAPTIONS[:1])
    with pytest.raises(IndexError):
        out.layer(0)


def test_image_embeddings_unit_norm_and_flip_average(tiny):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(3, 64, 64, 3), dtype=np.uint8)
    plain = tiny.encode_images(pixels)
    averaged = tiny.encode_images(pixels, flip_average=True)
    assert torch.allclose(averaged.norm(dim=-1), torch.ones(3), atol=1e-5)
    with torch.no_grad():
        x = tiny.pixels_to_tensor(pixels)
        manual = F.normalize(tiny.model.encode_image(x) + tiny.model.encode_image(torch.flip(x, dims=[3])), dim=-1)
    assert torch.allclose(averaged, manual, atol=1e-5)
    assert not torch.allclose(plain, averaged, atol=1e-4)
    # a horizontally symmetric image is its own mirror, so averaging changes nothing
    sym = np.concatenate([pixels[:, :, :32], pixels[:, :, :32][:, :, ::-1]], axis=2)
    assert torch.allclose(tiny.encode_images(sym), tiny.encode_images(sym, flip_average=True), atol=1e-5)


def test_checkpoint_round_trip_reports_what_it_loaded(tiny, tmp_path):
    path = save_checkpoint(tiny.model, tmp_path / "m.pt", "negbook-tiny")
    again = load_backbone(checkpoint=path)
    assert again.report.n_tensors_loaded == len(tiny.model.state_dict())
    assert str(path) in again.report.source
    assert torch.allclose(again.encode_text(CAPTIONS), tiny.encode_text(CAPTIONS))


def test_missing_or_unexpected_keys_are_errors(tiny, tmp_path):
    state = dict(tiny.model.state_dict())
    state.pop("ln_final.weight")
    state["extra.head"] = torch.zeros(1)
    torch.save({"state_dict": state, "negbook": {"model_name": "negbook-tiny"}}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointMismatchError,
                       match=r"missing keys \['ln_final.weight'\].*unexpected keys \['extra.head'\]"):
        load_backbone(checkpoint=tmp_path / "bad.pt")


def test_checkpoint_for_another_config_is_an_error(tiny, tmp_path):
    path = save_checkpoint(tiny.model, tmp_path / "m.pt", "negbook-tiny")
    with pytest.raises(CheckpointMismatchError, match="does not fit model config .negbook-organism"):
        load_backbone("negbook-organism", checkpoint=path)


def test_quick_gelu_trap_is_guarded(tiny, tmp_path):
    assert tag_needs_quick_gelu("ViT-B-32", "openai")
    assert not tag_needs_quick_gelu("ViT-B-32-quickgelu", "openai")
    assert not tag_needs_quick_gelu("ViT-B-32", "laion2b_s34b_b79k")
    path = save_checkpoint(tiny.model, tmp_path / "m.pt", "negbook-tiny", quick_gelu=False)
    with pytest.raises(ValueError, match="quick_gelu=False"):
        load_backbone(checkpoint=path, quick_gelu=True)


def test_random_init_is_seeded():
    a = load_backbone("negbook-tiny", seed=5).encode_text(CAPTIONS)
    b = load_backbone("negbook-tiny", seed=5).encode_text(CAPTIONS)
    c = load_backbone("negbook-tiny", seed=6).encode_text(CAPTIONS)
    assert torch.equal(a, b) and not torch.allclose(a, c)


@pytest.fixture(scope="module")
def siglip_like(tmp_path_factory):
    """A tiny CustomTextCLIP shaped like SigLIP's text side (last-token pooling, no causal mask,
    a Linear projection with bias): the code path of SigLIP and EVA towers, with no tokenizer download."""
    import json

    import open_clip

    from negutils.models.backbone import Backbone, create_model
    from negutils.models.weights import LoadReport

    cfg_dir = tmp_path_factory.mktemp("configs")
    (cfg_dir / "test-siglip-like.json").write_text(json.dumps({
        "embed_dim": 32, "init_logit_bias": -10, "custom_text": True,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 3,
                     "no_causal_mask": True, "proj_bias": True, "pool_type": "last"}}))
    open_clip.add_model_config(cfg_dir)
    model = create_model("test-siglip-like")
    return Backbone(model, "test-siglip-like", open_clip.SimpleTokenizer(context_length=16),
                    LoadReport("test-siglip-like", "random init"))


def test_taps_follow_the_pool_type_of_siglip_like_towers(siglip_like):
    out = siglip_like.encode_text_layers(CAPTIONS, token_layers=[2])
    assert out.eos.shape == (3, len(CAPTIONS), 32)
    assert out.eos_index.tolist() == [15] * len(CAPTIONS)  # "last" pooling reads the final position
    reference = F.normalize(siglip_like.model.encode_text(siglip_like.tokenize(CAPTIONS)), dim=-1)
    assert torch.allclose(out.layer(3), reference, atol=1e-5)


def test_trimmed_encoding_equals_the_full_context_forward(tiny):
    """encode_text runs each batch of similar-length captions only up to its longest EOS; the
    result is open_clip's full-context encode_text to float rounding, rows in the input order."""
    captions = CAPTIONS + ["a cat", "a much longer caption about a dog that sits on a red bench near a tree"]
    with torch.no_grad():
        full = tiny.model.encode_text(tiny.tokenize(captions), normalize=True)
    assert tiny.text_tower.trims
    assert torch.allclose(tiny.encode_text(captions, batch_size=2), full, atol=1e-6)
    assert torch.allclose(tiny.encode_text_layers(captions, token_layers=[3], batch_size=2).final, full, atol=1e-6)


def test_trimmed_encoding_trains_like_the_full_context(tiny):
    """Pretraining backpropagates through the trimmed forward: the gradient of every text weight is
    the full-context one's to float rounding, and the positional rows past the longest caption get none."""
    captions = ["a cat", "a dog beside a red house", "no tree"]
    text = tiny.tokenize(captions)
    grads = []
    for encode in (tiny.model.encode_text, tiny.text_tower.encode):
        tiny.model.zero_grad(set_to_none=True)
        encode(text).pow(2).sum().backward()
        grads.append({n: p.grad.clone() for n, p in tiny.model.named_parameters() if p.grad is not None})
    tiny.model.zero_grad(set_to_none=True)
    full, trimmed = grads
    assert full.keys() == trimmed.keys() and "positional_embedding" in full
    # float rounding, relative to each gradient's own scale (the token rows' reach ~250)
    assert all((full[n] - trimmed[n]).abs().max() <= 1e-5 * full[n].abs().max() for n in full)
    n = int(tiny.text_tower.eos_positions(text).max()) + 1
    assert n < text.shape[1] and not trimmed["positional_embedding"][n:].any()


def test_a_loaded_backbone_encodes_each_caption_once_and_a_training_wrapper_every_time(tiny):
    from negutils.models.backbone import Backbone

    calls = []
    original = tiny.text_tower.encode_by_length

    def counting(text, *args, **kwargs):
        calls.append(len(text))
        return original(text, *args, **kwargs)

    tiny.text_tower.encode_by_length = counting
    try:
        first = tiny.encode_text(["a memo star.", "a memo moon."])
        again = tiny.encode_text(["a memo moon.", "a memo star.", "a memo cup."])
        assert calls == [2, 1]                                   # only "a memo cup." was new
        assert torch.equal(again[0], first[1]) and torch.equal(again[1], first[0])
        training = Backbone(tiny.model, tiny.model_name, tiny.tokenizer, tiny.report)   # weights being trained
        training.text_tower.encode_by_length = counting
        training.encode_text(["a memo moon."])
        training.encode_text(["a memo moon."])
        assert calls == [2, 1, 1, 1]
    finally:
        del tiny.text_tower.encode_by_length


def count_image_encodes(backbone) -> list[int]:
    """Replaces ``backbone.encode_images`` (on the instance: ``del backbone.encode_images`` restores
    it) by one that records how many images each call encodes; returns that record."""
    calls = []
    original = backbone.encode_images

    def counting(images, *args, **kwargs):
        calls.append(len(images))
        return original(images, *args, **kwargs)

    backbone.encode_images = counting
    return calls


def test_scorers_on_a_loaded_backbone_share_image_embeddings_keyed_by_file(tiny, tiny_world):
    import dataclasses

    from negutils.benchmarks.evaluate import ClipScorer
    from negutils.world.coco import load_split

    val = load_split(tiny_world / "val")
    calls = count_image_encodes(tiny)
    try:
        first = ClipScorer(tiny).image_features(val, [0, 1, 2])
        again = ClipScorer(tiny, name="another").image_features(val, [2, 0, 3])
        assert calls == [3, 1]                              # only image 3 was new to the backbone
        assert torch.equal(again[0], first[2]) and torch.equal(again[1], first[0])
        flipped = ClipScorer(tiny, flip_average=True).image_features(val, [0])
        assert calls == [3, 1, 1] and not torch.equal(flipped[0], first[0])
        # the same file at another index of another split is the same embedding, not the index's
        backwards = dataclasses.replace(val, image_ids=val.image_ids[::-1], file_names=val.file_names[::-1],
                                        pixels_path=None)
        last = len(val) - 1
        assert torch.equal(ClipScorer(tiny).image_features(backwards, [last])[0], first[0])
    finally:
        del tiny.encode_images


def test_chapter_00s_whole_split_encoding_is_what_the_scorers_read_back(tiny_world):
    from negutils.benchmarks import ClipScorer
    from negutils.benchmarks.evaluate import split_image_embeddings
    from negutils.diagnosis import backbone_retrieval_recall, object_recognition
    from negutils.world.coco import load_split

    fresh = load_backbone("negbook-tiny")                       # an empty image memo
    val = load_split(tiny_world / "val")
    own = backbone_retrieval_recall(fresh, val), object_recognition(fresh, val)[1]     # each encodes for itself
    calls = count_image_encodes(fresh)
    images = split_image_embeddings(fresh, val)
    assert calls == [len(val)]
    assert torch.equal(images, type(fresh).encode_images(fresh, val.images()))     # as recognition encodes it
    shared = (backbone_retrieval_recall(fresh, val, image_embeddings=images),
              object_recognition(fresh, val, image_embeddings=split_image_embeddings(fresh, val))[1])
    scored = ClipScorer(fresh).image_features(val, [4, 1])
    assert calls == [len(val)]                                  # the recognition check and the scorer read them back
    assert shared == own and torch.equal(scored, images[[4, 1]])
    for check in (backbone_retrieval_recall, object_recognition):
        with pytest.raises(ValueError, match=r"image_embeddings has 3 rows; split 'val' has \d+ images"):
            check(fresh, val, image_embeddings=images[:3])


def test_a_caption_cut_at_the_context_length_warns_and_one_that_just_fits_does_not(tiny):
    import warnings

    n = tiny.context_length - 2                          # tokens left between start and end of text
    fits, cut = " ".join(["cat"] * n), " ".join(["cat"] * (n + 1))
    assert len(tiny.tokenizer.encode(fits)) == n
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny.tokenize(["a dog", fits])
    with pytest.warns(UserWarning, match=r"1 caption\(s\) exceed the context length"):
        tokens = tiny.tokenize([fits, cut, "a dog"])
    assert tokens.shape == (3, tiny.context_length)


def test_a_released_fine_tune_loads_in_its_base_models_activation(tmp_path):
    """A NegFull released in open_clip's training format records no activation: fine-tuned from a
    QuickGELU model, it must run with QuickGELU (a plain GELU loads every key and is silently wrong)."""
    from negutils.config import get_profile
    from negutils.models.backbone import create_model, save_training_checkpoint
    from negutils.session import Session

    base = load_backbone("negbook-tiny", quick_gelu=True)
    tuned_model = create_model("negbook-tiny", quick_gelu=True, seed=3)
    path = save_training_checkpoint(tuned_model, tmp_path / "finetuned_checkpoint.pt", "negfull")
    blob = torch.load(path, weights_only=True)
    assert blob["epoch"] == 1 and all(k.startswith("module.") for k in blob["state_dict"])
    session = Session(get_profile("smoke"), {}, base, "test", "data")
    tuned = session.backbone_from(path)
    assert tuned.report.quick_gelu and tuned.report.n_tensors_loaded == len(tuned_model.state_dict())
    with torch.no_grad():
        expected = F.normalize(tuned_model.encode_text(tuned.tokenize(CAPTIONS)), dim=-1)
    assert torch.allclose(tuned.encode_text(CAPTIONS), expected, atol=1e-5)
    plain = load_backbone("negbook-tiny", checkpoint=path)          # the trap: same keys, other activation
    assert not torch.allclose(plain.encode_text(CAPTIONS), expected, atol=1e-3)
    assert "activation GELU (assumed; the checkpoint records none)" in str(plain.report)     # and it says so
    assert "activation QuickGELU (as requested; the checkpoint records none)" in str(tuned.report)


@pytest.mark.parametrize("what, expected", [("folder", "is a folder; expected a weights file"),
                                            ("empty", r"is empty \(0 bytes\); expected a weights file"),
                                            ("text", r"cannot be read \(.*\); expected a weights file"),
                                            ("a tensor", "holds a Tensor; expected a weights file")])
def test_a_checkpoint_that_is_no_weights_file_is_an_error_naming_it(what, expected, tmp_path):
    from negutils.models.weights import CheckpointFileError

    path = tmp_path / "weights.pt"
    if what == "folder":
        path.mkdir()
    elif what == "a tensor":
        torch.save(torch.zeros(3), path)
    else:
        path.write_text("" if what == "empty" else "step,loss\n1,0.5\n")
    with pytest.raises(CheckpointFileError, match=f"checkpoint {path} {expected}"):
        load_backbone("negbook-tiny", checkpoint=path)


def test_a_tag_loaded_in_another_activation_than_it_was_trained_with_is_an_error():
    with pytest.raises(ValueError, match="tag 'openai' of ViT-B-32 was trained with QuickGELU, but quick_gelu=False"):
        load_backbone("ViT-B-32", "openai", quick_gelu=False)


def test_a_checkpoint_is_identified_by_its_content_not_its_size_and_time(tmp_path):
    """Weights replaced in place by ``cp -p`` keep the size and modification time: the identity (what the caches
    of its outputs are keyed by) still changes, and equal bytes give equal digests."""
    import os

    from negutils.models.backbone import checkpoint_identity

    path, other = tmp_path / "model.pt", tmp_path / "other.pt"
    path.write_bytes(b"weights of model A")
    other.write_bytes(b"weights of model A")
    stat = path.stat()
    before = checkpoint_identity(path)
    assert before.split(":sha256=")[1] == checkpoint_identity(other).split(":sha256=")[1]
    path.write_bytes(b"weights of model B")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert checkpoint_identity(path) != before
    assert checkpoint_identity(path, chunk_bytes=4) == checkpoint_identity(path)       # read in chunks alike
