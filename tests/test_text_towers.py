"""The layer taps read each open_clip text tower as it pools: padding is what the tokenizer in use
writes (not id 0), a caption counts as cut only when its tokenizer cut it, and the pooled position
follows the tower (CLIP's end of text, SigLIP's last position, a first-token tower's first)."""
import json
import os
import warnings

import open_clip
import pytest
import torch
import torch.nn.functional as F

from negutils.models.backbone import PROJECT_CONFIG_DIR, Backbone, create_model, load_backbone
from negutils.models.weights import LoadReport

SIGLIP = "negbook-tiny-siglip"
CONTEXT = 16                     # negbook-tiny-siglip's context length
# SigLIP's sentencepiece layout: "<pad>" 0 is never written, "</s>" 1 ends every caption and is also the
# padding, "<unk>" 2; words from 3 on
WORDS = "a photo of cat dog no there is but red star".split()
VOCAB = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
END = PAD = 1


def build_siglip_tokenizer(folder):
    """open_clip's tokenizer for negbook-tiny-siglip, read from ``folder`` as open_clip reads a local model
    (``local-dir:``, its config beside a Hugging Face tokenizer): the HFTokenizer a SigLIP config gets, over
    a word-level tokenizer built here with the ``tokenizers`` library, nothing downloaded."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        missing = ("no transformers: open_clip's HFTokenizer (SigLIP-family towers) wraps a transformers "
                   "tokenizer; pip install transformers to run the SigLIP tower tests")
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{missing}; CI=true requires it (.ci/run installs it)")
        pytest.skip(missing)
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", END)])
    PreTrainedTokenizerFast(tokenizer_object=words, pad_token="</s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(folder)
    config = json.loads((PROJECT_CONFIG_DIR / f"{SIGLIP}.json").read_text())
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": config}))
    return open_clip.get_tokenizer(f"local-dir:{folder}")


@pytest.fixture(scope="module")
def siglip_tokenizer(tmp_path_factory):
    return build_siglip_tokenizer(tmp_path_factory.mktemp("siglip-tokenizer"))


@pytest.fixture(scope="module")
def siglip(siglip_tokenizer):
    return Backbone(create_model(SIGLIP), SIGLIP, siglip_tokenizer, LoadReport(SIGLIP, "random init (seed 0)"))


@pytest.fixture(scope="module")
def vit_b32():
    return load_backbone("ViT-B-32")  # randomly initialised, nothing downloads


def test_the_siglip_config_builds_a_custom_text_tower_pooled_at_its_last_position(siglip):
    assert isinstance(siglip.model, open_clip.CustomTextCLIP)
    assert isinstance(siglip.tokenizer, open_clip.tokenizer.HFTokenizer) and not hasattr(siglip.tokenizer, "encode")
    tower = siglip.text_tower
    assert (tower.pool_type, tower.module.attn_mask, tower.trims) == ("last", None, False)
    assert tower.module.pad_id == 0 and siglip.pad_id == PAD      # the tower's default is not what the tokenizer pads


def test_siglip_mask_marks_the_captions_tokens_and_the_pooled_position(siglip):
    captions = ["A photo of a cat.", "there is a red star but no dog", "", "zebra"]
    tokens = siglip.tokenize(captions)
    # canonicalised ("a photo of a cat"), ended by </s>, padded with </s>
    assert tokens[0].tolist() == [3, 4, 5, 3, 6, END] + [PAD] * 10
    assert tokens[3].tolist() == [2, END] + [PAD] * 14
    out = siglip.encode_text_layers(captions, token_layers=[1, 3])
    assert out.eos_index.tolist() == [CONTEXT - 1] * 4
    for row, n in zip(out.mask, [6, 9, 1, 2]):                # words and </s>, then the pooled position
        assert row.nonzero().flatten().tolist() == [*range(n), CONTEXT - 1]
    with torch.no_grad():
        reference = F.normalize(siglip.model.encode_text(tokens), dim=-1)
        pooled = siglip.model.text.text_projection(out.tokens[3][:, CONTEXT - 1])
    assert torch.allclose(out.final, reference, atol=1e-5)
    assert torch.allclose(out.layer(3), reference, atol=1e-5)
    assert torch.allclose(F.normalize(pooled, dim=-1), reference, atol=1e-5)
    assert torch.allclose(siglip.encode_text(captions), reference, atol=1e-5)


def test_truncated_counts_only_the_captions_the_hugging_face_tokenizer_cuts(siglip):
    fits = " ".join(["cat"] * (CONTEXT - 1))                  # 15 words and </s>: exactly the context
    punctuated = ", ".join(["dog"] * (CONTEXT - 1)) + "."     # the same once cleaned of its punctuation
    cut = " ".join(["cat"] * CONTEXT)
    captions = ["a dog", fits, punctuated, cut]
    assert siglip.truncated(captions).tolist() == [False, False, False, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        siglip.tokenize(captions[:3])
    with pytest.warns(UserWarning, match=r"1 caption\(s\) exceed the context length 16 .* e\.g\. 'cat cat"):
        tokens = siglip.tokenize(captions)
    assert tokens[3].tolist() == [VOCAB["cat"]] * (CONTEXT - 1) + [END]   # the cut row still ends in </s>
    with pytest.warns(UserWarning, match="1 caption"):
        assert siglip.encode_text_layers([fits, cut], token_layers=[2]).mask.all()


def test_a_tower_that_masks_another_padding_id_than_its_tokenizer_writes_is_refused(siglip_tokenizer):
    model = create_model(SIGLIP)
    model.text.use_pad_mask = True                            # masks its pad_id, 0, out of attention
    with pytest.raises(ValueError, match=r"masks token id 0 .* pads with id 1"):
        Backbone(model, SIGLIP, siglip_tokenizer, LoadReport(SIGLIP, "random init (seed 0)"))
    model.text.pad_id = PAD
    masked = Backbone(model, SIGLIP, siglip_tokenizer, LoadReport(SIGLIP, "random init (seed 0)"))
    captions = ["a photo of a cat", "no dog"]
    with torch.no_grad():
        reference = F.normalize(model.encode_text(masked.tokenize(captions)), dim=-1)
    assert torch.allclose(masked.encode_text_layers(captions).final, reference, atol=1e-5)


def test_clip_pads_with_zero_and_pools_and_masks_through_its_end_of_text(vit_b32):
    """CLIP's id 0 is "!" as well as padding: "a cat!(" holds a 0 before its end of text, which is a token."""
    captions = ["a cat!(", "a dog", ""]
    assert 0 in vit_b32.tokenizer.encode(captions[0])
    lengths = [len(vit_b32.tokenizer.encode(c)) + 2 for c in captions]       # start, caption, end of text
    out = vit_b32.encode_text_layers(captions, token_layers=[12])
    assert out.eos_index.tolist() == [n - 1 for n in lengths] == [5, 3, 1]
    assert [row.nonzero().flatten().tolist() for row in out.mask] == [list(range(n)) for n in lengths]
    assert vit_b32.pad_id == 0 and vit_b32.text_tower.trims
    with torch.no_grad():
        reference = F.normalize(vit_b32.model.encode_text(vit_b32.tokenize(captions)), dim=-1)
    assert torch.allclose(out.final, reference, atol=1e-5) and torch.allclose(out.layer(12), reference, atol=1e-5)


def test_clip_counts_a_caption_as_cut_only_past_the_context(vit_b32):
    n = vit_b32.context_length - 2
    captions = [" ".join(["cat"] * n), " ".join(["cat"] * (n + 1)), "a dog"]
    assert vit_b32.truncated(captions).tolist() == [False, True, False]


def test_a_first_token_tower_pools_and_masks_from_the_first_position(tmp_path):
    config = json.loads((PROJECT_CONFIG_DIR / f"{SIGLIP}.json").read_text())
    config["text_cfg"].update(pool_type="first", vocab_size=49408)
    del config["text_cfg"]["hf_tokenizer_name"], config["text_cfg"]["tokenizer_kwargs"]
    (tmp_path / "test-first-token.json").write_text(json.dumps(config))
    open_clip.add_model_config(tmp_path)
    tokenizer = open_clip.SimpleTokenizer(context_length=CONTEXT)
    first = Backbone(create_model("test-first-token"), "test-first-token", tokenizer,
                     LoadReport("test-first-token", "random init (seed 0)"))
    captions = ["a photo of a cat", ""]
    out = first.encode_text_layers(captions, token_layers=[3])
    assert out.eos_index.tolist() == [0, 0] and not first.text_tower.trims
    assert out.mask.sum(dim=1).tolist() == [len(tokenizer.encode(c)) + 2 for c in captions] == [7, 2]
    with torch.no_grad():
        reference = F.normalize(first.model.encode_text(first.tokenize(captions)), dim=-1)
    assert torch.allclose(out.final, reference, atol=1e-5) and torch.allclose(out.layer(3), reference, atol=1e-5)


def test_peakpatchs_token_cache_holds_the_masked_positions_of_a_last_token_tower(siglip):
    """PeakTaps keeps a caption's own tokens: on a last-token tower those are its words, its end of text and
    the pooled last position after the padding, not a prefix of the row."""
    from negutils.methods.peakpatch.scorer import PeakTaps

    captions = ["a photo of a cat", "no dog"]
    taps = PeakTaps(siglip, 2, 1)
    batch = taps.batch(captions)
    layers = siglip.encode_text_layers(captions, token_layers=[2])
    for j in range(len(captions)):
        own = layers.tokens[2][j][layers.mask[j]]
        assert int(batch["mask"][j].sum()) == len(own)
        assert torch.allclose(batch["tokens"][j, :len(own)], own.half().float())
        assert torch.allclose(batch["tokens"][j, len(own) - 1], layers.tokens[2][j, CONTEXT - 1].half().float())
