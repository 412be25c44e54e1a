#!/usr/bin/env python3
"""Writes a student's starter copy of this repository.

Usage: scripts/make_starter.py SOURCE_REPO NEW_FOLDER     (make starter DIR=... does this)

Every file git tracks (or would track: untracked files that are not ignored) is copied. In C++ and CUDA sources, each region between
    // BEGIN SOLUTION <exercise>
    // END SOLUTION <exercise>
is replaced by a line that throws tiny::NotImplementedError("<exercise>"), whose message reads
"not implemented: <exercise>". The copy builds; the tests that need an exercise fail with that
message until the student writes it; the others pass.
"""
import os
import re
import shutil
import subprocess
import sys

BEGIN = re.compile(r"^(\s*)// BEGIN SOLUTION (\w+)\s*$")
END = re.compile(r"^\s*// END SOLUTION (\w+)\s*$")


def strip(text, path):
    out, open_name, exercises = [], None, []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_name:
                sys.exit(f"{path}:{number}: BEGIN SOLUTION {b[2]} inside {open_name}")
            open_name = b[2]
            exercises.append(open_name)
            out.append(f'{b[1]}// TODO(exercise {open_name}): write this; see the chapter\'s README.\n')
            out.append(f'{b[1]}throw tiny::NotImplementedError("{open_name}");\n')
        elif e:
            if e[1] != open_name:
                sys.exit(f"{path}:{number}: END SOLUTION {e[1]} does not close {open_name}")
            open_name = None
        elif open_name is None:
            out.append(line)
    if open_name:
        sys.exit(f"{path}: SOLUTION {open_name} is never closed")
    return "".join(out), exercises


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, target = sys.argv[1], sys.argv[2]
    if os.path.exists(target) and os.listdir(target):
        sys.exit(f"{target} exists and is not empty; choose a new folder")
    files = subprocess.run(["git", "-C", source, "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    stripped = []
    for rel in files:
        src, dst = os.path.join(source, rel), os.path.join(target, rel)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        if rel.endswith((".h", ".cpp", ".cu")):
            text, names = strip(open(src).read(), rel)
            open(dst, "w").write(text)
            stripped += [(name, rel) for name in names]
        else:
            shutil.copy2(src, dst)
    print(f"wrote {target} with {len(stripped)} exercises to do:")
    for name, rel in stripped:
        print(f"  {name:20s} {rel}")


if __name__ == "__main__":
    main()
