"""perf_record.py: what perf/harness and perf/accept/accept both need to read a run and to
record where it ran: the commit of the tree, and the training lines of a metrics file
(--metrics-file JSON lines). Standard library only."""
import json
import os
import subprocess


def git_commit(root, short=False):
    """The commit of the tree at root, with '-dirty' when tracked files changed; MTC_COMMIT
    overrides it (a copy of the tree carried to another machine, whose .git, if any, is not the
    one the build came from); 'unknown' outside a git checkout."""
    if os.environ.get("MTC_COMMIT"):
        return os.environ["MTC_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse"] + (["--short"] if short else []) + ["HEAD"],
                              capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def read_train_records(path):
    """The "split": "train" lines of a metrics file, those of its last run only (a requeued or
    resumed job appends a second run whose iterations start again). Raises ValueError naming
    path:line for a line that is not JSON."""
    runs = [[]]
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not a JSON line: {e}") from None
            if record.get("split") != "train":
                continue
            if runs[-1] and record["iteration"] <= runs[-1][-1]["iteration"]:
                runs.append([])
            runs[-1].append(record)
    return runs[-1]


def read_startup_record(path):
    """The last {"split": "startup"} line of a metrics file (the last run's start-up: seconds from
    the earliest process start to each stage), or None where there is none."""
    found = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if '"startup"' not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue   # read_train_records names a bad line
            if record.get("split") == "startup":
                found = {k: v for k, v in record.items() if k != "split"}
    return found
