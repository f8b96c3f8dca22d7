"""The real peer libraries the test_peer_*.py suites compare with (safetensors, zarr, timm), and
the one rule for a missing peer: the tests skip, with the reason and how to get it, unless
SPARSEVIT_REQUIRE_PEERS=1 (the Debian 13 leg, where every peer is installed): then they fail."""
import importlib
import os

import pytest

# How each peer is installed, for the skip / failure message.
HOW_TO_GET = {
    "safetensors": "Debian 13: apt-get install python3-safetensors (Debian 12 does not package it)",
    "zarr": "Debian: apt-get install python3-zarr",
    "numcodecs": "Debian: apt-get install python3-numcodecs (python3-zarr brings it)",
    "timm": "scripts/lib/python_peers.sh: sparsevit_python_peers DIR, then put DIR on PYTHONPATH",
}


def required():
    """True when a missing peer is a failure (SPARSEVIT_REQUIRE_PEERS=1), not a skip."""
    return os.environ.get("SPARSEVIT_REQUIRE_PEERS") == "1"


def require_peer(name):
    """Imports and returns module `name` (e.g. "safetensors.torch"); when it does not import,
    skips the calling test or module, or fails it under SPARSEVIT_REQUIRE_PEERS=1. Call it at
    module level (the whole file skips) or in a test or fixture."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        top = name.split(".")[0]
        why = f"peer '{name}' does not import ({e}); {HOW_TO_GET.get(top, 'install it')}"
        if required():
            pytest.fail(f"SPARSEVIT_REQUIRE_PEERS=1 but {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)
