# Shared by scripts/quickstart and scripts/test: install the Debian dependencies, configure
# and build in build/. Sourced, not run. Idempotent: installed packages and a configured
# build tree are reused.

SPARSEVIT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SPARSEVIT_BUILD="${SPARSEVIT_BUILD:-$SPARSEVIT_ROOT/build}"

SPARSEVIT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp libgloo-dev
  libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libpng-dev libturbojpeg0-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  libbox2d-dev libblosc-dev libzip-dev
  dataset-fashion-mnist python3
)
# scripts/test also installs these: Debian's PyTorch reads what sparsevit writes (weights interop
# tests) and regenerates the golden fixtures.
# The Python package (python/sparsevit) is tested with pytest over the same build: its
# extension needs pybind11 and Python's headers.
# The real peers the tests compare with: zarr writes Diffusion Policy's replay stores, PyYAML reads
# configs on the Python side; Debian 13 also has safetensors (Debian 12 does not package it), and
# SLEEF's header, without which torch.compile's CPU code (inductor, FlexAttention) finds no vector
# ISA and the flex template does not compile (bench/peers_bench.py).
SPARSEVIT_TEST_PACKAGES=(python3-torch python3-torchvision python3-pytest python3-scipy python3-pybind11 pybind11-dev python3-dev
                         python3-pip python3-venv python3-setuptools python3-zarr python3-yaml)
if [ "$(cut -d. -f1 /etc/debian_version 2>/dev/null)" -ge 13 ] 2>/dev/null; then
  SPARSEVIT_TEST_PACKAGES+=(python3-safetensors libsleef-dev)
fi

sparsevit_log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

sparsevit_install_deps() {
  local missing=()
  for p in "${SPARSEVIT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    sparsevit_log "Debian dependencies already installed"
    return
  fi
  sparsevit_log "Installing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "error: installing packages needs root or sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# sparsevit_build [CMAKE_ARGS...]: configures and builds everything, or only the targets listed
# in SPARSEVIT_BUILD_TARGETS (space-separated; scripts/quickstart builds the CLI alone).
sparsevit_build() {
  local jobs targets=()
  jobs="$(nproc)"
  sparsevit_log "Configuring in $SPARSEVIT_BUILD"
  cmake -S "$SPARSEVIT_ROOT" -B "$SPARSEVIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  if [ -n "${SPARSEVIT_BUILD_TARGETS:-}" ]; then
    read -r -a targets <<< "$SPARSEVIT_BUILD_TARGETS"
    targets=(--target "${targets[@]}")
  fi
  sparsevit_log "Building ${SPARSEVIT_BUILD_TARGETS:-everything} in $SPARSEVIT_BUILD ($jobs jobs)$(sparsevit_build_estimate "${targets[@]}")"
  cmake --build "$SPARSEVIT_BUILD" -j "$jobs" "${targets[@]}"
}

# What the build is about to cost, from the steps ninja has left and SPARSEVIT_BUILD_COLD
# ("STEPS CPU_SECONDS": a cold build of the same targets, measured; docs/building.md).
sparsevit_build_estimate() {
  [ -n "${SPARSEVIT_BUILD_COLD:-}" ] || return 0
  local cold_steps cold_cpu left minutes targets=()
  read -r cold_steps cold_cpu <<< "$SPARSEVIT_BUILD_COLD"
  [ $# -gt 0 ] && targets=("${@:2}")  # drop cmake's --target
  left="$(ninja -C "$SPARSEVIT_BUILD" -n "${targets[@]}" 2>/dev/null | grep -c '^\[' || true)"
  [ "$left" -gt 0 ] 2>/dev/null || { echo ": up to date"; return 0; }
  minutes=$(( (left * cold_cpu / cold_steps / $(nproc) + 59) / 60 ))
  echo ": $left steps, about $minutes min from nothing (less with a warm ccache)"
}
