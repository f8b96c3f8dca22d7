#!/usr/bin/env bash
# Times a cold `pip install --no-build-isolation --no-index ./python` into VENV (docs/python.md,
# "Build time"): a fresh copy of the checkout's files, a fresh CMake build folder, ccache off.
# VENV must already hold torch (and PyYAML). Prints wall seconds and the CPU time of the install.
#   bench/package_install_time.sh ~/.cache/sparsevit/pypi/venv-<hash>    # PyPI's torch
#   /usr/bin/python3 -m venv --system-site-packages /tmp/v && bench/package_install_time.sh /tmp/v
set -euo pipefail
venv="${1:?usage: bench/package_install_time.sh VENV}"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/setup.sh"
source "$SPARSEVIT_ROOT/scripts/lib/pypi.sh"  # sparsevit_clean_copy: what a clone holds, nothing built
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sparsevit_clean_copy "$work"
"$venv/bin/pip" uninstall -q -y sparsevit > /dev/null 2>&1 || true
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
cd "$work"
start=$(date +%s.%N)
CCACHE_DISABLE=1 SPARSEVIT_PACKAGE_BUILD_DIR="$work/cmake-build" bash -c \
  "time '$venv/bin/pip' install --no-build-isolation --no-index ./python" > "$work/install.log" 2>&1 || {
  tail -n 30 "$work/install.log" >&2; echo "error: the install failed" >&2; exit 1; }
echo "wall $(echo "$(date +%s.%N) - $start" | bc) s"
grep -E '^(user|sys)' "$work/install.log"
