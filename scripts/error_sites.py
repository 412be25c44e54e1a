#!/usr/bin/env python3
"""Lists the places in common/ that raise an error, and which of them PyTorch's own text checks.

    scripts/error_sites.py            one line per source file: sites, checked, not checked
    scripts/error_sites.py --list     and then every site not checked, with its first words

A site is a `throw` statement. It counts as checked against PyTorch when the first string literal
of its message (at least eight characters of it) appears in a fixture that real PyTorch wrote:
the parity suite's errors and einops cases (tests/fixtures/parity/) or the bad-input table's
(tests/fixtures/bad_inputs_torch.txt). A message built only from pieces (not_implemented_for,
a helper's return value) has no literal to look for and counts under "built elsewhere". Sites that
are the library's own (a progress bar, a CSV reader, the chapter harness) have no PyTorch text to
match; the list shows them so that a reader can tell those from the ones still to be covered.
This is a measuring tool for the parity work, not a test: it reads the source, not behaviour.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = [
    ROOT / "tests/fixtures/parity/errors.txt",
    ROOT / "tests/fixtures/parity/einops.txt",
    ROOT / "tests/fixtures/bad_inputs_torch.txt",
]
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def throw_statements(text):
    """Yields (line, statement) for each `throw ...;` outside comments."""
    code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)
    for m in re.finditer(r"\bthrow\b", code):
        depth, i = 0, m.end()
        in_string = False
        while i < len(code):
            c = code[i]
            if in_string:
                if c == "\\":
                    i += 1
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth < 0:
                    break
            elif c == ";" and depth == 0:
                break
            i += 1
        statement = code[m.start():i]
        if statement.strip() == "throw":  # a rethrow
            continue
        yield code.count("\n", 0, m.start()) + 1, statement


def first_literal(statement):
    for m in LITERAL.finditer(statement):
        s = m.group(1).encode().decode("unicode_escape")
        if len(s.strip()) >= 8:
            return s
    return None


def main():
    listing = "--list" in sys.argv[1:]
    known = "\n".join(p.read_text() for p in FIXTURES)
    rows, unchecked = [], []
    for path in sorted((ROOT / "common").rglob("*")):
        if path.suffix not in (".cpp", ".h", ".cu", ".cuh"):
            continue
        sites = list(throw_statements(path.read_text()))
        if not sites:
            continue
        checked = built = 0
        for line, statement in sites:
            literal = first_literal(statement)
            if literal is None:
                built += 1
            elif literal in known or literal.strip() in known:
                checked += 1
            else:
                words = " ".join(literal.split())[:70]
                unchecked.append(f"{path.relative_to(ROOT)}:{line}: {words}")
        rows.append((str(path.relative_to(ROOT)), len(sites), checked, built))
    width = max(len(r[0]) for r in rows)
    print(f"{'file':<{width}}  sites  checked  built elsewhere")
    for name, n, checked, built in rows:
        print(f"{name:<{width}}  {n:5}  {checked:7}  {built:15}")
    total = sum(r[1] for r in rows)
    print(f"{'all':<{width}}  {total:5}  {sum(r[2] for r in rows):7}  {sum(r[3] for r in rows):15}")
    if listing:
        print("\nnot checked against a PyTorch fixture:")
        print("\n".join(unchecked))


if __name__ == "__main__":
    main()
