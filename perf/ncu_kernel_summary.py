"""ncu_kernel_summary.py: GPU time per kernel from an Nsight Compute CSV of a training run.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv pretrain_gpt ... \
        --train-iters N > run.csv
    python3 perf/ncu_kernel_summary.py run.csv [--iterations N] [--top 30]

Takes the launches of the last iteration (the last 1/N of the launches; every iteration launches
the same kernels) and prints, per kernel name, its total time, share and launch count as a
markdown table, with the iteration's total GPU time. Template arguments and parameter lists are
stripped from the names."""
import argparse
import collections
import csv
import re


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--iterations", type=int, default=2, help="iterations in the profiled run")
    parser.add_argument("--top", type=int, default=30)
    a = parser.parse_args()
    with open(a.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) >= 15 and r[0] != "ID" and r[12] == "gpu__time_duration.sum"]
    if not rows:
        raise SystemExit(f"{a.csv}: no gpu__time_duration.sum rows (ncu --csv --metrics gpu__time_duration.sum)")
    scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "nsecond": 1e-6}
    last = rows[len(rows) - len(rows) // a.iterations:]
    total, count = collections.Counter(), collections.Counter()
    for r in last:
        name = re.sub(r"\(.*", "", r[4]).replace("void ", "")
        name = re.sub(r"<.*", "", name)
        total[name] += float(r[14].replace(",", "")) * scale.get(r[13], 1e-6)
        count[name] += 1
    whole = sum(total.values())
    print(f"GPU time of the last iteration: {whole:.2f} ms in {len(last)} launches")
    print("| kernel | ms | share | launches |\n| --- | --- | --- | --- |")
    for name, ms in total.most_common(a.top):
        print(f"| {name} | {ms:.2f} | {100 * ms / whole:.1f}% | {count[name]} |")


if __name__ == "__main__":
    main()
