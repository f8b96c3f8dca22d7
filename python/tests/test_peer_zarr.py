"""zarr itself (python3-zarr: 2.13 on Debian 12, 3.0 writing format 2 on Debian 13) against our reader
of Diffusion Policy's replay buffers (src/episodes/zarr_replay_buffer.*), beside the stores the C++
tests write by hand: a store in ReplayBuffer's layout (data/img [T, 96, 96, 3] chunked per frame,
data/state, data/action, optionally data/keypoint, meta/episode_ends), with the compressors
ReplayBuffer uses, reads through `sparsevit policy dataset-info --json` with the same shapes, episode
ends and bytes (CRC-32 of each array as read)."""
import json
import os
import subprocess
import zipfile
import zlib

import numpy as np
import pytest

from peers import require_peer

zarr = require_peer("zarr")
numcodecs = require_peer("numcodecs")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SPARSEVIT_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "sparsevit")
ZARR3 = int(zarr.__version__.split(".")[0]) >= 3
Blosc = numcodecs.Blosc

# Diffusion Policy's ReplayBuffer.resolve_compressor: "default" is lz4 without shuffle, "disk" is
# zstd with bit shuffle; byte shuffle, zlib and no compressor are the other forms zarr writes.
COMPRESSORS = {
    "blosc-lz4-noshuffle": lambda: Blosc(cname="lz4", clevel=5, shuffle=Blosc.NOSHUFFLE),
    "blosc-zstd-bitshuffle": lambda: Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE),
    "blosc-lz4-shuffle": lambda: Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE),
    "blosc-zstd-shuffle": lambda: Blosc(cname="zstd", clevel=3, shuffle=Blosc.SHUFFLE),
    "zlib": lambda: numcodecs.Zlib(level=1),
    "none": lambda: None,
}
EPISODE_LENGTHS = [5, 9, 4]


def episodes(image_dtype=np.uint8, keypoint=True, seed=0):
    """Three PushT-like episodes, concatenated as ReplayBuffer keeps them."""
    rng = np.random.default_rng(seed)
    steps = sum(EPISODE_LENGTHS)
    data = {
        "img": rng.integers(0, 256, size=(steps, 96, 96, 3)).astype(image_dtype),
        "state": (rng.standard_normal((steps, 5)) * 100).astype(np.float32),
        "action": (rng.standard_normal((steps, 2)) * 100).astype(np.float32),
    }
    if keypoint:
        data["keypoint"] = rng.standard_normal((steps, 9, 2)).astype(np.float32)
    return data, np.cumsum(EPISODE_LENGTHS).astype(np.int64)


def create_array(group, name, values, chunks, compressor, separator="."):
    """One zarr v2 array written by zarr, whichever major version is installed."""
    if ZARR3:
        array = group.create_array(name, shape=values.shape, chunks=chunks, dtype=values.dtype,
                                   compressors=compressor, filters=None,
                                   chunk_key_encoding={"name": "v2", "separator": separator})
    else:
        array = group.create_dataset(name, shape=values.shape, chunks=chunks, dtype=values.dtype,
                                     compressor=compressor, dimension_separator=separator)
    array[...] = values


def open_root(store):
    if ZARR3:
        return zarr.open_group(store=store, mode="w", zarr_format=2)
    return zarr.group(store=store, overwrite=True)


def write_replay_buffer(store, data, ends, compressor, separator="."):
    """ReplayBuffer's layout: data/<key> chunked per frame for images and in runs of steps for the
    low-dim keys (a partial last chunk), meta/episode_ends uncompressed as ReplayBuffer writes it."""
    root = open_root(store)
    group = root.require_group("data")
    for key, values in data.items():
        chunks = (1,) + values.shape[1:] if key == "img" else (4,) + values.shape[1:]
        create_array(group, key, values, chunks, compressor, separator)
    create_array(root.require_group("meta"), "episode_ends", ends, (len(ends),), None)
    return root


def dataset_info(path):
    r = subprocess.run([CLI, "policy", "dataset-info", "--data_path", str(path), "--json"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def crc32(values):
    return zlib.crc32(np.ascontiguousarray(values).tobytes())


def assert_reads_as_written(info, data, ends, task):
    steps = int(ends[-1])
    assert info["task"] == task and info["episodes"] == len(ends) and info["steps"] == steps
    assert info["episode_ends"] == ends.tolist()
    arrays = info["arrays"]
    # Our reader keeps images as uint8 (Diffusion Policy's float 0-255 converted) and the rest as float32.
    expected = {"img": data["img"].astype(np.uint8), "state": data["state"], "action": data["action"],
                "episode_ends": ends}
    assert sorted(arrays) == sorted(expected)  # keypoint is not read
    for key, values in expected.items():
        assert arrays[key]["shape"] == list(values.shape), key
        assert arrays[key]["crc32"] == crc32(values), key


@pytest.mark.parametrize("compressor", sorted(COMPRESSORS))
def test_a_directory_store_written_by_zarr_reads_with_the_same_arrays_and_episodes(compressor, tmp_path):
    data, ends = episodes(keypoint=compressor != "none")
    store = tmp_path / "pusht_peer.zarr"
    write_replay_buffer(str(store), data, ends, COMPRESSORS[compressor]())
    assert (store / ".zgroup").exists() and (store / "data" / "img" / ".zarray").exists()  # format 2
    assert_reads_as_written(dataset_info(store), data, ends, "pusht_peer")


def test_float_images_and_slash_chunk_keys_read_too(tmp_path):
    # pusht_cchi_v7_replay.zarr keeps its images as float32 0-255; "/" separators nest chunk folders.
    data, ends = episodes(image_dtype=np.float32, seed=1)
    store = tmp_path / "float_images.zarr"
    write_replay_buffer(str(store), data, ends, COMPRESSORS["blosc-lz4-noshuffle"](), separator="/")
    assert (store / "data" / "img" / "0" / "0" / "0" / "0").exists()
    assert_reads_as_written(dataset_info(store), data, ends, "float_images")


def test_a_zip_store_is_refused_clearly_and_reads_once_unzipped(tmp_path):
    # Our reader takes directory stores only (docs/episode_files.md): a zarr ZipStore is refused with
    # the remedy, and the same store unzipped into a folder reads as written.
    data, ends = episodes(seed=2)
    zipped = tmp_path / "pusht_zip.zarr.zip"
    zip_store = zarr.storage.ZipStore(str(zipped), mode="w")
    write_replay_buffer(zip_store, data, ends, COMPRESSORS["blosc-zstd-bitshuffle"]())
    zip_store.close()
    r = subprocess.run([CLI, "policy", "dataset-info", "--data_path", str(zipped), "--json"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode != 0 and "only zarr directory stores are read" in r.stderr, r.stderr
    unzipped = tmp_path / "pusht_zip.zarr"
    with zipfile.ZipFile(zipped) as z:
        z.extractall(unzipped)
    assert_reads_as_written(dataset_info(unzipped), data, ends, "pusht_zip")
