#!/usr/bin/env python3
"""megatron_flag_table.py: app/MEGATRON_FLAGS.md, the table of every flag pretrain_gpt knows with
its status here, is generated: between the lines "<!-- megatron-flags:begin -->" and
"<!-- megatron-flags:end -->" it holds a count of the flags of Megatron-LM's argument parser
(tests/data/megatron_parser_flags.txt) by status, then `pretrain_gpt --help-megatron-flags`
verbatim. --check exits 1 (with a diff) when the file's copy differs; --update rewrites it (and
creates the file when it does not exist).
    python3 tests/tools/megatron_flag_table.py --check|--update PRETRAIN_GPT [app/MEGATRON_FLAGS.md]"""
import difflib
import os
import re
import subprocess
import sys

BEGIN, END = "<!-- megatron-flags:begin -->\n", "<!-- megatron-flags:end -->\n"
HEADER = """# Megatron-LM's flags in pretrain_gpt

`app/pretrain_gpt` takes the flags of Megatron-LM's `pretrain_gpt.py`, so that a Megatron launch
script carries over by changing the executable. Every option string of Megatron-LM's argument
parser (`megatron/training/arguments.py`, all groups, every spelling;
[tests/data/megatron_parser_flags.txt](../tests/data/megatron_parser_flags.txt) names the commit)
is a row below, with its status here:

- **works**: Megatron's meaning;
- **accepted, no effect**: the value is checked, and the reason says why it changes nothing here
  (the start-up line names the no-effect flags a run was given);
- **refused**: the program stops before any work with the reason and what to use instead.

Flags of this program that are not in Megatron's parser are rows too; the line above the table
names them. The table is `pretrain_gpt --help-megatron-flags`; regenerate this file with
`python3 tests/tools/megatron_flag_table.py --update app/pretrain_gpt app/MEGATRON_FLAGS.md`
(`tests/unit/megatron_flags_doc_test.sh` fails when it is stale, and
`tests/unit/megatron_parser_flags_test.sh` when a flag of Megatron's parser is missing).

"""
PARSER_FLAGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "megatron_parser_flags.txt")


def generated(pretrain_gpt):
    table = subprocess.run([pretrain_gpt, "--help-megatron-flags"], check=True, capture_output=True,
                           text=True).stdout
    status = {}
    for line in table.splitlines():
        m = re.match(r"\| `(--[^ `]+)[^`]*` \| (works|accepted, no effect|refused):", line)
        if m:
            status[m.group(1)] = m.group(2)
    commit, counts, missing, megatron = "?", {"works": 0, "accepted, no effect": 0, "refused": 0}, 0, set()
    for line in open(PARSER_FLAGS, encoding="utf-8"):
        m = re.search(r"commit ([0-9a-f]{40})", line)
        if line.startswith("#"):
            commit = m.group(1)[:12] if m else commit
            continue
        flag = line.split("\t")[0]
        megatron.add(flag)
        if flag in status:
            counts[status[flag]] += 1
        else:
            missing += 1
    total = sum(counts.values()) + missing
    summary = (f"Megatron-LM's parser (commit {commit}): {total} option strings; here {counts['works']} work, "
               f"{counts['accepted, no effect']} are accepted with no effect, {counts['refused']} are refused"
               f"{f', {missing} MISSING' if missing else ''}. The table has {len(status)} rows; not in "
               f"Megatron's parser: {', '.join(f'`{f}`' for f in status if f not in megatron)}.\n")
    return [summary, "\n"] + table.splitlines(keepends=True)


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("--check", "--update"):
        sys.exit(__doc__.split("\n")[-1].strip())
    mode, pretrain_gpt = sys.argv[1:3]
    path = sys.argv[3] if len(sys.argv) == 4 else "app/MEGATRON_FLAGS.md"
    table = generated(pretrain_gpt)
    if mode == "--update" and not os.path.exists(path):
        open(path, "w", encoding="utf-8").writelines([HEADER, BEGIN] + table + [END])
        return
    lines = open(path, encoding="utf-8").readlines()
    if BEGIN not in lines or END not in lines:
        sys.exit(f"{path}: no {BEGIN.strip()} ... {END.strip()} lines")
    begin, end = lines.index(BEGIN) + 1, lines.index(END)
    if mode == "--update":
        open(path, "w", encoding="utf-8").writelines(lines[:begin] + table + lines[end:])
        return
    if lines[begin:end] != table:
        sys.stdout.writelines(difflib.unified_diff(lines[begin:end], table, path, "--help-megatron-flags"))
        sys.exit(f"{path}: the flag table is stale; run: python3 {sys.argv[0]} --update {pretrain_gpt} {path}")


main()
