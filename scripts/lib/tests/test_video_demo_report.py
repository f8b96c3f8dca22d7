"""Tests of scripts/lib/video_demo_report.py on hand-made sweep reports: the paired differences
between every two rows and their Student-t intervals, recomputed by hand here, and the floor.
Run: python3 -m pytest scripts/lib/tests"""
import json
import math
import os
import subprocess
import sys

LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def row(method, accs):
    mean = sum(accs) / len(accs)
    return {"method": method, "test_acc1": accs, "test_acc1_mean": mean, "test_acc1_ci": [mean - 1, mean + 1],
            "seeds": list(range(len(accs)))}


def make(tmp_path, rows, floor_accs=None):
    out = tmp_path / "demo"
    for d in ("sweep", "floor", "image_vit"):
        (out / d).mkdir(parents=True)
    (out / "sweep" / "report.json").write_text(json.dumps({"rows": rows}))
    (out / "sweep" / "report.md").write_text("# Attention sweep\n\n| table |\n")
    if floor_accs:
        (out / "floor" / "report.json").write_text(json.dumps({"rows": [row("vit_dense", floor_accs)]}))
        (out / "floor" / "report.md").write_text("# Attention sweep\n\n| floor table |\n")
    (out / "image_vit" / "summary.json").write_text(json.dumps({"test_acc1": 77.5}))
    (out / "image_vit" / "source.txt").write_text("made by scripts/video-demo in 100 s\n")
    subprocess.run([sys.executable, os.path.join(LIB, "video_demo_report.py"), str(out)], check=True,
                   capture_output=True)
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_pairs_their_intervals_and_which_separate(tmp_path):
    dense, fibo, bigbird = [70.0, 72.0, 71.0], [74.0, 75.5, 74.9], [70.5, 73.0, 70.0]
    report, md = make(tmp_path, [row("vit_dense", dense), row("fibo", fibo), row("bigbird", bigbird)], [40.0, 41.0, 42.5])
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    assert set(pairs) == {("fibo", "vit_dense"), ("bigbird", "vit_dense"), ("bigbird", "fibo")}
    # By hand: fibo - dense = 4, 3.5, 3.9 -> mean 3.8, sd 0.26458, half = 4.30265 * sd / sqrt(3).
    d = [4.0, 3.5, 3.9]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    half = 4.30265273 * sd / math.sqrt(3)
    p = pairs[("fibo", "vit_dense")]
    assert math.isclose(p["mean"], mean) and math.isclose(p["ci"][0], mean - half) and math.isclose(p["ci"][1], mean + half)
    assert p["separates"]
    assert not pairs[("bigbird", "vit_dense")]["separates"]  # 0.5, 1.0, -1.0: straddles 0
    assert pairs[("bigbird", "fibo")]["mean"] < 0 and pairs[("bigbird", "fibo")]["separates"]
    assert report["best"]["method"] == "fibo"
    assert report["floor"]["test_acc1"] == [40.0, 41.0, 42.5]
    assert report["image_vit"]["test_acc1"] == 77.5
    assert "| fibo | vit_dense | +3.80 |" in md and "**yes**" in md and "| floor table |" in md


def test_one_seed_has_no_interval_and_never_separates(tmp_path):
    report, md = make(tmp_path, [row("vit_dense", [70.0]), row("fibo", [90.0])])
    assert report["pairs"][0]["ci"] is None and not report["pairs"][0]["separates"]
    assert report["floor"] is None
    assert "(one seed)" in md
