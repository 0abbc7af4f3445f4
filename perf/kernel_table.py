#!/usr/bin/env python3
"""kernel_table.py: turn Nsight Compute's CSV (gpu__time_duration.sum per kernel launch) into the
table perf/profile_kernels.sh prints: kernels grouped by a short name, with calls and
milliseconds per step, share of the profiled GPU time and mean microseconds per call; then the
same time grouped by kind (GEMM, attention, normalization, elementwise, optimizer, ...).
  kernel_table.py NCU.csv --steps N [--top K]"""
import argparse
import csv
import re
import sys
from collections import defaultdict

KINDS = [  # first match wins: (kind, regex on the kernel name)
    ("GEMM (cuBLAS)", r"gemm|sm90_xmma|cutlass|nvjet|cublas"),
    ("attention", r"attention|flash"),
    ("normalization", r"layernorm|rmsnorm|norm_backward"),
    ("cross entropy", r"cross_entropy|softmax"),
    ("optimizer", r"adamw|sum_squares|norm_|clip"),
    ("embedding", r"embedding"),
    ("conversions and copies", r"bf16|float_to|to_float|copy|memcpy|memset|fill"),
]


def short_name(name):
    """kernel name without template arguments and parameter list"""
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    return name.split()[-1] if name else "?"


def kind_of(name):
    lower = name.lower()
    for kind, pattern in KINDS:
        if re.search(pattern, lower):
            return kind
    return "elementwise and other"


def read(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu prints notes before the CSV
    rows = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}.get(unit, 1e-6)
        rows.append((row["Kernel Name"], value * scale))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    rows = read(a.csv)
    if not rows:
        sys.exit(f"kernel_table.py: {a.csv} has no gpu__time_duration.sum rows (was the profiler range opened?)")
    total = sum(ms for _, ms in rows)
    by_name, by_kind = defaultdict(lambda: [0, 0.0]), defaultdict(lambda: [0, 0.0])
    for name, ms in rows:
        for table, key in ((by_name, short_name(name)), (by_kind, kind_of(name))):
            table[key][0] += 1
            table[key][1] += ms
    print(f"GPU time per step: {total / a.steps:.2f} ms over {len(rows) // a.steps} kernel launches "
          f"({a.steps} step(s) profiled, kernels serialized by ncu)\n")
    print("| kernel | calls/step | ms/step | share | mean µs |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (calls, ms) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print(f"| `{name}` | {calls / a.steps:g} | {ms / a.steps:.2f} | {100 * ms / total:.1f}% | {1000 * ms / calls:.1f} |")
    print("\n| kind | calls/step | ms/step | share |")
    print("| --- | ---: | ---: | ---: |")
    for kind, (calls, ms) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"| {kind} | {calls / a.steps:g} | {ms / a.steps:.2f} | {100 * ms / total:.1f}% |")


if __name__ == "__main__":
    main()
