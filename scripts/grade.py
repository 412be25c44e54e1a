#!/usr/bin/env python3
"""Grades the work by chapter: runs each chapter's tests (CTest label chNN), prints a scoreboard,
writes JUnit XML for a grading system, and exits non-zero when any test fails.

    python3 scripts/grade.py BUILD_DIR ch01_napkin ch02_views ...     (make grade does this)
    python3 scripts/grade.py --starter BUILD_DIR ch01_napkin ...      (checks a starter copy)

Each chapter is worth POINTS points, shared equally among its tests that ran (skipped tests,
such as GPU tests on a machine without a GPU, count for nothing either way). A chapter's line is
printed as soon as it is graded, and under it each failing test with its reason in one line
(an exercise's "not implemented: <name>", or GoogleTest's first failure; scripts/ctest_results.py).

--starter checks a freshly generated starter copy instead: every failing test must fail with
"not implemented: <exercise>", every exercise must be the reason for at least one failure, and
some tests must still pass. It exits non-zero when any of that is not so.
"""
import os
import re
import subprocess
import sys

import ctest_results

POINTS = 10


def run_label(build, label, out_dir):
    xml = os.path.abspath(os.path.join(out_dir, f"junit-{label}.xml"))
    # A stale file from an earlier run must not stand in for a run that wrote none.
    if os.path.exists(xml):
        os.remove(xml)
    subprocess.run(["ctest", "--test-dir", build, "-L", f"^{label}$", "-j", str(os.cpu_count() or 2),
                    "--output-junit", xml], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(xml):
        return xml, []
    # chNN_topic.run runs the chapter once for its golden tests (a CTest fixture); it passes
    # whatever the chapter does, so it is no test of the student's work.
    return xml, [c for c in ctest_results.read(xml) if not c.name.endswith(".run")]


def grade(build, chapters):
    out_dir = os.path.join(build, "grade")
    os.makedirs(out_dir, exist_ok=True)
    print(f"{'chapter':24s} {'passed':>8s} {'failed':>7s} {'skipped':>8s} {'points':>8s}", flush=True)
    total_points = total_max = failures = 0
    for chapter in chapters:
        # The chapter's name first, so that the one being graded shows while its tests run.
        print(f"{chapter:24s}", end="", flush=True)
        xml, cases = run_label(build, chapter[:4], out_dir)
        passed = sum(1 for c in cases if c.status == "passed")
        failed = sum(1 for c in cases if c.status == "failed")
        skipped = sum(1 for c in cases if c.status == "skipped")
        ran = passed + failed
        points = POINTS * passed / ran if ran else 0.0
        total_points += points
        total_max += POINTS
        failures += failed + (0 if cases else 1)
        print(f" {passed:4d}/{ran:<3d} {failed:7d} {skipped:8d} {points:5.1f}/{POINTS}")
        for c in cases:
            if c.status == "failed":
                print(f"    failed: {c.name}: {c.reason}")
        if not cases:
            print("    no tests ran for this chapter")
        sys.stdout.flush()
    print(f"{'total':24s} {'':8s} {'':7s} {'':8s} {total_points:5.1f}/{total_max}")
    print(f"JUnit XML: {out_dir}/junit-chNN.xml")
    return 1 if failures else 0


def check_starter(build, chapters):
    # The exercises removed from this copy: the ExerciseNotImplemented("<name>") lines the starter
    # script wrote into its sources (the build folder itself is skipped).
    exercises = set()
    copy_root = os.path.dirname(os.path.abspath(build))
    for folder, _, files in os.walk(copy_root):
        if os.path.abspath(folder).startswith(os.path.abspath(build)):
            continue
        for f in files:
            if f.endswith((".h", ".cpp", ".cu")):
                text = open(os.path.join(folder, f), errors="replace").read()
                exercises.update(re.findall(r'ExerciseNotImplemented\("([a-z_0-9]+)"\)', text))
    reasons, unexplained, passed = set(), [], 0
    for chapter in chapters:
        _, cases = run_label(build, chapter[:4], build)
        for c in cases:
            if c.status == "passed":
                passed += 1
            elif c.status == "failed":
                found = ctest_results.NOT_IMPLEMENTED.findall(c.output)
                if found:
                    reasons.update(found)
                else:
                    unexplained.append(f"{c.name} ({c.reason})")
    print(f"starter: exercises {sorted(exercises)}")
    print(f"starter: {passed} tests pass; failures explained by {sorted(reasons)}")
    ok = True
    if unexplained:
        print(f"starter: these tests fail without 'not implemented': {unexplained}")
        ok = False
    if exercises - reasons:
        print(f"starter: no test fails for these exercises: {sorted(exercises - reasons)}")
        ok = False
    if not exercises or passed == 0:
        print("starter: expected some exercises and some passing tests")
        ok = False
    print("starter: OK" if ok else "starter: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--starter":
        sys.exit(check_starter(args[1], args[2:]))
    if len(args) < 2:
        sys.exit(__doc__)
    sys.exit(grade(args[0], args[1:]))
