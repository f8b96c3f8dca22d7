"""Reader of sparsevit's .episodes demonstration files (docs/episode_files.md), numpy + stdlib.

It makes the checks of the C++ reader (src/episodes/episode_file.cpp), in its order, and raises
EpisodeFileError("PATH: what is wrong") for a missing, truncated, corrupt or foreign file.
Images are mapped, not read (a 96x96 file is mostly images and the statistics do not use them).
"""
import json
import os
import struct
import zlib

import numpy as np

MAGIC = b"SVEPISOD"
VERSION = 1
PREFIX_BYTES = 16  # magic, version, header length
MAX_HEADER_BYTES = 1 << 16
CHECKSUM_BYTES = 4
HEADER_FIELDS = ("task", "steps", "episodes", "image_height", "image_width", "image_channels", "state_dim",
                 "action_dim")
IMAGE_CHANNELS = 3
MAX_DIM = 1 << 16  # EpisodeSet::validate's limits
MAX_IMAGE_SIDE = 1 << 14
INT64_MAX = (1 << 63) - 1
CRC_CHUNK_BYTES = 1 << 24


class EpisodeFileError(Exception):
    """A file that is not a valid .episodes file; the message is one line naming the file."""


class EpisodeFile:
    """The arrays of a .episodes file (docs/episode_files.md, EpisodeSet's layout)."""

    def __init__(self, path, task, episode_ends, state, action, images):
        self.path = path
        self.task = task
        self.episode_ends = episode_ends  # int64 [episodes], exclusive end step of each episode
        self.state = state  # float32 [steps, state_dim]
        self.action = action  # float32 [steps, action_dim]
        self.images = images  # uint8 [steps, H, W, 3], memory-mapped (read-only)

    @property
    def episodes(self):
        return len(self.episode_ends)

    @property
    def steps(self):
        return int(self.episode_ends[-1]) if len(self.episode_ends) else 0

    def episode_starts(self):
        return np.concatenate([[0], self.episode_ends[:-1]]).astype(np.int64)

    def episode_index(self):
        """The episode of every step, int64 [steps]."""
        return np.repeat(np.arange(self.episodes, dtype=np.int64), np.diff(self.episode_ends, prepend=0))

    def episode_slice(self, e):
        start = int(self.episode_ends[e - 1]) if e > 0 else 0
        return slice(start, int(self.episode_ends[e]))


def _fail(path, what):
    raise EpisodeFileError(f"{path}: {what}")


def _header_count(path, header, field):
    if field not in header:
        _fail(path, f'header has no "{field}"')
    value = header[field]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _fail(path, f'header field "{field}" is not a non-negative integer')
    if value > INT64_MAX:
        _fail(path, f'header field "{field}" is out of range')
    return value


def _crc32(f, start, size):
    crc = 0
    f.seek(start)
    while size > 0:
        chunk = f.read(min(size, CRC_CHUNK_BYTES))
        if not chunk:
            break
        crc = zlib.crc32(chunk, crc)
        size -= len(chunk)
    return crc


def _check_set(path, ends, steps, dims):
    """EpisodeSet::validate: dims in range, ends strictly increasing from > 0, sizes consistent."""
    for name, value, limit in dims:
        if value > limit:
            _fail(path, f"episode set: {name} {value} is outside [0, {limit}]")
    previous = 0
    for e, end in enumerate(ends.tolist()):
        if end <= previous:
            _fail(path, f"episode set: episode_ends[{e}] = {end} " +
                  ("is not positive" if e == 0 else f"does not exceed the previous end {previous}"))
        previous = end
    if len(ends) == 0 and steps != 0:
        _fail(path, f"episode set: no episodes but {steps} steps")


def read_episode_file(path):
    """Reads and checks a .episodes file; returns an EpisodeFile or raises EpisodeFileError."""
    path = str(path)
    if os.path.isdir(path):
        _fail(path, "is a folder, not an episode file")
    try:
        f = open(path, "rb")
    except OSError as e:
        _fail(path, f"cannot open: {e.strerror}")
    with f:
        file_size = os.fstat(f.fileno()).st_size
        prefix = f.read(PREFIX_BYTES)
        if file_size < 8 or prefix[:8] != MAGIC:
            _fail(path, "not a sparsevit episode file (bad magic)")
        if file_size < PREFIX_BYTES:
            _fail(path, f"truncated in the file prefix ({file_size} bytes)")
        version, header_bytes = struct.unpack("<II", prefix[8:16])
        if version != VERSION:
            _fail(path, f"episode file format version {version} is not supported (this reader reads {VERSION})")
        if header_bytes > MAX_HEADER_BYTES:
            _fail(path, f"header length {header_bytes} exceeds {MAX_HEADER_BYTES} bytes (corrupt)")
        if PREFIX_BYTES + header_bytes + CHECKSUM_BYTES > file_size:
            _fail(path, f"truncated: {file_size} bytes, too short for its {header_bytes}-byte header")
        text = f.read(header_bytes)
        try:
            header = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            header = None
        if not isinstance(header, dict):
            _fail(path, "header is not a JSON object (corrupt)")
        for key in header:
            if key not in HEADER_FIELDS:
                _fail(path, f'header has unknown field "{key}"')
        if not isinstance(header.get("task"), str):
            _fail(path, 'header field "task" is not a string')
        counts = {field: _header_count(path, header, field) for field in HEADER_FIELDS[1:]}
        steps, episodes = counts["steps"], counts["episodes"]
        height, width = counts["image_height"], counts["image_width"]
        state_dim, action_dim = counts["state_dim"], counts["action_dim"]
        if counts["image_channels"] != IMAGE_CHANNELS:
            _fail(path, f'header field "image_channels" is {counts["image_channels"]}, expected 3 (RGB)')

        # Everything the header promises must be in the file before anything is read.
        sizes = [episodes * 8, steps * state_dim * 4, steps * action_dim * 4, steps * height * width * IMAGE_CHANNELS]
        if any(s > INT64_MAX for s in sizes) or sum(sizes) > INT64_MAX:
            _fail(path, "header sizes overflow (corrupt header)")
        expected = PREFIX_BYTES + header_bytes + CHECKSUM_BYTES + sum(sizes)
        if file_size < expected:
            _fail(path, f"truncated: {file_size} bytes, the header promises {expected}")
        if file_size > expected:
            _fail(path, f"has {file_size - expected} bytes after the checksum (corrupt or not ours)")

        crc = _crc32(f, 0, file_size - CHECKSUM_BYTES)
        f.seek(file_size - CHECKSUM_BYTES)
        (stored,) = struct.unpack("<I", f.read(CHECKSUM_BYTES))
        if stored != crc:
            _fail(path, "checksum mismatch (the file is corrupt)")

        offset = PREFIX_BYTES + header_bytes
        f.seek(offset)
        ends = np.fromfile(f, dtype="<i8", count=episodes).astype(np.int64)
        state = np.fromfile(f, dtype="<f4", count=steps * state_dim).astype(np.float32).reshape(steps, state_dim)
        action = np.fromfile(f, dtype="<f4", count=steps * action_dim).astype(np.float32).reshape(steps, action_dim)
    images_offset = offset + sizes[0] + sizes[1] + sizes[2]
    if sizes[3] > 0:
        images = np.memmap(path, dtype=np.uint8, mode="r", offset=images_offset,
                           shape=(steps, height, width, IMAGE_CHANNELS))
    else:
        images = np.zeros((steps, height, width, IMAGE_CHANNELS), dtype=np.uint8)

    if len(ends) and int(ends[-1]) != steps:
        _fail(path, f"the last episode ends at step {int(ends[-1])} but the header says {steps} steps")
    _check_set(path, ends, steps, [("image_height", height, MAX_IMAGE_SIDE), ("image_width", width, MAX_IMAGE_SIDE),
                                   ("state_dim", state_dim, MAX_DIM), ("action_dim", action_dim, MAX_DIM)])
    return EpisodeFile(path, header["task"], ends, state, action, images)

