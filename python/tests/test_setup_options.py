"""python/setup.py's decisions, made before anything compiles: which LibTorch CMake uses and whether
the CUDA kernels are built (docs/python.md, "Which torch the build uses, and the CUDA kernels").
setup.py runs here with setuptools.setup stubbed out, against stand-ins for torch."""
import os
import runpy
import types

import pytest
import setuptools

SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "setup.py")
CUDA_VARIABLES = ("SPARSEVIT_WITH_CUDA", "TORCH_CUDA_ARCH_LIST", "SPARSEVIT_CUDA_ARCHITECTURES", "CUDA_HOME", "CUDA_PATH")


@pytest.fixture
def setup_py(monkeypatch):
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    for name in CUDA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    functions = runpy.run_path(SETUP)
    return types.SimpleNamespace(cuda_options=functions["_cuda_options"], globals=functions["_cuda_options"].__globals__)


def fake_torch(cuda="13.2", gpus=()):
    return types.SimpleNamespace(
        __version__="2.15.0+cu132" if cuda else "2.15.0+cpu", version=types.SimpleNamespace(cuda=cuda),
        cuda=types.SimpleNamespace(is_available=lambda: bool(gpus), device_count=lambda: len(gpus),
                                   get_device_capability=lambda i: gpus[i]))


def fake_nvcc(tmp_path, archs=("75", "80", "86", "90", "100", "120")):
    """An nvcc that lists these architectures (the real one may be absent or of another version)."""
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\n" + "".join(f"echo compute_{a}\n" for a in archs))
    nvcc.chmod(0o755)
    return str(nvcc)


def cmake_archs(options):
    return next(o.split("=", 1)[1] for o in options if o.startswith("-DCMAKE_CUDA_ARCHITECTURES="))


def fails(setup_py, torch):
    with pytest.raises(SystemExit) as e:
        setup_py.cuda_options(torch)
    message = str(e.value)
    assert message.startswith("sparsevit: ") and "\n" not in message, message
    return message


def test_off_when_asked_whatever_the_machine_has(setup_py, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARSEVIT_WITH_CUDA", "0")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    options, why = setup_py.cuda_options(fake_torch(gpus=[(9, 0)]))
    assert options == ["-DSPARSEVIT_WITH_CUDA=OFF"] and "SPARSEVIT_WITH_CUDA=0" in why


def test_auto_is_cpu_only_without_a_gpu_or_a_list_and_for_a_cpu_torch(setup_py, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", os.path.dirname(os.path.dirname(fake_nvcc(tmp_path))))
    options, why = setup_py.cuda_options(fake_torch())
    assert options == ["-DSPARSEVIT_WITH_CUDA=OFF"] and "no GPU visible" in why
    options, why = setup_py.cuda_options(fake_torch(cuda=None, gpus=[(9, 0)]))
    assert options == ["-DSPARSEVIT_WITH_CUDA=OFF"] and "CPU build" in why


def test_an_architecture_list_turns_the_kernels_on_in_cmakes_terms(setup_py, monkeypatch, tmp_path):
    nvcc = fake_nvcc(tmp_path)
    monkeypatch.setenv("CUDA_HOME", os.path.dirname(os.path.dirname(nvcc)))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0a")
    options, why = setup_py.cuda_options(fake_torch())
    assert "-DSPARSEVIT_WITH_CUDA=ON" in options and f"-DCMAKE_CUDA_COMPILER={nvcc}" in options
    assert cmake_archs(options) == "80-real;90a-real" and "TORCH_CUDA_ARCH_LIST" in why
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.6+PTX 12.0")
    assert cmake_archs(setup_py.cuda_options(fake_torch())[0]) == "86;120-real"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    monkeypatch.setenv("SPARSEVIT_CUDA_ARCHITECTURES", "80;90a")  # ours, CMake's spelling
    assert cmake_archs(setup_py.cuda_options(fake_torch())[0]) == "80-real;90a-real"


def test_a_visible_gpu_names_the_architecture(setup_py, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", os.path.dirname(os.path.dirname(fake_nvcc(tmp_path))))
    assert cmake_archs(setup_py.cuda_options(fake_torch(gpus=[(9, 0), (8, 0)]))[0]) == "80-real;90a-real"


def test_a_visible_gpu_without_nvcc_falls_back_to_cpu(setup_py, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc anywhere
    options, why = setup_py.cuda_options(fake_torch(gpus=[(9, 0)]))
    assert options == ["-DSPARSEVIT_WITH_CUDA=OFF"] and "nvcc is not found" in why


def test_asked_for_but_impossible_is_a_one_line_error_before_compiling(setup_py, monkeypatch, tmp_path):
    nvcc = fake_nvcc(tmp_path)
    monkeypatch.setenv("CUDA_HOME", os.path.dirname(os.path.dirname(nvcc)))
    monkeypatch.setenv("SPARSEVIT_WITH_CUDA", "1")
    assert "no GPU is visible" in fails(setup_py, fake_torch())
    assert "CPU build" in fails(setup_py, fake_torch(cuda=None))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "5.0;9.0")
    assert "does not support CUDA architecture 50" in fails(setup_py, fake_torch())  # nvcc 13 dropped sm_50
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "Hopper-ish")
    assert "cannot read 'Hopper-ish'" in fails(setup_py, fake_torch())
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "nvcc is neither on PATH" in fails(setup_py, fake_torch())
    monkeypatch.setenv("SPARSEVIT_WITH_CUDA", "maybe")
    assert "use 0 (CPU only), 1" in fails(setup_py, fake_torch())
