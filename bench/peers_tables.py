#!/usr/bin/env python3
"""The markdown tables of docs/performance.md's "Against PyTorch 2.6's SDPA and FlexAttention
(CPU)" from one JSON of bench/peers_bench.py; every number printed comes from that file.

    python3 bench/peers_tables.py docs/results/peers/peers.json
"""
import json
import sys

PEERS = [("sdpa_dense", "SDPA dense"), ("sdpa_bool_mask", "SDPA + bool mask"),
         ("flex_compiled", "FlexAttention compiled"), ("flex_eager", "FlexAttention eager (reference path)")]
PASSES = {"fwd": "fwd", "fwd_bwd": "fwd+bwd"}


def ms(x):
    return f"{x:.3g}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def cell(r):
    """A peer's time and its ratio to ours, or its state."""
    if r.get("state") != "ok":
        err = r.get("error", r.get("state", "?")).replace("|", "/")
        return "fails: " + err.rsplit(" / ", 1)[-1][:80]  # the cause, when inductor wraps one
    return f"{ms(r['median_ms'])} ({r['ratio_to_ours']:.1f}×)"


def header(d):
    m = d["machine"]
    blas = ", ".join(p.rsplit("/", 1)[-1] for p in m["blas_libraries_loaded"]) or "none found"
    fs = d.get("flex_setup", {})
    lines = [
        f"- machine: {m['cpu']}, {m['cores']} cores visible, {m['mem_gib']} GiB, L2 "
        f"{m.get('caches_per_cpu0', {}).get('L2 Unified', '?')} per core, L3 {m.get('caches_per_cpu0', {}).get('L3 Unified', '?')}; "
        f"{m['os']}; Python {m['python']}, "
        f"torch {m['torch']} ({m['torch_cpu_capability']}), {m['torch_threads']} threads "
        f"(OMP_NUM_THREADS={m['omp_num_threads']}); BLAS loaded: {blas}; {m['gxx']}",
        f"- date {d['date_utc']}, commit {d['git_commit']}, {d['wall_s'] / 60:.1f} min; command: `{d['command']}`",
        f"- load average (1, 5, 15 min) before {d['load_before']['loadavg_1_5_15']}, after "
        f"{d['load_after']['loadavg_1_5_15']}",
        f"- inductor's vector ISA: {fs.get('vec_isa_without_change', '?')} as installed, "
        f"{fs.get('vec_isa_with_change', 'not changed')} " +
        "with " + "; ".join(([fs["inductor_link_fix"]] if fs.get("inductor_link_fix") else []) +
                            ([f"sleef.h from `{fs.get('sleef_include')}`"] if fs.get("sleef_include") else []) +
                            ([f"`{fs['preloaded']}` preloaded"] if fs.get("preloaded") else [])),
    ]
    return "\n".join(lines)


def operator_table(d):
    rows = ["| N | B | pass | ours ms | " + " | ".join(f"{name} ms (× ours)" for _, name in PEERS) + " |",
            "|---|---|---|---|" + "---|" * len(PEERS)]
    for e in d["operator"]:
        for p, label in PASSES.items():
            r = e["passes"][p]
            rows.append(f"| {e['N']} | {e['B']} | {label} | **{ms(r['ours']['median_ms'])}** | "
                        + " | ".join(cell(r[k]) for k, _ in PEERS) + " |")
    return "\n".join(rows)


def correctness_table(d):
    rows = ["| N | density | kept pairs per item | empty rows | " + " | ".join(
        f"{name}: out (grads)" for k, name in PEERS) + " | Flex blocks computed |",
            "|---|---|---|---|" + "---|" * len(PEERS) + "---|"]
    for e in d["operator"]:
        cells = []
        for k, _ in PEERS:
            f, b = e["passes"]["fwd"][k], e["passes"]["fwd_bwd"][k]
            if "max_abs_diff_out_vs_ours" not in f:
                cells.append("—")
                continue
            g = f" ({b['max_abs_diff_grads_vs_ours']:.1e})" if "max_abs_diff_grads_vs_ours" in b else ""
            cells.append(f"{f['max_abs_diff_out_vs_ours']:.1e}{g}")
        fb = e["flex_block_mask"]
        p = e["pattern"]
        blocks = (f"{fb['fraction_of_blocks_computed']:.2f} (block {fb['block_size']})"
                  if "fraction_of_blocks_computed" in fb else "not recorded")  # older JSONs
        rows.append(f"| {e['N']} | {p['density']:.4f} | {p['kept_pairs_per_batch_item']:,} | {p['empty_rows']} | "
                    + " | ".join(cells) + f" | {blocks} |")
    return "\n".join(rows)


def roofline_table(d):
    r = d["roofline"]
    rows = [f"Copy bandwidth {r['copy_gbytes_per_s_used']:.1f} GB/s (best of the run's two measurements: "
            f"{d['copy_bandwidth_start']['gbytes_per_s']:.1f} at the start, {d['copy_bandwidth_end']['gbytes_per_s']:.1f} "
            f"at the end; `dst.copy_(src)`, {d['copy_bandwidth_start']['buffer_mib']} MiB, bytes = 2 × size); sgemm "
            f"{r['sgemm_gflops_per_s_used']:.0f} GFLOP/s ({'×'.join(map(str, d['sgemm']['shape']))}, best of 5).",
            "",
            "| N | pass | ours ms | bytes, floor (MB) | bytes, gather no reuse (MB) | memory floor ms | FLOP bound ms "
            "| bound that holds | fraction of memory floor | fraction of FLOP bound | achieved GB/s (floor bytes) "
            "| achieved GFLOP/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, per in r["per_N"].items():
        for p, label in PASSES.items():
            x = per[p]
            rows.append(f"| {n} | {label} | {ms(x['measured_ms'])} | {x['bytes_lower_bound'] / 1e6:.1f} | "
                        f"{x['bytes_gather_no_reuse'] / 1e6:.1f} | {ms(x['mem_floor_ms'])} | {ms(x['flop_bound_ms'])} | "
                        f"{x['binding_bound']} | **{x['fraction_of_mem_floor']:.2f}** | {x['fraction_of_flop_bound']:.2f} | "
                        f"{x['achieved_gbytes_per_s_lower']:.1f} | {x['achieved_gflops_per_s']:.1f} |")
    return "\n".join(rows)


def models_table(d):
    rows = ["| model | N | batch | PyTorch 2.6 SDPA images/s | ours dense images/s | ours Fibottention images/s "
            "| ours dense / SDPA | ours Fibottention / SDPA | ours Fibottention / ours dense |",
            "|---|---|---|---|---|---|---|---|---|"]
    for m in d.get("models", []):
        pt, ours = m["pytorch_sdpa"], m["ours"]
        pt_s = f"{pt['result']['images_per_second']:.1f}" if pt["state"] == "ok" else f"{pt['state']}: {pt.get('error', '')}"
        if ours["state"] == "ok":
            o = ours["result"]
            dense, sparse = o["dense"]["images_per_second"], o["sparse"]["images_per_second"]
            ours_s = f"{dense:.1f} | {sparse:.1f}"
            ratios = (f"**{m['ours_dense_over_pytorch_sdpa']:.2f}×** | **{m['ours_fibottention_over_pytorch_sdpa']:.2f}×**"
                      if "ours_dense_over_pytorch_sdpa" in m else "— | —") + f" | {sparse / dense:.2f}×"
        else:
            ours_s = f"{ours['state']}: {ours.get('error', '')[:80]} | —"
            ratios = "— | — | —"
        rows.append(f"| {m['model']} | {m['tokens']} | {m['batch']} | {pt_s} | {ours_s} | {ratios} |")
    return "\n".join(rows)


def main():
    d = json.load(open(sys.argv[1]))
    print(header(d))
    if "operator" in d:
        print("\n#### The operator: median ms, and each peer's time as a multiple of ours\n")
        print(operator_table(d))
        print("\n#### Each peer against ours: max |difference| of the output (and of dq, dk, dv)\n")
        print(correctness_table(d))
        print("\n#### Our operator against the memory roofline and the FLOP bound\n")
        print(roofline_table(d))
    if d.get("models"):
        print("\n#### Whole timm-layout ViT training step (forward, loss, backward, AdamW)\n")
        print(models_table(d))


if __name__ == "__main__":
    main()
