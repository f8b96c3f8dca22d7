"""Finds and loads the compiled parts: libsparsevit_ops.so (the operators, registered with
torch.ops.sparsevit) and _sparsevit_core (configs and the mask registry). Searched in order:
the SPARSEVIT_LIBRARY / SPARSEVIT_BUILD environment variables, next to this package (after
`pip install ./python`), then the build tree of the checkout this package sits in."""
import importlib.util
import os
import sys

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT_BUILD = os.path.join(_HERE, "..", "..", "build")


def _candidate_dirs():
    dirs = []
    if os.environ.get("SPARSEVIT_LIBRARY"):
        dirs.append(os.path.dirname(os.path.abspath(os.environ["SPARSEVIT_LIBRARY"])))
    if os.environ.get("SPARSEVIT_BUILD"):
        dirs.append(os.environ["SPARSEVIT_BUILD"])
    dirs += [_HERE, _CHECKOUT_BUILD]
    return [os.path.abspath(d) for d in dirs]


def find(name_prefix, suffix):
    """The first file named name_prefix*suffix in the candidate folders."""
    if name_prefix == "libsparsevit_ops" and os.environ.get("SPARSEVIT_LIBRARY"):
        return os.path.abspath(os.environ["SPARSEVIT_LIBRARY"])
    for d in _candidate_dirs():
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.startswith(name_prefix) and f.endswith(suffix):
                return os.path.join(d, f)
    raise ImportError(f"sparsevit: cannot find {name_prefix}*{suffix} (looked in {', '.join(_candidate_dirs())}); "
                      "build the project (scripts/test or cmake --build build) or set SPARSEVIT_BUILD")


_loaded = None


def load_library():
    """Loads libsparsevit_ops.so into torch.ops (once) and returns its path."""
    global _loaded
    if _loaded is None:
        path = find("libsparsevit_ops", ".so")
        try:
            torch.ops.load_library(path)
        except OSError as e:
            raise ImportError(f"sparsevit: {path} does not load into PyTorch {torch.__version__} ({e}); the library "
                              "must be built against the LibTorch this torch uses") from e
        _loaded = path
    return _loaded


def core():
    """The _sparsevit_core extension module."""
    if "_sparsevit_core" in sys.modules:
        return sys.modules["_sparsevit_core"]
    path = find("_sparsevit_core", ".so")
    spec = importlib.util.spec_from_file_location("_sparsevit_core", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["_sparsevit_core"] = module
    return module
