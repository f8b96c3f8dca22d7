#!/usr/bin/env python3
"""Times the phases of a long command by its `==> ` log lines (scripts/lib/setup.sh's sparsevit_log).

    phase_timer.py --json OUT.json -- COMMAND ARGS...   runs COMMAND, echoes its output, and at the
                                                        end prints each phase's wall and CPU time
    phase_timer.py --ninja BUILD_DIR [--ninja ...]      the compile CPU of each target group of a
                                                        finished build, from its .ninja_log

A phase runs from one `==> ` line to the next. Its CPU time is the whole machine's (user + system
from /proc/stat, every core), so time it on an otherwise idle machine; the run's own children alone
are also given at the end (os.times). The ninja report adds up each edge's duration by the target
it builds (CMakeFiles/<target>.dir), which on a -j2 build is the CPU the compiler spent.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def machine_cpu_seconds():
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run_phases(command, json_path):
    start_wall, start_cpu = time.monotonic(), machine_cpu_seconds()
    phases = []  # [name, wall at start, cpu at start]
    current = ["(start)", start_wall, start_cpu]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1,
                            text=True, errors="replace")
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        text = ANSI.sub("", line).strip()
        if text.startswith("==> "):
            now, cpu = time.monotonic(), machine_cpu_seconds()
            phases.append((current[0], now - current[1], cpu - current[2]))
            current = [text[4:], now, cpu]
    rc = proc.wait()
    now, cpu = time.monotonic(), machine_cpu_seconds()
    phases.append((current[0], now - current[1], cpu - current[2]))
    children = os.times()
    total = {"wall_s": now - start_wall, "machine_cpu_s": cpu - start_cpu,
             "children_cpu_s": children.children_user + children.children_system, "exit_code": rc}
    print(f"\n{'wall s':>8} {'cpu s':>8}  phase (from its ==> line to the next)")
    for name, wall, cpu_s in phases:
        if wall >= 1.0:
            print(f"{wall:8.0f} {cpu_s:8.0f}  {name[:110]}")
    print(f"{total['wall_s']:8.0f} {total['machine_cpu_s']:8.0f}  all (exit {rc}; the command's own children: "
          f"{total['children_cpu_s']:.0f} CPU-s)")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"command": command, "total": total,
                       "phases": [{"phase": n, "wall_s": round(w, 1), "cpu_s": round(c, 1)} for n, w, c in phases]},
                      f, indent=1)
    return rc


def target_of(output):
    m = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    if m:
        return m.group(1)
    return "(link and other steps)"


def closure(build_dir, target):
    """The outputs a build of `target` alone runs: its inputs, recursively (ninja -t inputs), and itself."""
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "inputs", target], capture_output=True, text=True,
                         check=True).stdout.split()
    return {os.path.relpath(p, build_dir) if os.path.isabs(p) else p for p in out} | {target}


def ninja_report(build_dir, target=None):
    """Sums each target's edges from the last build recorded in .ninja_log (format v5); with
    `target`, only the edges a build of that target alone would run."""
    path = os.path.join(build_dir, ".ninja_log")
    by_target = collections.defaultdict(float)
    units = collections.defaultdict(int)
    slowest = []
    with open(path) as f:
        header = f.readline()
        if not header.startswith("# ninja log"):
            raise SystemExit(f"error: {path} is not a ninja log")
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    # The log appends every build; keep the newest entry of each output.
    newest = {}
    for start_ms, end_ms, _mtime, output, *_ in rows:
        newest[output] = (int(start_ms), int(end_ms))
    if target:
        wanted = closure(build_dir, target)
        newest = {o: t for o, t in newest.items() if o in wanted}
    for output, (start_ms, end_ms) in newest.items():
        seconds = (end_ms - start_ms) / 1000
        group = target_of(output)
        by_target[group] += seconds
        if output.endswith(".o") or output.endswith(".gch"):
            units[group] += 1
            slowest.append((seconds, output))
    total = sum(by_target.values())
    print(f"\n{build_dir}{' (' + target + ' alone)' if target else ''}: {len(newest)} steps, "
          f"{total:.0f} s of compiler time in all")
    print(f"{'s':>7} {'share':>6} {'units':>5}  target")
    for group, seconds in sorted(by_target.items(), key=lambda kv: -kv[1]):
        print(f"{seconds:7.0f} {100 * seconds / total:5.1f}% {units[group]:5d}  {group}")
    print("slowest units:")
    for seconds, output in sorted(slowest, reverse=True)[:15]:
        print(f"{seconds:7.1f}  {output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the phases here as JSON")
    parser.add_argument("--ninja", action="append", default=[], help="a finished build folder to report on")
    parser.add_argument("--target", help="with --ninja: only what building this target alone runs")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    rc = 0
    if command:
        rc = run_phases(command, args.json)
    for build_dir in args.ninja:
        ninja_report(build_dir, args.target)
    if not command and not args.ninja:
        parser.error("give a command to time or --ninja BUILD_DIR")
    return rc


if __name__ == "__main__":
    sys.exit(main())
