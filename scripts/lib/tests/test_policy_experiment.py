"""scripts/policy-experiment's label-free rows (issue #48), run against a stand-in `sparsevit`
that records its arguments: a *_mae row pretrains its encoder once (MAE on the training episodes'
frames, with the row's attention and stem) and starts every seed's policy from that checkpoint with
MAE_POLICY; a finished pretraining is not redone; no row passes a pose loss."""
import os
import stat
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "policy-experiment")

# The stand-in: logs each call, writes what the script looks for, prints a JSON summary last.
STUB = """#!/usr/bin/env bash
echo "$*" >> "$STUB_LOG"
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "--output_dir" ] || [ "$prev" = "--output" ]; then out="$a"; fi
  prev="$a"
done
case "$1 $2" in
  "policy collect") : > "$out" ;;
  pretrain*) mkdir -p "$out"; : > "$out/checkpoint.pt" ;;
esac
echo '{"done": true}'
"""


def run_script(tmp_path, rows, seeds, extra_env=None):
    """The script against the stand-in, its output under tmp_path/out; returns the finished process."""
    build = tmp_path / "build"
    build.mkdir(exist_ok=True)
    stub = build / "sparsevit"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "SPARSEVIT_SKIP_BUILD": "1", "SPARSEVIT_BUILD": str(build),
           "STUB_LOG": str(tmp_path / "calls.log"), "OUT": str(tmp_path / "out"), "ROWS": rows, "SEEDS": seeds,
           "JOBS": "2", **(extra_env or {})}
    return subprocess.run([SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def run_experiment(tmp_path, rows, seeds, extra_env=None):
    """A run that must succeed; returns the stand-in's calls, one line each."""
    r = run_script(tmp_path, rows, seeds, extra_env)
    assert r.returncode == 0, r.stderr
    return (tmp_path / "calls.log").read_text().splitlines()


def test_mae_rows_pretrain_once_and_start_each_seed_from_it(tmp_path):
    calls = run_experiment(tmp_path, "dense_mae fibottention_mae_stem", "0 1")
    pretrains = [c for c in calls if c.startswith("pretrain ")]
    assert len(pretrains) == 2, calls  # one per encoder, not one per seed
    out = tmp_path / "out"
    dense = next(c for c in pretrains if "pretrain_dense " in c + " ")
    assert f"--data_path {out}/demos.episodes --max_train_samples 450" in dense
    assert "--epochs 30" in dense and "vit_dense.yaml" in dense and "--stem" not in dense
    fibo = next(c for c in pretrains if "pretrain_fibottention_stem" in c)
    assert "vit_fibottention_modified.yaml" in fibo and "--stem conv" in fibo
    trains = [c for c in calls if c.startswith("policy train")]
    assert len(trains) == 4, calls
    for c in trains:
        assert "--pose_weight" not in c and "--layer_decay 0.75" in c
        if "dense_mae_seed" in c:
            assert f"--finetune {out}/pretrain_dense/checkpoint.pt" in c and "--stem" not in c
        else:
            assert f"--finetune {out}/pretrain_fibottention_stem/checkpoint.pt" in c and "--stem conv" in c

    # Rerun with the runs' summaries gone: the finished pretraining is reused, MAE_POLICY applies.
    for seed in (0, 1):
        os.remove(out / f"dense_mae_seed{seed}" / "summary.json")
    os.remove(tmp_path / "calls.log")
    calls = run_experiment(tmp_path, "dense_mae", "0 1", {"MAE_POLICY": "--freeze_encoder"})
    assert not [c for c in calls if c.startswith("pretrain ")], calls
    trains = [c for c in calls if c.startswith("policy train")]
    assert len(trains) == 2 and all("--freeze_encoder" in c and "--layer_decay" not in c for c in trains)


def test_fibottention_from_the_dense_mae_shares_its_pretraining(tmp_path):
    calls = run_experiment(tmp_path, "dense_mae fibottention_dense_mae", "0")
    pretrains = [c for c in calls if c.startswith("pretrain ")]
    assert len(pretrains) == 1 and "vit_dense.yaml" in pretrains[0], calls
    out = tmp_path / "out"
    fibo = next(c for c in calls if "fibottention_dense_mae_seed0" in c)
    assert "vit_fibottention_modified.yaml" in fibo and "vit_dense.yaml" not in fibo
    assert f"--finetune {out}/pretrain_dense/checkpoint.pt --layer_decay 0.75" in fibo


def test_stem_rows_and_unknown_rows(tmp_path):
    calls = run_experiment(tmp_path, "dense_stem", "0")
    train = next(c for c in calls if c.startswith("policy train"))
    assert "--stem conv" in train and "--finetune" not in train and "vit_dense.yaml" in train
    r = run_script(tmp_path, "dense_maee", "0", {"OUT": str(tmp_path / "out2"), "JOBS": "1"})
    assert "unknown row 'dense_maee'" in r.stderr
