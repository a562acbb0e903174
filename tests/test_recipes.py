"""Recipe conversion logic on small files made here (nothing downloads)."""
import hashlib

import numpy as np
import pytest

from negutils.core.phrasing import has_negation_cue, negate_caption
from negutils.world.coco import load_split
from negutils.world.recipes import ChecksumError, evenly_spaced_frames, msrvtt_to_coco, verify, voc_to_coco, write_json

VOC_XML = """<annotation><filename>{name}.jpg</filename><size><width>50</width><height>40</height></size>
{objects}</annotation>"""
VOC_OBJ = "<object><name>{cls}</name><difficult>{d}</difficult><bndbox><xmin>{x1}</xmin><ymin>{y1}</ymin>" \
          "<xmax>{x2}</xmax><ymax>{y2}</ymax></bndbox></object>"


@pytest.fixture
def voc_root(tmp_path):
    (tmp_path / "ImageSets" / "Main").mkdir(parents=True)
    (tmp_path / "Annotations").mkdir()
    (tmp_path / "JPEGImages").mkdir()
    (tmp_path / "ImageSets" / "Main" / "test.txt").write_text("000001\n000004\n")
    objs = {"000001": [("dog", 0, 1, 1, 10, 20), ("diningtable", 1, 5, 5, 30, 30)],
            "000004": [("person", 0, 2, 3, 4, 5)]}
    for name, items in objs.items():
        body = "".join(VOC_OBJ.format(cls=c, d=d, x1=a, y1=b, x2=x, y2=y) for c, d, a, b, x, y in items)
        (tmp_path / "Annotations" / f"{name}.xml").write_text(VOC_XML.format(name=name, objects=body))
    return tmp_path


def test_voc_converts_to_coco_that_load_split_reads(voc_root):
    coco = voc_to_coco(voc_root)
    assert [im["file_name"] for im in coco["images"]] == ["JPEGImages/000001.jpg", "JPEGImages/000004.jpg"]
    assert coco["annotations"][0]["bbox"] == [0.0, 0.0, 10.0, 20.0]  # 1-based inclusive -> 0-based x, y, w, h
    path = write_json(voc_root / "instances_voc2007_test.json", coco)
    split = load_split(instances=path, image_root=voc_root, name="ood")
    assert split.objects == [frozenset({"dog", "dining table"}), frozenset({"person"})]
    assert len(voc_to_coco(voc_root, include_difficult=False)["annotations"]) == 2


def test_voc_errors_name_the_file(voc_root, tmp_path):
    (voc_root / "Annotations" / "000004.xml").write_text("<annotation><oops")
    with pytest.raises(ValueError, match=r"000004\.xml: not a readable VOC annotation"):
        voc_to_coco(voc_root)
    with pytest.raises(FileNotFoundError, match="is .* a VOC2007 root"):
        voc_to_coco(tmp_path / "nowhere")


def test_frames_are_evenly_spaced_centres():
    assert evenly_spaced_frames(100) == [12, 37, 62, 87]
    assert evenly_spaced_frames(2) == [0, 0, 1, 1]
    with pytest.raises(ValueError):
        evenly_spaced_frames(0)


def test_msrvtt_conversion_keeps_only_the_split():
    ann = {"videos": [{"video_id": "video7"}, {"video_id": "video9"}],
           "sentences": [{"video_id": "video7", "caption": "a man sings"}, {"video_id": "video9", "caption": "x"}]}
    instances, captions = msrvtt_to_coco(ann, ["video7"])
    assert [im["video_id"] for im in instances["images"]] == ["video7"]
    assert len(instances["images"][0]["frames"]) == 4
    assert [c["caption"] for c in captions["annotations"]] == ["a man sings"]
    with pytest.raises(ValueError, match="not an MSR-VTT annotation"):
        msrvtt_to_coco({"annotations": []}, [])


def test_rule_based_negator_round_trip():
    rng = np.random.default_rng(0)
    out = [negate_caption("A dog sitting on a bench.", "collar", rng) for _ in range(20)]
    assert all(o and has_negation_cue(o) and "collar" in o and "dog sitting on a bench" in o.lower() for o in out)
    assert negate_caption("A dog with no collar", "cat", rng) is None      # already negated
    assert negate_caption("A dog and a cat", "cat", rng) is None           # names the object
    assert negate_caption("   ", "cat", rng) is None
    assert has_negation_cue("it isn't there") and not has_negation_cue("a knot on a note")
    for derived in ("a cat instead of a dog", "everything except a dog", "hardly any dogs", "the absence of a dog",
                    "a sofa that lacks a dog", "a dog-free sofa"):       # the parser's other negating forms
        assert has_negation_cue(derived), derived


def test_checksum_mismatch_moves_the_file_aside_and_keeps_its_bytes(tmp_path):
    f = tmp_path / "a.zip"
    f.write_bytes(b"abc")
    digest = hashlib.md5(b"abc").hexdigest()
    assert verify(f, digest) == digest
    with pytest.raises(ChecksumError, match=rf"differs from the published 0+; moved aside to .*a.zip.md5-{digest}"):
        verify(f, "0" * 32)
    assert not f.exists() and (tmp_path / f"a.zip.md5-{digest}").read_bytes() == b"abc"


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_half_extracted_archive_is_detected_and_extracted_again(tmp_path, kind):
    import tarfile
    import zipfile

    from negutils.world.recipes import extract

    source = tmp_path / "src"
    (source / "val2017").mkdir(parents=True)
    for name in ("a.jpg", "b.jpg"):
        (source / "val2017" / name).write_bytes(name.encode() * 100)
    archive = tmp_path / f"images.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for f in sorted((source / "val2017").iterdir()):
                zf.write(f, f"val2017/{f.name}")
    else:
        with tarfile.open(archive, "w") as tf:
            tf.add(source / "val2017", "val2017")
    root = tmp_path / "root"
    marker = extract(archive, root)
    assert marker.read_text().strip() == hashlib.md5(archive.read_bytes()).hexdigest()
    assert (root / "val2017" / "b.jpg").read_bytes() == b"b.jpg" * 100
    (root / "val2017" / "b.jpg").unlink()           # an extraction cut short: a file missing, no marker
    marker.unlink()
    extract(archive, root)
    assert (root / "val2017" / "b.jpg").read_bytes() == b"b.jpg" * 100 and marker.exists()
    (root / "val2017" / "a.jpg").write_bytes(b"edited")        # complete: the marker keeps it from running again
    extract(archive, root)
    assert (root / "val2017" / "a.jpg").read_bytes() == b"edited"
