# The pure-Python peers the tests compare with that Debian does not package, pinned, from PyPI:
# installed into a folder (never into the system Python, never with their dependencies: torch and
# torchvision come from Debian's python3-torch / python3-torchvision; timm's huggingface_hub and
# safetensors imports are optional). Sourced, not run. The tests find them on PYTHONPATH:
#   source scripts/lib/python_peers.sh; sparsevit_python_peers "$BUILD/python-peers"
#   PYTHONPATH=python:"$BUILD/python-peers" python3 -m pytest python/tests/test_peer_*.py
# timm 1.0.31 (the newest at the time) imports and runs on torch 1.13 (Debian 12) and 2.6 (Debian 13).
# Every peer here is a pure-Python wheel (py3-none-any), so one Python may install them for another:
# run this on the host for the Debian 13 root too (the root's pip may not trust the host's proxy).

SPARSEVIT_PYTHON_PEERS=(timm==1.0.31)

# Installs every pinned peer missing from DIR (idempotent: a peer whose pinned version is already
# there is left alone). Uses the Python that runs the tests (SPARSEVIT_PYTHON, default
# /usr/bin/python3) so that pip picks wheels for it. Returns non-zero when PyPI is unreachable.
sparsevit_python_peers() {
  local dir="${1:?usage: sparsevit_python_peers DIR}"
  local python="${SPARSEVIT_PYTHON:-/usr/bin/python3}"
  local peer name version missing=()
  for peer in "${SPARSEVIT_PYTHON_PEERS[@]}"; do
    name="${peer%%==*}"
    version="${peer##*==}"
    if [ -d "$dir/$name-$version.dist-info" ]; then
      printf '==> Python peer %s already in %s\n' "$peer" "$dir" >&2
    else
      missing+=("$peer")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  printf '==> Installing Python peers %s into %s (pip --no-deps, from PyPI)\n' "${missing[*]}" "$dir" >&2
  mkdir -p "$dir"
  local log
  log="$(mktemp)"
  # --upgrade: replaces another pinned version already in DIR. No cache: the folder is the cache.
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --no-deps --upgrade \
      --no-cache-dir --timeout 30 --retries 2 --target "$dir" "${missing[@]}" >"$log" 2>&1; then
    if grep -qiE 'connection|network|resolve|timed out|no matching distribution|HTTPSConnection|Temporary failure' "$log"; then
      echo "error: cannot install ${missing[*]} from PyPI (is https://pypi.org reachable? proxy settings?):" >&2
    else
      echo "error: pip could not install ${missing[*]} into $dir:" >&2
    fi
    tail -n 5 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
