# The image ViT the video models start from (sourced by scripts/video-demo and scripts/reproduce
# video), as TimeSformer starts from ImageNet ViT-B: vit_nano_patch4_28 at depth 4
# (timesformer_nano_patch4_28's spatial part), dense, trained on fashion_mnist_frames (the clips'
# 14x14 garments alone on the 28x28 canvas, docs/datasets.md).
#
# sparsevit_video_image_vit BIN DIR EPOCHS: makes DIR/checkpoint.pt, DIR/summary.json and
# DIR/source.txt (how it was made) unless DIR/summary.json exists already (then reused).
sparsevit_video_image_vit() {
  local bin="$1" dir="$2" epochs="$3"
  if [[ -f "$dir/summary.json" && -f "$dir/checkpoint.pt" ]]; then
    sparsevit_log "image ViT: reusing $dir ($(cat "$dir/source.txt" 2>/dev/null || echo 'source not recorded'))"
    return 0
  fi
  sparsevit_log "image ViT: vit_nano_patch4_28, depth 4, dense, on fashion_mnist_frames ($epochs epochs) -> $dir"
  local cmd=("$bin" finetune --dataset fashion_mnist_frames --model vit_nano_patch4_28 --depth 4
             --attn-cfg configs/attention/vit_dense.yaml --epochs "$epochs" --batch_size 128 --lr 4e-3
             --warmup_epochs 0.5 --drop_path 0 --train_crop none --num_workers 1 --threads "$(nproc)"
             --output_dir "$dir")
  local t0
  t0=$(date +%s)
  mkdir -p "$dir"
  "${cmd[@]}" | tee "$dir.log"
  tail -n 1 "$dir.log" > "$dir/summary.json.tmp"
  echo "made by \`${cmd[*]#"$SPARSEVIT_ROOT/"}\` in $(( $(date +%s) - t0 )) s" > "$dir/source.txt"
  mv "$dir/summary.json.tmp" "$dir/summary.json"
}
