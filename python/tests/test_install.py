"""`pip install ./python` (Debian's pip and setuptools, no network) into a virtual environment
that sees the system's torch: the installed package carries the compiled library and works
outside the checkout."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_pip_install_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation", "--no-index",
                        os.path.join(ROOT, "python")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    check = ("import sparsevit, torch; p = sparsevit.load_library(); assert p.startswith(%r), p; "
             "rp, ci = sparsevit.patterns.build(None, 50, 4); q = torch.randn(1, 4, 50, 16); "
             "print(sparsevit.sparse_attention(q, q, q, rp, ci).shape)") % str(venv)
    env.pop("SPARSEVIT_BUILD", None)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "torch.Size([1, 4, 50, 16])" in r.stdout
