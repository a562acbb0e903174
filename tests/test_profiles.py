import pytest

from negutils.config import PROFILES, dataset_root, get_profile


def test_four_profiles_and_gpu_uses_a_real_backbone_which_its_dry_run_shares():
    assert set(PROFILES) == {"smoke", "cpu", "gpu", "gpu-dryrun"}
    gpu, dry = get_profile("gpu"), get_profile("gpu-dryrun")
    assert (gpu.backbone, gpu.pretrained, gpu.dataset, gpu.dry_run) == ("ViT-B-32", "openai", "coco", False)
    assert (dry.backbone, dry.pretrained, dry.dataset, dry.dry_run) == ("ViT-B-32", None, "coco", True)
    assert get_profile("cpu").backbone is None


def test_overrides_replace_fields_and_none_keeps_the_default():
    assert get_profile("gpu", backbone="ViT-L-14").backbone == "ViT-L-14"
    assert get_profile("gpu", backbone=None).backbone == "ViT-B-32"


def test_unknown_profile_names_the_choices():
    with pytest.raises(ValueError, match="cpu.*gpu.*smoke"):
        get_profile("laptop")


def test_dataset_root_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("COCO_IMAGE_ROOT", raising=False)
    with pytest.raises(RuntimeError, match=r"\$COCO_IMAGE_ROOT"):
        dataset_root("COCO_IMAGE_ROOT")
    monkeypatch.setenv("COCO_IMAGE_ROOT", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        dataset_root("COCO_IMAGE_ROOT")
    assert dataset_root("COCO_IMAGE_ROOT", str(tmp_path)) == tmp_path


def test_artifacts_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("NEGBOOK_ARTIFACTS", str(tmp_path))
    assert get_profile("smoke").artifacts_dir() == tmp_path / "smoke"
