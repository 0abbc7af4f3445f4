#!/usr/bin/env python3
"""phase_timers.py: where a training step's wall time goes, phase by phase, with Megatron's
--timing-log-level timers. Runs pretrain_gpt three times with the same flags: at level 0 (the
step time with no timer synchronizing anything), at level 1 (forward-backward, gradient
synchronization, optimizer phases) and at level 2 (also forward-compute, backward-compute,
batch-generator, the pipeline's sends and receives), and prints one Markdown table of the last
logged interval's timers (maximum over ranks, ms per iteration) with what no timer covers:
the step minus forward-backward and optimizer (level 1), and forward-backward minus the compute,
communication and gradient-synchronization timers inside it (level 2). Each timer
synchronizes the device, so level 1 and 2 steps are a little slower than level 0; the level-0
column is the reference. Writes the three metrics files and logs to OUT_DIR.

usage: perf/phase_timers.py OUT_DIR [--ranks N] [--iters N] -- pretrain_gpt flags...
   PRETRAIN_GPT (default pretrain_gpt) and MPIEXEC (default mpiexec) from the environment.
example (issue 19's 1.3B shape on one GPU):
   perf/phase_timers.py /tmp/t13b -- --args-file configs/gpt-1.3b.args --device cuda \\
       --vocab-size 50304 --hidden-dropout 0 --attention-dropout 0 --lr 1e-4 --lr-warmup-iters 0 \\
       --micro-batch-size 8 --global-batch-size 8 --seq-length 2048
"""
import json
import os
import subprocess
import sys

INSIDE_FORWARD_BACKWARD = ["forward-compute", "backward-compute", "forward-recv", "forward-send", "backward-recv",
                           "backward-send", "forward-send-forward-recv", "forward-send-backward-recv",
                           "backward-send-forward-recv", "backward-send-backward-recv",
                           "forward-backward-send-forward-backward-recv", "all-grads-sync",
                           "embedding-grads-all-reduce", "layernorm-grads-all-reduce"]


def usage():
    sys.stderr.write("usage: perf/phase_timers.py OUT_DIR [--ranks N] [--iters N] -- pretrain_gpt flags...\n")
    sys.exit(2)


def run(out_dir, level, ranks, iters, flags):
    metrics = os.path.join(out_dir, "level%d.jsonl" % level)
    if os.path.exists(metrics):
        os.remove(metrics)
    log_interval = max(1, iters // 3)
    command = os.environ.get("MPIEXEC", "mpiexec").split() + ["-n", str(ranks), os.environ.get("PRETRAIN_GPT", "pretrain_gpt")]
    command += flags + ["--train-iters", str(iters), "--log-interval", str(log_interval), "--eval-iters", "0",
                        "--timing-log-level", str(level), "--timing-log-option", "all", "--metrics-file", metrics]
    with open(os.path.join(out_dir, "level%d.log" % level), "w") as log:
        status = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)
    if status != 0:
        sys.stderr.write("phase_timers.py: level %d run failed (exit %d): %s; see %s/level%d.log\n"
                         % (level, status, " ".join(command), out_dir, level))
        sys.exit(1)
    train = [json.loads(line) for line in open(metrics) if '"split": "train"' in line]
    if not train:
        sys.stderr.write("phase_timers.py: no logged iteration in %s\n" % metrics)
        sys.exit(1)
    last = train[-1]
    return last["elapsed_ms_per_iteration"], last.get("timers_ms", {})


def main():
    args = sys.argv[1:]
    if "--" not in args or args.index("--") < 1:
        usage()
    ours, flags = args[:args.index("--")], args[args.index("--") + 1:]
    out_dir, ranks, iters = ours[0], 1, 30
    i = 1
    while i < len(ours):
        if ours[i] == "--ranks" and i + 1 < len(ours):
            ranks = int(ours[i + 1])
        elif ours[i] == "--iters" and i + 1 < len(ours):
            iters = int(ours[i + 1])
        else:
            usage()
        i += 2
    os.makedirs(out_dir, exist_ok=True)
    step = {}
    timers = {}
    for level in (0, 1, 2):
        step[level], timers[level] = run(out_dir, level, ranks, iters, flags)
    names = list(timers[2])
    names += [n for n in timers[1] if n not in names]
    print("| timer (max over ranks, ms per iteration) | level 1 | level 2 |")
    print("| --- | ---: | ---: |")
    print("| step (elapsed time per iteration; level 0: %.2f) | %.2f | %.2f |" % (step[0], step[1], step[2]))
    for name in names:
        cell = lambda level: "%.2f" % timers[level][name]["max"] if name in timers[level] else ""
        print("| %s | %s | %s |" % (name, cell(1), cell(2)))
    # what no timer covers, per rank (ranks wait while others compute: maxima do not add up),
    # the largest over ranks
    outside = []
    for level in (1, 2):
        t = timers[level]
        if "forward-backward" not in t or "optimizer" not in t:
            outside.append("")
            continue
        ranks = range(len(t["forward-backward"]["ranks"]))
        rank_time = lambda name, r: t[name]["ranks"][r] if name in t else 0.0
        outside.append("%.2f" % max(step[level] - rank_time("forward-backward", r) - rank_time("optimizer", r) for r in ranks))
    print("| untimed: step - forward-backward - optimizer (largest over ranks) | %s | %s |" % tuple(outside))
    t = timers[2]
    if "forward-backward" in t:
        ranks = range(len(t["forward-backward"]["ranks"]))
        rank_time = lambda name, r: t[name]["ranks"][r] if name in t else 0.0
        inside = max(rank_time("forward-backward", r) - sum(rank_time(n, r) for n in INSIDE_FORWARD_BACKWARD) for r in ranks)
        print("| untimed inside forward-backward (largest over ranks) |  | %.2f |" % inside)
    print("\nlevel-0 step %.2f ms; timer overhead: level 1 %+.2f ms, level 2 %+.2f ms per step" % (
        step[0], step[1] - step[0], step[2] - step[0]))


if __name__ == "__main__":
    main()
