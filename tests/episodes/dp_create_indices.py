#!/usr/bin/python3
"""A transcription of Diffusion Policy's create_indices (diffusion_policy/common/sampler.py,
real-stanford/diffusion_policy) and of SequenceSampler.sample_sequence's padding, printing the
windows and padded samples that sequence_sampler_test.cpp pins. numpy only.
Usage: /usr/bin/python3 tests/episodes/dp_create_indices.py
"""
import numpy as np


def create_indices(episode_ends, sequence_length, episode_mask, pad_before=0, pad_after=0):
    assert episode_mask.shape == episode_ends.shape
    pad_before = min(max(pad_before, 0), sequence_length - 1)
    pad_after = min(max(pad_after, 0), sequence_length - 1)
    indices = list()
    for i in range(len(episode_ends)):
        if not episode_mask[i]:
            continue
        start_idx = 0
        if i > 0:
            start_idx = episode_ends[i - 1]
        end_idx = episode_ends[i]
        episode_length = end_idx - start_idx
        min_start = -pad_before
        max_start = episode_length - sequence_length + pad_after
        for idx in range(min_start, max_start + 1):
            buffer_start_idx = max(idx, 0) + start_idx
            buffer_end_idx = min(idx + sequence_length, episode_length) + start_idx
            start_offset = buffer_start_idx - (idx + start_idx)
            end_offset = (idx + sequence_length + start_idx) - buffer_end_idx
            sample_start_idx = 0 + start_offset
            sample_end_idx = sequence_length - end_offset
            indices.append([buffer_start_idx, buffer_end_idx, sample_start_idx, sample_end_idx])
    return np.array(indices).reshape(-1, 4)


def sample_sequence(array, index, sequence_length):
    buffer_start_idx, buffer_end_idx, sample_start_idx, sample_end_idx = index
    sample = array[buffer_start_idx:buffer_end_idx]
    data = sample
    if (sample_start_idx > 0) or (sample_end_idx < sequence_length):
        data = np.zeros(shape=(sequence_length,) + array.shape[1:], dtype=array.dtype)
        if sample_start_idx > 0:
            data[:sample_start_idx] = sample[0]
        if sample_end_idx < sequence_length:
            data[sample_end_idx:] = sample[-1]
        data[sample_start_idx:sample_end_idx] = sample
    return data


CASES = [
    # (name, episode_ends, horizon, pad_before, pad_after, mask)
    ("pusht_like", [5, 8, 14], 4, 1, 3, [True, True, True]),  # DP PushT: horizon 16, n_obs 2, n_action 8
    ("masked", [5, 8, 14], 4, 1, 3, [True, False, True]),
    ("no_pad", [5, 8, 14], 4, 0, 0, [True, True, True]),
    ("short_episode", [2, 9], 6, 0, 0, [True, True]),  # episode 0 shorter than the horizon: no window
    ("clamped_pads", [3], 3, 7, -2, [True]),  # pads clamped to [0, horizon - 1]
]

for name, ends, horizon, before, after, mask in CASES:
    windows = create_indices(np.array(ends), horizon, np.array(mask), before, after)
    print(name, windows.tolist())

# Padded samples: state row t is [t, 10 t]; the window list of "pusht_like".
state = np.stack([np.arange(14), 10 * np.arange(14)], axis=1).astype(np.float32)
windows = create_indices(np.array([5, 8, 14]), 4, np.ones(3, dtype=bool), 1, 3)
for i in (0, 4, 5, len(windows) - 1):
    print("sample", i, sample_sequence(state, windows[i], 4)[:, 0].astype(int).tolist())
