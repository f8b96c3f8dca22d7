"""`pip install --no-build-isolation ./python` after the project is built: the package plus the
compiled library it wraps (libsparsevit_ops.so and _sparsevit_core, copied from SPARSEVIT_BUILD
or the checkout's build/ into the installed package). Debian's setuptools; no network."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(HERE, "..", "build"))


class BuildPyWithLibrary(build_py):
    """build_py that also copies the compiled library into the package."""

    def run(self):
        super().run()
        libraries = glob.glob(os.path.join(BUILD, "libsparsevit_ops.so")) + glob.glob(
            os.path.join(BUILD, "_sparsevit_core*.so"))
        if len(libraries) != 2:
            raise SystemExit(f"sparsevit: {os.path.abspath(BUILD)} lacks libsparsevit_ops.so or _sparsevit_core*.so; "
                             "build the project first (scripts/test) or set SPARSEVIT_BUILD")
        for library in libraries:
            shutil.copy2(library, os.path.join(self.build_lib, "sparsevit"))


class BinaryDistribution(Distribution):
    """The package carries compiled libraries: wheels get this platform's tag."""

    def has_ext_modules(self):
        return True


setup(
    name="sparsevit",
    version="0.1.0",
    description="Sparse multi-head self-attention for vision transformers (Python face of the C++ library)",
    packages=["sparsevit"],
    python_requires=">=3.9",
    cmdclass={"build_py": BuildPyWithLibrary},
    distclass=BinaryDistribution,
    zip_safe=False,
)
