"""The committed evidence (docs/results/evidence/*/<report>.json, written by `sparsevit sweep`)
checked independently of the C++ that wrote it: every row's mean, sample std and Student-t
interval, every paired difference to the baseline, and the per-epoch bands recomputed with SciPy
from the per-seed values; the report's claim of a separated best row recomputed; and each row's
budget recomputed with `sparsevit masks` on the committed derived config."""
import glob
import json
import math
import os
import subprocess

import pytest

stats = pytest.importorskip("scipy.stats")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
REPORTS = sorted(p for p in glob.glob(os.path.join(ROOT, "docs", "results", "evidence", "*", "*.json")))


def interval(values, confidence):
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def test_there_is_evidence():
    assert len(REPORTS) >= 2, "docs/results/evidence/ should hold the committed sweep reports"


@pytest.mark.parametrize("path", REPORTS, ids=[os.path.relpath(p, ROOT) for p in REPORTS])
def test_intervals_and_paired_differences(path):
    report = json.load(open(path))
    c = report["confidence"]
    rows = report["rows"]
    base = rows[0]
    assert base["baseline"] and base["method"] == report["baseline"]
    for row in rows:
        mean, sd, lo, hi = interval(row["test_acc1"], c)
        assert row["test_acc1_mean"] == pytest.approx(mean, abs=1e-9)
        assert row["test_acc1_std"] == pytest.approx(sd, abs=1e-9)
        assert row["test_acc1_ci"] == pytest.approx([lo, hi], abs=1e-6)
        if row is not base:
            assert row["seeds"] == base["seeds"]
            diffs = [a - b for a, b in zip(row["test_acc1"], base["test_acc1"])]
            dm, _, dlo, dhi = interval(diffs, c)
            pd = row["paired_difference_to_baseline"]
            assert pd["mean"] == pytest.approx(dm, abs=1e-9)
            assert pd["ci"] == pytest.approx([dlo, dhi], abs=1e-6)
        # Per-epoch curve and band over the seeds.
        for e, value in enumerate(row["curve_test_acc1"]):
            m, _, elo, ehi = interval([curve[e] for curve in row["curves_test_acc1_per_seed"] if e < len(curve)], c)
            assert value == pytest.approx(m, abs=1e-9)
            assert row["curve_test_acc1_ci_low"][e] == pytest.approx(elo, abs=1e-6)
            assert row["curve_test_acc1_ci_high"][e] == pytest.approx(ehi, abs=1e-6)
    # The best row is marked only when its interval separates from every other's.
    top = max(rows, key=lambda r: r["test_acc1_mean"])
    separates = len(rows) > 1 and len(top["seeds"]) > 1 and all(
        r is top or r["test_acc1_ci"][1] < top["test_acc1_ci"][0] for r in rows)
    markdown = open(path[:-len(".json")] + ".md").read()
    assert ("(here it does)" if separates else "(here it does not") in markdown


@pytest.mark.parametrize("path", REPORTS, ids=[os.path.relpath(p, ROOT) for p in REPORTS])
def test_budgets_are_the_masks_commands(path):
    binary = os.path.join(BUILD, "sparsevit")
    if not os.path.exists(binary):
        pytest.skip("build/sparsevit is not built")
    report = json.load(open(path))
    for row in report["rows"]:
        out = subprocess.run([binary, "masks", "--model", report["recipe"]["model"], "--attn-cfg", row["config"],
                              "--json"], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["pruning_ratio"] == pytest.approx(row["pruning_ratio"], abs=1e-9), row["method"]


def reproduce(*args, env=None):
    return subprocess.run([os.path.join(ROOT, "scripts", "reproduce"), *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "SPARSEVIT_SKIP_BUILD": "1", **(env or {})})


def test_reproduce_names_its_experiments_and_refuses_others():
    out = reproduce()
    assert out.returncode == 2
    for name in ("table2", "low-data", "n197", "ablations"):
        assert name in out.stderr
    out = reproduce("table3")
    assert out.returncode == 2 and "unknown experiment 'table3'" in out.stderr


def test_reproduce_plan_prints_the_expected_time_and_the_matched_budgets(tmp_path):
    if not os.path.exists(os.path.join(BUILD, "sparsevit")):
        pytest.skip("build/sparsevit is not built")
    out = reproduce("low-data-10", "--plan", env={"REPRODUCE_RUNS": str(tmp_path), "ROWS": "vit_dense vit_random"})
    assert out.returncode == 0, out.stderr
    assert "expected wall time on the 2-core machine from scratch" in out.stderr
    lines = [l for l in out.stdout.splitlines() if l.startswith("vit_")]
    assert len(lines) == 2  # ROWS kept two configs
    assert "keys_per_query=4), pruning ratio 0.9184, 0/3 runs finished" in lines[1]
    assert (tmp_path / "fmnist_10pct" / "configs" / "vit_random.yaml").exists()
    assert not (tmp_path / "fmnist_10pct" / "report.md").exists()


def test_reproduce_reuse_continues_from_the_committed_runs(tmp_path):
    """REPRODUCE_REUSE=1 takes the committed runs' summaries as finished runs; without it a rerun
    trains everything anew (a real reproduction)."""
    if not os.path.exists(os.path.join(BUILD, "sparsevit")):
        pytest.skip("build/sparsevit is not built")
    committed = os.path.join(ROOT, "docs", "results", "evidence", "low-data-25", "runs")
    assert sorted(os.listdir(os.path.join(committed, "vit_sparse_transformer"))) == ["seed0", "seed1", "seed2"]
    env = {"REPRODUCE_RUNS": str(tmp_path), "ROWS": "vit_dense vit_sparse_transformer"}
    fresh = reproduce("low-data-25", "--plan", env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert [l.count("0/3 runs finished") for l in fresh.stdout.splitlines() if l.startswith("vit_")] == [1, 1]
    reused = reproduce("low-data-25", "--plan", env={**env, "REPRODUCE_REUSE": "1"})
    assert reused.returncode == 0, reused.stderr
    assert "6 finished runs taken from docs/results/evidence/low-data-25/runs" in reused.stderr
    assert [l.count("3/3 runs finished") for l in reused.stdout.splitlines() if l.startswith("vit_")] == [1, 1]
    run = tmp_path / "fmnist_25pct" / "vit_sparse_transformer" / "seed1"
    copied = os.path.join(committed, "vit_sparse_transformer", "seed1", "summary.json")
    assert json.load(open(run / "summary.json")) == json.load(open(copied))


def test_reproduce_keeps_the_hand_written_provenance(tmp_path):
    """A rerun rewrites PROVENANCE.md's generated head and keeps its sections from the first `## `
    on, so notes on where runs were trained survive regenerating a report from reused runs."""
    if not os.path.exists(os.path.join(BUILD, "sparsevit")):
        pytest.skip("build/sparsevit is not built")
    import shutil
    dest = tmp_path / "docs" / "table2"
    for stem in ("vit_dense", "vit_fibottention_small"):
        shutil.copytree(os.path.join(ROOT, "docs", "results", "evidence", "table2", "runs", stem), dest / "runs" / stem)
    notes = "## Where the runs were trained\n\nBy hand.\n\n## More\n\nKept too."
    (dest / "PROVENANCE.md").write_text("# Provenance of table2\n\n- Command: old\n\n" + notes + "\n")
    out = reproduce("table2", env={"REPRODUCE_RUNS": str(tmp_path / "runs"), "REPRODUCE_DOCS": str(tmp_path / "docs"),
                                   "REPRODUCE_REUSE": "1", "ROWS": "vit_dense vit_fibottention_small"})
    assert out.returncode == 0, out.stderr
    assert "6 finished runs taken from" in out.stderr
    text = (dest / "PROVENANCE.md").read_text()
    assert "- Command: old" not in text
    assert "- Command: `REPRODUCE_REUSE=1 ROWS=" in text
    assert text.endswith("\n" + notes + "\n") and text.count("## Where the runs were trained") == 1
    report = json.load(open(dest / "report.json"))
    assert [row["method"] for row in report["rows"]] == ["vit_dense", "vit_fibottention_small"]


def test_provenance_says_where_runs_finished(tmp_path):
    """scripts/lib/run_hosts.py, which PROVENANCE.md's "Where its runs finished" line comes from."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("run_hosts", os.path.join(ROOT, "scripts", "lib", "run_hosts.py"))
    run_hosts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_hosts)
    runs = [{"finished_on": {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "threads": 1, "utc": "x"}}] * 3 + \
           [{"finished_on": {"cpu": "AMD EPYC", "cores": 2, "threads": 2, "utc": "x"}}, {"test_acc1": 1.0}]
    paths = []
    for i, run in enumerate(runs):
        paths.append(str(tmp_path / f"{i}.json"))
        json.dump(run, open(paths[-1], "w"))
    assert run_hosts.describe(paths) == ("3 on 2 cores, Intel(R) Xeon(R) Processor at 1 thread; "
                                         "1 on 2 cores, AMD EPYC at 2 threads; "
                                         "1 not recorded (finished before summaries recorded it)")
    assert run_hosts.describe([]) == "no finished runs"


WITH_RUNS = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(ROOT, "docs", "results", "evidence", "*", "runs")))


@pytest.mark.parametrize("experiment", WITH_RUNS, ids=[os.path.relpath(p, ROOT) for p in WITH_RUNS])
def test_reports_are_their_committed_runs(experiment):
    """Where an experiment commits its runs (evidence/<name>/runs/), its report is made of exactly
    those runs: every row's per-seed top-1 and curve is the one of the run's summary.json."""
    report = json.load(open(os.path.join(experiment, "report.json")))
    for row in report["rows"]:
        for seed, acc1, curve in zip(row["seeds"], row["test_acc1"], row["curves_test_acc1_per_seed"]):
            path = os.path.join(experiment, "runs", row["method"], f"seed{seed}", "summary.json")
            assert os.path.exists(path), f"{row['method']} seed {seed}: no committed run"
            summary = json.load(open(path))
            assert summary["test_acc1"] == pytest.approx(acc1, abs=1e-9), (row["method"], seed)
            assert summary["curve_test_acc1"] == pytest.approx(curve, abs=1e-9), (row["method"], seed)
