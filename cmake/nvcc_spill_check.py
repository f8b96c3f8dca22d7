#!/usr/bin/env python3
"""CMake's CUDA compiler launcher for the kernels: runs the nvcc command line it is given (with
-Xptxas -v), echoes ptxas' report, saves it beside the object as <object>.ptxas.txt, and fails
the compile when any function spills registers ("N bytes spill stores, M bytes spill loads" with
N or M above 0): a spill in these memory-bound kernels is local-memory traffic per row.
SPARSEVIT_CUDA_SPILLS_FATAL=0 (scripts/device-check) reports spills without failing: on a GPU
machine a library with a spill still gives numbers, and the report says where it spills."""
import os
import re
import subprocess
import sys

SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([^' ]+)'?")


def main(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(proc.stdout)
    if "-o" in argv and argv.index("-o") + 1 < len(argv):
        with open(argv[argv.index("-o") + 1] + ".ptxas.txt", "w") as f:
            f.write(proc.stdout)
    if proc.returncode != 0:
        return proc.returncode
    spills, function = [], "?"
    for line in proc.stdout.splitlines():
        m = FUNCTION.search(line)
        if m:
            function = m.group(1)
        m = SPILL.search(line)
        if m and (int(m.group(1)) > 0 or int(m.group(2)) > 0):
            spills.append(f"{function}: {line.strip()}")
    if spills:
        fatal = os.environ.get("SPARSEVIT_CUDA_SPILLS_FATAL", "1") != "0"
        sys.stderr.write("nvcc_spill_check: register spills (" + ("the build fails on any" if fatal else
                         "reported only: SPARSEVIT_CUDA_SPILLS_FATAL=0") + "):\n  " + "\n  ".join(spills) + "\n")
        return 1 if fatal else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
