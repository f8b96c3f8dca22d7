"""`pip install --no-build-isolation ./python`: the package and its two compiled libraries,
libsparsevit_ops.so (the operators) and _sparsevit_core (configs, reports, the mask registry),
built by CMake from the checkout this folder sits in, against the torch of the Python that runs
pip (as torchvision, NATTEN and xformers build). `--no-build-isolation` lets the build see that
torch. Needs a C++17 compiler (C++20 for torch 2.10+), CMake >= 3.18 and Python's headers; none of
the CLI's libraries (SPARSEVIT_PYTHON_PACKAGE in CMakeLists.txt; docs/python.md). PyYAML reads the
attention configs. LibTorch comes from the torch package's own folder, never a system search; the
CUDA kernels only when asked for or a GPU is visible (_cuda_options, decided before compiling).

The CMake build lives in python/build/cmake-<python>-torch<version>/ (or SPARSEVIT_PACKAGE_BUILD_DIR;
kept: a rebuild only recompiles what changed; ccache is used when installed). `pip install -v`
shows its progress."""
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


def _torch_dir_with_libraries(torch):
    """The torch package folder when it carries lib/libtorch.so and include/: PyPI's wheels, and
    Debian's python3-torch too (its lib/ links into /usr/lib/x86_64-linux-gnu). Else None: CMake
    looks for LibTorch's own package."""
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    if os.path.isfile(os.path.join(torch_dir, "lib", "libtorch.so")) and os.path.isdir(os.path.join(torch_dir, "include")):
        return torch_dir
    return None


def _cxx_standard(torch):
    """20 where torch's own CMake config demands it of its users (cxx_std_20: PyPI's torch 2.10+), else 17."""
    config = os.path.join(torch.utils.cmake_prefix_path, "Torch", "TorchConfig.cmake")
    try:
        with open(config) as f:
            return "20" if "cxx_std_20" in f.read() else "17"
    except OSError:
        return "17"


def _torch_options(torch):
    """How CMake finds LibTorch: through the installed torch's own folder, every library by full path
    inside it (cmake/SparsevitTorchFromPython.cmake), whatever else the system has (Debian's
    libtorch-dev beside PyPI's torch); LibTorch's CMake package only for a torch without lib/."""
    torch_dir = _torch_dir_with_libraries(torch)
    options = [f"-DSPARSEVIT_CXX_STANDARD={_cxx_standard(torch)}"]
    if torch_dir is None:
        return options
    return options + [f"-DSPARSEVIT_TORCH_DIR={torch_dir}", f"-DSPARSEVIT_TORCH_VERSION={torch.__version__.split('+')[0]}",
                      f"-DSPARSEVIT_TORCH_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]


def _cmake_prefix_path():
    """pybind11's CMake package when it is a Python package (else src/python uses the copy torch's
    wheels carry, or Debian's pybind11-dev for Debian's torch)."""
    try:
        import pybind11
        return [f"-DCMAKE_PREFIX_PATH={pybind11.get_cmake_dir()}"]
    except (ImportError, AttributeError):
        return []


_OFF = ("0", "OFF", "NO", "FALSE")
_ON = ("1", "ON", "YES", "TRUE")


def _cuda_architectures(arch_list, variable):
    """TORCH_CUDA_ARCH_LIST's "8.0;9.0a" / "8.6+PTX" (or CMake's "80;90a") as CMake's list: "80-real;90a-real",
    "86" (SASS and PTX)."""
    result = []
    for item in arch_list.replace(",", ";").replace(" ", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        ptx = item.upper().endswith("+PTX")
        base = item[:-4] if ptx else item
        digits = base.replace(".", "")
        number, suffix = digits.rstrip("af"), digits[len(digits.rstrip("af")):]
        if not number.isdigit() or len(number) < 2:
            _fail(f"{variable}={arch_list!r}: cannot read {item!r} as a CUDA architecture (e.g. 8.0, 9.0a, 8.6+PTX)")
        result.append((number + suffix, ptx))
    if not result:
        _fail(f"{variable}={arch_list!r} names no CUDA architecture (e.g. 8.0;9.0a)")
    return result


def _nvcc():
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home and os.access(os.path.join(cuda_home, "bin", "nvcc"), os.X_OK):
        return os.path.join(cuda_home, "bin", "nvcc")
    return shutil.which("nvcc")


def _cuda_options(torch):
    """Whether to build the CUDA kernels (docs/python.md, "CUDA"), decided before anything compiles.
    Built when asked (SPARSEVIT_WITH_CUDA=1, or an architecture list: TORCH_CUDA_ARCH_LIST or
    SPARSEVIT_CUDA_ARCHITECTURES) or, for a CUDA torch, when a GPU is visible and nvcc is found;
    never for a CPU torch or with SPARSEVIT_WITH_CUDA=0. Asked for but impossible: a one-line error."""
    flag = os.environ.get("SPARSEVIT_WITH_CUDA", "auto").strip().upper()
    if flag not in _OFF + _ON + ("AUTO", ""):
        _fail(f"SPARSEVIT_WITH_CUDA={os.environ['SPARSEVIT_WITH_CUDA']!r}: use 0 (CPU only), 1 (the CUDA kernels) or auto")
    off = ["-DSPARSEVIT_WITH_CUDA=OFF"]
    if flag in _OFF:
        return off, "off (SPARSEVIT_WITH_CUDA=0)"
    arch_variable = next((v for v in ("TORCH_CUDA_ARCH_LIST", "SPARSEVIT_CUDA_ARCHITECTURES") if os.environ.get(v)), None)
    asked = flag in _ON or arch_variable is not None
    if not torch.version.cuda:
        if asked:
            why = "SPARSEVIT_WITH_CUDA=1" if flag in _ON else f"{arch_variable} is set"
            _fail(f"{why} but torch {torch.__version__} is a CPU build; install a CUDA torch, or set SPARSEVIT_WITH_CUDA=0")
        return off, f"off (torch {torch.__version__} is a CPU build)"
    if arch_variable:
        archs = _cuda_architectures(os.environ[arch_variable], arch_variable)
    elif torch.cuda.is_available():
        capabilities = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        archs = [(f"{major}{minor}" + ("a" if major in (9, 10, 12) else ""), False) for major, minor in capabilities]
        arch_variable = "the visible GPUs"
    elif asked:
        _fail("SPARSEVIT_WITH_CUDA=1 but no GPU is visible to name the architecture: set TORCH_CUDA_ARCH_LIST "
              "(e.g. TORCH_CUDA_ARCH_LIST='8.0;9.0a' for A100 and H100)")
    else:
        return off, "off (no GPU visible and no TORCH_CUDA_ARCH_LIST; SPARSEVIT_WITH_CUDA=1 to build them)"
    nvcc = _nvcc()
    if nvcc is None:
        if asked:
            _fail(f"the CUDA kernels were asked for ({arch_variable if arch_variable != 'the visible GPUs' else 'SPARSEVIT_WITH_CUDA=1'}) "
                  "but nvcc is neither on PATH nor in $CUDA_HOME/bin; install the CUDA toolkit, or set SPARSEVIT_WITH_CUDA=0")
        return off, "off (a GPU is visible but nvcc is not found; install the CUDA toolkit for the kernels)"
    listed = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True)
    supported = {line.strip()[len("compute_"):] for line in listed.stdout.split() if line.startswith("compute_")}
    unsupported = [a for a, _ in archs if a.rstrip("af") not in supported]
    if unsupported:
        _fail(f"{nvcc} does not support CUDA architecture {', '.join(unsupported)} (from {arch_variable}; it supports "
              f"{', '.join(sorted(supported, key=int))}): set TORCH_CUDA_ARCH_LIST to architectures it has")
    cmake_archs = ";".join(a if ptx else f"{a}-real" for a, ptx in archs)
    return (["-DSPARSEVIT_WITH_CUDA=ON", f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DCMAKE_CUDA_ARCHITECTURES={cmake_archs}"],
            f"on ({cmake_archs}, from {arch_variable}; {nvcc})")


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
        # SPARSEVIT_PACKAGE_BUILD_DIR: keep the CMake build outside the source tree (scripts/lib/pypi.sh).
        build_root = os.environ.get("SPARSEVIT_PACKAGE_BUILD_DIR") or os.path.join(HERE, "build")
        build_dir = os.path.join(build_root, f"cmake-{sys.implementation.cache_tag}-torch{torch_version}")
        configure = [cmake, "-S", CHECKOUT, "-B", build_dir, "-DSPARSEVIT_PYTHON_PACKAGE=ON",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
                     *_cmake_prefix_path(), *_torch_options(torch)]
        cuda_options, cuda_state = _cuda_options(torch)  # fails here, before anything compiles
        configure += cuda_options
        if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
            configure += ["-G", "Ninja"]  # the first configure picks the generator; it stays
        jobs = os.cpu_count() or 1
        print(f"sparsevit: building libsparsevit_ops.so and _sparsevit_core against torch {torch.__version__} "
              f"({jobs} jobs) in {build_dir}; CUDA kernels {cuda_state}", flush=True)
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
