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


def _built_for_another_torch(folder):
    """The LibTorch version a build folder's stamp names when it is not this torch's major.minor
    (loading such a library into this process would crash it), else None."""
    try:
        with open(os.path.join(folder, "sparsevit_torch_version.txt")) as f:
            built = f.read().strip()
    except OSError:
        return None
    return built if built.split(".")[:2] != torch.__version__.split("+")[0].split(".")[:2] else None


def find(name_prefix, suffix):
    """The first file named name_prefix*suffix in the candidate folders, skipping build folders of
    another LibTorch (a checkout's Debian build seen from a venv of PyPI's torch)."""
    if name_prefix == "libsparsevit_ops" and os.environ.get("SPARSEVIT_LIBRARY"):
        return os.path.abspath(os.environ["SPARSEVIT_LIBRARY"])
    skipped = []
    for d in _candidate_dirs():
        if not os.path.isdir(d):
            continue
        other = _built_for_another_torch(d)
        if other:
            skipped.append(f"{d} (built for LibTorch {other})")
            continue
        for f in sorted(os.listdir(d)):
            if f.startswith(name_prefix) and f.endswith(suffix):
                return os.path.join(d, f)
    why = f"; skipped {', '.join(skipped)}, not PyTorch {torch.__version__}" if skipped else ""
    raise ImportError(f"sparsevit: cannot find {name_prefix}*{suffix} (looked in {', '.join(_candidate_dirs())}{why}); "
                      "build the project (scripts/test or cmake --build build), set SPARSEVIT_BUILD, or "
                      "pip install --no-build-isolation ./python into this Python")


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
