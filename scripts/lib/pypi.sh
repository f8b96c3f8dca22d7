# The third tested platform: PyPI's torch (2.15, a CUDA 13.2 build), the torch nearly every
# PyTorch user has. Sourced after setup.sh, not run; `scripts/test --platform pypi` uses it.
#
# A venv of Debian's Python 3.11 (no system site packages: Debian's torch 1.13 stays invisible)
# with exactly the pins of scripts/lib/pypi-platform-requirements.txt, cached outside the checkout
# (SPARSEVIT_PYPI_CACHE, default ~/.cache/sparsevit/pypi) like the Debian 13 root: the wheels
# (~3 GB, fetched once) in wheels/, the venv in venv-<hash of the pins>/. The package is installed
# from a clean copy of the checkout (its tracked and unignored files, nothing built) with the
# README's command, a wheel is made from the same copy, the copy is removed (so the tests see an
# install that no longer has its source tree), and the whole Python suite runs against the
# installed package with SPARSEVIT_REQUIRE_PEERS=1, plus the benchmarks' compiled-FlexAttention
# proof (scripts/lib/tests/test_compiled_flex.py), which needs a torch 2.

SPARSEVIT_PYPI_CACHE="${SPARSEVIT_PYPI_CACHE:-$HOME/.cache/sparsevit/pypi}"
SPARSEVIT_PYPI_PYTHON="${SPARSEVIT_PYPI_PYTHON:-/usr/bin/python3}"
SPARSEVIT_PYPI_REQUIREMENTS="$SPARSEVIT_ROOT/scripts/lib/pypi-platform-requirements.txt"

sparsevit_pypi_venv_dir() {
  local key
  key="$( { "$SPARSEVIT_PYPI_PYTHON" -c 'import sys; print(sys.version)'; grep -v '^#' "$SPARSEVIT_PYPI_REQUIREMENTS"; } \
          | sha256sum | cut -c1-12)"
  echo "$SPARSEVIT_PYPI_CACHE/venv-$key"
}

# Makes the venv if it is missing or unfinished (the first time: ~3 GB from PyPI, a few minutes).
sparsevit_pypi_prepare() {
  local venv wheels
  venv="$(sparsevit_pypi_venv_dir)"
  wheels="$SPARSEVIT_PYPI_CACHE/wheels"
  if [ -f "$venv/.complete" ]; then
    sparsevit_log "PyPI venv already made ($venv)"
    echo "$venv"
    return
  fi
  sparsevit_log "Making the PyPI venv in $venv (pinned: $SPARSEVIT_PYPI_REQUIREMENTS)"
  rm -rf "$venv"
  mkdir -p "$wheels"
  "$SPARSEVIT_PYPI_PYTHON" -m venv "$venv" >&2 || {
    echo "error: $SPARSEVIT_PYPI_PYTHON -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
  # Fetch what the wheel folder lacks (pip download skips files already there), then install
  # offline from it: exactly the pinned set, no resolver.
  "$venv/bin/pip" download --no-deps --only-binary :all: --timeout 60 --retries 3 -q -d "$wheels" \
      -r "$SPARSEVIT_PYPI_REQUIREMENTS" >&2 || {
    echo "error: cannot fetch the pinned wheels from PyPI into $wheels (is https://pypi.org reachable?)" >&2; exit 1; }
  "$venv/bin/pip" install --no-deps --no-index --find-links "$wheels" -q -r "$SPARSEVIT_PYPI_REQUIREMENTS" >&2
  "$venv/bin/pip" check >&2 || { echo "error: the pinned PyPI set is inconsistent (pip check)" >&2; exit 1; }
  touch "$venv/.complete"
  echo "$venv"
}

# Copies the checkout's tracked and unignored files (what a clone would hold, nothing built) to DIR.
sparsevit_clean_copy() {
  local dir="${1:?usage: sparsevit_clean_copy DIR}"
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$SPARSEVIT_ROOT" && git ls-files -z --cached --others --exclude-standard \
     | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
     | tar --null -T - -cf -) | tar -xf - -C "$dir"
}

# Installs the package into the venv with the README's command from a clean copy, makes a wheel
# from the same copy, removes the copy, and runs the Python suite against the installed package.
sparsevit_pypi_test() {
  local venv="${1:?usage: sparsevit_pypi_test VENV [pytest args]}"
  shift
  local copy="$SPARSEVIT_PYPI_CACHE/checkout" dist="$SPARSEVIT_PYPI_CACHE/dist" start
  sparsevit_log "Copying the checkout's files to $copy"
  sparsevit_clean_copy "$copy"
  rm -rf "$dist"
  # The CMake build folder lives outside the copy, so a second run only recompiles what changed.
  export SPARSEVIT_PACKAGE_BUILD_DIR="$SPARSEVIT_PYPI_CACHE/package-build"
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_INDEX=1
  "$venv/bin/pip" uninstall -q -y sparsevit >/dev/null 2>&1 || true
  sparsevit_log "Installing the package into the PyPI venv: pip install --no-build-isolation ./python"
  start=$SECONDS
  (cd "$copy" && "$venv/bin/pip" install -v --no-build-isolation ./python) > "$SPARSEVIT_PYPI_CACHE/install.log" 2>&1 || {
    tail -n 40 "$SPARSEVIT_PYPI_CACHE/install.log" >&2; echo "error: pip install failed (log: $SPARSEVIT_PYPI_CACHE/install.log)" >&2; exit 1; }
  grep '^  sparsevit: building' "$SPARSEVIT_PYPI_CACHE/install.log" >&2 || true
  sparsevit_log "Installed in $(( SECONDS - start )) s; making a wheel from the same copy (pip wheel)"
  (cd "$copy" && "$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$dist" ./python) >&2
  rm -rf "$copy"
  local wheel
  wheel="$(ls "$dist"/sparsevit-*.whl)"
  sparsevit_log "Running the Python package's tests against PyPI's torch ($("$venv/bin/python" -c 'import torch; print(torch.__version__)'))"
  # Not SPARSEVIT_BUILD or PYTHONPATH: the installed package must find its own libraries. The
  # tests that compare with the CLI find it in the checkout's build/ (the Debian 12 build).
  (cd "$SPARSEVIT_PYPI_CACHE" && env -u SPARSEVIT_BUILD -u PYTHONPATH -u SPARSEVIT_LIBRARY SPARSEVIT_PLATFORM=pypi \
     SPARSEVIT_REQUIRE_PEERS=1 SPARSEVIT_INSTALLED_VENV="$venv" SPARSEVIT_WHEEL="$wheel" \
     "$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$SPARSEVIT_ROOT/python" "$@" "$SPARSEVIT_ROOT/python/tests" \
     "$SPARSEVIT_ROOT/scripts/lib/tests/test_compiled_flex.py")
}
