"""Replays our PushT demonstrations open loop in gym-pusht (the pymunk PushT of LeRobot, descended
from Diffusion Policy's pusht_env.py) and compares the block's trajectory, the coverage and the
success with ours. Run it through scripts/pusht-gym-compare (it makes the pinned venv).

For each of the first K episodes of a .episodes file (made with `policy collect --all`, so failures
are kept too): gym-pusht is reset to the episode's first recorded state, every recorded action is
stepped in order, and after k actions gym-pusht's block pose is compared with our recorded state k
(the state before step k + 1, docs/policy.md "Collecting"), for k = 0, 10, 50, 100 and the last
recorded state (k = T - 1; the state after the last action is not in the file).

Conventions (docs/pusht.md): both are in workspace pixels, x right, y down, angles turning +x toward
+y, and the block position is the T's body origin (middle of the bar's top edge), not its centre of
gravity (0, 45). gym-pusht's reset_to_state sets the position before the angle (the "legacy"
order), so pymunk rotates the body about its centre of gravity and the origin lands 45 px x
(sin a, 1 - cos a) away from the given point; we pass the point that puts the origin where ours is.
gym-pusht reports the angle modulo 2 pi; angles are compared wrapped to [-pi, pi).
"""
import argparse
import datetime
import importlib.metadata
import json
import math
import os
import sys

import numpy as np
import shapely.geometry as sg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from episode_file import EpisodeFileError, read_episode_file  # noqa: E402

COG_Y = 45.0  # the T's centre of gravity in its body frame: (0, 45)
BAR = [(-60, 0), (60, 0), (60, 30), (-60, 30)]
STEM = [(-15, 30), (15, 30), (15, 120), (-15, 120)]
GOAL_POSE = (256.0, 256.0, math.pi / 4)
SUCCESS_COVERAGE = 0.95  # success: coverage > 0.95, in both
MAX_STEPS = 300  # our rollouts stop at success or after 300 steps
AGENT_RADIUS = 15.0
CHECKPOINTS = (0, 10, 50, 100)
PINNED_PACKAGES = ("gym-pusht", "gymnasium", "pymunk", "shapely", "numpy", "opencv-python", "pygame")

KNOWN_DIFFERENCES = [
    "Physics engine: ours is Box2D 2.4 at 20 px per metre, 10 velocity + 10 position iterations; gym-pusht is "
    "pymunk (Chipmunk 7), 10 iterations. Same constants: PD k_p 100, k_v 20, 10 substeps of 0.01 s per action, "
    "block mass 1, inertia 3000 about the centre of gravity (0, 45), friction 0, restitution 0.",
    "Quasi-static block: pymunk's space.damping = 0 zeroes the block's velocity every substep; ours zeroes the "
    "block's linear and angular velocity before each Box2D substep (docs/pusht.md).",
    "Walls: pymunk segments of radius 2; ours 4 px thick boxes centred on them (inner faces at 7 and 504). The "
    "kinematic agent passes through walls in both.",
    "Box2D stores positions as floats: a state read back after our reset_to_state matches to about 1e-4 px.",
    "Reset: both run one physics substep after placing the state. Our recorded state 0 is already after our reset's "
    "substep, so gym-pusht's substep is a second one (it moves the block only where the agent starts overlapping it).",
    "gym-pusht's reset_to_state places the block in the legacy order (position, then angle about the centre of "
    "gravity); compensated here so that the body origin lands on ours (the residual is the k = 0 row).",
    "Random resets differ (our mt19937_64 vs numpy), irrelevant here: every episode starts from our recorded state.",
]


def tee_polygon(pose):
    """The T at pose (origin x, origin y, angle) as gym-pusht builds it: a MultiPolygon of its two rectangles."""
    x, y, a = pose
    c, s = math.cos(a), math.sin(a)
    return sg.MultiPolygon([sg.Polygon([(x + c * u - s * v, y + s * u + c * v) for u, v in rect])
                            for rect in (BAR, STEM)])


GOAL = tee_polygon(GOAL_POSE)


def coverage(pose):
    """area(block T intersect goal T) / area(goal T), with shapely as gym-pusht's _get_coverage."""
    return GOAL.intersection(tee_polygon(pose)).area / GOAL.area


def starts_overlapping(state):
    """Whether the agent's disc overlaps the T in this state (a random reset can start so; the two engines
    then resolve the penetration differently)."""
    return tee_polygon((float(state[2]), float(state[3]), float(state[4]))).distance(
        sg.Point(float(state[0]), float(state[1]))) < AGENT_RADIUS


def wrap_angle(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def legacy_reset_state(state):
    """The reset_to_state vector that puts gym-pusht's block origin at our (x, y) with our angle: gym-pusht
    sets the position at angle 0 (centre of gravity at (x, y + 45)), then the angle turns the body about it."""
    ax, ay, bx, by, a = (float(v) for v in state[:5])
    return np.array([ax, ay, bx - COG_Y * math.sin(a), by - COG_Y + COG_Y * math.cos(a), a], dtype=np.float64)


def gym_pose(env):
    return (float(env.block.position.x), float(env.block.position.y), float(env.block.angle))


def gym_agent(env):
    return (float(env.agent.position.x), float(env.agent.position.y))


def pose_errors(ours_state, gym_block, gym_agent_pos):
    ours = [float(v) for v in ours_state[:5]]
    return {"block_px": math.hypot(gym_block[0] - ours[2], gym_block[1] - ours[3]),
            "angle_rad": abs(wrap_angle(gym_block[2] - ours[4])),
            "agent_px": math.hypot(gym_agent_pos[0] - ours[0], gym_agent_pos[1] - ours[1])}


def replay_episode(env, states, actions):
    """Resets gym-pusht to states[0], steps every action; returns per-episode comparisons."""
    steps = len(actions)
    env.reset(options={"reset_to_state": legacy_reset_state(states[0])})
    gym_poses, gym_agents, gym_coverage = [gym_pose(env)], [gym_agent(env)], [None]
    first_success = None
    for t in range(steps):
        _, _, _, _, info = env.step(np.asarray(actions[t], dtype=np.float64))
        gym_poses.append(gym_pose(env))
        gym_agents.append(gym_agent(env))
        gym_coverage.append(float(info["coverage"]))
        if first_success is None and info["coverage"] > SUCCESS_COVERAGE:
            first_success = t + 1
    # gym_poses[k] is after k actions, as our states[k]; states[steps] (after the last action) is not recorded.
    along = [pose_errors(states[i], gym_poses[i], gym_agents[i]) for i in range(steps)]
    checkpoints = {}
    for k in list(CHECKPOINTS) + ["end"]:
        i = steps - 1 if k == "end" else k
        if i > steps - 1:
            continue
        e = pose_errors(states[i], gym_poses[i], gym_agents[i])
        e["k"] = i
        e["coverage_ours"] = coverage((float(states[i][2]), float(states[i][3]), float(states[i][4])))
        e["coverage_gym"] = coverage(gym_poses[i])
        checkpoints[str(k)] = e
    # gym-pusht's own coverage against ours (shapely, same polygons) on its poses: the definitions agree
    definition_gap = max((abs(c - coverage(p)) for c, p in zip(gym_coverage[1:], gym_poses[1:])), default=0.0)
    ours_success = steps < MAX_STEPS  # our rollout stops at the first success or after MAX_STEPS steps
    return {
        "steps": steps,
        "starts_overlapping": bool(starts_overlapping(states[0])),
        "checkpoints": checkpoints,
        "ours_success": ours_success if ours_success else None,  # None: 300 steps, step 300's outcome unknown
        "ours_success_step": steps if ours_success else None,
        "gym_final_coverage": gym_coverage[-1],
        "gym_final_success": gym_coverage[-1] > SUCCESS_COVERAGE,
        "gym_first_success_step": first_success,
        "coverage_definition_gap": definition_gap,
        "trajectory_max_block_px": max(e["block_px"] for e in along),
        "trajectory_max_angle_rad": max(e["angle_rad"] for e in along),
    }


def summarise(values):
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if v.size == 0:
        return None
    return {"n": int(v.size), "mean": float(v.mean()), "median": float(np.median(v)), "min": float(v.min()),
            "max": float(v.max())}


def compare_file(path, label, max_episodes):
    from gym_pusht.envs.pusht import PushTEnv  # in the venv only
    demos = read_episode_file(path)
    if demos.state.shape[1] < 5 or demos.action.shape[1] != 2:
        raise ValueError(f"{path}: not PushT rows (state_dim {demos.state.shape[1]}, action_dim {demos.action.shape[1]})")
    env = PushTEnv(obs_type="state", render_mode="rgb_array")
    episodes = []
    for e in range(min(max_episodes, demos.episodes)):
        s = demos.episode_slice(e)
        r = replay_episode(env, demos.state[s].astype(np.float64), demos.action[s].astype(np.float64))
        r["episode"] = e
        episodes.append(r)
    env.close()
    checkpoints = {}
    for k in [str(c) for c in CHECKPOINTS] + ["end"]:
        rows = [ep["checkpoints"][k] for ep in episodes if k in ep["checkpoints"]]
        checkpoints[k] = {"episodes": len(rows),
                          **{m: summarise([r[m] for r in rows])
                             for m in ("block_px", "angle_rad", "agent_px", "coverage_ours", "coverage_gym")}}
    n = len(episodes)
    return {
        "label": label,
        "file": os.path.abspath(path),
        "episodes": n,
        "steps": int(sum(ep["steps"] for ep in episodes)),
        "checkpoints": checkpoints,
        "episodes_starting_overlapping": [ep["episode"] for ep in episodes if ep["starts_overlapping"]],
        "final": {
            "ours_success": sum(1 for ep in episodes if ep["ours_success"]),
            "ours_unknown_at_300_steps": sum(1 for ep in episodes if ep["ours_success"] is None),
            "gym_success_at_end": sum(1 for ep in episodes if ep["gym_final_success"]),
            "gym_success_any_step": sum(1 for ep in episodes if ep["gym_first_success_step"] is not None),
            "both_success": sum(1 for ep in episodes if ep["ours_success"] and ep["gym_first_success_step"]),
            "gym_final_coverage": summarise([ep["gym_final_coverage"] for ep in episodes]),
            "coverage_at_last_recorded_state_ours": summarise([ep["checkpoints"]["end"]["coverage_ours"]
                                                                for ep in episodes]),
            "coverage_at_last_recorded_state_gym": summarise([ep["checkpoints"]["end"]["coverage_gym"]
                                                               for ep in episodes]),
            "gym_first_success_step_minus_ours": summarise(
                [ep["gym_first_success_step"] - ep["ours_success_step"] for ep in episodes
                 if ep["gym_first_success_step"] is not None and ep["ours_success_step"] is not None]),
            "trajectory_max_block_px": summarise([ep["trajectory_max_block_px"] for ep in episodes]),
            "trajectory_max_angle_rad": summarise([ep["trajectory_max_angle_rad"] for ep in episodes]),
            "coverage_definition_gap_max": max((ep["coverage_definition_gap"] for ep in episodes), default=0.0),
        },
        "per_episode": episodes,
    }


def versions():
    out = {"python": sys.version.split()[0]}
    for name in PINNED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def markdown(result):
    lines = ["# Our PushT (Box2D) against gym-pusht (pymunk): open-loop replay of our demonstrations", "",
             f"Generated {result['generated']} with {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.",
             "", "k = actions executed; ours = recorded state k, gym = gym-pusht after the same k actions from our "
             "state 0. Errors: block origin position (px), wrapped angle (rad), agent position (px); "
             "median / mean / max over the episodes that reach k. `end` is each episode's last recorded state "
             "(k = T - 1).", ""]
    for run in result["runs"]:
        f = run["final"]
        overlap = run["episodes_starting_overlapping"]
        lines += [f"## {run['label']}", "", f"`{run['file']}`: first {run['episodes']} episodes, {run['steps']} steps; "
                  f"{len(overlap)} start with the agent overlapping the T" + (f" (episodes {overlap})" if overlap else "")
                  + ".", "", "| k | episodes | block pos err px (med / mean / max) | angle err rad (med / mean / max) | "
                  "agent err px (max) | coverage ours (mean) | coverage gym (mean) |", "|---|---|---|---|---|---|---|"]
        for k, c in run["checkpoints"].items():
            if not c["episodes"]:
                continue
            b, a, g = c["block_px"], c["angle_rad"], c["agent_px"]
            lines.append(f"| {k} | {c['episodes']} | {b['median']:.3g} / {b['mean']:.3g} / {b['max']:.3g} | "
                         f"{a['median']:.3g} / {a['mean']:.3g} / {a['max']:.3g} | {g['max']:.2g} | "
                         f"{c['coverage_ours']['mean']:.3f} | {c['coverage_gym']['mean']:.3f} |")
        d = f["gym_first_success_step_minus_ours"]
        lines += ["", f"- success, ours (episode ended before step {MAX_STEPS}): {f['ours_success']} / {run['episodes']}"
                  + (f" ({f['ours_unknown_at_300_steps']} ran {MAX_STEPS} steps: outcome of the last step not in the file)"
                     if f["ours_unknown_at_300_steps"] else ""),
                  f"- gym-pusht, same actions: success after the last action {f['gym_success_at_end']} / "
                  f"{run['episodes']}, coverage > 0.95 at any step {f['gym_success_any_step']} / {run['episodes']}; "
                  f"both succeed {f['both_success']}",
                  f"- gym-pusht's coverage after the last action: mean {f['gym_final_coverage']['mean']:.3f}, "
                  f"median {f['gym_final_coverage']['median']:.3f}, min {f['gym_final_coverage']['min']:.3f}",
                  f"- coverage at the last recorded state: ours mean "
                  f"{f['coverage_at_last_recorded_state_ours']['mean']:.3f}, gym-pusht mean "
                  f"{f['coverage_at_last_recorded_state_gym']['mean']:.3f}",
                  f"- largest error along each trajectory (k = 0 .. T - 1), median / max over episodes: block "
                  f"{f['trajectory_max_block_px']['median']:.3g} / {f['trajectory_max_block_px']['max']:.3g} px, angle "
                  f"{f['trajectory_max_angle_rad']['median']:.3g} / {f['trajectory_max_angle_rad']['max']:.3g} rad",
                  "- gym-pusht's first success step minus ours: " +
                  ("-" if d is None else f"mean {d['mean']:+.2f}, min {d['min']:+.0f}, max {d['max']:+.0f} over the {d['n']} "
                   "episodes where both succeed"),
                  f"- check: gym-pusht's own coverage vs this script's shapely coverage on its poses, max gap "
                  f"{f['coverage_definition_gap_max']:.1e}", ""]
    lines += ["## Known differences (docs/pusht.md)", ""] + [f"- {d}" for d in KNOWN_DIFFERENCES] + [""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description="Open-loop replay of .episodes demonstrations in gym-pusht")
    parser.add_argument("files", nargs="+", metavar="FILE[=LABEL]", help=".episodes files (made with --all)")
    parser.add_argument("--episodes", type=int, default=50, help="first K episodes of each file (default 50)")
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON")
    parser.add_argument("--markdown", metavar="OUT", help="write the summary as markdown")
    parser.add_argument("--per-episode", action="store_true", help="keep each episode's numbers in the JSON")
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    runs = []
    try:
        for item in args.files:
            path, _, label = item.partition("=")
            runs.append(compare_file(path, label or os.path.basename(path), args.episodes))
    except (EpisodeFileError, ValueError) as e:
        print(f"pusht-gym-compare: {e}", file=sys.stderr)
        return 1
    if not args.per_episode:
        for run in runs:
            del run["per_episode"]
    result = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "versions": versions(), "checkpoints_k": list(CHECKPOINTS) + ["end"],
              "known_differences": KNOWN_DIFFERENCES, "runs": runs}
    text = markdown(result)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
