#!/usr/bin/env python3
"""gpu_figures.py: derived figures from the GPU counts (PAPI's cuda component) of a run's metrics
file (pretrain_gpt --metrics-file, with --papi-events default on --device cuda, or cuda::: events).

Per phase, per GPU and iteration: DRAM bytes read and written, bf16 tensor-path operations, the
tensor pipes' share of the SMs' active cycles. Over the iterations: the achieved DRAM bandwidth
per GPU against the GPU's peak, and the tensor FLOP/s the counters give next to the model's
(tflops_per_gpu, Megatron's count behind MFU), with their ratio.

Counts in a metrics line are over its log interval, summed over the "papi_ranks" ranks; the
interval is the iterations since the previous line, each "elapsed_ms_per_iteration" long, of which
"papi_iterations" were counted (--papi-sample-interval; all of them when the field is absent). The
first line (warm-up) is skipped unless --skip 0.

usage: perf/papi/gpu_figures.py METRICS.jsonl [--skip N] [--gpu H200|H100|...] [--dram-peak-tbps X]
"""
import argparse
import json
import sys

# peak DRAM bandwidth per GPU, TB/s (the datasheets: H100 SXM5 HBM3, H200 HBM3e, H100 PCIe HBM2e)
DRAM_PEAK_TBPS = {"H200": 4.8, "H100": 3.35, "H100 PCIe": 2.0, "H100 NVL": 3.9, "H200 NVL": 4.8}

# which counters each figure reads: metric base names inside "cuda:::NAME:stat=sum..."; a figure
# with several names is their sum (the default set on Hopper names the first of each)
METRICS = {
    "dram_read": ["dram__bytes_read"],
    "dram_write": ["dram__bytes_write"],
    "sm_cycles": ["sm__cycles_active"],
    # all tensor pipes (Hopper: wgmma and mma.sync); else the mma.sync (HMMA) pipe alone
    "tensor_cycles": ["sm__pipe_tensor_cycles_active"],
    "hmma_cycles": ["sm__pipe_tensor_op_hmma_cycles_active"],
    # bf16 operations: wgmma's (hgmma) and mma.sync's (hmma) parts, or the two together
    "tensor_ops_parts": ["sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32", "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32"],
    "tensor_ops_all": ["sm__ops_path_tensor_src_bf16_dst_fp32"],
}
ALL_METRICS = [name for names in METRICS.values() for name in names]


def metric_of(event):
    """the metric base name of a cuda::: event name, or None for a host event"""
    if not event.startswith("cuda:::"):
        return None
    return event[len("cuda:::"):].split(":")[0]


def fail(message):
    sys.exit("gpu_figures.py: error: " + message)


def dram_peak_of(gpu_name):
    """the peak DRAM bandwidth (TB/s) of a GPU named like nvidia-smi's "NVIDIA H200", or None"""
    for name in sorted(DRAM_PEAK_TBPS, key=len, reverse=True):   # "H100 NVL" before "H100"
        if name in (gpu_name or ""):
            return DRAM_PEAK_TBPS[name]
    return None


def figures(train, skip=1):
    """The derived figures of a run's logged training lines (metrics-file records with split
    "train", in order), the first `skip` left out (warm-up). Returns None when no line after them
    holds GPU counts; else a dict: "phases" (in the records' order), "per_phase" {phase: {figure:
    value per GPU and iteration}} with figures dram_read, dram_write (bytes), tensor_ops (bf16
    tensor-path operations), pipe_share (% of SM active cycles; pipes overlap, so up to several
    hundred), "iterations" counted, "lines", "seconds_per_iteration", "dram_tbps" (read + write
    over the step), "counted_tflops" and "model_tflops" (tflops_per_gpu) per GPU, "ratio"
    (counted / model); a figure whose counters are missing is None."""
    previous = 0
    covered = []
    for record in train:   # the iterations each line covers, before skipping
        covered.append(record["iteration"] - previous)
        previous = record["iteration"]
    used = [(r, n) for r, n in list(zip(train, covered))[skip:] if isinstance(r.get("papi"), dict)]
    if not used:
        return None
    # a phase's counts are {event: count}; anything else (a flat object) has no phases to read
    phases = [p for p, counts in used[0][0]["papi"].items() if isinstance(counts, dict)]
    totals = {p: {} for p in phases}   # phase -> figure -> count summed over lines, per GPU
    iterations = seconds = model_flops = 0.0
    for r, covers in used:
        ranks = r.get("papi_ranks", 1)
        n = r.get("papi_iterations", covers)  # --papi-sample-interval: the counted ones
        iterations += n
        seconds += n * r["elapsed_ms_per_iteration"] / 1000.0
        model_flops += n * r["elapsed_ms_per_iteration"] / 1000.0 * (r.get("tflops_per_gpu") or 0.0) * 1e12
        for phase, counts in r["papi"].items():
            if not isinstance(counts, dict):
                continue
            for event, value in counts.items():
                if not isinstance(value, (int, float)):
                    continue
                metric = metric_of(event)
                for figure, names in METRICS.items():
                    if metric in names:
                        totals.setdefault(phase, {})
                        totals[phase][figure] = totals[phase].get(figure, 0.0) + value / ranks
    if not phases or not any(totals.values()) or iterations <= 0:
        return None
    # the bf16 tensor operations of a phase: the combined counter where there is one, else the parts
    for counts in totals.values():
        combined = counts.pop("tensor_ops_all", None)
        parts = counts.pop("tensor_ops_parts", None)
        if combined is not None or parts is not None:
            counts["tensor_ops"] = combined if combined is not None else parts

    def per_iteration(phase, figure):
        value = totals[phase].get(figure)
        return None if value is None else value / iterations

    per_phase = {}
    for phase in phases:
        sm = per_iteration(phase, "sm_cycles")
        pipes = per_iteration(phase, "tensor_cycles")
        if pipes is None:
            pipes = per_iteration(phase, "hmma_cycles")
        per_phase[phase] = {"dram_read": per_iteration(phase, "dram_read"), "dram_write": per_iteration(phase, "dram_write"),
                            "tensor_ops": per_iteration(phase, "tensor_ops"),
                            "pipe_share": 100.0 * pipes / sm if sm and pipes is not None else None}

    def summed(figure):
        values = [totals[p][figure] for p in phases if figure in totals[p]]
        return sum(values) if values else None

    read, write, ops = summed("dram_read"), summed("dram_write"), summed("tensor_ops")
    result = {"phases": phases, "per_phase": per_phase, "iterations": iterations, "lines": len(used),
              "seconds_per_iteration": seconds / iterations, "dram_tbps": None, "counted_tflops": None,
              "model_tflops": model_flops / seconds / 1e12 if seconds > 0 else None, "ratio": None}
    if read is not None or write is not None:
        result["dram_tbps"] = ((read or 0.0) + (write or 0.0)) / seconds / 1e12
    if ops is not None:
        result["counted_tflops"] = ops / seconds / 1e12
        if result["model_tflops"]:
            result["ratio"] = result["counted_tflops"] / result["model_tflops"]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics")
    parser.add_argument("--skip", type=int, default=1, help="logged lines to skip first (warm-up)")
    parser.add_argument("--gpu", help="the GPU's name, for its peak DRAM bandwidth: " + ", ".join(DRAM_PEAK_TBPS))
    parser.add_argument("--dram-peak-tbps", type=float, help="the peak DRAM bandwidth, TB/s (instead of --gpu)")
    a = parser.parse_args()
    peak = a.dram_peak_tbps
    if peak is None and a.gpu:
        if a.gpu not in DRAM_PEAK_TBPS:
            fail("--gpu %s: no peak known (known: %s); give --dram-peak-tbps" % (a.gpu, ", ".join(DRAM_PEAK_TBPS)))
        peak = DRAM_PEAK_TBPS[a.gpu]

    train = []
    with open(a.metrics) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                fail("%s:%d: not JSON: %s" % (a.metrics, number, e))
            if record.get("split") == "train":
                train.append(record)
    if not any(isinstance(r.get("papi"), dict) for r in train[a.skip:]):
        fail("%s: no logged training iteration with PAPI counts after skipping %d" % (a.metrics, a.skip))
    f = figures(train, a.skip)
    if f is None:
        fail("%s: the PAPI counts hold none of the GPU metrics %s" % (a.metrics, ", ".join(ALL_METRICS)))

    def cell(value, scale, digits=2):
        return "-" if value is None else "%.*f" % (digits, value / scale)

    print("GPU counts per GPU and iteration (%d iterations over %d logged lines, %.3f s per iteration)"
          % (f["iterations"], f["lines"], f["seconds_per_iteration"]))
    print("  %-12s %14s %14s %16s %14s" % ("phase", "DRAM read GB", "DRAM write GB", "tensor bf16 GOP", "tensor pipe %"))
    for phase in f["phases"]:
        x = f["per_phase"][phase]
        print("  %-12s %14s %14s %16s %14s" % (phase, cell(x["dram_read"], 1e9), cell(x["dram_write"], 1e9),
              cell(x["tensor_ops"], 1e9), cell(x["pipe_share"], 1.0, 1)))
    if f["dram_tbps"] is not None:
        against = " = %.1f%% of the %.2f TB/s peak" % (100.0 * f["dram_tbps"] / peak, peak) if peak else ""
        print("DRAM bandwidth achieved per GPU (read + write over the step): %.3f TB/s%s" % (f["dram_tbps"], against))
    if f["counted_tflops"] is not None:
        ratio = " (counted / model = %.3f)" % f["ratio"] if f["ratio"] is not None else ""
        print("tensor bf16 TFLOP/s per GPU from the counters: %.1f; the model's (tflops_per_gpu): %.1f%s"
              % (f["counted_tflops"], f["model_tflops"], ratio))


if __name__ == "__main__":
    main()
