"""The logic behind ``data_recipes/``: checksummed downloads and conversions to the COCO layout the
embedded world uses, so every dataset is read by ``negutils.world.coco.load_split``.

The download registry holds the published MD5 of every archive that has one; a file whose digest
differs is moved aside (the user's bytes are never deleted) and reported, never used. Extraction
writes a completion marker last, so a half-extracted archive is detected and extracted again.
"""
from __future__ import annotations

import json
import os
import shutil
import tarfile
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from ..core.cache import atomic_save, file_digest
from ..core.offline import network_reachable, offline_requested

REGISTRY: dict[str, dict] = {
    "coco2017_val_images": {"url": "http://images.cocodataset.org/zips/val2017.zip",
                            "md5": "442b8da7639aecaf257c1dceb8ba8c80"},
    "coco2017_train_images": {"url": "http://images.cocodataset.org/zips/train2017.zip",
                              "md5": "cced6f7f71b7629ddf16f17bbcfab6b2"},
    "coco2017_annotations": {"url": "http://images.cocodataset.org/annotations/annotations_trainval2017.zip",
                             "md5": "f4bbac642086de4f52a3fdda2de5fa2c"},
    "voc2007_test": {"url": "http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtest_06-Nov-2007.tar",
                     "md5": "b6e924de25625d8de591ea690078ad9f"},
}

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor")
# VOC's run-together names, spelled as words so captions read naturally
VOC_NAMES = {"aeroplane": "airplane", "diningtable": "dining table", "motorbike": "motorbike",
             "pottedplant": "potted plant", "tvmonitor": "tv monitor"}


class ChecksumError(RuntimeError):
    pass


def md5sum(path: str | os.PathLike) -> str:
    """The MD5 the datasets publish for their archives."""
    return file_digest(path, "md5")


def verify(path: str | os.PathLike, md5: str | None) -> str:
    """The file's MD5; a mismatch with the expected one moves the file aside (``<name>.md5-<actual>``,
    so a re-download does not overwrite what may be the user's only copy) and raises."""
    actual = md5sum(path)
    if md5 and actual != md5:
        path = Path(path)
        aside = path.with_name(f"{path.name}.md5-{actual}")
        path.rename(aside)
        raise ChecksumError(f"{path}: MD5 {actual} differs from the published {md5}; moved aside to {aside} "
                            f"(delete it once you have the right file)")
    return actual


def extract(archive: str | os.PathLike, root: str | os.PathLike) -> Path:
    """Unpack a .zip or .tar ``archive`` into ``root`` unless its completion marker says it was,
    and write the marker (``root/.<archive>.extracted``, holding the archive's MD5) last: an
    extraction cut short has no marker and is done again, over what it left."""
    archive, root = Path(archive), Path(root)
    marker = root / f".{archive.name}.extracted"
    digest = md5sum(archive)
    if marker.exists() and marker.read_text().strip() == digest:
        return marker
    root.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(root)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(root, filter="data")
    atomic_save(marker, lambda tmp: tmp.write_text(digest + "\n"))
    return marker


def fetch(name: str, dest_dir: str | os.PathLike) -> Path:
    """The registry's archive ``name`` in ``dest_dir``: reused when present and correct, else
    downloaded (fails at once, naming the URL, when offline)."""
    entry = REGISTRY[name]
    target = Path(dest_dir) / os.path.basename(entry["url"])
    if target.exists():
        verify(target, entry.get("md5"))
        return target
    if offline_requested() or not network_reachable(urllib.request.urlparse(entry["url"]).hostname, 80):
        raise RuntimeError(f"{target} is missing and {entry['url']} cannot be reached; download it elsewhere "
                           f"(MD5 {entry.get('md5')}) and place it at {target}")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_save(target, lambda tmp: _download(entry["url"], tmp))
    verify(target, entry.get("md5"))
    return target


def _download(url: str, path: Path) -> None:
    with urllib.request.urlopen(url, timeout=60) as response, open(path, "wb") as out:
        shutil.copyfileobj(response, out)


# ----------------------------------------------------------------------------- VOC2007 -> COCO

def voc_to_coco(voc_root: str | os.PathLike, image_set: str = "test", include_difficult: bool = True) -> dict:
    """VOC2007 XML annotations of one image set as a COCO instances dict. ``file_name`` is relative
    to ``voc_root`` (``JPEGImages/000001.jpg``); boxes become [x, y, w, h] with VOC's 1-based
    pixel coordinates moved to 0-based."""
    root = Path(voc_root)
    ids_file = root / "ImageSets" / "Main" / f"{image_set}.txt"
    if not ids_file.exists():
        raise FileNotFoundError(f"{ids_file} does not exist: is {root} a VOC2007 root (VOCdevkit/VOC2007)?")
    categories = [{"id": k + 1, "name": VOC_NAMES.get(c, c), "supercategory": "voc"} for k, c in enumerate(VOC_CLASSES)]
    cat_id = {c: k + 1 for k, c in enumerate(VOC_CLASSES)}
    images, annotations = [], []
    for line in ids_file.read_text().split():
        xml_path = root / "Annotations" / f"{line}.xml"
        try:
            tree = ET.parse(xml_path).getroot()
        except (ET.ParseError, FileNotFoundError) as err:
            raise ValueError(f"{xml_path}: not a readable VOC annotation ({err})") from err
        size = tree.find("size")
        image_id = int(line)
        images.append({"id": image_id, "file_name": f"JPEGImages/{tree.findtext('filename')}",
                       "width": int(size.findtext("width")), "height": int(size.findtext("height"))})
        for obj in tree.findall("object"):
            name = obj.findtext("name").strip()
            if name not in cat_id:
                raise ValueError(f"{xml_path}: unknown VOC class {name!r}")
            if not include_difficult and obj.findtext("difficult", "0").strip() == "1":
                continue
            box = obj.find("bndbox")
            x1, y1, x2, y2 = (float(box.findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax"))
            w, h = x2 - x1 + 1, y2 - y1 + 1
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": cat_id[name],
                                "bbox": [x1 - 1, y1 - 1, w, h], "area": w * h, "iscrowd": 0,
                                "difficult": int(obj.findtext("difficult", "0").strip() or 0)})
    return {"info": {"description": f"VOC2007 {image_set} converted by negbook"}, "images": images,
            "annotations": annotations, "categories": categories}


VOC_INSTANCES = "instances_voc2007_test.json"


def convert_voc(voc_root: str | os.PathLike) -> Path:
    """``voc_to_coco`` of the test set written to ``<voc_root>/instances_voc2007_test.json``, the file
    ``load_splits`` reads for the ``ood`` split from ``$VOC_ROOT`` (= ``voc_root``)."""
    return write_json(Path(voc_root) / VOC_INSTANCES, voc_to_coco(voc_root, "test"))


# ----------------------------------------------------------------------------- MSR-VTT

def evenly_spaced_frames(n_frames: int, k: int = 4) -> list[int]:
    """k frame indices spread over the video, each at the centre of one of k equal segments
    (NegBench averages the embeddings of 4 such frames)."""
    if n_frames < 1:
        raise ValueError(f"a video needs at least one frame, got {n_frames}")
    return [min(n_frames - 1, int((j + 0.5) * n_frames / k)) for j in range(k)]


def msrvtt_to_coco(annotation: dict, split_ids: list[str], frames_per_video: int = 4) -> tuple[dict, dict]:
    """MSR-VTT's ``videos``/``sentences`` JSON, restricted to ``split_ids``, as (instances, captions)
    in COCO form: one image record per video with the file names of its sampled frames."""
    if "videos" not in annotation or "sentences" not in annotation:
        raise ValueError(f"not an MSR-VTT annotation: keys {sorted(annotation)}; expected 'videos' and 'sentences'")
    wanted = set(split_ids)
    images, captions = [], []
    for k, video in enumerate(v for v in annotation["videos"] if v["video_id"] in wanted):
        images.append({"id": k + 1, "video_id": video["video_id"], "file_name": f"frames/{video['video_id']}_0.jpg",
                       "frames": [f"frames/{video['video_id']}_{j}.jpg" for j in range(frames_per_video)]})
    index = {im["video_id"]: im["id"] for im in images}
    for s in annotation["sentences"]:
        if s["video_id"] in index:
            captions.append({"id": len(captions) + 1, "image_id": index[s["video_id"]], "caption": s["caption"]})
    instances = {"info": {"description": "MSR-VTT via negbook"}, "images": images, "annotations": [],
                 "categories": []}
    return instances, {"info": instances["info"], "images": images, "annotations": captions}


# ----------------------------------------------------------------------------- CC12M negations


def write_json(path: str | os.PathLike, obj: dict) -> Path:
    return atomic_save(path, lambda tmp: tmp.write_text(json.dumps(obj, sort_keys=True, indent=1) + "\n"))
