"""Tests of scripts/lib/episode_file.py and scripts/lib/demo_stats.py on tiny .episodes files whose
bytes are built here from docs/episode_files.md (not by the reader's module), with hand-checked
statistics. Run: python3 -m pytest scripts/lib/tests"""
import json
import math
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.dirname(LIB)
sys.path.insert(0, LIB)

import demo_stats  # noqa: E402
from episode_file import EpisodeFileError, read_episode_file  # noqa: E402


def episodes_bytes(ends, state, action, images=None, header_extra=None):
    """A .episodes file per docs/episode_files.md: magic, version 1, header length, JSON header
    padded with spaces to a multiple of 8, episode_ends int64, state / action float32, images
    uint8, crc32 of all before it; little-endian."""
    ends = np.asarray(ends, dtype="<i8")
    state = np.asarray(state, dtype="<f4")
    action = np.asarray(action, dtype="<f4")
    steps = int(ends[-1])
    images = np.zeros((steps, 0, 0, 3), np.uint8) if images is None else np.asarray(images, np.uint8)
    header = {"task": "pusht", "steps": steps, "episodes": len(ends), "image_height": images.shape[1],
              "image_width": images.shape[2], "image_channels": 3, "state_dim": state.shape[1],
              "action_dim": action.shape[1]}
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    body = b"SVEPISOD" + struct.pack("<II", 1, len(text)) + text
    body += ends.tobytes() + state.tobytes() + action.tobytes() + images.tobytes()
    return body + struct.pack("<I", zlib.crc32(body))


# Two episodes of two steps, built so that each step's nearest step of the other episode is known.
# Agent-only distance: step 0 (agent 100,100) is nearest to step 2 (105,100, 5 px) but, with the
# block, to step 3: step 2's block is turned by pi, which weighs 60 * |(cos 0, sin 0) - (cos pi,
# sin pi)| = 120 px, more than step 3's 30 px of agent distance.
STATE = [[100, 100, 300, 300, 0.0],     # episode 0
         [180, 100, 300, 300, 0.0],     #   block still
         [105, 100, 300, 300, math.pi],  # episode 1
         [130, 100, 300, 300, 0.0]]     #   block turns by pi (moves)
ACTION = [[110, 100],
          [116, 128],
          [113, 104],   # |a2 - a0| = 5
          [116, 108]]   # |a3 - a0| = 10, |a1 - a3| = 20
ENDS = [2, 4]


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.episodes"
    images = np.arange(4 * 2 * 2 * 3, dtype=np.uint8).reshape(4, 2, 2, 3)
    path.write_bytes(episodes_bytes(ENDS, STATE, ACTION, images))
    return path


def test_reader_returns_the_arrays(tiny):
    demos = read_episode_file(tiny)
    assert demos.task == "pusht"
    assert demos.episodes == 2 and demos.steps == 4
    np.testing.assert_array_equal(demos.episode_ends, ENDS)
    np.testing.assert_array_equal(demos.state, np.float32(STATE))
    np.testing.assert_array_equal(demos.action, np.float32(ACTION))
    np.testing.assert_array_equal(demos.images, np.arange(48, dtype=np.uint8).reshape(4, 2, 2, 3))
    np.testing.assert_array_equal(demos.episode_index(), [0, 0, 1, 1])


def test_hand_checked_statistics(tiny):
    s = demo_stats.demo_stats(read_episode_file(tiny))
    assert (s["episodes"], s["steps"], s["mean_episode_length"]) == (2, 4, 2.0)
    # command distances: 10, hypot(64, 28), hypot(8, 4), hypot(14, 8)
    d = sorted([10, math.hypot(64, 28), math.hypot(8, 4), math.hypot(14, 8)])
    c = s["command_distance_px"]
    assert c["median"] == pytest.approx((d[1] + d[2]) / 2)
    assert c["p90"] == pytest.approx(d[2] + 0.7 * (d[3] - d[2]))  # numpy's linear percentile: rank 2.7
    assert c["max"] == pytest.approx(d[3])
    # jumps within episodes only: |a1 - a0| = hypot(6, 28), |a3 - a2| = hypot(3, 4) = 5
    j = s["command_jump_px"]
    assert j["median"] == pytest.approx((math.hypot(6, 28) + 5) / 2)
    assert j["p90"] == pytest.approx(5 + 0.9 * (math.hypot(6, 28) - 5))
    # pairs (0,1): block still; (2,3): turned by pi; (1,2) crosses episodes and is not a pair
    assert s["block_moving_pairs"] == 2 and s["block_moving_share"] == 0.5
    nn = s["nn_action_error_px"]
    # agent only: 0 -> 2 (5), 1 -> 3 (20), 2 -> 0 (5), 3 -> 0 (10)
    assert nn["agent_only"] == {"mean": pytest.approx(10.0), "median": pytest.approx(7.5), "queries": 4}
    # with the block: 0 -> 3 (10), 1 -> 3 (20), 2 -> 0 (5), 3 -> 0 (10)
    assert nn["agent_and_block"] == {"mean": pytest.approx(11.25), "median": pytest.approx(10.0), "queries": 4}
    assert nn["angle_scale_px_per_rad"] == 60.0


@pytest.mark.parametrize("method", ["numpy", "kdtree"])
def test_nearest_neighbour_methods_on_the_tiny_file(tiny, method):
    if method == "kdtree" and demo_stats.cKDTree is None:
        pytest.skip("scipy is not installed")
    demos = read_episode_file(tiny)
    episode = demos.episode_index()
    for with_block, expected in [(False, [5, 20, 5, 10]), (True, [10, 20, 5, 10])]:
        features = demo_stats.nn_features(demos.state, with_block)
        find = (demo_stats.nearest_other_episode_kdtree if method == "kdtree"
                else demo_stats.nearest_other_episode_bruteforce)
        nn = find(features, episode, np.arange(4))
        errors = np.linalg.norm(demos.action - demos.action[nn], axis=1)
        np.testing.assert_allclose(errors, expected)


def test_kdtree_and_bruteforce_find_the_same_neighbours():
    if demo_stats.cKDTree is None:
        pytest.skip("scipy is not installed")
    rng = np.random.default_rng(3)
    state = rng.uniform(0, 512, size=(600, 5))
    episode = np.repeat(np.arange(12), 50)  # consecutive steps share an episode, as in a file
    state[:, 0:2] = np.cumsum(rng.normal(0, 5, size=(600, 2)), axis=0) + 256  # near neighbours within episodes
    queries = np.arange(0, 600, 7)
    for with_block in (False, True):
        f = demo_stats.nn_features(state, with_block)
        a = demo_stats.nearest_other_episode_bruteforce(f, episode, queries, chunk=16)
        b = demo_stats.nearest_other_episode_kdtree(f, episode, queries, first_k=2)
        np.testing.assert_array_equal(a, b)
        assert np.all(episode[a] != episode[queries])


def test_query_subsample_is_seeded_and_capped(tiny):
    demos = read_episode_file(tiny)
    one = demo_stats.demo_stats(demos, max_queries=3, seed=5)["nn_action_error_px"]
    two = demo_stats.demo_stats(demos, max_queries=3, seed=5)["nn_action_error_px"]
    assert one["agent_only"]["queries"] == 3 and one == two


def test_single_episode_has_no_nearest_neighbour(tmp_path):
    path = tmp_path / "one.episodes"
    path.write_bytes(episodes_bytes([2], STATE[:2], ACTION[:2]))
    s = demo_stats.demo_stats(read_episode_file(path))
    assert s["nn_action_error_px"]["agent_only"]["mean"] is None
    assert s["block_moving_share"] == 0.0


def corrupt_files(good):
    crc_body = good[:-4]
    flipped = bytearray(good)
    flipped[-10] ^= 0xFF  # inside the action section
    yield "bad magic", b"NOTOURS!" + good[8:], "bad magic"
    yield "truncated", good[:-9], "truncated"
    yield "trailing bytes", good + b"\0", "bytes after the checksum"
    yield "checksum", bytes(flipped), "checksum mismatch"
    extra = episodes_bytes(ENDS, STATE, ACTION, header_extra={"fps": 10})
    yield "unknown field", extra, 'unknown field "fps"'
    wrong_version = crc_body[:8] + struct.pack("<I", 2) + crc_body[12:]
    yield "version", wrong_version + struct.pack("<I", zlib.crc32(wrong_version)), "version 2 is not supported"
    yield "ends", episodes_bytes([2, 2, 4], STATE, ACTION), "episode_ends[1] = 2 does not exceed the previous end 2"
    last = episodes_bytes([2, 3], STATE, ACTION, header_extra={"steps": 4})
    yield "last end", last, "the last episode ends at step 3 but the header says 4 steps"


@pytest.mark.parametrize("case", ["bad magic", "truncated", "trailing bytes", "checksum", "unknown field",
                                  "version", "ends", "last end"])
def test_bad_files_raise_one_line_errors(tmp_path, case):
    good = episodes_bytes(ENDS, STATE, ACTION)
    data, expected = {name: (d, e) for name, d, e in corrupt_files(good)}[case]
    path = tmp_path / "bad.episodes"
    path.write_bytes(data)
    with pytest.raises(EpisodeFileError) as error:
        read_episode_file(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(EpisodeFileError, match="cannot open"):
        read_episode_file(tmp_path / "nothing.episodes")


def test_cli_prints_json_and_refuses_a_bad_file(tiny, tmp_path):
    out = tmp_path / "stats.json"
    run = subprocess.run([sys.executable, os.path.join(SCRIPTS, "demo-stats"), str(tiny), "--json", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "NN action error, agent + block: mean 11.2, median 10.0 px" in run.stdout
    assert "1 rad ~ 60 px" in run.stdout
    assert json.loads(out.read_text())["nn_action_error_px"]["agent_only"]["median"] == pytest.approx(7.5)

    bad = tmp_path / "bad.episodes"
    bad.write_bytes(tiny.read_bytes()[:-1])
    run = subprocess.run([sys.executable, os.path.join(SCRIPTS, "demo-stats"), str(bad)], capture_output=True,
                         text=True)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.strip().count("\n") == 0 and "truncated" in run.stderr
