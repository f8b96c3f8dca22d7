"""sparsevit for PyTorch users: the C++ library's sparse attention operator, attention configs
and mask registry from Python. The compiled library does the work; this package is a thin layer
over it (docs/python.md)."""
import torch

from . import _library
from ._library import load_library

__version__ = "0.1.0"


def _check_torch_version():
    built = _library.core().torch_version
    running = torch.__version__.split("+")[0]
    if built.split(".")[:2] != running.split(".")[:2]:
        raise ImportError(f"sparsevit: the compiled library was built against LibTorch {built}, but this Python "
                          f"runs PyTorch {running}; rebuild sparsevit against the same LibTorch")


_check_torch_version()
load_library()

UsageError = _library.core().UsageError

from . import config, models, nn, patterns  # noqa: E402
from .ops import sparse_attention  # noqa: E402
from .patch import patch_model  # noqa: E402

__all__ = ["config", "models", "nn", "patterns", "patch_model", "sparse_attention", "load_library", "UsageError"]
