"""Statistics of PushT demonstrations (.episodes files): how far and how jumpily the commands move,
how often the block moves, and how well a nearest-neighbour lookup in the other episodes predicts
an action (a rough measure of how consistent, hence learnable, the demonstrations are).

State rows are [agent x, agent y, block x, block y, block angle] (px, px, px, px, rad), actions the
commanded agent position (px); docs/policy.md "Collecting".
"""
import numpy as np

try:  # Debian's python3-scipy; the numpy brute force below gives the same neighbours without it
    from scipy.spatial import cKDTree
except ImportError:  # pragma: no cover - depends on the machine
    cKDTree = None

BLOCK_MOVE_PX = 0.5
BLOCK_TURN_RAD = 0.01
ANGLE_SCALE_PX = 60.0  # a radian of block angle weighs like 60 px in the agent + block distance
NN_MAX_QUERIES = 20000
NN_SEED = 0


def wrap_angle(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def _summary(values, keys):
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {k: None for k in keys}
    get = {"mean": np.mean, "median": np.median, "p90": lambda v: np.percentile(v, 90), "max": np.max}
    return {k: float(get[k](values)) for k in keys}


def consecutive_pairs(episode):
    """Indices (t-1, t) of consecutive steps within the same episode."""
    same = episode[1:] == episode[:-1]
    t = np.nonzero(same)[0] + 1
    return t - 1, t


def nn_features(state, with_block):
    """Rows to compare: agent x, y (px) and optionally block x, y (px), 60 cos(angle), 60 sin(angle)."""
    state = state.astype(np.float64)
    if not with_block:
        return state[:, 0:2].copy()
    angle = state[:, 4]
    return np.column_stack([state[:, 0:4], ANGLE_SCALE_PX * np.cos(angle), ANGLE_SCALE_PX * np.sin(angle)])


def nearest_other_episode_bruteforce(features, episode, queries, chunk=256):
    """For each query row, the index of the nearest row of another episode (numpy, in chunks)."""
    sq = np.einsum("ij,ij->i", features, features)
    out = np.empty(len(queries), dtype=np.int64)
    for s in range(0, len(queries), chunk):
        q = queries[s:s + chunk]
        d = sq[q][:, None] + sq[None, :] - 2.0 * features[q] @ features.T
        d[episode[q][:, None] == episode[None, :]] = np.inf
        out[s:s + chunk] = np.argmin(d, axis=1)
    return out


def nearest_other_episode_kdtree(features, episode, queries, first_k=16):
    """As nearest_other_episode_bruteforce, with a k-d tree: ask for k neighbours and widen k for the
    queries whose k nearest all lie in their own episode."""
    tree = cKDTree(features)
    out = np.full(len(queries), -1, dtype=np.int64)
    todo = np.arange(len(queries))
    k = first_k
    while todo.size:
        k = min(k, len(features))
        _, idx = tree.query(features[queries[todo]], k=k)
        idx = idx.reshape(len(todo), k)
        other = episode[idx] != episode[queries[todo]][:, None]
        found = other.any(axis=1)
        first = np.argmax(other, axis=1)  # neighbours come nearest first
        out[todo[found]] = idx[found, first[found]]
        todo = todo[~found]
        if k == len(features):
            break
        k *= 4
    return out


def nn_action_error(state, action, episode, with_block, max_queries=NN_MAX_QUERIES, seed=NN_SEED, method=None):
    """Leave-one-episode-out nearest-neighbour action error ||a_q - a_nn|| (px) over a seeded subsample
    of at most max_queries steps, against every step of the other episodes."""
    if len(np.unique(episode)) < 2:
        return {"mean": None, "median": None, "queries": 0}
    steps = len(state)
    rng = np.random.default_rng(seed)
    queries = np.sort(rng.choice(steps, size=max_queries, replace=False)) if steps > max_queries else np.arange(steps)
    features = nn_features(state, with_block)
    method = method or ("kdtree" if cKDTree is not None else "numpy")
    find = nearest_other_episode_kdtree if method == "kdtree" else nearest_other_episode_bruteforce
    nn = find(features, episode, queries)
    error = np.linalg.norm(action[queries].astype(np.float64) - action[nn].astype(np.float64), axis=1)
    result = _summary(error, ["mean", "median"])
    result["queries"] = int(len(queries))
    return result


def demo_stats(demos, max_queries=NN_MAX_QUERIES, seed=NN_SEED, method=None):
    """Every statistic of an EpisodeFile (scripts/lib/episode_file.py) as a JSON-ready dict."""
    state = demos.state.astype(np.float64)
    action = demos.action.astype(np.float64)
    if state.shape[1] < 5 or action.shape[1] != 2:
        raise ValueError(f"{demos.path}: expected PushT rows (state_dim >= 5, action_dim 2), "
                         f"got state_dim {state.shape[1]}, action_dim {action.shape[1]}")
    episode = demos.episode_index()
    lengths = np.diff(demos.episode_ends, prepend=0)
    prev, cur = consecutive_pairs(episode)

    command = np.linalg.norm(action - state[:, 0:2], axis=1)
    jump = np.linalg.norm(action[cur] - action[prev], axis=1)
    moved = np.linalg.norm(state[cur, 2:4] - state[prev, 2:4], axis=1)
    turned = np.abs(wrap_angle(state[cur, 4] - state[prev, 4]))
    moving = (moved > BLOCK_MOVE_PX) | (turned > BLOCK_TURN_RAD)
    method = method or ("kdtree" if cKDTree is not None else "numpy")
    return {
        "file": demos.path,
        "episodes": int(demos.episodes),
        "steps": int(demos.steps),
        "mean_episode_length": float(lengths.mean()) if len(lengths) else None,
        "command_distance_px": _summary(command, ["median", "p90", "max"]),
        "command_jump_px": _summary(jump, ["median", "p90"]),
        "block_moving_share": float(moving.mean()) if moving.size else None,
        "block_moving_pairs": int(moving.size),
        "nn_action_error_px": {
            "agent_only": nn_action_error(state, action, episode, False, max_queries, seed, method),
            "agent_and_block": nn_action_error(state, action, episode, True, max_queries, seed, method),
            "method": method,
            "seed": seed,
            "angle_scale_px_per_rad": ANGLE_SCALE_PX,
        },
        "definitions": {
            "command_distance": "||action_t - agent_pos_t|| (agent position of the state before the step)",
            "command_jump": "||a_t - a_(t-1)|| within an episode",
            "block_moving": f"|block pos change| > {BLOCK_MOVE_PX} px or |angle change| > {BLOCK_TURN_RAD} rad "
                            "between consecutive states of an episode (steps - episodes pairs)",
            "nn_action_error": "for a seeded subsample of steps, ||action - action of the nearest step of another "
                               "episode||; agent_only compares agent x, y; agent_and_block adds block x, y and the "
                               f"angle as ({ANGLE_SCALE_PX:g} cos, {ANGLE_SCALE_PX:g} sin), so a radian weighs "
                               f"like ~{ANGLE_SCALE_PX:g} px",
        },
    }


def _fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def format_stats(s):
    """The statistics as the lines demo-stats prints."""
    c, j, nn = s["command_distance_px"], s["command_jump_px"], s["nn_action_error_px"]
    a, b = nn["agent_only"], nn["agent_and_block"]
    share = s["block_moving_share"]
    return "\n".join([
        f"file                          : {s['file']}",
        f"episodes / steps              : {s['episodes']} / {s['steps']} (mean episode length "
        f"{_fmt(s['mean_episode_length'])} steps)",
        f"command distance |a - agent|  : median {_fmt(c['median'])}, p90 {_fmt(c['p90'])}, max {_fmt(c['max'])} px",
        f"command jump |a_t - a_t-1|    : median {_fmt(j['median'])}, p90 {_fmt(j['p90'])} px",
        f"block moves                   : {_fmt(None if share is None else 100 * share)}% of "
        f"{s['block_moving_pairs']} consecutive-state pairs (> {BLOCK_MOVE_PX} px or > {BLOCK_TURN_RAD} rad)",
        f"NN action error, agent only   : mean {_fmt(a['mean'])}, median {_fmt(a['median'])} px",
        f"NN action error, agent + block: mean {_fmt(b['mean'])}, median {_fmt(b['median'])} px",
        f"  (nearest step of another episode; {a['queries']} query steps, seed {nn['seed']}, {nn['method']}; "
        f"block angle as {ANGLE_SCALE_PX:g}*(cos, sin): 1 rad ~ {ANGLE_SCALE_PX:g} px)",
    ])
