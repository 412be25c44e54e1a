#!/usr/bin/env python3
"""Regenerates tests/golden/<chapter>.txt from the chapter's real output and shows the diff.

Usage: update.py BUILD_DIR CH   (CH = "02" or "ch02")

Lines of the old golden file that hold {{regex}} parts (machine-dependent numbers) are kept when
their pattern still matches the new output line; every other line is taken from the program as
printed. Check each change against the seed document before committing it.
"""
import difflib
import glob
import os
import re
import subprocess
import sys


def line_regex(line):
    parts, pos = [], 0
    while True:
        start = line.find("{{", pos)
        if start < 0:
            parts.append(re.escape(line[pos:]))
            return "".join(parts)
        end = line.find("}}", start + 2)
        parts.append(re.escape(line[pos:start]))
        parts.append("(?:" + line[start + 2:end] + ")")
        pos = end + 2


def main():
    build, ch = sys.argv[1], sys.argv[2]
    ch = ch if ch.startswith("ch") else "ch" + ch.zfill(2)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = glob.glob(os.path.join(root, "chapters", ch + "_*"))
    if len(dirs) != 1:
        sys.exit(f"no chapter {ch} under chapters/")
    name = os.path.basename(dirs[0])
    program = os.path.join(build, name)
    if not os.path.exists(program):
        sys.exit(f"{program} is not built: run make {ch} first")
    run = subprocess.run([program], capture_output=True, text=True, cwd=root)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-10:])
        sys.exit(f"{program} exited with status {run.returncode}; the golden file was not "
                 f"changed. Its last lines:\n{tail}")
    out = run.stdout.splitlines()
    path = os.path.join(root, "tests", "golden", name + ".txt")
    old = open(path).read().splitlines() if os.path.exists(path) else []
    patterns = [l for l in old if "{{" in l]
    new = []
    for line in out:
        keep = next((p for p in patterns if re.fullmatch(line_regex(p), line)), None)
        if keep is not None:
            patterns.remove(keep)
        new.append(keep if keep is not None else line)
    with open(path, "w") as f:
        f.write("\n".join(new) + "\n")
    diff = list(difflib.unified_diff(old, new, "golden (old)", "golden (new)", lineterm=""))
    print("\n".join(diff) if diff else f"{path}: unchanged")
    if any("{{" not in l and l not in old for l in new):
        print("\nNew literal lines: any machine-dependent number in them needs a {{regex}} by hand.")


if __name__ == "__main__":
    main()
