#!/usr/bin/env python3
"""check_layering.py: the include-direction rule of the tree (app/README.md, "Code map").

Every quoted include in app/, io/, kernels/ and perf/metrics/ is written from the root of the tree
("app/model/gpt_model.h"; config.h is the one exception) and may only point to its own layer
or to the layers below it, as LAYERS says. The link line (APP_LIBS in app/local.mk) must list
each library once, in the same top-down order. Prints one line per violation and exits 1 when
there is any; exits 0 silently otherwise.

usage: check_layering.py [ROOT]   (default: the tree this file is in)
"""
import os
import re
import sys

# layer: (path prefix, layers it may include besides itself), bottom up
LAYERS = [
    ("kernels", "kernels/", []),
    ("core", "app/core/", []),
    ("perf", "perf/metrics/", ["core"]),
    ("io", "io/", ["core"]),
    ("tokenizers", "app/tokenizers/", ["core"]),
    ("parallel", "app/parallel/", ["core", "kernels"]),
    ("data", "app/data/", ["core", "io", "kernels"]),
    ("checkpoint", "app/checkpoint/", ["core", "io", "kernels", "parallel"]),
    ("model", "app/model/", ["core", "io", "kernels", "parallel", "checkpoint"]),
    ("optim", "app/optim/", ["core", "io", "kernels", "parallel", "checkpoint", "model"]),
    ("inference", "app/inference/", ["core", "io", "kernels", "parallel", "checkpoint", "model",
                                     "tokenizers"]),
    ("training", "app/training/", ["core", "io", "kernels", "parallel", "checkpoint", "model",
                                   "optim", "data", "tokenizers", "perf", "inference"]),
    ("tasks", "app/tasks/", ["core", "io", "kernels", "parallel", "checkpoint", "model", "optim",
                             "data", "tokenizers", "perf", "inference", "training"]),
    ("programs", "app/", None),  # the entry points at the top of app/: anything
]
# the libraries of the link line, top down (each may use only those after it)
LIBRARIES = {"tasks": "app/tasks/libtasks.a", "training": "app/training/libtraining.a", "inference": "app/inference/libinference.a",
             "optim": "app/optim/liboptim.a",
             "model": "app/model/libmodel.a", "checkpoint": "app/checkpoint/libcheckpoint.a",
             "data": "app/data/libdata.a", "parallel": "app/parallel/libparallel.a",
             "tokenizers": "app/tokenizers/libtokenizers.a", "io": "io/libio.a",
             "perf": "perf/metrics/libperfmetrics.a",
             "core": "app/core/libcore.a", "kernels": "kernels/libkernels.a"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh")


def layer_of(path):
    for name, prefix, _ in LAYERS:
        if path.startswith(prefix):
            return name
    return None


def allowed(layer):
    for name, _, below in LAYERS:
        if name == layer:
            return None if below is None else set(below) | {name}
    return set()


def check_includes(root):
    problems = []
    for top in ("app", "io", "kernels", "perf/metrics"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                full = os.path.join(directory, name)
                path = os.path.relpath(full, root)
                layer = layer_of(path)
                may = allowed(layer)
                text = open(full, encoding="utf-8", errors="replace").read()
                for match in INCLUDE.finditer(text):
                    target = match.group(1)
                    line = text.count("\n", 0, match.start()) + 1
                    if target == "config.h":
                        continue
                    if not os.path.exists(os.path.join(root, target)):
                        problems.append(f"{path}:{line}: #include \"{target}\" is not a path from the "
                                        "root of the tree")
                        continue
                    target_layer = layer_of(target)
                    if may is not None and target_layer not in may:
                        problems.append(f"{path}:{line}: {layer} includes {target} ({target_layer}); "
                                        f"{layer} may include only {', '.join(sorted(may))}")
    return problems


def check_link_line(root):
    problems = []
    makefile = os.path.join(root, "app", "local.mk")
    text = open(makefile).read()
    match = re.search(r"^APP_LIBS\s*=\s*((?:.*\\\n)*.*)$", text, re.M)
    if not match:
        return [f"app/local.mk: no APP_LIBS link line"]
    words = match.group(1).replace("\\\n", " ").split()
    libraries = [w for w in words if w.endswith(".a")]
    for lib in sorted(set(libraries)):
        if libraries.count(lib) > 1:
            problems.append(f"app/local.mk: {lib} is listed {libraries.count(lib)} times on APP_LIBS")
    order = [name for name, _, _ in reversed(LAYERS) if name in LIBRARIES]
    position = {LIBRARIES[name]: i for i, name in enumerate(order)}
    known = [lib for lib in libraries if lib in position]
    for a, b in zip(known, known[1:]):
        if position[a] > position[b]:
            problems.append(f"app/local.mk: APP_LIBS lists {a} before {b}, but {b} is the higher layer")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems = check_includes(root) + check_link_line(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
