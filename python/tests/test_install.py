"""`pip install --no-build-isolation --no-index ./python` into a fresh venv that sees the system's
torch (`--system-site-packages`): the package's build compiles both libraries with CMake against
that torch (SPARSEVIT_PYTHON_PACKAGE: no yaml-cpp, libzip, libpng, fmt), and the installed package
works outside the checkout with the libraries it carries. One install per session (the fixture);
its CMake build folder (python/build/) and ccache make a second session's install quick."""
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# What the package's libraries may bring beside what torch brings (and the operators, which the
# core finds beside itself): the C++ runtime, libc and friends, OpenMP, and Python. Debian's
# libtorch itself brings libpng, libfmt, minizip...: allowed as torch's; our own needs must not.
RUNTIME = re.compile(r"^(linux-vdso|ld-linux.*|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libgomp|"
                     r"libpython3.*)\.so")
CLI_ONLY = re.compile(r"yaml-cpp|libzip|libpng|libfmt|libspdlog")


def clean_env():
    """The environment without the in-tree flow's variables, so only the installed package is found."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARSEVIT_BUILD", "SPARSEVIT_LIBRARY")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    # The PyPI leg (scripts/lib/pypi.sh) has already installed the package with the README's command
    # into its venv of PyPI's torch, from a copy of the checkout since removed: test that install.
    if os.environ.get("SPARSEVIT_INSTALLED_VENV"):
        return pathlib.Path(os.environ["SPARSEVIT_INSTALLED_VENV"])
    home = tmp_path_factory.mktemp("install")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-v", "--no-build-isolation", "--no-index",
                        os.path.join(ROOT, "python")], capture_output=True, text=True, env=clean_env(), cwd=home)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return venv


def run_python(venv, code, cwd, check=True):
    r = subprocess.run([str(venv / "bin" / "python"), "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=clean_env(), cwd=cwd, timeout=300)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def installed_paths(venv, tmp_path):
    """Where the installed package and the libraries it loaded lie, and the versions involved."""
    out = run_python(venv, """
        import json, torch, sparsevit
        from sparsevit import _library
        q = torch.randn(1, 4, 50, 16)
        row_ptr, col_idx = sparsevit.patterns.build(None, 50, 4)
        out = sparsevit.sparse_attention(q, q, q, row_ptr, col_idx)
        print(json.dumps({"package": sparsevit.__file__, "ops": sparsevit.load_library(),
                          "core": _library.core().__file__, "built_for": _library.core().torch_version,
                          "torch": torch.__version__, "shape": list(out.shape)}))
        """, cwd=tmp_path).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_installed_package_loads_the_libraries_it_carries(venv, tmp_path):
    info = installed_paths(venv, tmp_path)
    for key in ("package", "ops", "core"):
        assert os.path.realpath(info[key]).startswith(os.path.realpath(str(venv)) + os.sep), (key, info)
    assert os.path.dirname(info["ops"]) == os.path.dirname(info["core"]) == os.path.dirname(info["package"])
    assert info["built_for"].split(".")[:2] == info["torch"].split("+")[0].split(".")[:2], info
    assert info["shape"] == [1, 4, 50, 16]


def test_patch_model_on_a_timm_layout_vit(venv, tmp_path):
    out = run_python(venv, """
        import torch
        from torch import nn
        import sparsevit

        class Attention(nn.Module):  # timm's layout: qkv, proj, num_heads
            def __init__(self, dim, heads):
                super().__init__()
                self.num_heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

            def forward(self, x):
                B, N, C = x.shape
                q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
                a = (q @ k.transpose(-2, -1) * (C // self.num_heads) ** -0.5).softmax(-1)
                return self.proj((a @ v).transpose(1, 2).reshape(B, N, C))

        class Block(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.attn = Attention(dim, heads)

            def forward(self, x):
                return x + self.attn(x)

        class ViT(nn.Module):
            def __init__(self, depth=2, dim=64, heads=4, tokens=50):
                super().__init__()
                self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
                self.pos_embed = nn.Parameter(torch.zeros(1, tokens, dim))
                self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])

            def forward(self, x):
                return self.blocks(x)

        torch.manual_seed(0)
        model = ViT().eval()
        x = torch.randn(2, 50, 64)
        dense = model(x)
        info = sparsevit.patch_model(model, "attention:\\n  backend: vit\\n  mask: local\\n  mask_kwargs:\\n    window: 3\\n")
        sparse = model(x)
        print(info["layers_patched"], tuple(sparse.shape), round(info["pruning_ratio"], 3), bool((sparse - dense).abs().max() > 1e-4))
        """, cwd=tmp_path).stdout
    assert out.startswith("2 (2, 50, 64)"), out
    assert out.strip().endswith("True"), out  # a local window is not dense attention


# Bad configs: the installed core reads YAML with PyYAML, the CLI build with yaml-cpp; the spec
# parser is the same, so the messages are the same, locations included.
BAD_CONFIGS = {
    "unknown_backend": "attention:\n  backend: vitt\n",
    "unknown_key": "attention:\n  backend: vit\n  maks: fibo\n",
    "duplicate_key": "attention:\n  mask: local\n  mask_kwargs:\n    window: 2\n    window: 70\n",
    "bad_kwarg": "attention:\n  mask: fibo\n  mask_kwargs:\n    w_mx: 3\n",
    "list_item": "attention:\n  mask: fibo\n  mask_kwargs:\n    sequence: [1, [2]]\n",
    "null_value": "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min:\n",
    "not_a_mapping": "- attention: {}\n",
    "no_mask": "attention:\n  backend: vit\n  mask_kwargs: {w_min: 3}\n",
    "recursive_alias": "attention: &x {backend: vit, mask_kwargs: *x}\n",
}
PRINT_ERRORS = """
    import json, sys, sparsevit
    errors = {}
    for name, text in json.loads(sys.argv[1]).items():
        try:
            sparsevit.config.load(text)
            errors[name] = None
        except sparsevit.UsageError as e:
            errors[name] = str(e)
    print(json.dumps(errors))
    """


def test_config_errors_name_the_place_as_the_cli_build_does(venv, tmp_path):
    r = subprocess.run([str(venv / "bin" / "python"), "-c", textwrap.dedent(PRINT_ERRORS), json.dumps(BAD_CONFIGS)],
                       capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    installed = json.loads(r.stdout.strip().splitlines()[-1])
    assert installed["unknown_backend"].startswith("<string>:2:12: unknown backend 'vitt'"), installed
    assert installed["duplicate_key"].startswith("<string>:5:5: duplicate key 'window'"), installed
    assert all(installed.values()), installed
    build = os.environ.get("SPARSEVIT_BUILD", "")
    if os.path.isdir(build) and any(f.startswith("_sparsevit_core") for f in os.listdir(build)):
        # The in-tree core (the CLI build's, reading with yaml-cpp) gives the same messages.
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(PRINT_ERRORS), json.dumps(BAD_CONFIGS)],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, r.stderr
        in_tree = json.loads(r.stdout.strip().splitlines()[-1])
        # An empty value has no text of its own: PyYAML places it after its key (4:11), yaml-cpp at
        # the next line (5:1). Every other message is the same, place included.
        strip_place = lambda message: message.split(": ", 1)[1]  # noqa: E731
        assert strip_place(installed.pop("null_value")) == strip_place(in_tree.pop("null_value"))
        assert installed == in_tree
    # Malformed YAML: each reader has its own words, but both say where.
    r = run_python(venv, """
        import sparsevit
        try:
            sparsevit.config.load("attention:\\n  backend: [vit\\n")
        except sparsevit.UsageError as e:
            print(e)
        """, cwd=tmp_path)
    assert re.match(r"<string>:\d+:\d+: invalid YAML: ", r.stdout), r.stdout


def linked_libraries(path):
    """{soname: resolved path} from ldd."""
    r = subprocess.run(["ldd", path], capture_output=True, text=True, check=True)
    libs = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts:
            libs[os.path.basename(parts[0])] = parts[2] if len(parts) > 2 and parts[1] == "=>" else parts[0]
    return libs


def test_the_libraries_need_only_torch_the_cxx_runtime_and_python(venv, tmp_path):
    info = installed_paths(venv, tmp_path)
    torch_dir = run_python(venv, "import os, torch; print(os.path.dirname(torch.__file__))", cwd=tmp_path).stdout.strip()
    torch_extension = [os.path.join(torch_dir, f) for f in os.listdir(torch_dir) if f.startswith("_C.") and
                       f.endswith(".so")][0]
    torch_brings = set(linked_libraries(torch_extension))
    for library in (info["ops"], info["core"]):
        libs = linked_libraries(library)
        assert "not found" not in libs.values(), (library, libs)
        ours = {name for name in libs if name not in torch_brings and not name.startswith("libtorch") and
                not name.startswith("libc10") and not RUNTIME.match(name) and name != "libsparsevit_ops.so"}
        assert not ours, f"{library} needs {sorted(ours)} beyond torch, the C++ runtime and Python"
        needed = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout
        assert not CLI_ONLY.search(needed), needed


def test_a_core_built_for_another_torch_is_refused_naming_both(venv, tmp_path):
    info = installed_paths(venv, tmp_path)
    # The real check (sparsevit/__init__.py) against the installed core's recorded version, with
    # the running torch claiming another version.
    r = run_python(venv, """
        import torch
        torch.__version__ = "0.42.0"
        import sparsevit
        """, cwd=tmp_path, check=False)
    assert r.returncode != 0
    assert "ImportError" in r.stderr, r.stderr
    assert f"LibTorch {info['built_for']}" in r.stderr and "PyTorch 0.42.0" in r.stderr, r.stderr


def run_example(venv, tmp_path, name, *args):
    r = subprocess.run([str(venv / "bin" / "python"), os.path.join(ROOT, "examples", "python", name), *args],
                       capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_example_patch_torchvision_vit(venv, tmp_path):
    if run_python(venv, "import torchvision", cwd=tmp_path, check=False).returncode != 0:
        pytest.skip("needs torchvision")
    out = run_example(venv, tmp_path, "patch_torchvision_vit.py", "--batch", "1", "--repeats", "1")
    assert "patched 12 layers (torchvision), N = 197: pruning ratio 0.98" in out
    assert "dense" in out and "sparse" in out


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"), reason="needs dataset-fashion-mnist")
def test_example_train_fashion_mnist(venv, tmp_path):
    out = run_example(venv, tmp_path, "train_fashion_mnist.py", "--steps", "60")
    accuracy = float(out.strip().splitlines()[-1].split(": ")[1].rstrip("%"))
    assert accuracy > 30  # chance is 10%


# The libraries of torch (libtorch*, libc10*) a process has mapped, from /proc/self/maps: after
# `import torch` alone, then after importing sparsevit and running an operator.
MAPPED_TORCH_LIBRARIES = """
    import json, os, re
    def mapped():
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
        return sorted(p for p in paths if re.match(r"lib(torch|c10)[^/]*\\.so", os.path.basename(p)))
    import torch
    before = mapped()
    import sparsevit
    q = torch.randn(1, 2, 20, 8)
    row_ptr, col_idx = sparsevit.patterns.build(None, 20, 2)
    sparsevit.sparse_attention(q, q, q, row_ptr, col_idx)
    print(json.dumps({"before": before, "after": mapped(), "torch": torch.__version__,
                      "torch_dir": os.path.dirname(torch.__file__)}))
    """


def test_only_the_installed_torchs_libraries_are_mapped_and_the_process_exits_cleanly(venv, tmp_path):
    # A machine with Debian's libtorch-dev (libc10.so.1.13) and PyPI's torch: a package linked
    # against both aborted at exit (malloc corruption, rc 134; issue 46).
    r = run_python(venv, MAPPED_TORCH_LIBRARIES, cwd=tmp_path, check=False)
    assert r.returncode == 0, f"rc {r.returncode}: {r.stderr[-3000:]}"
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["before"], info  # the probe sees torch's own libraries
    assert info["after"] == info["before"], f"sparsevit mapped other torch libraries: {info}"
    if not info["torch"].startswith("1.13"):
        assert not [p for p in info["after"] if ".so.1.13" in p], info


def test_runpath_holds_only_origin_relative_entries(venv, tmp_path):
    info = installed_paths(venv, tmp_path)
    for library in (info["ops"], info["core"]):
        dynamic = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True).stdout
        entries = [e for m in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.*)\]", dynamic)
                   for e in m.split(":")]
        assert entries, dynamic  # $ORIGIN at least: the core finds the operators beside it
        assert all(e.startswith("$ORIGIN") for e in entries), (library, entries)


@pytest.mark.skipif(not os.environ.get("SPARSEVIT_WHEEL"), reason="the PyPI leg makes the wheel (scripts/lib/pypi.sh)")
def test_the_wheel_installs_into_a_second_venv_with_the_same_torch(venv, tmp_path):
    """`pip wheel` in the PyPI leg, from a copy of the checkout since removed: the wheel goes into a
    new venv, which then reaches the same torch (a .pth to the first venv's site-packages, searched
    after its own)."""
    second = tmp_path / "second"
    base_python = run_python(venv, "import sys; print(sys._base_executable)", cwd=tmp_path).stdout.strip()
    subprocess.run([base_python, "-m", "venv", str(second)], check=True)
    first_site = run_python(venv, "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip()
    second_site = subprocess.run([str(second / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    r = subprocess.run([str(second / "bin" / "pip"), "install", "--no-deps", "--no-index", os.environ["SPARSEVIT_WHEEL"]],
                       capture_output=True, text=True, env=clean_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    # After the install: with the first venv visible, pip would find its sparsevit and install nothing.
    pathlib.Path(second_site, "first_venv.pth").write_text(first_site + "\n")
    info = installed_paths(second, tmp_path)
    for key in ("package", "ops", "core"):
        assert os.path.realpath(info[key]).startswith(os.path.realpath(str(second)) + os.sep), (key, info)
    assert info["shape"] == [1, 4, 50, 16]
    r = run_python(second, MAPPED_TORCH_LIBRARIES, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
