"""scripts/device-check's dry run (DEVICE_CHECK_DRY_RUN=1: stand-ins for the build, the GPU stages and
the sanitizer): it ends inside its deadline, $OUT holds at most three files after every stage (the
script lists $OUT into the work folder after each), a stage that overruns is cut at the deadline and
the rest are skipped, a failed build whose library exists goes on; and the precomputed Fibottention
patterns of bench/device/ expand to the library's own patterns. Short deadlines: seconds each."""
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "device-check")
DEVICE = os.path.join(ROOT, "bench", "device")
ALLOWED = {"device-check.tar.gz", "stages.txt", "summary.txt"}


def dry_run(tmp_path, deadline, **env):
    work, out = tmp_path / "work", tmp_path / "out"
    e = dict(os.environ, DEVICE_CHECK_DRY_RUN="1", DEVICE_CHECK_DEADLINE_S=str(deadline), DEVICE_CHECK_RESERVE_S="2",
             DEVICE_CHECK_WORK=str(work), OUT=str(out), DEVICE_CHECK_DRY_SCALE="0.005")
    e.update({k: str(v) for k, v in env.items()})
    t0 = time.monotonic()
    proc = subprocess.run([SCRIPT], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=deadline + 30)
    seconds = time.monotonic() - t0
    listing = (work / "out-listing.txt").read_text().splitlines()
    stages = {}
    for line in (out / "stages.txt").read_text().splitlines():
        d = dict(kv.split("=", 1) for kv in line.split(" note=")[0].split())
        stages[d["stage"]] = d
    return proc, seconds, listing, stages, out


def check_files(listing, out):
    assert listing, "the script listed $OUT after no stage"
    for line in listing:
        stage, _, files = line.partition(": ")
        names = set(files.split())
        assert len(names) <= 3 and names <= ALLOWED, f"after {stage}: $OUT holds {sorted(names)}"
    assert {p.name for p in out.iterdir()} == ALLOWED


def test_dry_run_whole_script(tmp_path):
    # Deadlines of tens of seconds: the stand-ins start Python processes, slow on a loaded 2-core CI.
    proc, seconds, listing, stages, out = dry_run(tmp_path, 60)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert seconds < 60, f"took {seconds:.1f} s against a 60 s deadline"
    check_files(listing, out)
    names = [line.split(":")[0] for line in listing]
    assert names == ["env", "build-ops", "correctness", "benchmarks", "build-core", "vit-step", "memcheck", "end"]
    assert all(stages[s]["status"] == "ok" for s in names[:-1]), stages
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("DRY RUN"), summary[:200]
    assert "correctness: passed" in summary and "memcheck: ERROR SUMMARY: 0 errors" in summary
    assert "correctness=passed" in summary  # the benchmarks carry the correctness status
    assert summary.strip() in proc.stdout  # printed too
    with tarfile.open(out / "device-check.tar.gz") as t:
        members = set(t.getnames())
    assert {"results/benchmarks.jsonl", "results/correctness.jsonl", "results/stages.txt",
            "results/summary.txt"} <= members
    # per-kernel and back-to-back times, and the floor, in every benchmark record
    rows = [json.loads(x) for x in (tmp_path / "work" / "results" / "benchmarks.jsonl").read_text().splitlines()]
    att = [r for r in rows if r.get("bench") == "attention"]
    assert att and all({"events_ms", "profiler_kernel_ms", "floor_gb_per_s"} <= set(r) for r in att)
    assert [r["N"] for r in att][0] == 1025 and {r["class_token"] for r in att} == {"global", "none"}


def test_dry_run_overrunning_stage_is_cut_at_the_deadline(tmp_path):
    deadline = 30  # the earlier stand-ins need a few seconds on a loaded machine; the benchmarks want 300
    proc, seconds, listing, stages, out = dry_run(tmp_path, deadline, DEVICE_CHECK_DRY_BENCHMARKS_S=300)
    assert seconds <= deadline + 1, f"took {seconds:.1f} s against a {deadline} s deadline"
    check_files(listing, out)
    assert stages["benchmarks"]["status"] == "timeout", stages
    for s in ("build-core", "vit-step", "memcheck"):
        assert stages[s]["status"] == "skipped", stages[s]
    summary = (out / "summary.txt").read_text()
    assert "benchmarks   timeout" in summary
    # what the cut stage had written is kept
    assert "(the benchmark stage ended before it finished" in summary


def test_dry_run_failed_build_with_library_goes_on(tmp_path):
    proc, seconds, listing, stages, out = dry_run(tmp_path, 60, DEVICE_CHECK_DRY_BUILD_RC=1)
    check_files(listing, out)
    assert stages["build-ops"]["status"] == "failed"
    assert stages["correctness"]["status"] == "ok" and stages["benchmarks"]["status"] == "ok", stages
    assert seconds < 60


def test_dry_run_without_library_skips_the_device_stages(tmp_path):
    proc, seconds, listing, stages, out = dry_run(tmp_path, 60, DEVICE_CHECK_DRY_BUILD_RC=1,
                                                  DEVICE_CHECK_DRY_NO_LIBRARY=1)
    assert proc.returncode == 1
    check_files(listing, out)
    assert all(stages[s]["status"] == "skipped" for s in ("correctness", "benchmarks", "vit-step", "memcheck"))


@pytest.mark.parametrize("script", ["attention_bench.py", "correctness.py", "vit_step.py", "memcheck_ops.py"])
def test_bench_scripts_parse_arguments_and_fail_in_one_line_without_cuda(script):
    help_ = subprocess.run([sys.executable, os.path.join(DEVICE, script), "--help"], capture_output=True, text=True,
                           timeout=120)
    assert help_.returncode == 0 and "usage:" in help_.stdout, help_.stderr[-2000:]
    pytest.importorskip("torch")
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    run = subprocess.run([sys.executable, os.path.join(DEVICE, script), "--out", "/tmp"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.strip().count("\n") == 0 and "CUDA is not available" in run.stderr, run.stderr


def test_precomputed_patterns_equal_the_library():
    """bench/device/fibottention_patterns.json, expanded by device_patterns.expand, is the mask
    registry's pattern (sparsevit.patterns.build_all) at every N and class-token mode it holds."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, DEVICE)
    import device_patterns
    import make_patterns
    try:
        import sparsevit
        sparsevit.patterns.stats(os.path.join(ROOT, make_patterns.CONFIG), 197, 12, 12)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the package's core is not built ({str(e).splitlines()[0][:200]})")
    data = device_patterns.load()
    assert {(e["N"], e["class_token"]) for e in data["entries"]} == \
        {(n, c) for n in make_patterns.SIZES for c in ("global", "none")}
    for e in data["entries"]:
        layer = sparsevit.patterns.build_all(os.path.join(ROOT, data["config"]), e["N"], data["heads"], data["layers"],
                                             64, data["prefix_tokens"], overrides=e["overrides"])[data["layer"]]
        rp, ci = device_patterns.expand(e)
        assert torch.equal(rp, layer.row_ptr), (e["N"], e["class_token"])
        width = int(rp[:, -1].max())
        assert torch.equal(ci[:, :width], layer.col_idx[:, :width]), (e["N"], e["class_token"])


def test_python_transcription_matches_the_file():
    """The generator's transcription of the C++ mask gives the committed offsets (so the file can be
    regenerated without the library), and its permutation matches the C++ test's expectation."""
    sys.path.insert(0, DEVICE)
    import device_patterns
    import make_patterns
    assert make_patterns.seeded_permutation(0, 0, 12) == [6, 0, 4, 3, 10, 11, 7, 2, 8, 1, 9, 5]
    for e in device_patterns.load()["entries"]:
        assert [h["offsets"] for h in e["heads"]] == make_patterns.python_offsets(e["N"]), e["N"]
