"""What depends on a backbone's family: NegFull fine-tunes a SigLIP (a model with a ``logit_bias``) with the
sigmoid loss it was pretrained with, and LCSE takes the paper's (mu, beta) only for the models the paper
calibrated (CLIP ViT-B/32, SigLIP 2), leaving every other model to a fit or ``--lcse-calibration``."""
import numpy as np
import open_clip
import pytest
import torch
import torch.nn.functional as F
from open_clip.loss import SigLipLoss

from negutils import eval as negbook_eval
from negutils.methods.lcse import Calibration, default_calibration
from negutils.methods.negfull import NegFullConfig, finetune_negfull, negfull_loss
from negutils.methods.training_data import prepare_negation_data, protocol_view
from negutils.models.backbone import Backbone, load_backbone
from negutils.models.weights import LoadReport
from negutils.world.coco import load_split


def tiny_siglip(seed: int = 0) -> Backbone:
    """A SigLIP at tiny widths with random weights: open_clip's CustomTextCLIP with SigLIP's initial
    logit scale and bias (its configs' ``init_logit_bias``), read through open_clip's own tokenizer."""
    torch.manual_seed(seed)
    model = open_clip.CustomTextCLIP(
        embed_dim=64, vision_cfg={"image_size": 64, "layers": 2, "width": 64, "head_width": 32, "patch_size": 16},
        text_cfg={"context_length": 32, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
        init_logit_scale=np.log(10), init_logit_bias=-10)
    report = LoadReport("tiny-siglip", f"random init (seed {seed})", 0, sum(p.numel() for p in model.parameters()))
    return Backbone(model, "tiny-siglip", open_clip.SimpleTokenizer(context_length=32), report)


@pytest.fixture(scope="module")
def siglip_setup(tiny_world, tmp_path_factory):
    backbone = tiny_siglip()
    data = prepare_negation_data(backbone, load_split(tiny_world / "pretrain"), "tiny-siglip:seed0",
                                 tmp_path_factory.mktemp("features"), held_out=0.2, progress=False)
    return backbone, data


def fixed_batch(backbone: Backbone, data, protocol: str, size: int = 8):
    """The first ``size`` training images of ``protocol``'s view with their captions, drawn with seed 0."""
    view = protocol_view(data, protocol)
    rows = np.arange(size)
    batch = view.batch(rows, np.random.default_rng(0))
    images = backbone.image_batch(data.split.images(view.images[rows]))
    return images, backbone.tokenize([data.captions[c] for c in batch["captions"]]), batch


@pytest.mark.parametrize("protocol", ["negbench", "hard-negatives"])
def test_negfull_loss_of_a_siglip_is_open_clips_sigmoid_loss_plus_the_mcq_term(siglip_setup, protocol):
    backbone, data = siglip_setup
    images, text, batch = fixed_batch(backbone, data, protocol)
    model = backbone.model
    loss, loss_sigmoid, loss_mcq = negfull_loss(backbone, images, text, batch, alpha=0.3)

    img = F.normalize(model.encode_image(images), dim=-1)
    txt = F.normalize(model.encode_text(text), dim=-1)
    scale, bias = model.logit_scale.exp(), model.logit_bias
    pos, neg = txt[batch["positives"]], txt[batch["negatives"]]
    n = len(img)
    assert protocol == "negbench" and len(neg) == 0 or protocol == "hard-negatives" and len(neg) > 0
    # every pair a binary decision: +1 for an image's own positive, -1 for every other positive and every negative
    labels = torch.cat([2 * torch.eye(n) - 1, -torch.ones(n, len(neg))], dim=1)
    pairwise = F.softplus(-labels * (scale * img @ torch.cat([pos, neg]).T + bias)).sum() / n
    assert torch.allclose(loss_sigmoid, pairwise, rtol=1e-5)
    if protocol == "negbench":
        assert torch.allclose(loss_sigmoid, SigLipLoss()(img, pos, scale, bias), rtol=1e-5)
    options = torch.from_numpy(batch["mcq"].astype(np.int64))
    scores = (img[batch["mcq_rows"]][:, None, :] * txt[options]).sum(-1)
    mcq = F.cross_entropy(scale * scores, torch.from_numpy(batch["mcq_correct"].astype(np.int64)))
    assert len(options) > 0 and torch.allclose(loss_mcq, mcq, rtol=1e-5)
    assert torch.allclose(loss, 0.3 * pairwise + 0.7 * mcq, rtol=1e-5)
    loss.backward()                  # the bias is trained: the loss depends on it
    assert model.logit_bias.grad is not None and model.logit_bias.grad.abs().item() > 0
    model.zero_grad(set_to_none=True)


def test_a_short_negfull_run_lowers_a_siglips_sigmoid_loss_and_moves_its_bias(siglip_setup):
    backbone, data = siglip_setup
    config = NegFullConfig(alpha=0.5, batch_size=8, images=64, lr=1e-3, weight_decay=0.0, bf16=False)
    tuned, history = finetune_negfull(backbone, data, config, progress=False)
    assert len(history) == 8 and (history["contrastive"] == "sigmoid").all()
    images, text, batch = fixed_batch(backbone, data, "negbench")
    with torch.no_grad():
        before = [x.item() for x in negfull_loss(backbone, images, text, batch, alpha=0.5)]
        after = [x.item() for x in negfull_loss(tuned, images, text, batch, alpha=0.5)]
    assert after[0] < before[0] and after[1] < before[1]          # the whole loss and its sigmoid term
    # without weight decay only the sigmoid loss's gradient moves the bias, up from -10: at the start every
    # pair's logit is near -10, so the positives' misses outweigh the negatives' near-certain hits
    assert backbone.model.logit_bias.item() == -10 and tuned.model.logit_bias.item() > -10


def test_a_clip_is_still_fine_tuned_with_the_softmax_loss(tiny_world, tmp_path):
    clip = load_backbone("negbook-tiny")
    data = prepare_negation_data(clip, load_split(tiny_world / "pretrain"), "tiny:seed0", tmp_path, held_out=0.2,
                                 progress=False)
    _, history = finetune_negfull(clip, data, NegFullConfig(alpha=0.5, batch_size=8, images=8), progress=False)
    assert list(history["contrastive"]) == ["softmax"]


@pytest.mark.parametrize("model_name, family", [
    ("ViT-B-32", "clip"), ("ViT-B-32-quickgelu", "clip"), ("clip", "clip"),
    ("ViT-B-16-SigLIP2", "siglip2"), ("ViT-SO400M-14-SigLIP2", "siglip2"), ("ViT-B-32-SigLIP2-256", "siglip2"),
    ("siglip2", "siglip2")])
def test_the_papers_calibration_goes_to_clip_vit_b32_and_siglip2(model_name, family):
    mu = {"clip": 0.22, "siglip2": 0.05}[family]
    assert default_calibration(model_name) == Calibration(mu, 30.0, f"LCSE paper default for {family}")


@pytest.mark.parametrize("model_name", ["ViT-B-16-SigLIP", "ViT-SO400M-14-SigLIP", "ViT-L-16-SigLIP-256",
                                        "EVA02-B-16", "ViT-L-14", "ViT-B-16", "RN50", "ViT-B-32-256",
                                        "negbook-organism", "negbook-tiny"])
def test_a_model_the_paper_did_not_calibrate_gets_no_calibration(model_name):
    assert default_calibration(model_name) is None
    assert negbook_eval.calibration(model_name, None) is None


def test_negbook_eval_asks_a_siglip_for_its_lcse_calibration_before_loading_anything(monkeypatch, tmp_path, capsys):
    def refuse(*args, **kwargs):
        pytest.fail("negbook eval loaded weights or data before refusing its arguments")

    monkeypatch.setattr(negbook_eval, "load_backbone", refuse)
    monkeypatch.setattr(negbook_eval, "load_splits", refuse)
    code = negbook_eval.main(["--model", "ViT-B-16-SigLIP", "--pretrained", "webli", "--method", "lcse",
                              "--output", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err
    assert code == 1 and "LCSE has no published (mu, beta) for ViT-B-16-SigLIP: pass --lcse-calibration" in err


@pytest.mark.parametrize("model_name,rows", [("ViT-B-32", 2), (None, 2), ("ViT-L-14", 1)])
def test_the_fit_stands_beside_the_papers_values_only_where_the_paper_gave_some(model_name, rows):
    """Chapter 05's comparison: a model the LCSE paper calibrated gets its (mu, beta) beside the fit (the
    organism, None, is compared with CLIP's); any other model shows the fit alone, never a borrowed row."""
    from negutils.methods.lcse_analysis import beside_paper

    evidence = {"holistic": np.array([[0.3, 0.1], [0.2, 0.4]]), "parses": [(), ()], "sims": np.zeros((2, 0)),
                "column": {}, "correct": np.array([0, 1]), "test": ["NOT", "AND"]}
    table = beside_paper(evidence, Calibration(0.1, 20.0, "fit"), model_name, "pretrain")
    assert len(table) == rows and table["used"].tolist() == [True] + [False] * (rows - 1)
    assert (table["All"] == 1.0).all()                  # holistic scores already pick the right option
