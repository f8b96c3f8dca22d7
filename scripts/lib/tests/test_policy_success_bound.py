"""scripts/policy-success-bound: its argument checks and its table, made from the JSON files an
earlier invocation left (finished files are reused, so no policy is evaluated here)."""
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "policy-success-bound")


def run(*args, env=None):
    return subprocess.run([SCRIPT, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "SPARSEVIT_SKIP_BUILD": "1", **(env or {})})


def test_usage_and_missing_files_are_errors(tmp_path):
    out = run()
    assert out.returncode == 2 and "Usage: scripts/policy-success-bound OUT" in out.stderr
    out = run(tmp_path / "out", tmp_path / "nothing.pt", tmp_path / "demos.episodes")
    assert out.returncode == 2 and "no such file" in out.stderr and "nothing.pt" in out.stderr


def test_the_table_is_made_from_the_finished_files(tmp_path):
    ckpt, demos, out = tmp_path / "lowdim.pt", tmp_path / "demos.episodes", tmp_path / "out"
    ckpt.write_text("x")
    demos.write_text("x")
    out.mkdir()
    exact = {"episodes": 50, "score": 0.9729, "success_rate": 0.92, "mean_max_coverage": 0.9356}
    noisy = {"episodes": 50, "score": 0.675, "success_rate": 0.0, "mean_max_coverage": 0.641,
             "block_noise": {"position": 20.0, "angle_deg": 20.0}}
    (out / "lowdim_noise0_0.json").write_text(json.dumps(exact))
    (out / "lowdim_noise20_20.json").write_text(json.dumps(noisy))
    (out / "probe_0.json").write_text(json.dumps({
        "checkpoint": "dense.pt", "image_gap": 0.1123,
        "block_pose": {"position_rmse": 30.81, "baseline_position_rmse": 76.13, "angle_median_deg": 22.1,
                       "baseline_angle_median_deg": 34.8}}))
    fit = {"position_rmse": 8.81, "angle_median_deg": 2.04, "train_position_rmse": 4.0, "train_angle_median_deg": 1.4,
           "baseline_position_rmse": 76.1, "baseline_angle_median_deg": 34.9}
    (out / "pose_fit_dense_seed0.json").write_text(json.dumps({**fit, "name": "fresh dense encoder, seed 0"}))
    (out / "pose_fit_fibottention_seed0.json").write_text(json.dumps({**fit, "name": "fresh Fibottention encoder, seed 0"}))
    r = run(out, ckpt, demos, env={"NOISE_GRID": "0 0 20 20", "POSE_FIT_SEEDS": "0"})
    assert r.returncode == 0, r.stderr
    table = (out / "table.md").read_text()
    assert "| 0 units, 0 deg | 0.973 | 92% (46 / 50) | 0.936 |" in table
    assert "| 20 units, 20 deg | 0.675 | 0% (0 / 50) | 0.641 |" in table
    assert "| dense.pt | +0.1123 | 30.8 (76.1) | 22.1 deg (34.8) |" in table
    assert "| fresh dense encoder, seed 0 | 8.8, 2.0 deg | 4.0, 1.4 deg | 76.1, 34.9 deg |" in table
    assert "| fresh Fibottention encoder, seed 0 |" in table
