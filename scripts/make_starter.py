#!/usr/bin/env python3
"""Writes a student's starter copy of this repository.

Usage: scripts/make_starter.py SOURCE_REPO NEW_FOLDER [CHAPTER]
       (make starter DIR=... [CH=03] does this)

Every file git tracks (or would track: untracked files that are not ignored) is copied. In C++
and CUDA sources, each region between
    // BEGIN SOLUTION chNN <exercise>
    // END SOLUTION chNN <exercise>
is replaced by a line that throws tiny::ExerciseNotImplemented("<exercise>"), whose message reads
"not implemented: <exercise>". With CHAPTER (like ch03 or 03), only that chapter's exercises are
removed and the earlier chapters' solutions stay, for a class that works chapter by chapter.
The copy builds; the tests that need an exercise fail with that message until the student
writes it; the others pass.
"""
import os
import re
import shutil
import subprocess
import sys

BEGIN = re.compile(r"^(\s*)// BEGIN SOLUTION (ch\d\d) (\w+)\s*$")
END = re.compile(r"^\s*// END SOLUTION (ch\d\d) (\w+)\s*$")


def strip(text, path, chapter=None):
    """Returns the text with the chosen exercises' solutions replaced, and their names."""
    out, open_name, keep, exercises = [], None, True, []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        b, e = BEGIN.match(line), END.match(line)
        if b:
            if open_name:
                sys.exit(f"{path}:{number}: BEGIN SOLUTION {b[3]} inside {open_name}")
            open_name, keep = b[3], chapter is not None and b[2] != chapter
            if keep:
                out.append(line)
                continue
            exercises.append(open_name)
            out.append(f'{b[1]}// TODO(exercise {open_name}): write this; see the chapter\'s README.\n')
            out.append(f'{b[1]}throw tiny::ExerciseNotImplemented("{open_name}");\n')
        elif e:
            if e[2] != open_name:
                sys.exit(f"{path}:{number}: END SOLUTION {e[2]} does not close {open_name}")
            if keep:
                out.append(line)
            open_name = None
        elif open_name is None or keep:
            out.append(line)
    if open_name:
        sys.exit(f"{path}: SOLUTION {open_name} is never closed")
    return "".join(out), exercises


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    source, target = sys.argv[1], sys.argv[2]
    chapter = None
    if len(sys.argv) == 4 and sys.argv[3]:
        chapter = sys.argv[3] if sys.argv[3].startswith("ch") else "ch" + sys.argv[3].zfill(2)
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
            text, names = strip(open(src).read(), rel, chapter)
            open(dst, "w").write(text)
            stripped += [(name, rel) for name in names]
        else:
            shutil.copy2(src, dst)
    print(f"wrote {target} with {len(stripped)} exercises to do:")
    for name, rel in stripped:
        print(f"  {name:20s} {rel}")


if __name__ == "__main__":
    main()
