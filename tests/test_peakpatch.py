"""PeakPatch's modules, losses, training, scorer, training data and the NegFull baseline."""
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from negutils.methods import ECN, SCN, PeakPatchConfig, parameter_count
from negutils.methods.peakpatch.model import ALPHA_MAX, PeakPatch
from negutils.methods.peakpatch.train import losses


def random_batch(n=6, tokens=7, width=64, dim=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(n, tokens, dtype=torch.bool)
    mask[0, 3:] = False                       # one short caption: padding must be masked
    return {"final": F.normalize(torch.randn(n, dim, generator=g), dim=-1),
            "proj_lp": F.normalize(torch.randn(n, dim, generator=g), dim=-1),
            "eos_lp": torch.randn(n, width, generator=g), "eos_la": torch.randn(n, width, generator=g),
            "tokens": torch.randn(n, tokens, width, generator=g) * mask[..., None], "mask": mask}


def test_sizes_match_table_14_at_clip_vit_b32():
    assert abs(parameter_count(ECN(512, 512)) - 4.7e6) < 0.05e6        # paper: ~4.7M
    assert abs(parameter_count(SCN(512)) - 494e3) < 5e3                 # paper: 494K
    assert parameter_count(ECN(512, 512, use_anchor=False)) < parameter_count(ECN(512, 512))


def test_ecn_output_is_unit_norm_and_alpha_starts_at_e_minus_0_7():
    ecn = ECN(64, 64).eval()
    b = random_batch()
    out = ecn(b["final"], b["eos_lp"], b["eos_la"], b["tokens"], b["mask"])
    assert torch.allclose(out.norm(dim=-1), torch.ones(len(out)), atol=1e-6)
    assert ecn.alpha.item() == pytest.approx(np.exp(-0.7))


def test_padding_does_not_change_the_ecn_output():
    ecn = ECN(64, 64).eval()
    b = random_batch()
    longer = {**b, "tokens": torch.cat([b["tokens"], torch.randn(6, 3, 64)], dim=1),
              "mask": torch.cat([b["mask"], torch.zeros(6, 3, dtype=torch.bool)], dim=1)}
    args = ("final", "eos_lp", "eos_la", "tokens", "mask")
    assert torch.allclose(ecn(*[b[k] for k in args]), ecn(*[longer[k] for k in args]), atol=1e-6)


def test_scn_correction_is_bounded_by_alpha_max():
    scn = SCN(64)
    with torch.no_grad():
        for p in scn.parameters():
            p.mul_(50)                                                  # saturate the tanh
    b = random_batch()
    delta = scn(b["final"], b["proj_lp"], b["final"].flip(0))
    assert (delta.abs() <= ALPHA_MAX + 1e-7).all() and delta.abs().max() > 0.9 * ALPHA_MAX
    pairwise = scn.pairwise(b["final"], b["proj_lp"], b["final"][:4], chunk=4)
    assert pairwise.shape == (4, 6) and torch.allclose(pairwise[2], scn(b["final"], b["proj_lp"],
                                                                         b["final"][2].expand(6, -1)), atol=1e-6)


def test_scn_pairwise_in_tiles_of_images_equals_whole_columns():
    """Tiles of images change which matrix-product kernel runs only for tiles of a few rows: at the
    chapters' sizes (hundreds of images a tile, a ragged last one) the values are the same bit for bit
    on the CPUs measured, and on any tiling the same to float rounding."""
    generator = torch.Generator().manual_seed(1)
    scn = SCN(256).eval()
    text, peak, images = (F.normalize(torch.randn(n, 256, generator=generator), dim=-1) for n in (40, 40, 600))
    with torch.no_grad():
        whole = scn.pairwise(text, peak, images, rows=len(images))
        tiled = scn.pairwise(text, peak, images, rows=256)              # tiles of 256, 256 and 88 images
        small = scn.pairwise(text, peak, images, chunk=4, rows=7)
    assert tiled.shape == (600, 40) and torch.equal(tiled, whole)
    assert torch.allclose(small, whole, atol=1e-6, rtol=0)
    assert torch.allclose(whole[:, 5], scn(text[5].expand(600, -1), peak[5].expand(600, -1), images), atol=1e-6)


def _batch_layout(n_captions=6):
    """Three images whose positives are captions 0-2, one hard negative (3) and one MCQ each."""
    return {"captions": np.arange(n_captions), "positives": np.array([0, 1, 2]), "negatives": np.array([3]),
            "mcq": np.array([[0, 3, 1, 2], [1, 4, 0, 2], [2, 5, 0, 1]]), "mcq_rows": np.arange(3),
            "mcq_correct": np.array([0, 0, 0])}


@pytest.mark.parametrize("variant, reaches_ecn", [("joint", True), ("detached", False)])
def test_scn_loss_reaches_the_ecn_only_when_not_detached(variant, reaches_ecn):
    torch.manual_seed(0)
    model = PeakPatch(64, 64, variant, identity_init=False)
    images = F.normalize(torch.randn(3, 64), dim=-1)
    config = PeakPatchConfig(variant=variant, lambda_scn=1.0)
    terms = losses(model, random_batch(), images, _batch_layout(), config)
    terms["scn"].backward()
    grad = model.ecn.query.grad
    assert (grad is not None and grad.abs().sum() > 0) == reaches_ecn


def test_a_training_step_is_bitwise_reproducible_on_two_threads():
    """The loss gathers captions shared by several rows (positives, negatives, MCQ options); a
    gather by advanced indexing has a backward (index_put_ with accumulate) whose sums come in
    thread order, so two runs on 2 threads differed in the 8th digit and the models drifted apart
    over training. index_select's backward (index_add_) does not depend on the threads."""
    n, d, rng = 512, 256, np.random.default_rng(0)         # large enough that the old gather split over threads
    layout = {"captions": np.arange(n), "positives": rng.integers(0, n, 256), "negatives": rng.integers(0, n, 256),
              "mcq": rng.integers(0, n, (128, 4)), "mcq_rows": np.arange(128), "mcq_correct": np.zeros(128, int)}
    images = F.normalize(torch.randn(256, d, generator=torch.Generator().manual_seed(1)), dim=-1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(3):
            torch.manual_seed(0)
            model = PeakPatch(d, d, "joint", dropout=0.1)
            batch = random_batch(n, width=d, dim=d)
            losses(model, batch, images, layout, PeakPatchConfig(lambda_scn=1.0))["total"].backward()
            grads.append([p.grad.clone() for p in model.parameters()])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(*grads))


def test_ecn_is_the_identity_at_init_unless_asked_otherwise():
    b = random_batch()
    args = ("final", "eos_lp", "eos_la", "tokens", "mask")
    torch.manual_seed(0)
    same = F.cosine_similarity(ECN(64, 64).eval()(*[b[k] for k in args]), b["final"])
    torch.manual_seed(0)
    rotated = F.cosine_similarity(ECN(64, 64, identity_init=False).eval()(*[b[k] for k in args]), b["final"])
    assert (same > 0.99).all() and torch.allclose(same, torch.ones(6), atol=1e-6)
    assert rotated.mean() < 0.9
    # zero-initialised, the last layer still learns: its gradient is not zero
    ecn = ECN(64, 64)
    ecn(*[b[k] for k in args]).sum().backward()
    assert ecn.mlp[-1].weight.grad.abs().sum() > 0


def test_hard_negatives_enter_only_the_image_to_text_denominator():
    from negutils.methods.training_data import contrastive_loss

    images = F.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(0)), dim=-1)
    base = contrastive_loss(images, images, 10.0)
    with_far = contrastive_loss(images, torch.cat([images, -images[:1]]), 10.0)
    with_close = contrastive_loss(images, torch.cat([images, images[:1]]), 10.0)
    assert base <= with_far < with_close


def test_variants_have_the_right_modules():
    assert PeakPatch(64, 64, "ecn_only").scn is None and PeakPatch(64, 64, "scn_only").ecn is None
    assert PeakPatch(64, 64, "no_anchor").ecn.use_anchor is False
    with pytest.raises(ValueError, match="unknown PeakPatch variant"):
        PeakPatch(64, 64, "both")


@pytest.fixture(scope="module")
def trained_setup(tiny_world, tmp_path_factory):
    from negutils.methods import prepare_negation_data
    from negutils.models.backbone import load_backbone
    from negutils.models.features import TextFeatures, extract_text_features
    from negutils.world.coco import load_split

    backbone = load_backbone("negbook-tiny")
    split = load_split(tiny_world / "pretrain")
    root = tmp_path_factory.mktemp("features")
    data = prepare_negation_data(backbone, split, "tiny:seed0", root, held_out=0.2, progress=False)
    features = TextFeatures(extract_text_features(backbone, data.captions, 6, 3, root, "tiny:seed0", progress=False))
    return backbone, split, data, features


@pytest.mark.parametrize("protocol", ["negbench", "hard-negatives", "mixed"])
def test_a_short_training_run_lowers_the_loss(trained_setup, protocol):
    from negutils.methods.peakpatch.train import train_peakpatch

    _, _, data, features = trained_setup
    config = PeakPatchConfig(protocol=protocol, epochs=4, batch_size=16, lr_ecn=1e-3, lr_scn=1e-3, dropout=0.0)
    model, history = train_peakpatch(features, data, config, progress=False)
    assert list(history["epoch"]) == [0, 1, 2, 3, 4]
    assert history["loss total"].iloc[-1] < history["loss total"].iloc[1]
    assert history["held-out MCQ accuracy"].between(0, 1).all() and not model.training


def test_trained_models_are_cached_with_their_history(trained_setup, tmp_path):
    from negutils.methods.peakpatch.train import ensure_peakpatch

    _, _, data, features = trained_setup
    config = PeakPatchConfig(epochs=1, batch_size=16, variant="scn_only")
    first, history = ensure_peakpatch(features, data, config, tmp_path, progress=False)
    again, history_again = ensure_peakpatch(features, data, config, tmp_path, progress=False)
    assert len(list(tmp_path.glob("*.pt"))) == 1 and history.equals(history_again)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
    checkpoint = next(tmp_path.glob("*.pt"))
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])                 # cut: trained again, not loaded
    with pytest.warns(UserWarning, match=r"is not whole \(.* bytes, its record .*training it again"):
        retrained, _ = ensure_peakpatch(features, data, config, tmp_path, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), retrained.state_dict().values()))


def test_runs_trained_side_by_side_in_workers_equal_runs_trained_here(trained_setup, tmp_path):
    from negutils.methods import train_variants

    _, _, data, features = trained_setup
    runs = {v: PeakPatchConfig(variant=v, epochs=2, batch_size=16, lr_ecn=1e-3, lr_scn=1e-3)
            for v in ("joint", "ecn_only", "scn_only")}
    runs["joint again"] = runs["joint"]                       # one config under two names trains once
    threads = torch.get_num_threads()
    here, history_here = train_variants(features, data, runs, tmp_path / "here", progress=False, workers=1)
    apart, history_apart = train_variants(features, data, runs, tmp_path / "apart", progress=False, workers=2)
    assert len(list((tmp_path / "apart").glob("*.pt"))) == 3
    for name in runs:
        a, b = here[name].state_dict(), apart[name].state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    columns = [c for c in history_here.columns if c != "samples/s"]
    pd.testing.assert_frame_equal(history_here[columns], history_apart[columns])
    assert torch.get_num_threads() == threads            # training's single thread is given back


def test_design_table_keeps_the_reference_unless_a_candidate_leads_by_two_standard_errors():
    from negutils.methods import chosen_design
    from negutils.methods.peakpatch.train import design_table, runner_up_design

    runs = {"reference": PeakPatchConfig(), "scale 10": PeakPatchConfig(scn_logit_scale=10.0),
            "default init": PeakPatchConfig(identity_init=False)}

    def table(accuracies, questions=100):
        return design_table(runs, dict(zip(runs, accuracies)), questions)
    # standard error of 0.5 over 100 questions: 0.05; two of a difference near 0.5: about 0.14
    within = table([0.50, 0.62, 0.53])
    assert within["chosen"].tolist() == [True, False, False]
    assert within["standard error"].iloc[0] == pytest.approx(0.05)
    assert runner_up_design(within) == ("scale 10", {"identity_init": True, "scn_logit_scale": 10.0,
                                                     "delta_penalty": 1.0})
    beyond = table([0.50, 0.55, 0.66])
    assert beyond["chosen"].tolist() == [False, False, True]
    assert chosen_design(beyond) == {"identity_init": False, "scn_logit_scale": 100.0, "delta_penalty": 1.0}
    assert runner_up_design(beyond)[0] == "scale 10"
    assert table([0.50, 0.58, 0.52], questions=400)["chosen"].tolist() == [False, True, False]   # 2 SE 0.07


def test_choose_design_trains_every_candidate_then_the_default_init_of_the_best(trained_setup, tmp_path):
    from negutils.methods import choose_design, train_variants
    from negutils.methods.peakpatch.train import design_table

    _, _, data, features = trained_setup
    base = PeakPatchConfig(epochs=1, batch_size=16, lr_ecn=1e-3, lr_scn=1e-3)
    design = choose_design(features, data, base, (100.0, 10.0), (1.0, 10.0), tmp_path, progress=False)
    grid = [f"SCN scale {s:g}, penalty {p:g}" for s in (100.0, 10.0) for p in (1.0, 10.0)]
    assert design["candidate"].tolist()[:4] == grid and len(design) == 5 and design["chosen"].sum() == 1
    first_round = design.iloc[:4].reset_index(drop=True)
    best = first_round.loc[first_round["held-out MCQ accuracy"].idxmax()]
    leads = best["held-out MCQ accuracy"] - first_round["held-out MCQ accuracy"][0] > 2 * np.hypot(
        best["standard error"], first_round["standard error"][0])
    best = best if leads else first_round.iloc[0]
    last = design.iloc[4]
    assert last["candidate"] == f"{best['candidate']}, default init" and not last["identity_init"]
    assert (last["scn_logit_scale"], last["delta_penalty"]) == (best["scn_logit_scale"], best["delta_penalty"])
    assert design.iloc[:4]["identity_init"].all()
    # each candidate's accuracy is its own trained run's (retrained from the cache: the same numbers)
    runs = {row.candidate: PeakPatchConfig(epochs=1, batch_size=16, lr_ecn=1e-3, lr_scn=1e-3,
                                           identity_init=bool(row.identity_init),
                                           scn_logit_scale=row.scn_logit_scale, delta_penalty=row.delta_penalty)
            for row in design.itertuples()}
    _, history = train_variants(features, data, runs, tmp_path, progress=False)
    best_epochs = history.groupby("run", sort=False)["held-out MCQ accuracy"].max().to_dict()
    again = design_table(runs, best_epochs, len(data.held_out_mcq()))
    pd.testing.assert_frame_equal(again, design)


def test_a_judge_compares_runs_by_its_own_questions(trained_setup, tmp_path):
    """With a judge, the design table and the layer sweep hold the judge's accuracy of each run's kept
    model over the judge's questions; the decision set's credit is the plain 4-way accuracy."""
    from negutils.methods import choose_design, layer_sweep
    from negutils.methods.decision import DecisionSet, peakpatch_credit, questions_only
    from negutils.methods.peakpatch.train import ensure_peakpatch, held_out_accuracy

    _, _, data, features = trained_setup
    decision = DecisionSet(questions_only(data), "held-out images")
    assert decision.questions == len(data.held_out_mcq()) and not len(decision.data.train_images)
    assert set(decision.data.held_out_mcq()[[f"option_{k}" for k in range(4)]].to_numpy().ravel()) == set(
        range(len(decision.data.captions)))
    base = PeakPatchConfig(epochs=1, batch_size=16, lr_ecn=1e-3, lr_scn=1e-3)
    seen = []

    class Judge:
        questions = 12_345

        def __call__(self, model, layers):
            seen.append(layers)
            return 0.25 + 0.01 * len(seen)

    design = choose_design(features, data, base, (100.0,), (1.0, 10.0), tmp_path, progress=False, judge=Judge(),
                           layers=(6, 3))
    assert (design["questions"] == 12_345).all() and set(seen) == {(6, 3)}
    assert design["held-out MCQ accuracy"].tolist() == pytest.approx([0.26, 0.27, 0.28])  # each judged once
    sweep = layer_sweep({(6, 3): features.folder}, data, base, tmp_path, progress=False, judge=Judge())
    assert sweep["questions"].tolist() == [12_345] and seen[-1] == (6, 3)
    model, _ = ensure_peakpatch(features, data, base, tmp_path, progress=False)
    # on the held-out questions themselves, the decision credit is the held-out accuracy
    whole = DecisionSet(data, "the same questions")
    assert peakpatch_credit(model, features, whole).mean() == pytest.approx(held_out_accuracy(model, features, data))
    with pytest.raises(ValueError, match="feature cache holds"):
        peakpatch_credit(model, features, decision)


def test_scorer_rows_agree_with_full_scores(trained_setup):
    from negutils.methods.peakpatch.analysis import near_tie_subset
    from negutils.methods.peakpatch.scorer import PeakPatchScorer

    backbone, _, data, _ = trained_setup
    torch.manual_seed(0)
    scorer = PeakPatchScorer(backbone, PeakPatch(64, 64, "joint").eval(), 6, 3)
    captions = [["a cat", "no cat"], ["a star without a cup", "a star"]]
    images = data.images[:2]
    rows = scorer.score_rows(images, captions)
    full = scorer.score(images, [c for caps in captions for c in caps])
    assert torch.allclose(rows, torch.stack([full[0, :2], full[1, 2:]]), atol=1e-5)
    assert list(near_tie_subset(np.array([[0.5, 0.49, 0.1], [0.9, 0.1, 0.0], [0.3, 0.3, 0.2]]), share=0.34)) == [2]


def test_negfull_alphas_are_compared_by_the_judge_and_the_protocols_that_reuse_one_keep_their_held_out(
        trained_setup, tmp_path):
    from negutils.config import PeakPatchSettings
    from negutils.methods import fit_protocols

    backbone, _, data, _ = trained_setup
    settings = PeakPatchSettings(protocols=("negbench", "mixed"), negfull_alphas=(0.5, 1.0), negfull_images=16,
                                 negfull_batch_size=8, negfull_alpha_protocols=("negbench",))

    class Judge:
        questions = 777
        calls = []

        def __call__(self, model):
            self.calls.append(model)
            return (0.2, 0.6)[len(self.calls) - 1]

    models, table = fit_protocols(backbone, "tiny", data, settings, tmp_path, progress=False, judge=Judge())
    judged = table[table["protocol"] == "negbench"].set_index("alpha")
    assert len(Judge.calls) == 2 and (judged["questions"] == 777).all()     # only the swept protocol is judged
    assert judged["held-out MCQ accuracy"].to_dict() == {0.5: 0.2, 1.0: 0.6}
    assert judged["chosen"].to_dict() == {0.5: False, 1.0: True}
    reused = table[table["protocol"] == "mixed"].iloc[0]         # the judge's alpha, its held-out accuracy kept
    assert reused["alpha"] == 1.0 and reused["questions"] == len(data.held_out_mcq()) and reused["chosen"]
    assert set(models) == {("negbench", 0.5), ("negbench", 1.0), ("mixed", 1.0)}


def test_negfull_short_run_and_bad_alpha(trained_setup):
    from negutils.methods.negfull import NegFullConfig, finetune_negfull, held_out_accuracy

    backbone, split, data, _ = trained_setup
    before = [p.clone() for p in backbone.model.parameters()]
    tuned, history = finetune_negfull(backbone, data, NegFullConfig(alpha=0.5, batch_size=8, lr=1e-3, images=32),
                                      progress=False)
    assert len(history) == 32 // 8 and np.isfinite(history["loss"]).all()
    assert all(torch.equal(a, b) for a, b in zip(before, backbone.model.parameters()))     # original untouched
    assert any(not torch.equal(a, b) for a, b in zip(before, tuned.model.parameters()))
    assert 0.0 <= held_out_accuracy(tuned, data) <= 1.0
    math_kernel, mcq_only = finetune_negfull(backbone, data, NegFullConfig(alpha=0.0, batch_size=8, images=16),
                                             progress=False)
    assert (mcq_only["loss CLIP"] == 0).all() and (mcq_only["loss MCQ"] > 0).all()
    # the math attention kernel (the default on CPU) is in effect: PyTorch's flash kernel rounds otherwise
    flash, _ = finetune_negfull(backbone, data, NegFullConfig(alpha=0.0, batch_size=8, images=16, attention="default"),
                                progress=False)
    assert any(not torch.equal(a, b) for a, b in zip(flash.model.parameters(), math_kernel.model.parameters()))
    with pytest.raises(ValueError, match="alpha must be in"):
        finetune_negfull(backbone, data, NegFullConfig(alpha=1.5))
    with pytest.raises(ValueError, match=r"needs at least 8 training images \(one batch of batch_size=8.*got 5"):
        finetune_negfull(backbone, data, NegFullConfig(batch_size=8, images=5))
    with pytest.raises(ValueError, match=r"needs at least 3 training images .*got 2"):
        finetune_negfull(backbone, data, NegFullConfig(batch_size=2, images=2))


def test_negfull_alpha_1_on_negbench_trains_on_negcap_captions_and_no_mcq(trained_setup, monkeypatch):
    import negutils.methods.negfull as negfull

    backbone, _, data, _ = trained_setup
    seen, original = [], negfull.negfull_loss

    def spy(backbone, images, text, batch, alpha):
        out = original(backbone, images, text, batch, alpha)
        seen.append(([data.captions[c] for c in batch["captions"][batch["positives"]]], out))
        return out

    monkeypatch.setattr(negfull, "negfull_loss", spy)
    negfull.finetune_negfull(backbone, data, negfull.NegFullConfig(alpha=1.0, batch_size=8), progress=False)
    positives = {c for captions, _ in seen for c in captions}
    negcap = {data.captions[c] for c in data.negcap["caption"]}
    assert seen and positives & negcap and positives - negcap          # NegCap captions and affirmative ones
    assert all(float(out[2].detach()) == 0.0 and float(out[1].detach()) > 0
               for _, out in seen)   # no MCQ term at alpha = 1


def test_mentioned_falls_back_to_word_matching():
    from negutils.methods.training_data import mentioned

    assert mentioned({"caption": "Two cats and a dog on a bench."}, ["cat", "dog", "bench", "car"]) == {"cat", "dog",
                                                                                                        "bench"}
    assert mentioned({"caption": "x", "mentioned": ["star"]}, ["star"]) == {"star"}
    assert mentioned({"caption": "Three knives."}, ["knife", "car"]) == {"knife"}


def _results():
    rows = []
    for method, acc in (("vanilla", 0.4), ("PeakPatch (joint)", 0.7)):
        for split in ("val", "ood"):
            rows.append({"dataset": "embedded", "split": split, "task": "mcq", "method": method, "accuracy": acc,
                         "positive_accuracy": acc + 0.2, "negative_accuracy": acc - 0.3, "hybrid_accuracy": acc})
        rows.append({"dataset": "embedded", "split": "val", "task": "retrieval_negated", "method": method,
                     "R@5": acc / 2})
    return pd.DataFrame(rows)


def test_mcq_and_ablation_tables_follow_the_papers_layout():
    from negutils.methods import mcq_table
    from negutils.report import ablation_table

    table = mcq_table(_results())
    assert list(table.columns) == [(s, m) for s in ("COCO/val", "VOC/ood") for m in ("Aff", "Neg", "Hyb", "Avg")]
    assert table.loc["PeakPatch (joint)", ("COCO/val", "Avg")] == 70.0
    ablation = ablation_table(_results(), {"vanilla": "CLIP (baseline)", "PeakPatch (joint)": "PeakPatch (joint)"})
    joint = ablation.set_index("variant").loc["PeakPatch (joint)"]
    assert joint["MCQ Neg"] == 40.0 and joint["Ret R@5"] == 35.0 and joint["paper MCQ Avg"] == 74.3


def test_attention_and_embedding_maps_on_the_tiny_backbone(trained_setup):
    from negutils.methods import attention_by_token_type, embedding_map, polarity_separation
    from negutils.methods.peakpatch.scorer import PeakPatchScorer

    backbone = trained_setup[0]
    torch.manual_seed(0)
    scorer = PeakPatchScorer(backbone, PeakPatch(64, 64, "joint").eval(), 6, 3)
    captions = ["no cat and no dog", "a red star without a cup or a kite"]   # two cues, then one
    batch = scorer.text_batch(captions)
    lengths = batch["mask"].sum(dim=1)
    assert lengths[0] != lengths[1]                      # one caption is padded in the batch
    # each head's softmax over the caption's own tokens: it sums to 1 and leaves padding at 0
    _, weights = scorer.model.ecn.attend(batch["tokens"], batch["mask"], need_weights=True)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(2, 8, 1), atol=1e-6)
    assert (weights[0, :, 0, int(lengths[0]):] == 0).all() and (weights[0, :, 0, :int(lengths[0])] > 0).all()
    # a zero query makes every logit equal: each head spreads 1/n over a caption's n tokens, so the mean
    # weight on negation cues equals that on content words, 1/n per caption, whatever the heads learned
    with torch.no_grad():
        scorer.model.ecn.query.zero_()
        scorer.model.ecn.attention.in_proj_bias[:64].zero_()
    attention = attention_by_token_type(scorer, captions)
    assert list(attention["head"]) == list(range(8))
    uniform = float((1.0 / lengths.double()).mean())
    assert np.allclose(attention["negation"], uniform) and np.allclose(attention["content"], uniform)
    assert np.allclose(attention["ratio"], 1.0)
    frame = embedding_map(backbone.encode_text, ["cat", "star", "cup"])
    assert len(frame) == 30 and set(frame["polarity"]) == {"affirmative", "negated"}
    # an embedder that ignores negation entirely puts negated captions exactly on the affirmative ones
    same = lambda caps: torch.stack([torch.eye(3)[["cat", "star", "cup"].index(c.split()[-1])] for c in caps])  # noqa: E731
    assert polarity_separation(frame, same) == pytest.approx(0.0)


def test_ecn_single_query_attention_equals_torch_multihead_attention():
    torch.manual_seed(0)
    ecn = ECN(64, 64, identity_init=False).eval()
    b = random_batch()
    with torch.no_grad():
        query = ecn.query.expand(len(b["tokens"]), 1, -1)
        reference, weights = ecn.attention(query, b["tokens"], b["tokens"], key_padding_mask=~b["mask"],
                                           need_weights=True, average_attn_weights=False)
        ours, our_weights = ecn.attend(b["tokens"], b["mask"], need_weights=True)
    assert torch.allclose(ours, ecn.post_norm(reference[:, 0]), atol=1e-5)
    assert torch.allclose(our_weights, weights, atol=1e-6) and (our_weights[0, :, 0, 3:] == 0).all()


def test_negation_data_is_built_once_per_split_and_each_backbone_gets_its_own_images(trained_setup, tmp_path,
                                                                                       monkeypatch):
    import dataclasses

    from negutils.methods import prepare_negation_data, training_data
    from negutils.models.backbone import load_backbone

    backbone, split, data, _ = trained_setup
    built = []
    monkeypatch.setattr(training_data, "build_negation_data", lambda *a, **k: built.append(a) or data)
    other = load_backbone("negbook-tiny", seed=1)                  # another model, same split: no rebuild
    again = prepare_negation_data(other, split, "tiny:seed1", tmp_path, held_out=0.2, progress=False)
    assert built == [] and again.captions == data.captions and again.negmcq is data.negmcq
    assert not torch.equal(again.images, data.images)              # its own embeddings, the first copy's kept
    assert torch.equal(data.images, prepare_negation_data(backbone, split, "tiny:seed0", tmp_path, held_out=0.2,
                                                          progress=False).images)
    recaptioned = dataclasses.replace(split, captions=[list(c) for c in split.captions])   # same folder, new object
    prepare_negation_data(backbone, recaptioned, "tiny:seed0", tmp_path, held_out=0.2, progress=False)
    assert len(built) == 1 and built[0][0] is recaptioned


def test_an_export_rebuilds_the_scorer_and_refuses_other_backbones_and_bad_files(trained_setup, tmp_path):
    from negutils.methods import export_peakpatch
    from negutils.methods.peakpatch.export import load_peakpatch
    from negutils.methods.peakpatch.scorer import PeakPatchScorer
    from negutils.models.backbone import load_backbone

    backbone, _, data, _ = trained_setup
    torch.manual_seed(3)
    model = PeakPatch(64, 64, "no_anchor").eval()
    torch.nn.init.normal_(model.ecn.mlp[-1].weight, std=0.1)           # a correction that is not the identity
    scorer = PeakPatchScorer(backbone, model, 6, 3, name="PeakPatch (w/o anchor)")
    path = export_peakpatch(scorer, tmp_path / "export.pt", training={"epochs": 1})
    loaded = load_peakpatch(path, backbone)
    assert loaded.name == scorer.name and (loaded.l_p, loaded.l_a) == (6, 3) and loaded.model.variant == "no_anchor"
    captions = ["a cat", "no cat", "a star without a cup"]
    assert torch.equal(loaded.score(data.images[:3], captions), scorer.score(data.images[:3], captions))
    with pytest.raises(ValueError, match="trained on other weights.*its text tower's"):
        load_peakpatch(path, load_backbone("negbook-tiny", seed=1))
    retowered = load_backbone("negbook-tiny")               # the same text tower, another image tower
    with torch.no_grad():
        for parameter in retowered.model.visual.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    with pytest.raises(ValueError, match=r"trained on other weights.*differ, its image tower's by up to"):
        load_peakpatch(path, retowered)
    with pytest.raises(ValueError, match="text width 64 there, 256 here, embedding size 64 there, 256 here"):
        load_peakpatch(path, load_backbone("negbook-organism"))
    blob = torch.load(path, weights_only=True)
    blob["state_dict"]["scn.head.0.weight"][0, 0] = float("nan")
    torch.save(blob, tmp_path / "nan.pt")
    with pytest.raises(ValueError, match=r"non-finite values in 1 tensors: \['scn.head.0.weight'\]"):
        load_peakpatch(tmp_path / "nan.pt", backbone)
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    with pytest.raises(ValueError, match="is not a PeakPatch export"):
        load_peakpatch(tmp_path / "bare.pt", backbone)


def test_negfull_fine_tunes_a_vit_b32_at_its_own_resolution(trained_setup):
    """The gpu profile's NegFull when no released checkpoint is given: ViT-B-32 (224 px, QuickGELU)
    fine-tuned on the world's 64 px images, which must be resized for its position embeddings."""
    from negutils.methods.negfull import NegFullConfig, finetune_negfull
    from negutils.models.backbone import load_backbone

    _, _, data, _ = trained_setup
    vit = load_backbone("ViT-B-32", quick_gelu=True)
    tuned, history = finetune_negfull(vit, data, NegFullConfig(alpha=0.5, batch_size=3, images=3, lr=1e-5),
                                      progress=False)
    assert vit.image_size == 224 and len(history) == 1 and np.isfinite(history["loss"]).all()
    assert tuned.report.quick_gelu
    assert any(not torch.equal(a, b) for a, b in zip(vit.model.parameters(), tuned.model.parameters()))


@pytest.mark.parametrize("how", ["zeroed", "emptied"])
def test_a_zeroed_or_emptied_peakpatch_checkpoint_is_trained_again(trained_setup, tmp_path, how):
    from negutils.methods.peakpatch.train import ensure_peakpatch

    _, _, data, features = trained_setup
    config = PeakPatchConfig(epochs=1, batch_size=16, variant="scn_only")
    first, _ = ensure_peakpatch(features, data, config, tmp_path, progress=False)
    checkpoint = next(tmp_path.glob("*.pt"))
    checkpoint.write_bytes(b"\0" * checkpoint.stat().st_size if how == "zeroed" else b"")
    with pytest.warns(UserWarning, match="is not whole .*training it again"):
        again, _ = ensure_peakpatch(features, data, config, tmp_path, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))


def test_a_damaged_negfull_checkpoint_is_fine_tuned_again(trained_setup, tmp_path):
    from negutils.methods.negfull import NegFullConfig, ensure_negfull

    backbone, _, data, _ = trained_setup
    config = NegFullConfig(alpha=0.5, batch_size=8, images=8)
    _, accuracy = ensure_negfull(backbone, "tiny", data, config, tmp_path, progress=False)
    checkpoint = next((tmp_path / "negfull").glob("*.pt"))
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    with pytest.warns(UserWarning, match="NegFull checkpoint .* is not whole .*fine-tuning it again"):
        _, again = ensure_negfull(backbone, "tiny", data, config, tmp_path, progress=False)
    assert again == accuracy


def test_negfull_fine_tuned_from_a_quickgelu_model_reloads_with_quickgelu(trained_setup, tmp_path):
    from negutils.methods.negfull import NegFullConfig, ensure_negfull
    from negutils.models.backbone import load_backbone

    _, _, data, _ = trained_setup
    base = load_backbone("negbook-tiny", quick_gelu=True)      # as OpenAI's ViT-B-32 runs
    tuned, _ = ensure_negfull(base, "tiny-qg", data, NegFullConfig(alpha=0.5, batch_size=8, images=8), tmp_path,
                              progress=False)
    assert tuned.report.quick_gelu


def test_without_delta_scores_the_ecn_alone_and_the_difference_is_the_scns_delta(trained_setup):
    from negutils.methods.peakpatch.retrieval_collapse import without_delta
    from negutils.methods.peakpatch.scorer import PeakPatchScorer

    backbone, _, data, _ = trained_setup
    torch.manual_seed(0)
    scorer = PeakPatchScorer(backbone, PeakPatch(64, 64, "joint").eval(), 6, 3)
    alone = without_delta(scorer)
    captions = ["a cat", "no cat", "a star without a cup"]
    images = data.images[:4]
    corrected, peak = scorer.text_features(captions)
    assert torch.allclose(alone.score(images, captions), images @ corrected.T)
    assert torch.allclose(scorer.score(images, captions) - alone.score(images, captions),
                          scorer.model.scn.pairwise(corrected, peak, images), atol=1e-6)
    rows = alone.score_rows(images[:2], [captions[:2], captions[1:]])
    assert torch.allclose(rows[0], (images[0] * corrected[:2]).sum(-1), atol=1e-6)


def test_the_world_decision_set_is_fresh_images_all_held_out_with_enough_questions(tiny_world_config, tmp_path,
                                                                                  monkeypatch, trained_setup):
    """On the embedded world a held-out tenth too small for the wanted questions is replaced by fresh
    negtrain-like images (none of the world's), every one held out, their NegMCQ only; a real dataset
    keeps its held-out questions and says how few."""
    import dataclasses
    from types import SimpleNamespace

    from negutils.config import get_profile
    from negutils.methods.decision import decision_set
    from negutils.world.coco import load_split
    from negutils.world.generate import ensure_world

    backbone, _, data, _ = trained_setup
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    prof = dataclasses.replace(get_profile("smoke"), world=tiny_world_config)
    world = load_split(ensure_world(tiny_world_config, prof.artifacts_dir(), progress=False) / "negtrain")
    session = SimpleNamespace(profile=prof, backbone=backbone, features_key="tiny:seed0")
    decision = decision_set(session, data, tmp_path / "features", minimum=60, progress=False)
    assert len(data.held_out_mcq()) < 60                    # the fixture's held-out fifth is too small
    assert decision.questions >= 54 and "fresh" in decision.source   # about one question per image
    assert not len(decision.data.train_images)              # every image with a question is held out
    assert set(decision.data.held_out_mcq()["image_index"]) == set(decision.data.held_images.tolist())
    assert not set(decision.data.split.file_names) & set(world.file_names)
    assert len(decision.data.negcap) == 0 and len(decision.data.captions) <= 4 * decision.questions
    assert decision.standard_error() == pytest.approx((0.25 / decision.questions) ** 0.5)
    enough = decision_set(session, data, tmp_path / "features", minimum=len(data.held_out_mcq()), progress=False)
    assert enough.source == "the negtrain split's held-out images"
    real = SimpleNamespace(profile=dataclasses.replace(prof, dataset="coco"), backbone=backbone, features_key="x")
    assert "fewer than the 10000 wanted" in decision_set(real, data, tmp_path, minimum=10_000).source
    with pytest.raises(ValueError, match="minimum must be a positive"):
        decision_set(session, data, tmp_path, minimum=0)
