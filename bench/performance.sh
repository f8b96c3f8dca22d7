#!/usr/bin/env bash
# Every number of docs/performance.md: the operator at ViT sizes, whole-model training and
# inference dense vs sparse (fp32 and bf16, with the step breakdown), PyTorch eager on the same
# models, and short finetune runs (images/s from metrics.jsonl, data loading included).
#
#   bench/performance.sh [OUT_DIR]      (default docs/results/performance; ~25 min on 2 cores)
#
# Resumable: a result file that exists is not measured again (delete it to redo). Run it on an
# otherwise idle machine; SPARSEVIT (default build/sparsevit) and PYTHON (default /usr/bin/python3,
# Debian's python3-torch) can be overridden; SPARSEVIT_BEFORE, when set, is an older binary whose
# operator timings, training step (with its breakdown) and finetune speed are measured too, for
# before/after tables (docs/performance.md: main at 06d3c66 with this commit's src/benchmarks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${1:-docs/results/performance}"
SV="${SPARSEVIT:-build/sparsevit}"
PY="${PYTHON:-/usr/bin/python3}"
FIBO=configs/attention/vit_fibottention.yaml
mkdir -p "$OUT"

run() {  # run FILE CMD...: CMD's stdout into FILE unless it exists (written whole or not at all)
  local file="$OUT/$1"
  shift
  [ -s "$file" ] && return
  echo "==> $file: $*" >&2
  "$@" > "$file.tmp"
  mv "$file.tmp" "$file"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} > "$OUT/machine.txt"

# 1. The operator: Fibottention w_min 5, w_max N/3, H 12, D 64, B 8.
for N in 197 577 1025; do
  for pass in fwd bwd; do
    flag=""; [ $pass = bwd ] && flag=--backward
    run "op_N${N}_${pass}.json" "$SV" bench --attn-cfg $FIBO --set w_min=5 --set w_max=$((N / 3)) --tokens $N \
      --heads 12 --head-dim 64 --batch 8 --threads 2 --repeats 7 --warmup 2 $flag --json
    if [ -n "${SPARSEVIT_BEFORE:-}" ]; then
      run "op_N${N}_${pass}_before.json" "$SPARSEVIT_BEFORE" bench --attn-cfg $FIBO --set w_min=5 \
        --set w_max=$((N / 3)) --tokens $N --heads 12 --head-dim 64 --batch 8 --threads 2 --repeats 7 --warmup 2 $flag --json
    fi
  done
done

# 2. Whole models, batch 128: training step and inference, fp32 and bf16, with the breakdown;
#    N = 197 with the ViT-B config, and the quickstart model (N = 50) with its own.
for model in vit_nano_patch2_28 vit_tiny_patch2_28 vit_nano_patch4_28; do
  cfg=$FIBO; reps=5
  [ $model = vit_nano_patch4_28 ] && cfg=configs/attention/vit_fibottention_small.yaml
  [ $model = vit_tiny_patch2_28 ] && reps=3
  for amp in none bf16; do
    run "model_${model}_train_${amp}.json" "$SV" bench --model $model --attn-cfg $cfg --backward --amp $amp \
      --threads 2 --repeats $reps --warmup 2 --breakdown --json
    run "model_${model}_infer_${amp}.json" "$SV" bench --model $model --attn-cfg $cfg --amp $amp \
      --threads 2 --repeats $reps --warmup 2 --json
  done
  if [ -n "${SPARSEVIT_BEFORE:-}" ]; then  # the old model code; it trained without the malloc cache
    run "model_${model}_train_none_before.json" "$SPARSEVIT_BEFORE" bench --model $model --attn-cfg $cfg --backward \
      --no-malloc-cache --threads 2 --repeats $reps --warmup 2 --breakdown --json
  fi
  run "eager_${model}_train.json" "$PY" bench/vit_train_pytorch.py --model $model --batch 128 --threads 2 --steps $reps --warmup 2
  run "eager_${model}_infer.json" "$PY" bench/vit_train_pytorch.py --model $model --batch 128 --threads 2 --steps $reps --warmup 2 --forward
done
# High resolution, where dense attention dominates: ViT-Ti at 448 x 448 with 8 x 8 patches (N = 3137).
run model_vit_tiny_448_p8_infer_none.json "$SV" bench --model vit_tiny_patch16_224 --input_size 448 --patch_size 8 \
  --attn-cfg $FIBO --set w_max=1045 --batch 4 --threads 2 --repeats 3 --warmup 1 --json

# 3. Short finetune runs on real data (loader, augmentation and evaluation included): images/s
#    from metrics.jsonl, dense vs Fibottention, N = 197.
finetune() {  # finetune NAME BINARY CONFIG
  local dir="$OUT/finetune_$1"
  [ -s "$dir/metrics.jsonl" ] && return
  echo "==> $dir" >&2
  "$2" finetune --dataset fashion_mnist --model vit_nano_patch2_28 --attn-cfg "$3" --epochs 1 --batch_size 128 \
    --lr 4e-3 --warmup_epochs 0.5 --drop_path 0 --train_crop none --max_train_samples 8192 --max_eval_samples 1024 \
    --num_workers 2 --threads 2 --output_dir "$dir.tmp" > /dev/null
  mkdir -p "$dir"
  cp "$dir.tmp/metrics.jsonl" "$dir/metrics.jsonl"
  rm -rf "$dir.tmp"
}
finetune nano_p2_dense "$SV" configs/attention/vit_dense.yaml
finetune nano_p2_fibottention "$SV" $FIBO
if [ -n "${SPARSEVIT_BEFORE:-}" ]; then
  finetune nano_p2_dense_before "$SPARSEVIT_BEFORE" configs/attention/vit_dense.yaml
  finetune nano_p2_fibottention_before "$SPARSEVIT_BEFORE" $FIBO
fi
echo "results in $OUT" >&2
