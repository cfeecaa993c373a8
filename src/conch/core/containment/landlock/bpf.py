"""A classic BPF assembler for seccomp filters, pure: instructions in, the bytes of a
``sock_filter`` array out (what ``seccomp(SECCOMP_SET_MODE_FILTER)`` and bwrap's ``--seccomp
FD`` take). A filter is a head (the architecture check), a jump table from system call numbers
to named tails, and the tails; ``assemble`` lays the tails out after the table and resolves
every jump to a tail by its name (jumps go forward only, at most 255 instructions)."""

from __future__ import annotations

import struct
from typing import Any

LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS: load a word of seccomp_data
AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RET = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_KILL = 0x80000000
#: the filter's verdict that hands the call to Conch (seccomp_unotify(2))
RET_USER_NOTIF = 0x7FC00000
RET_ERRNO = 0x00050000
X32_BIT = 0x40000000  # x86_64: a system call number of the x32 ABI has this bit

#: one instruction: (code, jump if true, jump if false, k)
Instruction = tuple[int, int, int, int]


def ret_errno(e: int) -> int:
    """The verdict that fails the call with ``e``."""
    return RET_ERRNO | e


def arg(i: int) -> int:
    """Where args[``i``] is in seccomp_data (the low word: x86_64 and aarch64 are little
    endian; the high word is 4 further)."""
    return 16 + 8 * i


def head(audit_arch: int, *, x32: bool) -> list[Instruction]:
    """Kill a call of another architecture (and, with ``x32``, of the x32 ABI), then load the
    system call number (seccomp_data: nr at 0, arch at 4)."""
    prog = [
        (LD_ABS_W, 0, 0, 4),
        (JEQ, 1, 0, audit_arch),
        (RET, 0, 0, RET_KILL),
        (LD_ABS_W, 0, 0, 0),
    ]
    if x32:
        prog += [(JGE, 0, 1, X32_BIT), (RET, 0, 0, RET_KILL)]
    return prog


def assemble(
    start: list[Instruction],
    table: dict[int, str],
    tails: dict[str, list[tuple[Any, ...]]],
    returns: tuple[str, ...],
) -> bytes:
    """``start``, then one jump per entry of ``table`` (system call number -> the tail it goes
    to) and a fall-through RET ALLOW, then the tails: each instruction of a tail is (code, k) or
    (code, k, tail if true, tail if false), a tail None being the next instruction. The tails
    the table names and those they jump to are laid out in ``tails``' order, then every tail of
    ``returns`` (in that order, whether used or not): the tails that jump come first, the RETs
    they reach last."""
    prog = list(start)
    used = set(table.values())
    used |= {t for name in used for ins in tails[name] for t in ins[2:] if t is not None}
    order = [n for n in tails if n in used and n not in returns] + list(returns)
    at = len(prog) + len(table) + 1  # after the table and its fall-through RET ALLOW
    where: dict[str, int] = {}
    for name in order:
        where[name] = at
        at += len(tails[name])
    for sysno, tail in table.items():
        prog.append((JEQ, where[tail] - len(prog) - 1, 0, sysno))
    prog.append((RET, 0, 0, RET_ALLOW))
    for name in order:
        for ins in tails[name]:
            here = len(prog)
            if len(ins) == 4:
                code, k, jt, jf = ins
                t = 0 if jt is None else where[jt] - here - 1
                f = 0 if jf is None else where[jf] - here - 1
                prog.append((code, t, f, k))
            else:
                prog.append((ins[0], 0, 0, ins[1]))
    assert len(prog) == at
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in prog)
    # every jump lands inside the program (on a later instruction), and it ends with a RET
    jumps = [(i, jt, jf) for i, (c, jt, jf, _) in enumerate(prog) if c & 7 == 5]  # BPF_JMP
    assert all(i + 1 + max(jt, jf) < len(prog) for i, jt, jf in jumps)
    assert prog[-1][0] == RET
    return pack(prog)


def pack(prog: list[Instruction]) -> bytes:
    """The bytes of ``prog`` as a ``struct sock_filter`` array (native byte order)."""
    return b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in prog)
