"""Run profiles: smoke (tests), cpu (the default book), gpu (real backbones and datasets).

A profile is data, so a notebook's only parameters are literals: ``profile = "cpu"`` plus
optional overrides. Paths to real datasets come from parameters or environment variables,
never from absolute paths in committed files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .benchmarks.confusion import ConfusionConfig
from .benchmarks.factor import FactorConfig
from .benchmarks.suite import BenchmarkConfig
from .core.cache import atomic_write_json
from .models.pretrain import PretrainConfig
from .world.generate import WorldConfig
from .world.published import TrainSubsets

# where the ``coco`` dataset's negtrain comes from: COCO train2017 (the NegBench protocol built on its
# instances, as on the world) or NegBench's released CC12M-NegCap / CC12M-NegMCQ (``$CC12M_NEGATION_DIR``)
NEGATION_DATA = ("coco-train2017", "negbench-cc12m")

REPO_ROOT = Path(__file__).resolve().parent.parent
# where a backbone other than its profile's own keeps its run: artifacts/<profile>/backbones/<key>/
# (``Profile.run_dir``)
BACKBONES_DIR = "backbones"
# what a run records in that folder, so chapter 06 finds every backbone a profile has run (``Profile.backbone_runs``)
BACKBONE_RECORD = "backbone.json"
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt")


@dataclass(frozen=True)
class BackboneSpec:
    """One backbone of a run: an open_clip config name and its weights, a pretrained tag or a local
    checkpoint. Written ``MODEL``, ``MODEL:TAG`` (``ViT-L-14:openai``) or ``MODEL:PATH`` (a file:
    ``ViT-B-32:/data/negclip.pt``), as open_clip's own ``--model``/``--pretrained`` pair."""
    model: str
    pretrained: str | None = None
    checkpoint: str | None = None

    @classmethod
    def parse(cls, text: str) -> BackboneSpec:
        model, _, weights = str(text).strip().partition(":")
        if not model or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+@-]*", model):
            raise ValueError(f"backbone {text!r}: write MODEL, MODEL:TAG or MODEL:PATH (e.g. ViT-L-14:openai)")
        if not weights:
            return cls(model)
        if os.sep in weights or "/" in weights or weights.endswith(CHECKPOINT_SUFFIXES):
            return cls(model, checkpoint=weights)
        return cls(model, pretrained=weights)

    def __str__(self) -> str:
        weights = self.checkpoint or self.pretrained
        return f"{self.model}:{weights}" if weights else self.model


def parse_backbones(value) -> tuple[BackboneSpec, ...]:
    """The backbone list of ``-p backbones=A,B`` (a comma-separated string) or a profile's ``backbones``
    (a sequence of strings or specs). A backbone named twice is an error: its second run would overwrite
    the first's results."""
    if value is None:
        return ()
    items = [v for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
    specs = tuple(v if isinstance(v, BackboneSpec) else BackboneSpec.parse(v) for v in items)
    seen = [str(s) for s in specs]
    repeated = sorted({s for s in seen if seen.count(s) > 1})
    if repeated:
        raise ValueError(f"backbones: {', '.join(repeated)} named more than once")
    return specs


@dataclass(frozen=True)
class DiagnosisConfig:
    """Sizes of chapter 02's analyses."""
    diagnostic_pairs: int = 1000      # (image, T+, T-) triples; PeakPatch's control uses 1K pairs
    bootstrap: int = 1000             # resamples for the 95% intervals
    ranking_pairs: int = 200          # concept pairs per kind of query change (LCSE Fig. 3)
    min_per_quadrant: int = 5         # images a concept pair needs in each of Both/A-only/B-only/Neither
    max_pairs: int = 300              # concept pairs in the quadrant and span-residual analyses
    dilution_pairs: int | None = None  # ordered concept pairs in the dilution measure (None: every one)
    seed: int = 0


@dataclass(frozen=True)
class PeakPatchSettings:
    """Chapter 03's training budget and the candidates it measures. The paper: 10 epochs, batch 1024,
    lr 1e-5 (ECN) / 1e-4 (SCN)."""
    epochs: int = 10
    batch_size: int = 1024
    lr_ecn: float = 1e-5
    lr_scn: float = 1e-4
    protocols: tuple[str, ...] = ("negbench", "hard-negatives", "mixed")   # the first is the default
    variants: tuple[str, ...] = ("joint", "ecn_only", "scn_only", "no_anchor", "detached")
    # what the paper leaves open, measured on held-out NegMCQ (the first candidate is the fallback)
    scn_logit_scales: tuple[float, ...] = (100.0, 10.0)
    delta_penalties: tuple[float, ...] = (1.0, 10.0)
    scn_logit_scale: float = 100.0     # used where chapter 03 has not measured (its first candidates)
    delta_penalty: float = 1.0
    sweep_l_p: tuple[int, ...] = (2, 4, 6, 8, 10, 12)
    sweep_l_a: tuple[int, ...] = (2, 4, 6)
    sweep_epochs: int = 10
    sweep_images: int | None = None    # negtrain images the layer sweep trains on (None: all)
    # NegMCQ questions the runs are compared on (methods.decision): 10,000 keep a standard error <= 0.5 point
    decision_questions: int = 10_000
    negfull_alphas: tuple[float, ...] = (0.0, 0.5, 0.9, 0.99, 1.0)
    # protocols whose NegFull alpha is swept; the others reuse the first one's choice
    negfull_alpha_protocols: tuple[str, ...] = ("negbench", "hard-negatives", "mixed")
    negfull_images: int | None = None  # training images per NegFull run, one epoch (None: all)
    negfull_lr: float = 1e-5
    negfull_batch_size: int = 256


@dataclass(frozen=True)
class TrainingFreeSettings:
    """Chapters 04-05's sizes: LCSE fits (mu, beta) on pairwise operator tests of ``pretrain``."""
    calibration_samples: int = 100    # pairwise tests per operator (App. A: ~50 images suffice for CLIP)


@dataclass(frozen=True)
class ReportSettings:
    """Chapter 06's unified table: percentile bootstrap over each benchmark's items."""
    bootstrap: int = 1000             # resamples per 95% interval and per paired lead
    seed: int = 0


@dataclass(frozen=True)
class NegationRateSettings:
    """Chapter 07's sweep. ``pilot_*`` always runs in the book; ``sweep_*`` when the chapter's
    ``full_sweep`` parameter is true (and in the gpu profile)."""
    pilot_rates: tuple[float, ...] = (0.0, 0.05)
    pilot_samples: int = 20_000           # pretraining image-caption pairs per pilot run
    sweep_rates: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.05, 0.2)
    sweep_samples: int | None = None      # None: the profile's full pretraining budget
    mcq_questions: int = 1500             # val MCQ questions per measurement (the first ones)
    diagnostic_pairs: int = 500
    bootstrap: int = 200
    calibration_samples: int = 60         # LCSE calibration tests per operator
    peakpatch_images: int | None = 2000   # negtrain images PeakPatch trains on per rate (None: all)
    seed: int = 0


@dataclass(frozen=True)
class Profile:
    name: str
    world: WorldConfig = field(default_factory=WorldConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    benchmarks: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    diagnosis: DiagnosisConfig = field(default_factory=DiagnosisConfig)
    peakpatch: PeakPatchSettings = field(default_factory=PeakPatchSettings)
    training_free: TrainingFreeSettings = field(default_factory=TrainingFreeSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    negation_rate: NegationRateSettings = field(default_factory=NegationRateSettings)
    # Real-backbone mode: when ``backbone`` is set, it is loaded instead of pretraining the organism.
    backbone: str | None = None
    pretrained: str | None = None
    checkpoint: str | None = None     # a local weights file for ``backbone`` instead of a pretrained tag
    # the backbones the runner runs chapters 00-05 over, each under its own ``run_dir`` (empty: ``backbone``)
    backbones: tuple[str, ...] = ()
    dataset: str = "embedded"         # "embedded" or "coco"
    # the coco dataset's pretrain and negtrain: subsets of COCO train2017, and negtrain's negation data
    train2017: TrainSubsets = field(default_factory=TrainSubsets)
    negation_data: str = "coco-train2017"
    # the gpu profile's code path on CPU: the runner writes a random checkpoint of ``backbone`` and
    # the profile's world in the published data layouts, and points the chapters at them
    dry_run: bool = False
    # chapters the runner executes at the same time where their dependencies allow (bench/chapter_concurrency.py)
    chapter_jobs: int = 2
    description: str = ""

    def artifacts_dir(self, root: str | os.PathLike | None = None) -> Path:
        """``<root>/<profile>``: ``root``, else ``$NEGBOOK_ARTIFACTS``, else the repository's ``artifacts/``.
        An empty or blank ``$NEGBOOK_ARTIFACTS``, or one naming a file, is an error rather than a
        silent fallback (an empty value would write every artifact into the working directory)."""
        if root is not None:
            base, source = Path(root), "root"
        elif "NEGBOOK_ARTIFACTS" in os.environ:
            value = os.environ["NEGBOOK_ARTIFACTS"]
            if not value.strip():
                raise ValueError(f"$NEGBOOK_ARTIFACTS is set but blank ({value!r}): unset it to use "
                                 f"{REPO_ROOT / 'artifacts'}, or name a folder")
            base, source = Path(value).expanduser(), "$NEGBOOK_ARTIFACTS"
        else:
            base, source = REPO_ROOT / "artifacts", "the default"
        if base.exists() and not base.is_dir():
            raise NotADirectoryError(f"{source} names {base}, which is a file, not a folder for artifacts")
        return base / self.name

    def backbone_key(self) -> str:
        """Empty for the backbone the registered profile names (the organism, or the ``gpu`` profile's
        ViT-B-32/openai); otherwise a name for this backbone's folder: its model, tag, and a checkpoint's
        file name and path hash, so two backbones' results never share a folder. A dry run's checkpoints
        are the runner's own random weights of the model, so they do not name it."""
        own = PROFILES.get(self.name)
        if own is None or (self.backbone is None and self.checkpoint is None):
            return ""
        if (self.backbone, self.pretrained) == (own.backbone, own.pretrained) and (
                self.checkpoint is None or self.dry_run):
            return ""
        parts = [self.backbone or "checkpoint", self.pretrained or ""]
        if self.checkpoint and not self.dry_run:
            where = hashlib.sha256(str(Path(self.checkpoint).expanduser().resolve()).encode()).hexdigest()[:8]
            parts.append(f"{Path(self.checkpoint).stem}-{where}")
        return re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(p for p in parts if p))

    def run_dir(self) -> Path:
        """Where this backbone's run keeps what is its own (results, the staged chapters): the profile's
        folder for its own backbone, ``<profile>/backbones/<backbone_key>/`` for another. The caches
        (world, benchmarks, features) stay in the profile's folder, keyed by content."""
        key = self.backbone_key()
        return self.artifacts_dir() / BACKBONES_DIR / key if key else self.artifacts_dir()

    def results_dir(self) -> Path:
        return self.run_dir() / "results"

    def backbone_label(self) -> str:
        """The backbone's name in tables: ``organism`` for the pretrained organism, else the model and
        its tag (``ViT-B-32/openai``) or its checkpoint's file name."""
        if self.backbone is None:
            return f"checkpoint ({Path(self.checkpoint).name})" if self.checkpoint else "organism"
        if self.checkpoint and not self.dry_run:
            return f"{self.backbone} ({Path(self.checkpoint).name})"
        return f"{self.backbone}/{self.pretrained}" if self.pretrained else self.backbone

    def with_backbone(self, spec: BackboneSpec) -> Profile:
        return dataclasses.replace(self, backbone=spec.model, pretrained=spec.pretrained, checkpoint=spec.checkpoint)

    def record_backbone(self) -> None:
        """Write ``backbone.json`` in a non-default backbone's ``run_dir`` (what ``backbone_runs`` finds)."""
        if self.backbone_key():
            record = {"backbone": self.backbone, "pretrained": self.pretrained, "checkpoint": self.checkpoint}
            atomic_write_json(self.run_dir() / BACKBONE_RECORD, record)

    def backbone_runs(self) -> list[Profile]:
        """This profile, then one profile per other backbone it has run (``backbone.json`` under
        ``<profile>/backbones/``), in folder order."""
        runs = [self]
        for record in sorted((self.artifacts_dir() / BACKBONES_DIR).glob(f"*/{BACKBONE_RECORD}")):
            try:
                fields = json.loads(record.read_text())
                spec = {name: fields[name] for name in ("backbone", "pretrained", "checkpoint")}
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{record} is not a backbone record ({err!r}): rerun that backbone's chapters, "
                                 f"or delete {record.parent} to drop its results") from None
            runs.append(dataclasses.replace(self, **spec))
        return runs


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        world=WorldConfig(pretrain=512, negtrain=128, val=128, ood=64),
        pretrain=PretrainConfig(model_name="negbook-tiny-rn", samples=16 * 128, batch_size=128,
                                lr=1e-3, evaluations=2, eval_images=128, snapshots=3),
        benchmarks=BenchmarkConfig(confusion=ConfusionConfig(m_min=3, m_max=10),
                                   factor=FactorConfig(operator_samples=20, equivalence_samples=(
                                       ("De Morgan", 5), ("double negation", 5), ("commutativity", 10)),
                                       compound_samples=10, nested_samples=10),
                                   existence_samples=100),
        diagnosis=DiagnosisConfig(diagnostic_pairs=100, bootstrap=100, ranking_pairs=20, min_per_quadrant=1,
                                  max_pairs=40, dilution_pairs=96),
        peakpatch=PeakPatchSettings(epochs=2, batch_size=16, lr_ecn=1e-4, lr_scn=1e-3, sweep_l_p=(4, 12),
                                    sweep_l_a=(2,), sweep_epochs=1, scn_logit_scales=(100.0, 10.0),
                                    delta_penalties=(1.0,), negfull_alphas=(0.5, 1.0), negfull_images=32,
                                    negfull_lr=1e-5, negfull_batch_size=16, negfull_alpha_protocols=("negbench",),
                                    decision_questions=200),
        negation_rate=NegationRateSettings(pilot_rates=(0.0, 0.05), pilot_samples=4 * 128, sweep_rates=(0.0, 0.05),
                                           mcq_questions=100, diagnostic_pairs=40, bootstrap=20,
                                           calibration_samples=6, peakpatch_images=64),
        training_free=TrainingFreeSettings(calibration_samples=30),
        report=ReportSettings(bootstrap=100),
        description="tiny world and model, a few steps: the whole suite in minutes (what tests run)",
    ),
    "cpu": Profile(
        name="cpu",
        world=WorldConfig(pretrain=30_000, negtrain=8_000, val=2_000, ood=1_000),
        # the tower bench/organism_probe.py chose (organism_probe_grammar_10min.csv): a ModifiedResNet image tower
        # and a 12-layer, width-128 text tower, for 880 steps of 128 (a step's time, each way it can run:
        # bench/pretrain_step.py; the pretraining's in chapter 00's rows of bench/results/main_job_*.csv)
        # and ten snapshots of its weights for chapter 02's LCD through pretraining
        pretrain=PretrainConfig(model_name="negbook-organism-rn-t128", samples=880 * 128, batch_size=128,
                                snapshots=10),
        # 2,000 images instead of COCO's 5,000: M_min=10 leaves only 2 triples for 3C, so 5. FACTOR's
        # operator split keeps LCSE Table 3's counts (so "All" weights operators alike); 23 concepts
        # instead of COCO's 79 need caps of 15 per pair (NOT: 300 / 23 per concept) and 25 per concept
        # (250 two-concept samples) instead of the paper's 5 and 10
        benchmarks=BenchmarkConfig(confusion=ConfusionConfig(m_min=5, m_max=50),
                                   factor=FactorConfig(operator_per_pair=15, operator_per_concept=25)),
        # ~7k training images instead of ~1M pairs: learning rates x10, batch 256, so each run takes seconds
        peakpatch=PeakPatchSettings(batch_size=256, lr_ecn=1e-4, lr_scn=1e-3, sweep_l_p=(1, 2, 4, 8, 12),
                                    sweep_l_a=(1, 2, 4), sweep_epochs=5, sweep_images=2000, negfull_images=1280,
                                    negfull_lr=5e-5, negfull_batch_size=128, negfull_alpha_protocols=("negbench",)),
        # the pilot: two rates at 64 of the organism's 880 steps, each pretrained then measured on one thread, side
        # by side, beside chapters 04-06; it is the book's last chapter to finish, so its budget is sized to end
        # near them and keep `make book` within its 25 minutes (chapter 07's rows of
        # bench/results/main_job_*.csv). full_sweep=True runs all six rates at the full budget
        # (bench/negation_sweep.py)
        negation_rate=NegationRateSettings(pilot_rates=(0.0, 0.05), pilot_samples=64 * 128, peakpatch_images=1000),
        description="the default book: a 30k-image world and the organism pretrained for 880 steps of 128",
    ),
}


PROFILES["gpu"] = Profile(
    name="gpu",
    backbone="ViT-B-32",
    pretrained="openai",
    dataset="coco",
    # real data for chapters 00-06: a held-out 5,000 images of COCO train2017 for LCSE's calibration, the rest of
    # it for PeakPatch and NegFull. Chapter 07's organisms are glyph-world models on every profile: its world,
    # organism and pilot are the cpu book's
    train2017=TrainSubsets(pretrain_images=5_000),
    world=PROFILES["cpu"].world,
    pretrain=PROFILES["cpu"].pretrain,
    negation_rate=PROFILES["cpu"].negation_rate,
    diagnosis=DiagnosisConfig(min_per_quadrant=10),
    # one GPU: two chapters' batches on it at once are unmeasured, so one chapter at a time
    chapter_jobs=1,
    description="real open_clip backbone (ViT-B-32/openai) on COCO val2017 / train2017 and VOC2007 from "
                "data_recipes/",
)


PROFILES["gpu-dryrun"] = dataclasses.replace(
    PROFILES["smoke"], name="gpu-dryrun", backbone="ViT-B-32", dataset="coco", dry_run=True,
    # the smoke run's steps on a fifth of its val and ood images and a quarter of its negtrain ones (ViT-B-32
    # encodes at 224 px: the dry run's main cost; 24 val images are about the fewest on which every chapter has
    # items to score), written in COCO's and VOC's layouts, so COCO-Confusion takes galleries of 2 images;
    # NegFull fine-tunes all of ViT-B-32, so one protocol at one alpha (the smoke run covers the others); LCSE
    # calibrates on a sixth of the smoke run's pairwise tests (each encodes a pretrain image at 224 px); FACTOR
    # keeps every split and operator at 58 caption pairs instead of the smoke run's 140 (ViT-B-32's text tower
    # is the rest of its cost), and the smoke run's sample of dilution pairs is kept for the same reason.
    # Chapter 07 reads only the embedded world and the organism on every profile, which the smoke run covers,
    # so here its pilot is a code-path check: two steps per rate on a smaller pretrain split, each measurement
    # on a few dozen items (a dry run's times per chapter: artifacts/gpu-dryrun/results/notebook_times.csv)
    world=dataclasses.replace(PROFILES["smoke"].world, pretrain=384, negtrain=32, val=24, ood=12),
    # the published train2017 is written from the first 64 images of the world's pretrain split (disjoint from
    # val); LCSE calibrates on 24 of them, PeakPatch and NegFull train on the other 40
    train2017=TrainSubsets(pretrain_images=24),
    negation_rate=dataclasses.replace(PROFILES["smoke"].negation_rate, pilot_samples=2 * 128, mcq_questions=40,
                                      diagnostic_pairs=20, bootstrap=10, calibration_samples=4,
                                      peakpatch_images=32),
    training_free=TrainingFreeSettings(calibration_samples=5),
    benchmarks=dataclasses.replace(PROFILES["smoke"].benchmarks, confusion=ConfusionConfig(m_min=2, m_max=10),
                                   factor=dataclasses.replace(PROFILES["smoke"].benchmarks.factor, operator_samples=8,
                                                              equivalence_samples=(("De Morgan", 2),
                                                                                   ("double negation", 2),
                                                                                   ("commutativity", 4)),
                                                              compound_samples=5, nested_samples=5)),
    # NegFull: one step of 8 published train2017 images, a code-path check of fine-tuning ViT-B-32 on real layouts
    peakpatch=dataclasses.replace(PROFILES["smoke"].peakpatch, protocols=("negbench",), negfull_alphas=(1.0,),
                                  negfull_images=8, negfull_batch_size=8),
    description="the gpu profile's path on CPU: ViT-B-32 (QuickGELU, 224 px, 77 tokens) from a random local "
                "checkpoint, COCO / VOC / NegBench CSVs in their published layouts, at smoke sizes")


def get_profile(name: str, **overrides) -> Profile:
    """The named profile, with any top-level field replaced (e.g. ``backbone="ViT-L-14"``)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if overrides.get("negation_data", NEGATION_DATA[0]) not in NEGATION_DATA:
        raise ValueError(f"negation_data {overrides['negation_data']!r}: choose one of {list(NEGATION_DATA)}")
    return dataclasses.replace(PROFILES[name], **overrides)


def dataset_root(variable: str, parameter: str | None = None) -> Path:
    """A dataset location from a notebook parameter or else an environment variable
    (``COCO_IMAGE_ROOT``, ``NEGBENCH_CSV_DIR``, ``VOC_ROOT``, ...)."""
    source = "the notebook parameter" if parameter is not None else f"${variable}"
    value = parameter if parameter is not None else os.environ.get(variable)
    if value is None:
        raise RuntimeError(f"no dataset location: pass it as a parameter or set ${variable} "
                           "(see data_recipes/README.md for how to build it)")
    if not str(value).strip():
        raise ValueError(f"{source} for {variable} is blank ({value!r}): name the dataset folder "
                         "(see data_recipes/README.md)")
    path = Path(value).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"{source} for {variable} points at {path}, which does not exist")
    if not path.is_dir():
        raise NotADirectoryError(f"{source} for {variable} points at {path}, which is a file, not a dataset folder")
    return path
