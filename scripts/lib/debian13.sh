# The second tested platform: a Debian 13 (trixie) root made with debootstrap, holding the same
# dependencies from Debian 13's own packages (LibTorch 2.6, torch 2.6, FFmpeg 7.1, Python 3.13).
# Sourced after setup.sh, not run. The root is cached outside the checkout (SPARSEVIT_DEBIAN13_ROOT,
# default ~/.cache/sparsevit/debian13) so that every clone on the machine reuses it, with its
# ccache. Commands run in a private mount namespace (unshare), so that nothing stays mounted
# and several runs may share the root at once; the checkout is bind-mounted at its own path.

SPARSEVIT_DEBIAN13_ROOT="${SPARSEVIT_DEBIAN13_ROOT:-$HOME/.cache/sparsevit/debian13}"
SPARSEVIT_DEBIAN13_MIRROR="${SPARSEVIT_DEBIAN13_MIRROR:-http://deb.debian.org/debian}"

sparsevit_need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "error: the Debian 13 leg needs root (debootstrap, chroot, mount)" >&2; exit 1; }
}

# Makes the root if it is missing (about a minute), then installs into it whatever of the
# package lists it lacks (the first time: 2.9 GB, about 5 minutes).
sparsevit_debian13_prepare() {
  sparsevit_need_root
  local root="$SPARSEVIT_DEBIAN13_ROOT"
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    command -v debootstrap >/dev/null || {
      sparsevit_log "Installing debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    sparsevit_log "Making a Debian 13 root in $root (debootstrap)"
    rm -rf "$root.partial"
    mkdir -p "$(dirname "$root")"
    debootstrap --variant=minbase trixie "$root.partial" "$SPARSEVIT_DEBIAN13_MIRROR" > "$root.debootstrap.log" 2>&1 || {
      echo "error: debootstrap failed; see $root.debootstrap.log" >&2; exit 1; }
    mv "$root.partial" "$root"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # setup.sh's own install step, run inside the root, installs what is missing there.
  sparsevit_debian13_run bash -c 'source scripts/lib/setup.sh
    SPARSEVIT_PACKAGES+=("${SPARSEVIT_TEST_PACKAGES[@]}"); sparsevit_install_deps'
}

# Runs a command inside the root, in the checkout, with the checkout at the same path.
sparsevit_debian13_run() {
  local root="$SPARSEVIT_DEBIAN13_ROOT"
  # The checkout's mount point is made after the tmpfs on the root's /tmp: a checkout under /tmp
  # (a CI clone) gets its mount point inside that tmpfs, not under it where the bind cannot see it.
  unshare --mount --propagation private -- bash -c '
    set -e
    root="$1"; repo="$2"; shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs tmpfs "$root/tmp"
    mkdir -p "$root$repo"
    mount --bind "$repo" "$root$repo"
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
      TERM="${TERM:-dumb}" SPARSEVIT_BUILD="$SPARSEVIT_BUILD" SPARSEVIT_PLATFORM=debian13 \
      SPARSEVIT_REQUIRE_PEERS=1 bash -c "cd \"$repo\" && exec \"\$@\"" _ "$@"' \
    _ "$root" "$SPARSEVIT_ROOT" "$@"
}
