#!/usr/bin/env bash
# Writes Kinetics-like videos for bench/video_loader_bench (docs/video.md, "Loader throughput"):
# COUNT clips of 10 s and LONG clips of 60 s, 340x256 at 30 fps, H.264 (libx264's defaults: GOP
# 250, B-frames, CRF 23) in yuv420p .mp4, from FFmpeg's testsrc2 / mandelbrot / noisy testsrc2
# sources in turn, and DIR/train.csv listing them (label = the source). Needs Debian's `ffmpeg`.
#   bench/make_kinetics_like.sh DIR [COUNT=64] [LONG=4]
set -euo pipefail
dir="${1:?usage: make_kinetics_like.sh DIR [COUNT] [LONG]}"
count="${2:-64}"
long="${3:-4}"
command -v ffmpeg > /dev/null || { echo "make_kinetics_like.sh: needs ffmpeg (apt-get install -y ffmpeg)" >&2; exit 1; }
mkdir -p "$dir/videos"
: > "$dir/train.csv.tmp"
sources=("testsrc2=size=340x256:rate=30" "mandelbrot=size=340x256:rate=30" "testsrc2=size=340x256:rate=30,noise=alls=24:allf=t+u")
make_clip() {  # NAME SECONDS INDEX
  local name="$1" seconds="$2" k="$3"
  local source="${sources[$((k % 3))]}"
  # A different start for each clip, so that the clips of one source differ.
  nice ffmpeg -v error -y -f lavfi -i "$source" -ss "$((k / 3))" -t "$seconds" -c:v libx264 -pix_fmt yuv420p \
    "$dir/videos/$name.mp4"
  echo "videos/$name.mp4 $((k % 3))" >> "$dir/train.csv.tmp"
}
for ((k = 0; k < count; ++k)); do make_clip "clip_$k" 10 "$k"; done
for ((k = 0; k < long; ++k)); do make_clip "long_$k" 60 "$k"; done
mv "$dir/train.csv.tmp" "$dir/train.csv"
echo "make_kinetics_like.sh: $count + $long clips in $dir"
