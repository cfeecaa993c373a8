"""The BPF assembler (core/containment/landlock/bpf.py) on its own: a jump table to named tails,
the tails laid out after it with every jump resolved forward, the return tails last. The
filters built with it are pinned byte for byte in test_seccomp_bytes.py."""

from __future__ import annotations

import struct

from conch.core.containment.landlock import bpf


def _instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


def test_the_table_jumps_to_its_tails_and_falls_through_to_allow():
    head = [(bpf.LD_ABS_W, 0, 0, 0)]
    tails = {
        "checked": [(bpf.LD_ABS_W, bpf.arg(1)), (bpf.JEQ, 0, "allow", "deny")],
        "unused": [(bpf.RET, bpf.RET_KILL)],
        "allow": [(bpf.RET, bpf.RET_ALLOW)],
        "deny": [(bpf.RET, bpf.ret_errno(1))],
    }
    program = bpf.assemble(head, {7: "checked", 9: "deny"}, tails, ("allow", "deny"))
    assert _instructions(program) == [
        (bpf.LD_ABS_W, 0, 0, 0),
        (bpf.JEQ, 2, 0, 7),  # to "checked" (index 4)
        (bpf.JEQ, 4, 0, 9),  # to "deny" (index 7)
        (bpf.RET, 0, 0, bpf.RET_ALLOW),  # no entry of the table: allowed
        (bpf.LD_ABS_W, 0, 0, 24),  # args[1]
        (bpf.JEQ, 0, 1, 0),  # to "allow" (6), else "deny" (7)
        (bpf.RET, 0, 0, bpf.RET_ALLOW),
        (bpf.RET, 0, 0, bpf.RET_ERRNO | 1),
    ]  # ("unused": named by no entry and no tail, so not laid out)


def test_the_head_kills_another_architecture_and_x32():
    x86 = bpf.head(0xC000003E, x32=True)
    assert x86[:3] == [
        (bpf.LD_ABS_W, 0, 0, 4),
        (bpf.JEQ, 1, 0, 0xC000003E),
        (bpf.RET, 0, 0, bpf.RET_KILL),
    ]
    assert x86[3:] == [
        (bpf.LD_ABS_W, 0, 0, 0),
        (bpf.JGE, 0, 1, bpf.X32_BIT),
        (bpf.RET, 0, 0, bpf.RET_KILL),
    ]
    assert bpf.head(0xC00000B7, x32=False)[3:] == [(bpf.LD_ABS_W, 0, 0, 0)]
