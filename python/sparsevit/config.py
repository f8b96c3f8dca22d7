"""Attention configs (configs/attention/*.yaml), validated by the C++ parser: the same checks
and the same messages as the CLI (a bad config raises sparsevit.UsageError, a ValueError)."""
import os

from ._library import core


def read(config):
    """(yaml text, source name) of a path, a YAML string, or None (the built-in Fibottention)."""
    if config is None:
        return core().default_yaml(), "<built-in>"
    if "\n" not in config and os.path.exists(config):
        with open(config, encoding="utf-8") as f:
            return f.read(), config
    if "attention" in config and ":" in config:
        return config, "<string>"
    raise ValueError(f"cannot read attention config '{config}'")


def load(config=None, overrides=()):
    """The validated spec as a dict: backend, mask, mask_kwargs, backend_kwargs, kernel,
    dynamic, source. `overrides` are NAME=VALUE strings, as the CLI's --set."""
    yaml, source = read(config)
    return core().spec(yaml, source, list(overrides))
