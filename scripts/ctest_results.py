#!/usr/bin/env python3
"""Reads the JUnit XML that `ctest --output-junit FILE` writes: each test's status, and in one
line why it was skipped or why it failed. make test prints its summary with it, and
scripts/grade.py its scoreboard.

    python3 scripts/ctest_results.py FILE      (make test runs this after ctest)

prints how many tests passed, how many were skipped, grouped by the reason GoogleTest was given
(GTEST_SKIP() << "no CUDA device: ..."), and how many failed, each with its reason. ctest's own
"100% tests passed" counts a skipped test as passed; this summary does not. It exits 0 whatever
the tests did: make test's exit status stays ctest's.
"""
import collections
import os
import re
import signal
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What a starter copy's exercise throws (tiny::NotImplementedError("<name>")).
NOT_IMPLEMENTED = re.compile(r"not implemented: ([a-z_0-9]+)")

# One test: name, status ("passed", "failed" or "skipped"), its output, and for a skipped or
# failed test the reason in one line ("" for a passed one).
Case = collections.namedtuple("Case", "name status output reason")


def one_line(text, width=160):
    """Text with its whitespace squeezed to single spaces and the repository's path left out,
    cut to `width` characters."""
    text = " ".join(text.replace(ROOT + os.sep, "").split())
    return text if len(text) <= width else text[:width - 3] + "..."


def skip_reason(output, ctest_message=""):
    """GoogleTest's message for a skipped test: the line after "<file>:<line>: Skipped". A test
    that ctest itself did not run (a fixture that failed, a disabled test) has none; ctest's
    message says why then."""
    m = re.search(r": Skipped\n(.*)", output)
    if m:
        return one_line(m.group(1)) or "(GTEST_SKIP() without a message)"
    return one_line(ctest_message) or "not run"


def failure_reason(output, ctest_message=""):
    """Why a test failed, in one line: the first "not implemented: <exercise>" (a starter copy's
    exercise), else the line golden.h prints for a chapter that exited with a non-zero status,
    else GoogleTest's first "<file>:<line>: Failure" (or "unknown file: Failure", an exception
    thrown in the test) with up to four lines after it, to the first blank one, else ctest's
    message or the output's last line (a crash, a timeout)."""
    m = NOT_IMPLEMENTED.search(output)
    if m:
        return one_line(m.group(0))
    # golden.h: "the chapter exited with status 1; its output:", the output, then GoogleTest's
    # lines. A chapter that exits with an error says why on its last line, added in parentheses
    # (one that a signal ended was cut short, and its last line says nothing of why).
    m = re.search(r"the chapter ((?:exited|did not exit)[^;\n]*); its output:\n(.*?)"
                  r"(?:^[^\n]*:\d+: Failure$|^\[  FAILED  \]|\Z)", output, re.MULTILINE | re.DOTALL)
    if m:
        how = m.group(1)
        last = [line for line in m.group(2).splitlines() if line.strip()]
        if last and how.startswith("exited") and "signal" not in how:
            how += f" (its last line: {last[-1]})"
        return one_line("the chapter " + how)
    m = re.search(r"^(.*(?::\d+|unknown file): Failure)\n((?:(?!\[ ).+\n?){0,4})", output,
                  re.MULTILINE)
    if m:
        return one_line(m.group(1).replace(": Failure", ":") + " " + m.group(2))
    lines = [line for line in output.splitlines() if line.strip()]
    return one_line(ctest_message or (lines[-1] if lines else "failed, without output"))


def read(xml_path):
    """The tests in ctest's JUnit file, in its order."""
    cases = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        out = case.findtext("system-out") or ""
        # ctest writes "run" for a test that passed, "fail", and "notrun" or "disabled" (with a
        # <skipped message=...>) for one it did not run or that skipped itself: GoogleTest's
        # "[  SKIPPED ]" matches the SKIP_REGULAR_EXPRESSION that gtest_discover_tests sets.
        status = case.get("status")
        if status == "fail":
            failure = case.find("failure")
            message = failure.get("message", "") if failure is not None else ""
            cases.append(Case(case.get("name"), "failed", out, failure_reason(out, message)))
        elif status == "run" and "[  SKIPPED ]" not in out:
            cases.append(Case(case.get("name"), "passed", out, ""))
        else:
            skipped = case.find("skipped")
            message = skipped.get("message", "") if skipped is not None else status
            cases.append(Case(case.get("name"), "skipped", out, skip_reason(out, message)))
    return cases


def summary(cases):
    """The lines make test ends with."""
    count = collections.Counter(c.status for c in cases)
    lines = [f"== tests: {count['passed']} passed, {count['skipped']} skipped, "
             f"{count['failed']} failed, of {len(cases)}"]
    if count["skipped"]:
        lines.append("skipped, by reason:")
        reasons = collections.Counter(c.reason for c in cases if c.status == "skipped")
        lines += [f"  {n:4d}  {reason}" for reason, n in reasons.most_common()]
    if count["failed"]:
        lines.append("failed:")
        lines += [f"  {c.name}: {c.reason}" for c in cases if c.status == "failed"]
    return lines


if __name__ == "__main__":
    # Read by `| head` too (gpu_check.sh): a closed pipe ends the script quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if not os.path.exists(sys.argv[1]):
        # ctest stopped before it ran anything (it says why above); there is nothing to count.
        print(f"== tests: no results in {sys.argv[1]}")
        sys.exit(0)
    print("\n".join(summary(read(sys.argv[1]))))
