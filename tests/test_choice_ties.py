"""Chapter 03's statement of which design choices its held-out NegMCQ separates and which are ties."""
import pandas as pd
import pytest

from negutils.methods.peakpatch.analysis import choice_ties, design_choices, ties_findings


def _design():
    candidates = ["scale 100, penalty 1", "scale 10, penalty 1", "scale 10, penalty 1, default init"]
    return pd.DataFrame({"candidate": candidates,
                         "identity_init": [True, True, False], "scn_logit_scale": [100.0, 10.0, 10.0],
                         "delta_penalty": [1.0, 1.0, 1.0], "held-out MCQ accuracy": [0.40, 0.45, 0.30]})


def test_two_standard_errors_of_the_difference_decide_separated_from_tied():
    options = {"x": pd.DataFrame({"option": ["a", "b", "c"], "held-out MCQ accuracy": [0.50, 0.47, 0.40]})}
    ties = choice_ties(options, questions=1000).set_index("other")
    # 2 SE of the difference at 1,000 questions: 2 * sqrt(.25/1000 + .2491/1000) = 4.468 points
    assert ties.loc["b", "2 SE"] == pytest.approx(4.468, abs=1e-3) and not ties.loc["b", "separated"]
    assert ties.loc["c", "separated"] and ties.loc["c", "difference"] == pytest.approx(10.0)
    # ten times the questions separate the 3-point lead
    assert choice_ties(options, questions=10_000).set_index("other").loc["b", "separated"]
    with pytest.raises(ValueError, match="held-out questions"):
        choice_ties(options, questions=0)


def test_the_choices_are_read_from_the_sweep_the_design_table_and_the_alpha_selection():
    sweep = pd.DataFrame({"l_p": [1, 4], "l_a": [1, 2], "held-out MCQ accuracy": [0.44, 0.43]})
    selection = pd.DataFrame({"protocol": ["negbench"] * 3 + ["mixed"], "alpha": [0.5, 1.0, "released", 0.5],
                              "held-out MCQ accuracy": [0.5, 0.3, float("nan"), 0.9]})
    choices = design_choices(sweep, _design(), selection, "negbench")
    assert list(choices["peak and anchor layers"]["option"]) == ["(1, 1)", "(4, 2)"]
    assert list(choices["SCN scale and penalty"]["option"]) == ["scale 100, penalty 1", "scale 10, penalty 1"]
    # the default init is compared with the candidate it was trained beside, not with every candidate
    assert list(choices["ECN initialisation"]["held-out MCQ accuracy"]) == [0.45, 0.30]
    assert list(choices["NegFull alpha"]["option"]) == ["alpha 0.5", "alpha 1.0"]
    lines = ties_findings(choice_ties(choices, questions=700))
    assert lines[0].startswith("peak and anchor layers: (1, 1) ties with (4, 2)")
    assert "ECN initialisation: last layer at zero beats PyTorch default by more than two standard errors." in lines
