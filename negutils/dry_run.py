"""What the dry run of the real path (a ``dry_run`` profile) reads where the ``gpu`` profile reads
downloads: the profile's embedded world written in every published layout the ``coco`` dataset reads
(COCO val2017 and train2017, VOC2007, NegBench's CSVs and its released CC12M sets), and randomly
initialised checkpoints of the real backbone. ``data_recipes/published_layouts.py`` writes the same files
for a reader who wants them."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .benchmarks.cc12m import write_cc12m_negations
from .benchmarks.published import FOREIGN_ROOT, PUBLISHED_LAYOUT, write_published_world
from .config import Profile
from .core.cache import atomic_write_json, config_hash
from .methods.training_data import build_negation_data, released_frames
from .models.backbone import create_model, save_checkpoint, save_training_checkpoint
from .world.coco import load_split
from .world.generate import ensure_world
from .world.published import write_coco_layout

# the published train2017: the first images of the world's pretrain split (disjoint from val), ids past val's
PUBLISHED_TRAIN_IMAGES, TRAIN_ID_OFFSET = 64, 1_000_000


def write_published_data(profile: Profile, out: str | os.PathLike, foreign_root: str = FOREIGN_ROOT,
                         train_images: int = PUBLISHED_TRAIN_IMAGES, progress: bool = True) -> dict[str, Path]:
    """The profile's embedded world in the published layouts under ``out``: ``val`` as COCO val2017 and
    ``ood`` as VOC2007 test with NegBench's CSVs over them (``write_published_world``), the first
    ``train_images`` of ``pretrain`` as COCO train2017 (JPEGs of varied sizes), and ``negtrain``'s
    negation data as NegBench's released CC12M-NegCap / NegMCQ (``negutils.benchmarks.cc12m``), paths
    in the CSVs under ``foreign_root``. Returns the environment that points the ``coco`` dataset at
    them (``COCO_IMAGE_ROOT``, ``VOC_ROOT``, ``NEGBENCH_CSV_DIR``, ``CC12M_NEGATION_DIR``)."""
    world = ensure_world(profile.world, profile.artifacts_dir(), progress=progress)
    out = Path(out)
    env = write_published_world({name: load_split(world / name) for name in ("val", "ood")}, out,
                                profile.benchmarks.mcq, profile.benchmarks.retrieval_seed, foreign_root)
    write_coco_layout(load_split(world / "pretrain"), env["COCO_IMAGE_ROOT"], "train2017", id_offset=TRAIN_ID_OFFSET,
                      varied_sizes_seed=0, limit=train_images)
    negtrain = load_split(world / "negtrain")
    negcap, negmcq = released_frames(build_negation_data(negtrain))
    env["CC12M_NEGATION_DIR"] = write_cc12m_negations(negtrain, negcap, negmcq,
                                                      out / PUBLISHED_LAYOUT["CC12M_NEGATION_DIR"], foreign_root)
    return env


def dry_run_inputs(profile: Profile, progress: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """What a ``dry_run`` profile reads where the ``gpu`` profile reads downloads, written once per
    world under ``artifacts/<profile>/``: its embedded world in the published layouts
    (``write_published_data``: COCO val2017 and train2017, VOC2007, NegBench's CSVs and its released
    CC12M sets), a randomly initialised checkpoint of ``profile.backbone`` with QuickGELU (how OpenAI's
    weights run), and, for the dry run's own backbone, another in open_clip's training-script format
    with no metadata, as a released NegFull comes. A second backbone of a dry run (``-p backbones``)
    gets its own random checkpoint on the same data. Returns the environment that points the ``coco``
    dataset at the files (``COCO_IMAGE_ROOT``, ``VOC_ROOT``, ``NEGBENCH_CSV_DIR``,
    ``CC12M_NEGATION_DIR``) and the notebook parameters naming the checkpoints (``checkpoint``, and
    ``negfull_checkpoint`` for the dry run's own backbone)."""
    if not profile.dry_run or profile.backbone is None:
        raise ValueError(f"profile {profile.name!r} is not a dry run of a real backbone")
    folder = profile.artifacts_dir() / f"dry-run-{config_hash([profile.world.key(), 4])}"
    record = folder / "inputs.json"
    if not record.exists():
        env = write_published_data(profile, folder / "data", progress=progress)
        atomic_write_json(record, {"env": {k: str(v) for k, v in env.items()}})
    # other seeds than the untrained control's (load_backbone's seed 0), so "trained" and untrained differ
    parameters = {"checkpoint": str(_random_checkpoint(folder / f"{profile.backbone}-random.pt", profile.backbone,
                                                       seed=1))}
    if profile.backbone_key() == "":
        negfull = folder / "negfull-released" / "finetuned_checkpoint.pt"
        if not negfull.exists():
            save_training_checkpoint(create_model(profile.backbone, quick_gelu=True, seed=2), negfull,
                                     "negfull-dry-run")
        parameters["negfull_checkpoint"] = str(negfull)
    return json.loads(record.read_text())["env"], parameters


def _random_checkpoint(path: Path, model: str, seed: int) -> Path:
    """A randomly initialised ``model`` with QuickGELU saved at ``path`` (once; the seed fixes it)."""
    if not path.exists():
        save_checkpoint(create_model(model, quick_gelu=True, seed=seed), path, model, quick_gelu=True)
    return path
