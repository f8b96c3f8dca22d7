"""`pip install --no-build-isolation ./python`: the package and its two compiled libraries,
libsparsevit_ops.so (the operators) and _sparsevit_core (configs, reports, the mask registry),
built by CMake from the checkout this folder sits in, against the torch of the Python that runs
pip (as torchvision, NATTEN and xformers build). `--no-build-isolation` lets the build see that
torch. Needs a C++17 compiler, CMake >= 3.18 and Python's headers; none of the CLI's libraries
(SPARSEVIT_PYTHON_PACKAGE in CMakeLists.txt; docs/python.md). PyYAML reads the attention configs.

The CMake build lives in python/build/cmake-<python>-torch<version>/ (kept: a rebuild only
recompiles what changed; ccache is used when installed). `pip install -v` shows its progress."""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)


def _fail(message):
    raise SystemExit(f"sparsevit: {message}")


def _installed_torch():
    try:
        import torch
        import torch.utils
    except ImportError as e:
        _fail(f"building needs PyTorch installed in this Python ({sys.executable}: {e}); with pip, install with "
              "`pip install --no-build-isolation ./python` so that the build sees it")
    return torch


def _cmake_prefix_path(torch):
    """Torch's CMake package (pip wheels: <torch>/share/cmake; Debian's python3-torch has none
    there and CMake finds libtorch-dev's on its own), then pybind11's when it is a Python package."""
    paths = [torch.utils.cmake_prefix_path]
    try:
        import pybind11
        paths.append(pybind11.get_cmake_dir())
    except (ImportError, AttributeError):
        pass  # CMake looks for pybind11's package itself, else uses torch's bundled headers
    return ";".join(paths)


def _cuda_options(torch):
    """The CUDA kernels and their torch glue for a CUDA torch (docs/gpu.md), for the GPU this machine
    has (or SPARSEVIT_CUDA_ARCHITECTURES, e.g. "80;90a"); none for a CPU torch, whose build could
    not use them."""
    if not torch.version.cuda:
        return ["-DSPARSEVIT_WITH_CUDA=OFF"]
    arch = os.environ.get("SPARSEVIT_CUDA_ARCHITECTURES")
    if not arch and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}" + ("a" if major >= 9 else "")
    return ["-DSPARSEVIT_WITH_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch or '80;90a'}"]


class CMakeLibraries(Extension):
    """Both compiled libraries, made by one CMake build of the checkout."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class BuildWithCMake(build_ext):
    def build_extension(self, ext):
        torch = _installed_torch()
        if not os.path.isfile(os.path.join(CHECKOUT, "CMakeLists.txt")):
            _fail(f"{CHECKOUT} is not a sparsevit checkout (no CMakeLists.txt): build from the repository's python/")
        cmake = shutil.which("cmake")
        if cmake is None:
            _fail("building needs CMake >= 3.18 on PATH (Debian: apt install cmake; or pip install cmake)")
        torch_version = torch.__version__.split("+")[0]
        build_dir = os.path.join(HERE, "build", f"cmake-{sys.implementation.cache_tag}-torch{torch_version}")
        configure = [cmake, "-S", CHECKOUT, "-B", build_dir, "-DSPARSEVIT_PYTHON_PACKAGE=ON",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
                     f"-DCMAKE_PREFIX_PATH={_cmake_prefix_path(torch)}"]
        configure += _cuda_options(torch)
        if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
            configure += ["-G", "Ninja"]  # the first configure picks the generator; it stays
        jobs = os.cpu_count() or 1
        print(f"sparsevit: building libsparsevit_ops.so and _sparsevit_core against torch {torch.__version__} "
              f"({jobs} jobs) in {build_dir}", flush=True)
        subprocess.check_call(configure)
        subprocess.check_call([cmake, "--build", build_dir, "--target", "sparsevit_ops", "_sparsevit_core",
                               "-j", str(jobs)])

        core_name = "_sparsevit_core" + sysconfig.get_config_var("EXT_SUFFIX")
        built = [os.path.join(build_dir, "libsparsevit_ops.so"), os.path.join(build_dir, core_name)]
        missing = [p for p in built if not os.path.isfile(p)]
        if missing:
            found = ", ".join(sorted(os.path.basename(p) for p in glob.glob(os.path.join(build_dir, "*.so"))))
            _fail(f"the CMake build did not make {', '.join(missing)} (it holds: {found or 'no .so'})")
        destination = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(destination, exist_ok=True)
        for path in built:
            shutil.copy2(path, os.path.join(destination, os.path.basename(path)))


setup(
    name="sparsevit",
    version="0.1.0",
    description="Sparse multi-head self-attention for vision transformers (Python face of the C++ library)",
    packages=["sparsevit"],
    python_requires=">=3.9",
    install_requires=["PyYAML"],
    ext_modules=[CMakeLibraries("sparsevit._sparsevit_core")],
    cmdclass={"build_ext": BuildWithCMake},
    # setuptools' own build folders per Python too: two platforms may build from one checkout at once.
    options={"build": {"build_base": os.path.join("build", f"setuptools-{sys.implementation.cache_tag}")}},
    zip_safe=False,
)
