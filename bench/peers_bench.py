#!/usr/bin/env python3
"""The peers a PyTorch 2.x user compares sparsevit with, measured side by side in one process
(issue 33, item 3; docs/performance.md, "Against PyTorch 2.6's SDPA and FlexAttention (CPU)").

Run inside the Debian 13 root (torch 2.6, Python 3.13, libopenblas0-openmp), with the operator
library built against torch 2.6 (SPARSEVIT_BUILD points at it):

    OMP_NUM_THREADS=2 python3 bench/peers_bench.py --out docs/results/peers/peers.json

One run writes one JSON with:
  a. the attention operator at N = 197, 577, 1025, 3137 (H 12, D 64, fp32, B per N in BATCH),
     forward (under no_grad) and forward+backward, for ours (torch.ops.sparsevit through the
     Python package, the Fibottention pattern of configs/attention/vit_fibottention.yaml with
     w_max = N // 3 as bench/performance.sh uses), F.scaled_dot_product_attention dense and with
     the same pattern as a bool mask [H, N, N], compiled FlexAttention (create_block_mask of the
     same pattern) and eager FlexAttention (the slow reference path); each timed run follows an
     untimed run of the same method, in an order rotated every repeat (as `sparsevit bench`);
     median and every time; each peer's output (and, forward+backward, gradients) against ours;
  b. the memory roofline of our operator: bytes over the copy bandwidth measured in this run,
     and the FLOP bound over a measured sgemm rate, per N and pass;
  c. whole timm-layout ViT training steps: bench/vit_train_pytorch.py --attention sdpa (torch
     2.6) vs `sparsevit bench --model` (ours, dense and Fibottention), same threads and batch.

Inductor's CPU code needs sleef.h (Debian's libsleef-dev, not a dependency of python3-torch);
without it inductor finds no vector ISA and the FlexAttention CPU template fails to compile.
--sleef-include names a folder holding sleef.h (e.g. libsleef-dev unpacked with dpkg -x), and
libsleef.so.3 is preloaded so that the compiled kernels resolve its symbols (Debian's gcc links
with --as-needed, so the kernels do not pull in libtorch_cpu's libsleef themselves).
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "bench", "device"))
from compiled_flex import CompiledFlex  # noqa: E402
FIBO = "configs/attention/vit_fibottention.yaml"
FIBO_SMALL = "configs/attention/vit_fibottention_small.yaml"
HEADS, HEAD_DIM = 12, 64
# Batch per N: B 8 at ViT-B's N, smaller where the N x N peers would not fit the run's time.
BATCH = {197: 8, 577: 4, 1025: 2, 3137: 1}
# Whole-model steps: (model, tokens, our attention config), as docs/performance.md uses them.
MODELS = [("vit_nano_patch4_28", 50, FIBO_SMALL), ("vit_nano_patch2_28", 197, FIBO), ("vit_tiny_patch16_224", 197, FIBO)]
SLEEF_LIB = "/usr/lib/x86_64-linux-gnu/libsleef.so.3"


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # a missing tool is recorded, not fatal
        return f"unavailable ({type(e).__name__})"


def git_head():
    """The checkout's commit, read from .git (the Debian 13 root has no git)."""
    git = os.path.join(REPO, ".git")
    try:
        head = open(os.path.join(git, "HEAD")).read().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if os.path.exists(os.path.join(git, ref)):
            return open(os.path.join(git, ref)).read().strip()[:12]
        for line in open(os.path.join(git, "packed-refs")):
            if line.strip().endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        pass
    return "unknown"


def error_state(e):
    lines = str(e).strip().splitlines()
    # Inductor wraps the cause: "backend='inductor' raised:\nIndexError: ..." -> keep the cause too.
    first = lines[0] if lines else ""
    cause = next((l for l in lines[1:] if l and not l.startswith(" ") and ":" in l), "")
    return {"state": "failed", "error": f"{type(e).__name__}: {first}" + (f" / {cause}" if cause else "")}


def load_state():
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    top = sh("ps -eo pcpu,stat,comm --sort=-pcpu | head -8")
    return {"loadavg_1_5_15": [float(x) for x in load], "top_processes": top.splitlines()}


def machine_info(torch):
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    a = torch.randn(256, 256)
    a @ a  # BLAS is loaded lazily: call it before reading the process's mappings
    blas = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in os.path.basename(path) or "lapack" in os.path.basename(path):
                blas.add(os.path.realpath(path))
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    caches = {}  # what the roofline's working sets compare with (L3 may hold N = 197's tensors)
    base = "/sys/devices/system/cpu/cpu0/cache"
    for idx in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            level = open(f"{base}/{idx}/level").read().strip()
            kind = open(f"{base}/{idx}/type").read().strip()
            caches[f"L{level} {kind}"] = open(f"{base}/{idx}/size").read().strip()
        except OSError:
            pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem_kib / 2**20, 1), "caches_per_cpu0": caches,
        "kernel": platform.release(), "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "python": platform.python_version(), "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "blas_libraries_loaded": sorted(blas), "gxx": sh("g++ --version | head -1"),
        "torch_config": torch.__config__.show(),
    }


def timed(fn, reps, warmup, paired):
    """Times fn: warm-up runs, then reps timed runs (each after an untimed one when paired)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        if paired:
            fn()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_rotated(methods, reps, warmup):
    """methods: name -> fn. Each timed run follows an untimed run of the same method (its own
    data in cache, as a model runs a layer); the order of methods rotates every repeat so that
    slow drifts of a shared machine spread over all of them. Returns name -> list of ms."""
    names = list(methods)
    if not names:
        return {}
    for name in names:
        for _ in range(warmup):
            methods[name]()
    times = {n: [] for n in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name] += timed(methods[name], 1, 0, paired=True)
    return times


def copy_bandwidth(torch, mib=256, reps=7):
    """GB/s of dst.copy_(src) on two buffers far larger than the caches (bytes = 2 x size)."""
    n = mib * 2**20 // 4
    src, dst = torch.ones(n), torch.empty(n)
    best = min(timed(lambda: dst.copy_(src), reps, 1, paired=False))
    return {"buffer_mib": mib, "best_ms": best, "gbytes_per_s": 2 * n * 4 / (best * 1e-3) / 1e9}


def sgemm_rate(torch, n=2048, reps=5):
    a, b = torch.randn(n, n), torch.randn(n, n)
    c = torch.empty(n, n)
    best = min(timed(lambda: torch.mm(a, b, out=c), reps, 1, paired=False))
    return {"shape": [n, n, n], "best_ms": best, "gflops_per_s": 2 * n**3 / (best * 1e-3) / 1e9}


def torch_folder():
    import importlib.util
    spec = importlib.util.find_spec("torch")
    return os.path.dirname(spec.origin) if spec and spec.origin else ""


# Inductor links its CPU kernels with Python's LIBDIR before torch's lib/ (torch 2.15,
# _inductor/cpp_builder.py: python_libraries_dirs + torch_libraries_dirs). Debian's Python has
# LIBDIR /usr/lib/x86_64-linux-gnu, where Debian's libtorch-dev puts libtorch.so (1.13): with both
# installed, -ltorch_cpu picks Debian's, and the compiled Flex kernel fails to load (undefined
# at::native::cpublas::brgemm); the vector-ISA probe fails the same way. Linux links no libpython
# into extensions, so the bench drops Python's LIBDIR from inductor's link line.
INDUCTOR_LINK_FIX = """
import torch._inductor.cpp_builder as _cb
_python_args = _cb._get_python_related_args
_cb._get_python_related_args = lambda: (_python_args()[0], [])
"""


def vec_isa_probe(env, link_fix=False):
    """Inductor's CPU vector-ISA choice, in a fresh process (the check is cached per process)."""
    code = ((INDUCTOR_LINK_FIX if link_fix else "") +
            "from torch._inductor import cpu_vec_isa as c; i = c.pick_vec_isa(); print(type(i).__name__, bool(i))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if r.stdout.strip():
        return r.stdout.strip()
    err = r.stderr.strip().splitlines()
    return f"probe failed: {err[-1] if err else r.returncode}"


def setup_inductor_cpu(args):
    """Makes inductor's CPU vectorisation available (see the module docstring); returns what was done."""
    done = {"sleef_include": None, "preloaded": None}
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(args.inductor_cache))
    done["inductor_cache_dir"] = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    # In a cache folder of its own: a kernel built without the fixes stays in the cache and is reused.
    done["vec_isa_without_change"] = vec_isa_probe({**os.environ, "CPATH": "", "LD_PRELOAD": "",
                                                    "TORCHINDUCTOR_CACHE_DIR": done["inductor_cache_dir"] + "-unfixed"})
    if args.no_flex_fix:
        return done
    link_fix = os.path.isfile(os.path.join(torch_folder(), "lib", "libtorch.so"))
    if link_fix:
        # torch's lib/ first on inductor's link line: applied in this process after `import torch`,
        # with compiles in-process. Harmless where lib/ links to the system's libraries (Debian 13).
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        done["inductor_link_fix"] = "python LIBDIR dropped from inductor's link line"
    if os.path.isfile(os.path.join(torch_folder(), "include", "sleef.h")):  # PyPI's wheels carry it
        done["vec_isa_with_change"] = vec_isa_probe(dict(os.environ), link_fix=link_fix)
        return done
    if args.sleef_include:
        inc = os.path.abspath(args.sleef_include)
        os.environ["CPATH"] = inc + (":" + os.environ["CPATH"] if os.environ.get("CPATH") else "")
        done["sleef_include"] = inc
    if os.path.exists(SLEEF_LIB):
        ctypes.CDLL(SLEEF_LIB, mode=ctypes.RTLD_GLOBAL)  # this process loads the compiled kernels
        os.environ["LD_PRELOAD"] = SLEEF_LIB  # inductor's ISA check loads its test kernel in a child
        done["preloaded"] = SLEEF_LIB
    done["vec_isa_with_change"] = vec_isa_probe(dict(os.environ), link_fix=link_fix)
    return done


def operator_at(torch, F, sparsevit, flex, N, B, args, flex_state):
    """Every method at one N: correctness against ours, then forward and forward+backward times."""
    torch.manual_seed(0)
    layer = sparsevit.patterns.build_all(os.path.join(REPO, FIBO), N, HEADS, 12, HEAD_DIM, 1,
                                         overrides=[f"w_max={N // 3}"])[0]
    row_ptr, col_idx = layer.row_ptr, layer.col_idx
    mask = layer.dense_mask()  # [H, N, N] bool, True: attend
    pairs_per_batch = int(row_ptr[:, -1].sum())
    entry = {"N": N, "B": B, "H": HEADS, "D": HEAD_DIM, "dtype": "float32",
             "pattern": {"config": FIBO, "overrides": [f"w_max={N // 3}"], "layer": 0, "layers": 12,
                         "prefix_tokens": 1, "kept_pairs_per_batch_item": pairs_per_batch,
                         "density": pairs_per_batch / (HEADS * N * N),
                         "empty_rows": int((mask.sum(-1) == 0).sum())}}
    q, k, v = (torch.randn(B, HEADS, N, HEAD_DIM) for _ in range(3))
    dout = torch.randn(B, HEADS, N, HEAD_DIM)
    scale = HEAD_DIM ** -0.5

    def mask_mod(b, h, q_idx, kv_idx):
        return mask[h, q_idx, kv_idx]

    t0 = time.perf_counter()
    block_mask = flex.create_block_mask(mask_mod, None, HEADS, N, N, device="cpu", BLOCK_SIZE=args.flex_block)
    # Blocks FlexAttention computes (partial + full) out of all H x q-blocks x kv-blocks: the
    # pattern's diagonals reach N/3 away, so few blocks are skipped.
    blocks = block_mask.kv_num_blocks.sum() + (block_mask.full_kv_num_blocks.sum()
                                                if block_mask.full_kv_num_blocks is not None else 0)
    nb = -(-N // args.flex_block)
    entry["flex_block_mask"] = {"block_size": args.flex_block, "build_s": time.perf_counter() - t0,
                                "blocks_computed": int(blocks), "blocks_total": HEADS * nb * nb,
                                "fraction_of_blocks_computed": int(blocks) / (HEADS * nb * nb)}
    flex_compiled = CompiledFlex(torch, flex.flex_attention)

    fns = {
        "ours": lambda a, b, c: sparsevit.sparse_attention(a, b, c, row_ptr, col_idx, scale),
        "sdpa_dense": lambda a, b, c: F.scaled_dot_product_attention(a, b, c),
        "sdpa_bool_mask": lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask),
        "flex_compiled": lambda a, b, c: flex_compiled(a, b, c, block_mask=block_mask, scale=scale),
        "flex_eager": lambda a, b, c: flex.flex_attention(a, b, c, block_mask=block_mask, scale=scale),
    }
    notes = {"sdpa_dense": "dense attention: a different function, its difference to ours is not an error",
             "flex_eager": "uncompiled flex_attention: PyTorch's slow reference path, not a fast kernel"}

    passes = {}
    for pass_name in ("fwd", "fwd_bwd"):
        results, runners, ref = {}, {}, {}
        flex_compiled.fresh()  # a compile of this pass alone, never a leftover of the other pass's failure
        for name, fn in fns.items():
            if pass_name == "fwd_bwd" and name == "flex_compiled" and flex_state.get("fwd_bwd_failed"):
                results[name] = dict(flex_state["fwd_bwd_failed"], note="not retried: failed at a smaller N")
                continue
            if pass_name == "fwd" and name == "flex_compiled" and flex_state.get("fwd_failed"):
                results[name] = dict(flex_state["fwd_failed"], note="not retried: failed at a smaller N")
                continue
            if pass_name == "fwd":
                def run(fn=fn):
                    with torch.no_grad():
                        return fn(q, k, v)
            else:
                qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

                def run(fn=fn, qg=qg, kg=kg, vg=vg):
                    qg.grad = kg.grad = vg.grad = None
                    out = fn(qg, kg, vg)
                    out.backward(dout)
                    return out, (qg.grad, kg.grad, vg.grad)
            try:
                t0 = time.perf_counter()
                got = run()
                first_s = time.perf_counter() - t0
            except Exception as e:
                results[name] = error_state(e)
                if name == "flex_compiled":
                    flex_compiled.fresh()  # after a failure, dynamo would run later calls eagerly
                    if pass_name == "fwd_bwd":  # read in torch/_inductor/kernel/flex_attention.py (2.6)
                        results[name]["note"] = ("torch 2.6's CPU lowering of flex_attention (lower_cpu) returns the "
                                                 "output alone, no logsumexp for a backward: 'torch.compile on CPU "
                                                 "only supports inference'")
                    flex_state[pass_name + "_failed"] = results[name]
                    traceback.print_exc(limit=2)
                continue
            out, grads = (got, None) if pass_name == "fwd" else got
            ref[name] = (out.detach(), grads)
            results[name] = {"state": "ok", "first_call_s": first_s}
            if name in notes:
                results[name]["note"] = notes[name]
            runners[name] = run
        base_out, base_grads = ref["ours"]
        for name, (out, grads) in ref.items():
            if name == "ours":
                continue
            results[name]["max_abs_diff_out_vs_ours"] = float((out - base_out).abs().max())
            if grads is not None:
                results[name]["max_abs_diff_grads_vs_ours"] = max(float((g - b).abs().max())
                                                                  for g, b in zip(grads, base_grads))
        reps = args.reps.get(N, 3)
        # A timed warm-up run per method sorts the fast from the slow: a run longer than
        # --slow-ms streams far more than the caches hold, so pairing it with an untimed run buys
        # nothing; slow methods run unpaired and fewer times (the run must fit ~15 minutes).
        warm = {n: timed(r, 1, max(0, args.warmup - 1), paired=False)[0] for n, r in runners.items()}
        slow = {n for n, t in warm.items() if t > args.slow_ms}
        times = time_rotated({n: r for n, r in runners.items() if n not in slow}, reps, 0)
        very_slow = {n for n in slow if warm[n] > args.max_call_s * 1e3}
        for name in runners:
            if name in very_slow:  # the warm-up run is its only time: the run must stay bounded
                times[name] = [warm[name]]
            elif name in slow:
                n_slow = min(reps, args.slow_reps, args.eager_flex_reps if name == "flex_eager" else reps)
                times[name] = timed(runners[name], max(2, n_slow), 0, paired=False)
        if "flex_compiled" in runners:
            # Every call of the runner must have run inductor's graph: otherwise the times are eager ones.
            proof = flex_compiled.proof()
            results["flex_compiled"]["compiled_proof"] = proof
            if not proof["every_call_ran_the_compiled_graph"]:
                results["flex_compiled"].update(state="not proven compiled", error=json.dumps(proof))
                times.pop("flex_compiled", None)
        for name, ts in times.items():
            timing = ("one run (its warm-up run, over max_call_s)" if name in very_slow else
                      "unpaired (slow)" if name in slow else "paired, rotated")
            results[name].update(times_ms=ts, median_ms=statistics.median(ts), reps=len(ts), warmup_ms=warm[name],
                                 timing=timing)
        for name, r in results.items():
            if "median_ms" in r and name != "ours":
                r["ratio_to_ours"] = r["median_ms"] / results["ours"]["median_ms"]
        passes[pass_name] = results
        print(f"N {N} {pass_name}: " + ", ".join(f"{n} {r.get('median_ms', float('nan')):.2f} ms"
                                                  for n, r in results.items()), file=sys.stderr, flush=True)
    entry["passes"] = passes
    return entry


def roofline(entry, bandwidth, gemm):
    """Our operator's bytes and FLOPs at one N, over the copy bandwidth and sgemm rate.

    Lower bound (the floor used): every dense tensor moved once - forward reads q, k, v and
    writes out and lse; backward reads q, k, v, out, dout and lse and writes dq, dk, dv
    (fwd+bwd = both). The gather count (for reference, not a bound): every kept pair's key and
    value rows read from memory with no cache reuse - forward: per query q, out, lse and each
    kept key's K and V row; backward: a query pass (q, dout, dq, lse, delta, each kept key's K
    and V) and a key pass (k, v, dk, dv, each kept query's q and dout rows, lse and delta), out
    once for delta. FLOPs: 4 D per kept pair forward (q.k and p.v), 10 D backward (recomputed
    q.k, dout.v, p^T dout, ds k, ds^T q)."""
    B, H, N, D = entry["B"], entry["H"], entry["N"], entry["D"]
    e = 4
    T = B * H * N * D * e  # one [B, H, N, D] float32 tensor
    L = B * H * N * e  # lse (or delta)
    pairs = B * entry["pattern"]["kept_pairs_per_batch_item"]
    fwd_lower, bwd_lower = 4 * T + L, 8 * T + L
    fwd_gather = 2 * T + L + pairs * 2 * D * e
    bwd_gather = 8 * T + 2 * L + pairs * (4 * D * e + 2 * e)
    counts = {"fwd": (fwd_lower, fwd_gather, pairs * 4 * D),
              "fwd_bwd": (fwd_lower + bwd_lower, fwd_gather + bwd_gather, pairs * 14 * D)}
    out = {}
    for p, (lower, gather, flops) in counts.items():
        ours = entry["passes"][p]["ours"]
        t_mem = lower / (bandwidth * 1e9) * 1e3
        t_flop = flops / (gemm * 1e9) * 1e3
        out[p] = {"bytes_lower_bound": lower, "bytes_gather_no_reuse": gather, "flops": flops,
                  "mem_floor_ms": t_mem, "gather_ms_at_copy_bw": gather / (bandwidth * 1e9) * 1e3,
                  "flop_bound_ms": t_flop, "measured_ms": ours["median_ms"],
                  "fraction_of_mem_floor": t_mem / ours["median_ms"],
                  "fraction_of_flop_bound": t_flop / ours["median_ms"],
                  "binding_bound": "memory" if t_mem > t_flop else "compute",
                  "achieved_gbytes_per_s_lower": lower / (ours["median_ms"] * 1e-3) / 1e9,
                  "achieved_gflops_per_s": flops / (ours["median_ms"] * 1e-3) / 1e9}
    return out


def run_json(cmd, env):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()
        return {"state": "failed", "returncode": r.returncode, "error": tail[-1] if tail else "", "command": cmd}
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    return {"state": "ok", "command": cmd, "wall_s": wall, "result": json.loads(lines[-1])}


def models_part(args, env):
    rows = []
    cli = os.path.join(args.sparsevit_build, "sparsevit")
    for model, tokens, cfg in MODELS:
        if args.models and model not in args.models:
            continue
        reps, warmup = (args.model_reps, 1) if "tiny" in model else (args.model_reps + 2, 2)
        row = {"model": model, "tokens": tokens, "batch": args.model_batch, "attention_config": cfg}
        row["pytorch_sdpa"] = run_json([sys.executable, "bench/vit_train_pytorch.py", "--model", model, "--batch",
                                        str(args.model_batch), "--threads", str(args.threads), "--steps", str(reps),
                                        "--warmup", str(warmup), "--attention", "sdpa"], env)
        if os.path.exists(cli):
            row["ours"] = run_json([cli, "bench", "--model", model, "--attn-cfg", cfg, "--backward", "--batch",
                                    str(args.model_batch), "--threads", str(args.threads), "--repeats", str(reps),
                                    "--warmup", str(warmup), "--json"], env)
        else:
            row["ours"] = {"state": "not built", "error": f"{cli} does not exist"}
        if row["pytorch_sdpa"]["state"] == "ok" and row["ours"]["state"] == "ok":
            pt = row["pytorch_sdpa"]["result"]["images_per_second"]
            o = row["ours"]["result"]
            row["ours_dense_over_pytorch_sdpa"] = o["dense"]["images_per_second"] / pt
            row["ours_fibottention_over_pytorch_sdpa"] = o["sparse"]["images_per_second"] / pt
        print(f"model {model}: " + json.dumps({k: v for k, v in row.items() if k.startswith("ours_")}),
              file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def parse_reps(text):
    return {int(n): int(r) for n, r in (p.split(":") for p in text.split(","))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", default="197,577,1025,3137", help="operator N list")
    ap.add_argument("--reps", type=parse_reps, default=parse_reps("197:7,577:5,1025:5,3137:3"),
                    help="timed repeats per N (N:reps,...)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--eager-flex-reps", type=int, default=2, help="repeats of eager flex when it is slow")
    ap.add_argument("--slow-ms", type=float, default=500, help="a method whose warm-up run takes longer is slow")
    ap.add_argument("--slow-reps", type=int, default=3, help="repeats of a slow method (unpaired)")
    ap.add_argument("--max-call-s", type=float, default=10, help="a method slower than this is timed once")
    ap.add_argument("--flex-block", type=int, default=128, help="BLOCK_SIZE of create_block_mask")
    ap.add_argument("--sleef-include", default=None, help="folder with sleef.h for inductor's CPU kernels")
    ap.add_argument("--no-flex-fix", action="store_true", help="leave inductor as it is (records the failure)")
    ap.add_argument("--inductor-cache", default=os.path.join(REPO, "build-bench-d13", "inductor-cache"))
    ap.add_argument("--parts", default="operator,models", help="operator (a and b), models (c)")
    ap.add_argument("--models", default="", help="only these models (comma-separated)")
    ap.add_argument("--model-batch", type=int, default=128)
    ap.add_argument("--model-reps", type=int, default=3, help="timed steps (vit_tiny; +2 for the nano models)")
    ap.add_argument("--installed", action="store_true",
                    help="the pip-installed sparsevit (e.g. in a venv of PyPI's torch), not the checkout's python/")
    ap.add_argument("--sparsevit-build", default=os.environ.get("SPARSEVIT_BUILD", os.path.join(REPO, "build")))
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    started = time.perf_counter()
    record = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv), "date_utc": now_utc(),
              "git_commit": git_head(),
              "load_before": load_state()}
    flex_setup = setup_inductor_cpu(args)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import flex_attention as flex
    if flex_setup.get("inductor_link_fix"):
        exec(INDUCTOR_LINK_FIX, {})
    torch.set_num_threads(args.threads)
    if not args.installed:
        sys.path.insert(0, os.path.join(REPO, "python"))  # the checkout's package, over SPARSEVIT_BUILD's library
    import sparsevit

    record["machine"] = machine_info(torch)
    record["sparsevit_library"] = sparsevit.load_library()
    record["settings"] = {"threads": args.threads, "warmup": args.warmup, "reps_per_N": args.reps,
                          "eager_flex_reps": args.eager_flex_reps, "batch_per_N": BATCH, "heads": HEADS,
                          "head_dim": HEAD_DIM, "slow_ms": args.slow_ms, "slow_reps": args.slow_reps, "max_call_s": args.max_call_s,
                          "timing": "median of timed runs after a timed warm-up run; each timed run after an untimed "
                          "run of the same method, order rotated per repeat; methods slower than slow_ms unpaired, "
                          "slow_reps times (eager flex: eager_flex_reps)"}
    record["flex_setup"] = flex_setup
    parts = args.parts.split(",")
    if "operator" in parts:
        record["copy_bandwidth_start"] = copy_bandwidth(torch)
        record["sgemm"] = sgemm_rate(torch)
        flex_state = {}
        record["operator"] = []
        for N in (int(n) for n in args.tokens.split(",")):
            record["operator"].append(operator_at(torch, F, sparsevit, flex, N, BATCH.get(N, 1), args, flex_state))
        record["copy_bandwidth_end"] = copy_bandwidth(torch)
        bw = max(record["copy_bandwidth_start"]["gbytes_per_s"], record["copy_bandwidth_end"]["gbytes_per_s"])
        record["roofline"] = {"copy_gbytes_per_s_used": bw, "sgemm_gflops_per_s_used": record["sgemm"]["gflops_per_s"],
                              "floor": "dense tensors once (bytes_lower_bound); see roofline() for the counts",
                              "per_N": {str(e["N"]): roofline(e, bw, record["sgemm"]["gflops_per_s"])
                                        for e in record["operator"]}}
    if "models" in parts:
        record["models"] = models_part(args, dict(os.environ))
    record["load_after"] = load_state()
    record["wall_s"] = time.perf_counter() - started
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out} ({record['wall_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
