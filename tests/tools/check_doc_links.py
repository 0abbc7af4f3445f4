#!/usr/bin/env python3
"""check_doc_links.py: no document points to a missing file.

Checks, in the source tree ROOT:
  - every relative Markdown link or image, [text](target), of every *.md file: the target exists
    relative to the file's folder, and a #fragment into a .md file names one of its headings (as
    GitHub makes anchors: lower case, punctuation dropped, spaces to hyphens);
  - every path perf/results/... named in a *.md file or in a source, script or configuration file
    of app/, kernels/, io/, perf/, tests/, jobs/, configs/, autotools/: it exists relative to ROOT.
    A pattern (perf/results/accept-<machine>-<date>.md, .../checkpoint-bandwidth-*) is not a path
    and is skipped.
Prints one line per missing target (FILE:LINE: TARGET) and exits 1 when there is any.

usage: check_doc_links.py [ROOT]   (default: the tree this file is in)
"""
import os
import re
import sys

SKIP_DIRS = {".git", "autom4te.cache", ".deps", ".libs", "node_modules", "__pycache__"}
SOURCE_DIRS = ("app", "kernels", "io", "perf", "tests", "jobs", "configs", "autotools")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
RESULTS = re.compile(r"perf/results/[A-Za-z0-9_./-]*")
PATTERN_CHARS = "*<{$["


def walk(top):
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for f in sorted(files):
            yield os.path.join(root, f)


def read_text(path):
    try:
        if os.path.getsize(path) > 4 << 20:
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


def anchors(path, cache={}):
    """The GitHub anchors of the headings of a Markdown file."""
    if path not in cache:
        names = set()
        text = read_text(path) or ""
        in_code = False
        for line in text.splitlines():
            if line.lstrip().startswith("```"):
                in_code = not in_code
            elif not in_code and re.match(r"^#{1,6} ", line):
                title = line.lstrip("#").strip().lower()
                slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
                base, n = slug, 1
                while slug in names:
                    slug = f"{base}-{n}"
                    n += 1
                names.add(slug)
        cache[path] = names
    return cache[path]


def results_paths(text):
    """(line, path) for each perf/results/... path in text that is not a pattern."""
    for number, line in enumerate(text.splitlines(), 1):
        for m in RESULTS.finditer(line):
            path = m.group(0).rstrip(".-")
            after = line[m.end():m.end() + 1]
            if after and after in PATTERN_CHARS:
                continue
            yield number, path


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
    me = os.path.realpath(__file__)
    missing = []
    checked = 0
    markdown = [p for p in walk(root) if p.endswith(".md")]
    for path in markdown:
        text = read_text(path)
        if text is None:
            continue
        rel = os.path.relpath(path, root)
        in_code = False
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                target, _, fragment = target.partition("#")
                checked += 1
                full = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
                if not os.path.exists(full):
                    missing.append(f"{rel}:{number}: link {target}")
                elif fragment and full.endswith(".md") and fragment not in anchors(full):
                    missing.append(f"{rel}:{number}: link {target}#{fragment} (no such heading)")
    sources = list(markdown)
    for d in SOURCE_DIRS:
        sources += [p for p in walk(os.path.join(root, d))
                    if not p.endswith(".md") and not p.startswith(os.path.join(root, "perf", "results") + os.sep)]
    for path in sources:
        if os.path.realpath(path) == me:
            continue
        text = read_text(path)
        if text is None or "perf/results/" not in text:
            continue
        rel = os.path.relpath(path, root)
        for number, target in results_paths(text):
            checked += 1
            if not os.path.exists(os.path.join(root, target)):
                missing.append(f"{rel}:{number}: path {target}")
    for line in missing:
        print(line)
    print(f"{checked} links and perf/results paths checked, {len(missing)} missing", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
