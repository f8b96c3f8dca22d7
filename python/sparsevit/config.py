"""Attention configs (configs/attention/*.yaml), validated by the C++ parser: the same checks
and the same messages as the CLI (a bad config raises sparsevit.UsageError, a ValueError)."""
import difflib
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
    raise core().UsageError(_missing_config_message(config))


_CONFIG_SUFFIXES = (".yaml", ".yml")


def _missing_config_message(path):
    """'no such config file' with the nearest existing config name(s), as the CLI suggests mask names."""
    folder = os.path.dirname(path) or "."
    looks_like_a_path = path.endswith(_CONFIG_SUFFIXES) or os.sep in path
    if not looks_like_a_path:
        return (f"cannot read attention config '{path}': it is neither an existing file nor YAML text with an "
                "'attention:' mapping")
    message = f"attention config file '{path}' does not exist"
    if not os.path.isdir(folder):
        return f"{message} (no folder '{folder}')"
    names = sorted(f for f in os.listdir(folder) if f.endswith(_CONFIG_SUFFIXES))
    near = difflib.get_close_matches(os.path.basename(path), names, n=2, cutoff=0.6)
    if near:
        return f"{message}; did you mean {' or '.join(repr(os.path.join(os.path.dirname(path), n)) for n in near)}?"
    return f"{message} ({len(names)} configs in '{folder}')"


def load(config=None, overrides=()):
    """The validated spec as a dict: backend, mask, mask_kwargs, backend_kwargs, kernel,
    dynamic, source. `overrides` are NAME=VALUE strings, as the CLI's --set."""
    yaml, source = read(config)
    return core().spec(yaml, source, list(overrides))
