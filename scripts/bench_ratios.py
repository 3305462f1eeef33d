#!/usr/bin/env python3
"""Ratio tables from depthlab_bench's JSON output (--benchmark_out=FILE).

    scripts/bench_ratios.py [build/bench.json]

Benchmarks are named <what>/<impl>/<shape>[/real_time...]. Runs are grouped by <what> and
<shape>; a <what> of the form <base>_<variant> whose <base> also exists (matmul_primitive
next to matmul) joins the <base> group as impl <impl>:<variant>. Throughput is the GFLOP/s or
GB/s counter (else 1/real_time); with --benchmark_repetitions the median is used.

Each group prints every impl's throughput, then ratios row / column: depthlab's impls
(depthlab, depthlab_bf16, and the ISA paths scalar/avx2/avx512 of the memory-bound kernels)
against every other impl (libtorch, libtorch_bf16, onednn, onednn_bf16), each ISA path against scalar and
each depthlab variant against depthlab's f32. A ratio above 1 means the row is faster.

act_encoder_train/interleaved/... runs three steps in turn (compact, masked, fixed depth)
and reports their times and ratios as counters: those print as their own table, since
their real time is a sum of the three.
"""
import json
import sys
from collections import OrderedDict

ISAS = ("scalar", "avx2", "avx512")
INTERLEAVED_COUNTERS = ("mean_iterations", "compact_ms", "masked_ms", "fixed_ms", "masked_over_compact", "compact_over_fixed")
RATE_COUNTERS = ("GFLOP/s", "GB/s")


def is_ours(impl):
    name = impl.split(":")[0]
    return name.startswith("depthlab") or name in ISAS


def throughput(entry):
    for key in RATE_COUNTERS:
        if key in entry:
            return key, float(entry[key])
    t = float(entry.get("real_time", 0.0))
    return "1/time", (1.0 / t if t > 0 else 0.0)


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load(data):
    runs = OrderedDict()  # run name -> list of entries (iterations) / dict of aggregates
    skipped = OrderedDict()  # run name -> error message (e.g. an ISA this CPU lacks)
    for e in data.get("benchmarks", []):
        if e.get("error_occurred"):
            skipped[e.get("run_name") or e.get("name", "")] = e.get("error_message", "")
            continue
        name = e.get("run_name") or e.get("name", "")
        slot = runs.setdefault(name, {"iterations": [], "aggregates": {}})
        if e.get("run_type") == "aggregate":
            slot["aggregates"][e.get("aggregate_name", "")] = e
        else:
            slot["iterations"].append(e)
    results = OrderedDict()  # name -> (unit, value)
    for name, slot in runs.items():
        agg = slot["aggregates"]
        if "median" in agg:
            results[name] = throughput(agg["median"])
        elif "mean" in agg:
            results[name] = throughput(agg["mean"])
        elif slot["iterations"]:
            values = sorted(throughput(e)[1] for e in slot["iterations"])
            results[name] = (throughput(slot["iterations"][0])[0], values[len(values) // 2])
    return data.get("context", {}), results, skipped


def is_interleaved(name):
    parts = name.split("/")
    return len(parts) >= 3 and parts[1] == "interleaved"


def interleaved_counters(data):
    """run name -> its counters (the median aggregate, else the first run)."""
    out = OrderedDict()
    for e in data.get("benchmarks", []):
        name = e.get("run_name") or e.get("name", "")
        if not is_interleaved(name) or e.get("error_occurred"):
            continue
        if e.get("run_type") == "aggregate" and e.get("aggregate_name") != "median":
            continue
        if name not in out or e.get("run_type") == "aggregate":
            out[name] = {k: float(e[k]) for k in INTERLEAVED_COUNTERS if k in e}
    return out


def print_interleaved(counters):
    print("interleaved steps (times in ms; goals: masked / compact >= 1.5 at 60%, compact / fixed <= mean/N_max + 0.10)")
    print(f"  {'run':<58} " + " ".join(f"{k:>19}" for k in INTERLEAVED_COUNTERS))
    for name, c in counters.items():
        print(f"  {name.split('/')[2]:<58} " + " ".join(f"{c.get(k, float('nan')):19.3f}" for k in INTERLEAVED_COUNTERS))
    print()


def group(results):
    parsed = []
    for name, (unit, value) in results.items():
        parts = name.split("/")
        if len(parts) < 3 or is_interleaved(name):
            continue
        parsed.append((parts[0], parts[1], parts[2], unit, value))
    whats = {p[0] for p in parsed}
    groups = OrderedDict()  # (what, shape) -> {"unit": u, "impls": OrderedDict(impl -> value)}
    for what, impl, shape, unit, value in parsed:
        base, _, variant = what.rpartition("_")
        if base and base in whats:
            what, impl = base, f"{impl}:{variant}"
        g = groups.setdefault((what, shape), {"unit": unit, "impls": OrderedDict()})
        g["impls"][impl] = value
    return groups


def fmt(x):
    return f"{x:10.3f}" if x is not None else f"{'-':>10}"


def print_group(what, shape, g):
    impls = g["impls"]
    unit = g["unit"]
    width = max([len(i) for i in impls] + [12])
    print(f"{what} {shape}  [{unit}]")
    for impl, value in impls.items():
        print(f"  {impl:<{width}} {value:12.3f}")
    rows = [i for i in impls if is_ours(i)]
    cols = [i for i in impls if not is_ours(i)]
    if "scalar" in impls and any(i in impls for i in ISAS[1:]):
        cols.append("scalar")
    if "depthlab" in impls and any(r != "depthlab" and r.startswith("depthlab") for r in rows):
        cols.append("depthlab")  # a variant (depthlab_bf16) against depthlab's f32
    rows = [r for r in rows if not (cols == [r])]
    if not rows or not cols:
        print()
        return
    print(f"  ratio (row / column):")
    print(f"  {'':<{width}} " + " ".join(f"{c:>10}" for c in cols))
    for r in rows:
        cells = []
        for c in cols:
            cells.append(fmt(None) if r == c or impls[c] <= 0 else fmt(impls[r] / impls[c]))
        print(f"  {r:<{width}} " + " ".join(cells))
    print()


def main(argv):
    path = argv[1] if len(argv) > 1 else "build/bench.json"
    try:
        data = read(path)
        context, results, skipped = load(data)
    except (OSError, json.JSONDecodeError) as err:
        print(f"bench_ratios: cannot read {path}: {err}", file=sys.stderr)
        return 1
    for key in ("depthlab_isa", "omp_max_threads", "openmp_runtime", "blas_loaded"):
        if key in context:
            print(f"{key}: {context[key]}")
    if context.get("load_avg"):
        # Anything else running (builds, other benchmarks) makes the numbers meaningless.
        print("load_avg at start:", ", ".join(f"{x:.2f}" for x in context["load_avg"]))
    for name, msg in skipped.items():
        print(f"skipped: {name}: {msg}")
    print()
    groups = group(results)
    if not groups and not any(is_interleaved(n) for n in results):
        print("bench_ratios: no successful <what>/<impl>/<shape> runs in", path)
        return 1
    for (what, shape), g in groups.items():
        print_group(what, shape, g)
    counters = interleaved_counters(data)
    if counters:
        print_interleaved(counters)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
