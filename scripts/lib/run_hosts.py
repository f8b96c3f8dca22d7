#!/usr/bin/env python3
"""Says where the finished runs of a sweep ran, from each summary.json's `finished_on`.

usage: run_hosts.py SUMMARY.json...   prints one line, e.g.
  "4 on 2 cores, Intel(R) Xeon(R) Processor at 1 thread; 2 not recorded"
Runs repeat to the last digit only on the same CPU model at the same thread count, and the thread
count is not part of a sweep's recipe, so a report that reuses runs says which machines made them.
"""
import collections
import json
import sys


def describe(paths):
    hosts = collections.Counter()
    for path in paths:
        with open(path) as f:
            h = json.load(f).get("finished_on")
        if h is None:
            hosts[None] += 1
        else:
            t = h["threads"]
            hosts[f'{h["cores"]} cores, {h["cpu"]} at {t} thread{"s" if t != 1 else ""}'] += 1
    parts = [f"{n} on {host}" for host, n in sorted(hosts.items(), key=lambda kv: (kv[0] is None, -kv[1])) if host]
    if hosts[None]:
        parts.append(f"{hosts[None]} not recorded (finished before summaries recorded it)")
    return "; ".join(parts) if parts else "no finished runs"


if __name__ == "__main__":
    print(describe(sys.argv[1:]))
