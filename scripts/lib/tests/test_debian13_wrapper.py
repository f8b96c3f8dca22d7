"""sparsevit_debian13_run (scripts/lib/debian13.sh) from a checkout anywhere, /tmp included: a CI
clone under /tmp once stopped the Debian 13 leg at once ("mount point does not exist": the mount
point was made under the root's /tmp, then hidden by the tmpfs mounted there). The root here is a
stand-in for the Debian 13 one: this machine's /usr and /etc bound into an empty folder, in a
private mount namespace, so the test needs neither debootstrap nor the cached root."""
import os
import shutil
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                       reason="the wrapper needs root (chroot, mount) and unshare"),
    # The wrapper runs on the host to enter the root; inside the root (the Debian 13 leg's own
    # suite) / is no mount point and unshare cannot make it private.
    pytest.mark.skipif(os.environ.get("SPARSEVIT_PLATFORM") == "debian13",
                       reason="runs on the host: this is the Debian 13 root"),
]


def fake_root(parent):
    root = os.path.join(parent, "root")
    for d in ("usr", "etc", "proc", "dev", "sys", "tmp", "root"):
        os.makedirs(os.path.join(root, d))
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink(f"/{link}"):
            os.symlink(os.readlink(f"/{link}"), os.path.join(root, link))
    return root


@pytest.mark.parametrize("parent", ["/tmp", os.path.expanduser("~")])
def test_the_wrapper_runs_a_command_in_a_checkout_under(parent):
    with tempfile.TemporaryDirectory(dir=parent, prefix="sparsevit-clone-") as clone, \
            tempfile.TemporaryDirectory(prefix="sparsevit-root-") as holder:
        shutil.copytree(os.path.join(ROOT, "scripts", "lib"), os.path.join(clone, "scripts", "lib"))
        root = fake_root(holder)
        script = f"""
            set -e
            mount --bind /usr {root}/usr && mount --bind /etc {root}/etc
            source {clone}/scripts/lib/setup.sh
            SPARSEVIT_DEBIAN13_ROOT={root}
            source {clone}/scripts/lib/debian13.sh
            sparsevit_debian13_run bash -c 'pwd; head -n 1 scripts/lib/debian13.sh; echo "platform=$SPARSEVIT_PLATFORM"'
        """
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == clone, r.stdout  # the command ran in the checkout, at its own path
        assert lines[1].startswith("# The second tested platform"), r.stdout  # and sees its files
        assert lines[2] == "platform=debian13", r.stdout
