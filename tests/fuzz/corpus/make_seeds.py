#!/usr/bin/env python3
"""Writes the seed inputs of the harnesses whose inputs are not files of a format (the .npy and
.safetensors seeds are copies of tests/fixtures/). FuzzedDataProvider reads strings from the
front of the input and integers from the back (the last byte first), so a seed is a string
part, a terminator ("\\" then another character), and the integers, reversed."""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), "wb") as f:
        f.write(data)


def seed(strings, ints):
    front = b"".join(s.encode() + b"\\x" for s in strings)
    return front + bytes(reversed(ints))


# einops: rank, sizes, number of axis names (0 here), what (0 rearrange, 1-3 reduce, 4 einsum),
# then the pattern.
for i, (shape, what, pattern) in enumerate([
        ([2, 3], 0, "a b -> b a"), ([2, 3, 4], 0, "a b c -> a (b c)"),
        ([4, 3], 0, "(h w) c -> h w c"), ([2, 3, 4], 1, "a b c -> a"),
        ([2, 3, 4], 2, "a b c -> c"), ([2, 3, 4], 3, "... c -> c"),
        ([2, 3], 4, "i j, i j -> i"), ([2, 1, 3], 0, "a 1 b -> b a"),
        ([3, 3], 4, "i i -> i"), ([2, 3, 3], 4, "b i i, b i i -> b")]):
    write("einops", f"seed{i}", seed([pattern], [len(shape)] + shape + [0, what]))

# views: rank, sizes, then (op, arguments...) with each argument a "small" one: kind byte
# below 200 and a value byte (value - (-6)) in 0..12.
def small(v):
    return [0, v + 6]
for i, ops in enumerate([
        [0, *small(0), *small(1)], [1, *small(1), *small(0)], [2, *small(0), *small(1)],
        [3, *small(1), *small(0), *small(2)], [4, *small(0), 1, *small(1), 0, *small(2)],
        [5, 3, *small(2), *small(-1), *small(3)], [6, 1, *small(-1)], [7, 2, *small(3), *small(-1)],
        [8, 1], [9, *small(0)], [10, *small(0), *small(-1)], [11, 2, *small(1), *small(2)],
        # a hand-made layout: rank, sizes, 1 (as many strides as sizes), strides, offset; an
        # empty one with offset INT64_MAX (an extreme: kind byte 200)
        [12, 2, *small(2), *small(3), 1, *small(1), *small(0), *small(1)],
        [12, 1, *small(3), 1, *small(2), *small(0)], [12, 1, *small(0), 1, *small(1), 200]]):
    write("views", f"seed{i}", bytes(reversed([2, 2, 3] + ops)))

# float formats: format index, overflow, two floats and a pattern (raw little-endian words,
# consumed from the back).
for i, (fmt, x, y, p) in enumerate([(0, 1.5, -2.25, 0x3f800000), (1, 65504.0, 1e-8, 0x7c00),
                                   (3, 448.0, 500.0, 0x7f), (4, 57344.0, -0.0, 0x7b),
                                   (5, 6.0, 0.25, 0x7), (6, 3.0, 1e30, 0x3)]):
    fx, fy = struct.unpack("<I", struct.pack("<f", x))[0], struct.unpack("<I", struct.pack("<f", y))[0]
    ints = [fmt, 1] + list(struct.pack(">I", fx)) + list(struct.pack(">I", fy)) + list(struct.pack(">I", p))
    write("float_formats", f"seed{i}", bytes(reversed(ints)))

# the command line: arguments separated by NUL bytes.
for i, args in enumerate([[], ["--csv", "out"], ["--csv=out/csv"], ["--help"], ["--csv"],
                          ["--csv", "a", "--csv=b"], ["--csv", "--help"], ["-h", "--bogus"]]):
    write("cli", f"seed{i}", b"\0".join(a.encode() for a in args))

# checkpoint: the first byte is the mode (bit 0: 1 = an edited copy of a real checkpoint, 0 = the
# bytes that follow are the file; bit 1: load the scaler's state too). An edited copy with no
# edits is the intact checkpoint; the edits are, per metadata key (optimizer, its groups, the
# scaler, "step") 0 keep, 1 replace with the next string, 2 drop; then per tensor 0 keep, 1
# reshape, 2 another dtype, 3 rename, 4 flatten. (The raw seed, raw_checkpoint, is "\x02" and
# the file the harness writes for the intact seed: a real save_checkpoint.)
for i, (mode, strings, ints) in enumerate([
        (3, [], []), (1, [], []),
        (3, ['{"scale": 2.0, "growth_factor": 2.0}'], [0, 0, 1, 0]),
        (3, ['{"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 1.5, '
             '"_growth_tracker": 0}'], [0, 0, 1, 0]),
        (1, ['[{"lr": 0.1, "betas": [0.9, 0.999], "params": [0, 1]}]'], [0, 1, 0, 0]),
        (1, ["SGD"], [1, 0, 0, 0]), (3, [], [0, 0, 2, 0]),
        (1, [], [0, 0, 0, 0, 1, 3, 2]), (1, [], [0, 0, 0, 0, 2, 1, 0, 4])]):
    write("checkpoint", f"seed{i}", bytes([mode]) + seed(strings, ints))
