#!/usr/bin/env python3
"""Refreshes the code and output blocks of a chapter's README from its source and a real run.

Usage: scripts/literate.py BUILD_DIR CHAPTER      (CHAPTER like ch02_views or 02)
       scripts/literate.py --snippets CHAPTER   (the code blocks only; the program is not run,
                                                 so the output blocks keep their recorded run)

A block follows a marker line: `<!-- snippet: NAME -->` takes the source lines between the two
`//! [NAME]` markers; `<!-- output: KEY -->` takes the program's output section whose heading
("== ... ==") contains KEY, up to the next blank line. A block under `<!-- output lines: KEY -->`
quotes lines of its own choosing from such a section and is left as it is, and so is the prose.

tests/literate.h states and checks the rules, those of the blocks and those of the prose's claims
about them (a line count in digits, a sentence that points at the output above or below). A
refresh can make a claim false, by changing a snippet's length or a number that an output block
prints, and only the author can mend the prose; so afterwards the script runs the chapter's
README test, when it is built, and exits with its status.
"""
import glob
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def region(source, name):
    lines = source.splitlines()
    marks = [i for i, l in enumerate(lines) if f"//! [{name}]" in l]
    if len(marks) != 2:
        sys.exit(f"no region '{name}' (two '//! [{name}]' lines) in the source")
    return textwrap.dedent("\n".join(lines[marks[0] + 1:marks[1]])).splitlines()


def section(output, key):
    out, inside = [], False
    for line in output.splitlines():
        if not inside and line.startswith("== ") and key in line:
            inside = True
        elif inside and not line:
            break
        if inside:
            out.append(line)
    if not out:
        sys.exit(f"no output section with '{key}' in its heading")
    return out


def run_chapter(program):
    """The chapter's output; a sentence, not a traceback, when it is missing or fails."""
    if not os.path.exists(program):
        sys.exit(f"{program} is not built: run make {os.path.basename(program)[:4]} first")
    run = subprocess.run([program], capture_output=True, text=True)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-10:])
        sys.exit(f"{program} exited with status {run.returncode}; the blocks were not refreshed. "
                 f"Its last lines:\n{tail}")
    return run.stdout


def main():
    build, ch = sys.argv[1], sys.argv[2]
    snippets_only = build == "--snippets"
    ch = ch if ch.startswith("ch") else "ch" + ch.zfill(2)
    chapter = os.path.basename(glob.glob(os.path.join(ROOT, "chapters", ch + "*"))[0])
    folder = os.path.join(ROOT, "chapters", chapter)
    source = open(os.path.join(folder, chapter + ".cpp")).read()
    output = "" if snippets_only else run_chapter(os.path.join(build, chapter))
    readme_path = os.path.join(folder, "README.md")
    lines = open(readme_path).read().splitlines()
    result, i = [], 0
    while i < len(lines):
        result.append(lines[i])
        m = re.fullmatch(r"<!-- (snippet|output): (.+) -->", lines[i])
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```") and not (
                snippets_only and m[1] == "output"):
            result.append(lines[i + 1])
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            result += region(source, m[2]) if m[1] == "snippet" else section(output, m[2])
            i = end
            continue
        i += 1
    open(readme_path, "w").write("\n".join(result) + "\n")
    print(f"refreshed {readme_path}")
    sys.exit(check_readme(os.path.join(ROOT, "build") if snippets_only else build, chapter))


def check_readme(build, chapter):
    """The chapter's README test (tests/literate.h) on the refreshed text: its status, 0 when
    the test program is not built (the script then says so)."""
    test = os.path.join(build, "tests", chapter + "_test")
    if not os.path.exists(test):
        print(f"not checked: build {chapter}_test to check the README's claims")
        return 0
    run = subprocess.run([test, "--gtest_filter=*.ReadmeMatchesTheCodeAndTheOutput"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr, end="")
        print("the blocks are refreshed, but the README test fails (above): mend what it names")
    return run.returncode


if __name__ == "__main__":
    main()
