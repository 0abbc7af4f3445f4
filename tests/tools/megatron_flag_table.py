#!/usr/bin/env python3
"""megatron_flag_table.py: the README's table of Megatron-LM flags is `pretrain_gpt
--help-megatron-flags` verbatim, between the lines "<!-- megatron-flags:begin -->" and
"<!-- megatron-flags:end -->". --check exits 1 (with a diff) when the README's copy differs;
--update rewrites it in place.
    python3 tests/tools/megatron_flag_table.py --check|--update PRETRAIN_GPT README.md"""
import difflib
import subprocess
import sys

BEGIN, END = "<!-- megatron-flags:begin -->\n", "<!-- megatron-flags:end -->\n"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("--check", "--update"):
        sys.exit(__doc__.split("\n")[-1].strip())
    mode, pretrain_gpt, readme = sys.argv[1:]
    table = subprocess.run([pretrain_gpt, "--help-megatron-flags"], check=True, capture_output=True,
                           text=True).stdout.splitlines(keepends=True)
    lines = open(readme, encoding="utf-8").readlines()
    if BEGIN not in lines or END not in lines:
        sys.exit(f"{readme}: no {BEGIN.strip()} ... {END.strip()} lines")
    begin, end = lines.index(BEGIN) + 1, lines.index(END)
    if mode == "--update":
        open(readme, "w", encoding="utf-8").writelines(lines[:begin] + table + lines[end:])
        return
    if lines[begin:end] != table:
        sys.stdout.writelines(difflib.unified_diff(lines[begin:end], table, readme, "--help-megatron-flags"))
        sys.exit(f"{readme}: the flag table is stale; run: python3 {sys.argv[0]} --update {pretrain_gpt} {readme}")


main()
