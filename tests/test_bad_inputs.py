"""Inputs that would otherwise give a plausible wrong number: each is scored exactly (ties split) or
refused with an error that names it."""
import numpy as np
import pandas as pd
import pytest
import torch

from negutils.benchmarks import evaluate_mcq, evaluate_pairwise
from negutils.benchmarks.evaluate import mcq_option_scores
from negutils.benchmarks.negbench import build_mcq, read_mcq_csv, write_mcq_csv
from negutils.benchmarks.suite import Benchmarks
from negutils.benchmarks.tokenisation import (IdenticalOptionsError, check_tokenisation, tokenisation_report,
                                              tokenisation_summary)
from negutils.core import NonFiniteScores, choice_credit, mcq_metrics, ranks_of_targets, tied_choices
from negutils.methods import build_scorer, mcq_accuracy
from negutils.models import NonFiniteWeightsError, load_backbone, save_checkpoint
from negutils.world import load_split


class ConstantScorer:
    """Every image and caption scores the same: a model that cannot tell anything apart."""

    def __init__(self, value: float = 0.5, name: str = "constant"):
        self.value, self.name = value, name

    def image_features(self, split, indices):
        return torch.zeros(len(indices), 4)

    def score(self, image_features, captions):
        return torch.full((len(image_features), len(captions)), self.value)


@pytest.fixture(scope="module")
def val(tiny_world):
    return load_split(tiny_world / "val")


@pytest.fixture(scope="module")
def layouts(val):
    """The same questions in our layout (the answer at a seeded position) and in NegBench's
    published one (the answer always in column 0)."""
    ours = build_mcq(val)
    published = ours.copy()
    for q, row in ours.iterrows():
        options = [row[f"caption_{k}"] for k in range(4)]
        c = int(row["correct_answer"])
        order = [c] + [k for k in range(4) if k != c]
        for k, source in enumerate(order):
            published.loc[q, f"caption_{k}"] = options[source]
            published.loc[q, f"caption_{k}_type"] = row[f"caption_{source}_type"]
    published["correct_answer"] = 0
    assert ours["correct_answer"].nunique() > 1
    return {"ours": ours, "published": published}


def test_choice_credit_splits_ties_and_refuses_nan():
    scores = np.array([[0.9, 0.1, 0.2, 0.3], [0.5, 0.5, 0.1, 0.0], [0.4, 0.4, 0.4, 0.4], [0.1, 0.2, 0.2, 0.0]])
    assert choice_credit(scores, [0, 1, 2, 0]).tolist() == [1.0, 0.5, 0.25, 0.0]
    assert tied_choices(scores).tolist() == [False, True, True, True]
    metrics = mcq_metrics(scores, [0, 1, 2, 0], np.array(["positive"] * 4),
                          np.array([["correct", "negative", "hybrid", "positive"]] * 4))
    assert metrics["accuracy"] == pytest.approx(1.75 / 4) and metrics["tied_questions"] == 3
    # the wrong picks of row 1 (1/2 on option 0), row 2 (1/4 each on 0, 1, 3) and row 3 (1/2 on 1 and 2)
    assert metrics["wrong_pick_negative"] == pytest.approx((0.25 + 0.5) / 2.25)
    with pytest.raises(NonFiniteScores, match=r"1 non-finite values in 1 rows, first rows \[1\]"):
        choice_credit([[0.1, 0.2], [np.nan, 0.0]], [0, 0])


def test_a_constant_scorer_ranks_every_target_last_not_first():
    assert ranks_of_targets(np.zeros((3, 5)), [0, 2, 4]).tolist() == [4, 4, 4]
    assert ranks_of_targets(np.array([[0.9, 0.1, 0.5]]), [0]).tolist() == [0]


@pytest.mark.parametrize("layout", ["ours", "published"])
def test_a_constant_scorer_scores_at_chance_in_both_layouts(layouts, val, layout):
    metrics = evaluate_mcq(ConstantScorer(), layouts[layout], val)
    assert metrics["accuracy"] == pytest.approx(0.25) and metrics["tied_questions"] == len(layouts[layout])


@pytest.mark.parametrize("layout", ["ours", "published"])
def test_a_nan_scorer_is_refused_with_its_name_and_a_caption(layouts, val, layout):
    with pytest.raises(NonFiniteScores, match=r"scorer 'diverged' gave \d+ non-finite scores .* e.g. for \["):
        evaluate_mcq(ConstantScorer(float("nan"), "diverged"), layouts[layout], val)


def test_a_constant_scorer_is_at_chance_on_pairwise_tasks_and_in_training_selection(val):
    samples = pd.DataFrame({"image_id": val.image_ids[:6], "caption_0": ["a"] * 6, "caption_1": ["b"] * 6,
                            "correct": [0, 1, 0, 1, 1, 1]})
    assert evaluate_pairwise(ConstantScorer(), samples, val)["accuracy"] == 0.5
    assert mcq_accuracy(torch.zeros(8, 4), [0] * 8) == 0.25
    with pytest.raises(NonFiniteScores):
        mcq_accuracy(torch.full((2, 4), float("nan")), [0, 0])


def _collision_bench(val, tmp_path, correct: int) -> Benchmarks:
    """One question whose first two options differ only after the 32-token context of negbook-tiny."""
    head = "A photo of " + ", ".join(["a red star and a blue moon"] * 6)
    mcq = build_mcq(val).head(3).copy()
    mcq.loc[0, "caption_0"], mcq.loc[0, "caption_1"] = head + " and a cup.", head + " but no cup."
    mcq.loc[0, "correct_answer"] = correct
    root = tmp_path / f"layout-{correct}"
    write_mcq_csv(mcq, root / "mcq.csv")
    empty = {name: pd.DataFrame(columns=cols) for name, cols in
             {"retrieval_affirmative": ["query"], "retrieval_negated": ["query"], "confusion_2c": ["query"],
              "confusion_3c": ["query"], "factor": ["caption_0", "caption_1"],
              "existence": ["caption_0", "caption_1"]}.items()}
    for name, frame in empty.items():
        frame.to_csv(root / f"{name}.csv", index=False)
    return Benchmarks(split="val", root=root, mcq=read_mcq_csv(root / "mcq.csv"), **empty)


@pytest.mark.parametrize("correct", [0, 1])       # published layout (column 0) and ours
def test_options_identical_after_tokenisation_are_refused_or_scored_as_a_tie(val, tmp_path, correct):
    tiny = load_backbone("negbook-tiny")
    bench = _collision_bench(val, tmp_path, correct)
    report = tokenisation_report(bench, tiny)
    mcq_row = report.set_index("benchmark").loc["mcq"]
    assert mcq_row["over context"] == 2 and mcq_row["identical option sets"] == 1 and "row 0" in mcq_row["example"]
    assert "1 identical option sets" in tokenisation_summary(report)
    with pytest.raises(IdenticalOptionsError, match=rf"{bench.root / 'mcq.csv'}: 1 of its questions, e.g. row 0"):
        check_tokenisation(report)
    check_tokenisation(report, accept_identical_options=True)
    with pytest.warns(UserWarning, match="exceed the context length 32"):
        option_scores = mcq_option_scores(build_scorer("vanilla", tiny), bench.mcq, val)
    assert option_scores[0, 0] == option_scores[0, 1]            # the model saw one input twice
    credit = choice_credit(option_scores, bench.mcq["correct_answer"].to_numpy())[0]
    assert credit in (0.0, 0.5)          # 1/2 when the clashing pair is on top, never 1


def test_a_checkpoint_with_nan_weights_is_refused_with_the_tensor_names(tmp_path):
    model = load_backbone("negbook-tiny").model
    with torch.no_grad():
        model.ln_final.weight[0] = float("nan")
        model.text_projection[0, 0] = float("inf")
    path = save_checkpoint(model, tmp_path / "diverged.pt", "negbook-tiny")
    with pytest.raises(NonFiniteWeightsError, match=r"non-finite values \(NaN or inf\) in 2 tensors: "
                                                    r"\['text_projection', 'ln_final.weight'\]"):
        load_backbone(checkpoint=path)
