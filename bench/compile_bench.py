#!/usr/bin/env python3
"""torch.compile of a Fibottention-patched timm ViT against the same model eager, and against
timm's dense model (F.scaled_dot_product_attention) eager and compiled: a forward (eval, no_grad)
and a training step (forward, loss, backward), side by side in one process (issue 54, item 4;
docs/performance.md, "torch.compile"). Run with the venv of PyPI's torch and the package installed:

    OMP_NUM_THREADS=2 ~/.cache/sparsevit/pypi/venv-*/bin/python bench/compile_bench.py \\
        --out docs/results/compile/compile_bench.json

Every compiled model runs through a counting wrapper around inductor: the record proves that each
timed call ran the compiled graph and that nothing recompiled inside the timed calls (an eager
fallback or a guard failing every call would be timed as the compiled model). Beside the times:
the attention FLOPs of both patterns (the physical bound of the attention part) and the whole
model's FLOPs, from sparsevit's report.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
from peers_bench import INDUCTOR_LINK_FIX, machine_info, time_rotated, torch_folder  # noqa: E402

FIBO = os.path.join(REPO, "configs", "attention", "vit_fibottention.yaml")
# N -> (image size for patch 16, batch): ViT-T's own 224 px (N 197), and 512 px (N 1025).
GEOMETRY = {197: (224, 8), 1025: (512, 2)}


class CountedCompile:
    """torch.compile(model, fullgraph=True) with inductor behind a wrapper that counts the graphs
    compiled and the calls of the compiled graphs."""

    def __init__(self, torch, model):
        from torch._inductor.compile_fx import compile_fx
        self.graphs_compiled = self.graph_calls = self.calls = 0

        def counted(gm, example_inputs):
            self.graphs_compiled += 1
            compiled = compile_fx(gm, example_inputs)

            def run(*args):
                self.graph_calls += 1
                return compiled(*args)
            return run
        self.fn = torch.compile(model, backend=counted, fullgraph=True)

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)

    def proof(self, graphs_expected):
        return {"graphs_compiled": self.graphs_compiled, "calls": self.calls,
                "compiled_graph_calls": self.graph_calls,
                "every_call_ran_the_compiled_graph": self.graph_calls >= self.calls,
                "no_recompile": self.graphs_compiled == graphs_expected}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=sorted(GEOMETRY), choices=sorted(GEOMETRY))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch
    if os.path.isfile(os.path.join(torch_folder(), "lib", "libtorch.so")):
        exec(INDUCTOR_LINK_FIX, {})  # see bench/peers_bench.py: Debian's libtorch.so beside PyPI's torch
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    import timm
    import sparsevit
    torch.set_num_threads(args.threads)
    started = time.time()
    record = {"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine_info(torch), "sparsevit": sparsevit.__version__, "results": []}

    for tokens in args.tokens:
        size, batch = GEOMETRY[tokens]
        torch.manual_seed(0)
        dense = timm.create_model("vit_tiny_patch16_224", img_size=size, num_classes=1000)
        fibo = timm.create_model("vit_tiny_patch16_224", img_size=size, num_classes=1000)
        fibo.load_state_dict(dense.state_dict())
        report = sparsevit.patch_model(fibo, FIBO)
        dense_stats = sparsevit.patterns.stats(os.path.join(REPO, "configs", "attention", "vit_dense.yaml"),
                                               tokens, 3, 12, 64, 1)
        x = torch.randn(batch, 3, size, size)
        target = torch.randint(0, 1000, (batch,))
        entry = {"tokens": tokens, "image_size": size, "batch": batch, "model": "vit_tiny_patch16_224",
                 "fibottention": {"pruning_ratio": report["pruning_ratio"], "density": report["density"],
                                  "attention_gflops_per_image": report["attention_gflops"]},
                 "dense_attention_gflops_per_image": dense_stats["attention_gflops"]}
        for mode in ("forward", "train_step"):
            torch._dynamo.reset()  # each mode compiles afresh (dynamo's cache is per code object)
            methods, compiled = {}, {}
            for name, model in (("fibottention", fibo), ("dense_sdpa", dense)):
                model.train(mode == "train_step")
                compiled[name] = CountedCompile(torch, model)
                for label, fn in ((f"{name} eager", model), (f"{name} compiled", compiled[name])):
                    if mode == "forward":
                        def run(fn=fn):
                            with torch.no_grad():
                                fn(x)
                    else:
                        def run(fn=fn, model=model):
                            model.zero_grad(set_to_none=True)
                            torch.nn.functional.cross_entropy(fn(x), target).backward()
                    methods[label] = run
            # Compiled equals eager (outputs, in the mode timed) before anything is timed; this
            # first call compiles. The timed calls must then compile nothing more.
            for name, model in (("fibottention", fibo), ("dense_sdpa", dense)):
                grad = torch.enable_grad() if mode == "train_step" else torch.no_grad()
                with grad:
                    diff = (compiled[name](x) - model(x)).abs().max().item()
                entry.setdefault(f"max_abs_diff_compiled_vs_eager_{mode}", {})[name] = diff
            graphs_before = {n: c.graphs_compiled for n, c in compiled.items()}
            t0 = time.time()
            times = time_rotated(methods, args.reps, args.warmup)
            result = {label: {"median_ms": statistics.median(ms), "ms": ms} for label, ms in times.items()}
            result["eager_over_compiled"] = {n: result[f"{n} eager"]["median_ms"] / result[f"{n} compiled"]["median_ms"]
                                             for n in ("fibottention", "dense_sdpa")}
            result["dense_compiled_over_fibottention_compiled"] = (
                result["dense_sdpa compiled"]["median_ms"] / result["fibottention compiled"]["median_ms"])
            result["proof"] = {n: c.proof(graphs_before[n]) for n, c in compiled.items()}
            result["wall_s"] = time.time() - t0
            entry[mode] = result
            print(json.dumps({"tokens": tokens, "mode": mode, **{k: v for k, v in result.items() if k != "proof"}},
                             default=str)[:600], file=sys.stderr)
        record["results"].append(entry)
    record["wall_s"] = time.time() - started
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {args.out} ({record['wall_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
