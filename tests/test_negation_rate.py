"""The negation-rate experiment: the recaptioned pretrain split has the asked-for rate of
grounded negations, and the sweep's verdict rules read the tables they are given."""
import numpy as np
import pytest

from negutils.experiments import rate_verdicts, sweep_tables
from negutils.experiments.negation_rate import load_rate_run, save_rate_run
from negutils.world import false_negations, negation_share
from negutils.world.coco import load_split
from negutils.world.generate import WorldConfig, build_world
from negutils.world.recaption import recaption


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(WorldConfig(pretrain=500, negtrain=4, val=4, ood=4, seed=3),
                       tmp_path_factory.mktemp("w") / "w", progress=False)


@pytest.mark.parametrize("rate", [0.0, 0.01, 0.05, 0.2])
def test_the_negated_share_is_the_rate_within_sampling_error(world, rate):
    captions = recaption(world / "pretrain", rate, seed=0)
    n = sum(map(len, captions))
    assert n == 500 * 5
    # images that contain every category cannot be negated, so the share may sit a hair below
    assert abs(negation_share(captions) - rate) <= 4 * np.sqrt(rate * (1 - rate) / n) + 1e-12


def test_every_negated_caption_is_true_of_its_image(world):
    captions = recaption(world / "pretrain", 0.2, seed=1)
    split = load_split(world / "pretrain")
    assert false_negations(captions, split.objects) == []
    negated = [c for per in captions for c in per if c["negated"]]
    assert negated and all(c["negated"][0] in c["caption"] for c in negated)
    # the benchmark templates stay out of pretraining
    assert not any("does not feature" in c["caption"] or "but not" in c["caption"] for c in negated)


def test_same_seed_same_captions_and_the_images_never_change(world):
    assert recaption(world / "pretrain", 0.05, seed=2) == recaption(world / "pretrain", 0.05, seed=2)
    split = load_split(world / "pretrain")
    mentioned = [set(c["mentioned"]) for per in recaption(world / "pretrain", 0.05, seed=2) for c in per]
    present = [set(o) for o in split.objects for _ in range(5)]
    assert all(m <= p for m, p in zip(mentioned, present))


def test_bad_rates_and_foreign_splits_are_refused(tmp_path, world):
    with pytest.raises(ValueError, match="negation_rate must be in"):
        recaption(world / "pretrain", 1.5)
    with pytest.raises(FileNotFoundError, match="instances.json"):
        recaption(tmp_path, 0.01)


def test_a_replacement_split_must_say_what_differs(world):
    from negutils.models.pretrain import PretrainConfig, ensure_pretrained

    with pytest.raises(ValueError, match="key_extra"):
        ensure_pretrained(world, PretrainConfig(), world, split=load_split(world / "pretrain"))


def _runs(peaks, gains, negatives):
    runs = []
    for rate, peak, gain, neg in zip((0.0, 0.01, 0.05), peaks, gains, negatives):
        measures = {"MCQ negative": neg, "polarity AUC": 0.3 + neg, "LCD peak": peak, "retrieval R@5": 0.5}
        methods = {"method": ["vanilla", "PeakPatch (joint)", "KTN"], "MCQ": [0.3, 0.3 + gain, 0.3 + gain / 2],
                   "Conf-2C": [0.5, 0.5, 0.5], "FACTOR": [0.5, 0.5, 0.5]}
        curves = {"condition": ["negated"], "quantity": ["D_LCD"], "layer": [1], "mean": [peak], "lo": [peak],
                  "hi": [peak]}
        runs.append({"rate": rate, "pretrain seconds": 1.0, "measure seconds": 1.0, "measures": measures,
                     "curves": curves, "methods": methods})
    return runs


def test_verdicts_follow_their_rules():
    measures, _, methods = sweep_tables(_runs(peaks=(0.01, 0.05, 0.09), gains=(0.3, 0.2, 0.1),
                                              negatives=(0.02, 0.1, 0.3)))
    assert methods.loc[methods.method == "vanilla", "MCQ gain"].eq(0).all()
    v = rate_verdicts(measures, methods).set_index("claim")["verdict"]
    assert v["scarce negation in pretraining causes negation blindness"] == "reproduced"
    assert v["post-hoc corrections help less as the negation rate rises"] == "reproduced"
    assert v["PeakPatch's gain tracks the height of the LCD peak"] == "not reproduced"   # peak up, gain down
    assert v["negation data costs affirmative retrieval"] == "not reproduced"
    measures, _, methods = sweep_tables(_runs(peaks=(0.01, 0.05, 0.09), gains=(0.1, 0.2, 0.3),
                                              negatives=(0.02, 0.02, 0.02)))
    v = rate_verdicts(measures, methods).set_index("claim")["verdict"]
    assert v["PeakPatch's gain tracks the height of the LCD peak"] == "reproduced"
    assert v["scarce negation in pretraining causes negation blindness"] == "not reproduced"
    assert v["post-hoc corrections help less as the negation rate rises"] == "not reproduced"



def test_a_rate_read_back_from_its_cache_gives_the_tables_byte_for_byte(tmp_path):
    """Chapter 07 run again reads each rate's measurements from JSON; its CSVs must be the ones
    the run that computed them wrote, columns in the same order (sorted keys once reordered them)."""
    fresh = _runs(peaks=(0.01, 0.05, 0.09), gains=(0.3, 0.2, 0.1), negatives=(0.02, 0.1, 0.3))
    cached = []
    for k, run in enumerate(fresh):
        save_rate_run(tmp_path / f"measures-{k}.json", run)
        cached.append(load_rate_run(tmp_path / f"measures-{k}.json"))
    assert list(cached[0]["measures"]) == ["MCQ negative", "polarity AUC", "LCD peak", "retrieval R@5"]
    for computed, read_back in zip(sweep_tables(fresh), sweep_tables(cached)):
        assert computed.to_csv(index=False) == read_back.to_csv(index=False)

def test_features_are_keyed_by_the_backbone_itself_so_replacing_it_replaces_the_key(tmp_path):
    import os

    from negutils.config import get_profile
    from negutils.experiments.negation_rate import rate_session
    from negutils.models.backbone import Backbone, checkpoint_identity, load_backbone, save_checkpoint
    from negutils.session import Session

    untrained = load_backbone("negbook-tiny")
    assert untrained.key == "negbook-tiny/random-init-seed0"
    assert load_backbone("negbook-tiny", seed=3).key == "negbook-tiny/random-init-seed3"
    pilot_file = save_checkpoint(untrained.model, tmp_path / "pilot" / "model.pt", "negbook-tiny")
    full_file = save_checkpoint(untrained.model, tmp_path / "full" / "model.pt", "negbook-tiny")
    pilot, full = load_backbone(checkpoint=pilot_file), load_backbone(checkpoint=full_file)
    assert pilot.key == f"negbook-tiny/{checkpoint_identity(pilot_file)}" and str(pilot_file.resolve()) in pilot.key

    base = Session(get_profile("smoke"), {}, untrained, "", "world-key")
    assert base.features_key == "world-key|negbook-tiny/random-init-seed0"
    one, two = rate_session(base, pilot, 0.05), rate_session(base, full, 0.05)
    assert one.features_key != two.features_key != base.features_key     # one rate, two budgets: two caches
    assert one.features_key.startswith("world-key|") and "pilot" in one.features_key

    stat = os.stat(pilot_file)
    pilot_file.write_bytes(pilot_file.read_bytes() + b"\0")              # rewritten in place: another backbone
    os.utime(pilot_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert checkpoint_identity(pilot_file) != pilot.key.split("/", 1)[1]

    training = Backbone(untrained.model, "negbook-tiny", untrained.tokenizer, untrained.report)
    with pytest.raises(ValueError, match="has no key"):
        Session(get_profile("smoke"), {}, training, "pretraining", "world-key").features_key
