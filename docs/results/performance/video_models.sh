#!/usr/bin/env bash
# The video rows of docs/performance.md: `sparsevit bench --model` on TimeSformers, dense spatial
# attention vs the video demo's two configs (scripts/video-demo): modified Fibottention
# (w_min 1, w_max N - 1) and BigBird with its pruning ratio set to Fibottention's. Writes one
# JSON per run here: the bench's object plus the command, machine, date and load it ran under.
# Usage: docs/results/performance/video_models.sh BUILD_DIR (a Release build with the bench);
# VIDEO_BENCH_ONLY=nano runs part 1 only.
set -euo pipefail
SV="$(cd "$1" && pwd)/sparsevit"
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT="${VIDEO_BENCH_OUT:-docs/results/performance}"  # elsewhere for a trial run
FIBO=configs/attention/video/timesformer_fibottention_modified.yaml

# run NAME ARGS...: `sparsevit bench ARGS --json` into $OUT/NAME with its provenance.
run() {
  local name="$1"; shift
  local load; load="$(cut -d' ' -f1-3 /proc/loadavg)"
  local date; date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "==> $name (load $load)" >&2
  "$SV" bench "$@" --json > "$OUT/$name.tmp"
  /usr/bin/python3 - "$OUT/$name.tmp" "$OUT/$name" "$date" "$load" "sparsevit bench $* --json" <<'EOF'
import json, os, platform, subprocess, sys
tmp, out, date, load, command = sys.argv[1:]
result = json.load(open(tmp))
cpu = next((l.split(':', 1)[1].strip() for l in subprocess.run(['lscpu'], capture_output=True, text=True).stdout.splitlines()
            if l.startswith('Model name')), platform.processor())
commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
result = {'command': command, 'date': date, 'machine': f'{cpu}, {os.cpu_count()} cores',
          'load_before': load, 'load_after': ' '.join(open('/proc/loadavg').read().split()[:3]),
          'commit': commit, **result}
json.dump(result, open(out, 'w'), indent=1)
os.remove(tmp)
EOF
}

# The pruning ratio of Fibottention's spatial attention, which BigBird's random keys fill up to.
ratio() {
  "$SV" flops --model "$1" --attn-cfg $FIBO "${@:2}" --json |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["pruning_ratio"])'
}

# 1. timesformer_nano_patch4_28 (8 frames of 28 x 28, N = 50): the video demo's model and batch.
m=timesformer_nano_patch4_28
nano=(--model $m --batch 32 --threads 2 --repeats 10 --warmup 3 --breakdown)
bigbird_ratio="$(ratio $m --set w_max=49)"
for pass in infer train; do
  flag=(); [ $pass = train ] && flag=(--backward)
  run "model_${m}_${pass}_none_fibottention.json" "${nano[@]}" "${flag[@]}" --attn-cfg $FIBO --set w_max=49
  run "model_${m}_${pass}_none_bigbird.json" "${nano[@]}" "${flag[@]}" --attn-cfg configs/attention/vit_bigbird.yaml \
    --set "pruning_ratio=$bigbird_ratio"
done

[ "${VIDEO_BENCH_ONLY:-}" = nano ] && exit 0  # rerun the nano rows alone

# 2. timesformer_tiny_patch16_224 (8 frames of 224 x 224, N = 197), inference at batch 4;
#    Fibottention's w_max = N - 1 = 196 is the config's own.
m=timesformer_tiny_patch16_224
tiny=(--model $m --batch 4 --threads 2 --repeats 3 --warmup 1)
bigbird_ratio="$(ratio $m)"
run "model_${m}_infer_none_fibottention.json" "${tiny[@]}" --attn-cfg $FIBO
run "model_${m}_infer_none_bigbird.json" "${tiny[@]}" --attn-cfg configs/attention/vit_bigbird.yaml \
  --set "pruning_ratio=$bigbird_ratio"
