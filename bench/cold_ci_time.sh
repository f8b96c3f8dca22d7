#!/usr/bin/env bash
# Times `.ci/run`, `scripts/test` or `scripts/quickstart` cold, as on a fresh machine: a fresh clone
# of HEAD in a folder under /tmp, an empty ccache, no PyPI venv or wheels, no Debian 13 root, no
# Python peers. Prints each phase's wall and CPU time (bench/phase_timer.py: the phases are the
# scripts' `==> ` lines) and, for every build folder, each target group's compile time from its
# .ninja_log. Debian 12's own packages (apt) are not removed: the first run on a new machine pays
# for them (docs/building.md gives that figure separately).
#   bench/cold_ci_time.sh [--keep-downloads] [--keep] [ci|test|quickstart]   (default: ci)
#     --keep-downloads  reuse ~/.cache/sparsevit/pypi/wheels (hard links): the ~3 GB of wheels
#     --keep            leave the folder (clone, caches, builds) for a look afterwards
# Results: $work/phases.json and the printed tables; run it on an otherwise idle machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
keep_downloads=0 keep=0 what=ci
for arg in "$@"; do
  case "$arg" in
    --keep-downloads) keep_downloads=1 ;;
    --keep) keep=1 ;;
    ci|test|quickstart) what="$arg" ;;
    *) echo "error: unknown argument '$arg' (usage: bench/cold_ci_time.sh [--keep-downloads] [--keep] [ci|test|quickstart])" >&2; exit 2 ;;
  esac
done
work="$(mktemp -d /tmp/sparsevit-cold.XXXXXX)"
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/clone"
echo "cold $what at $(git -C "$work/clone" rev-parse --short HEAD) in $work; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
export CCACHE_DIR="$work/ccache" SPARSEVIT_PYPI_CACHE="$work/pypi" SPARSEVIT_DEBIAN13_ROOT="$work/debian13"
export PIP_NO_CACHE_DIR=1
if [ "$keep_downloads" = 1 ] && [ -d "$HOME/.cache/sparsevit/pypi/wheels" ]; then
  mkdir -p "$work/pypi"
  cp -al "$HOME/.cache/sparsevit/pypi/wheels" "$work/pypi/wheels"
fi
case "$what" in
  ci) command=(.ci/run) ;;
  test) command=(scripts/test) ;;
  quickstart) command=(scripts/quickstart) ;;
esac
cd "$work/clone"
rc=0
python3 "$here/phase_timer.py" --json "$work/phases.json" -- "${command[@]}" || rc=$?
builds=()
for b in build build-debian13 "$work/pypi/package-build"; do
  [ -f "$b/.ninja_log" ] && builds+=(--ninja "$b")
done
[ ${#builds[@]} -gt 0 ] && python3 "$here/phase_timer.py" "${builds[@]}"
echo "phases: $work/phases.json"
[ "$keep" = 1 ] || cp "$work/phases.json" "/tmp/sparsevit-cold-$what-phases.json"
exit "$rc"
