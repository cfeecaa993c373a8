"""The seccomp assembler is a pure function (core/containment/landlock/seccomp.py): the same
options give the same bytes. Its programs are pinned here byte for byte, as they were when the
assembler still lived in the fork server's script, so a move or a refactor that changes one
instruction of any program fails; what each rule does is tested by running the programs
(test_landlock_abi.py)."""

from __future__ import annotations

import hashlib
import itertools
import struct

import pytest

from conch.core.containment.landlock import seccomp as sc

#: sha256 (first 16 hex digits) of the 48 programs of ``_every_program``, joined, and of the
#: four notify programs, per architecture
PINNED = {
    "x86_64": ("970985d084ec158d", "7997975a4503a01d"),
    "aarch64": ("c0eb41c628bb09cf", "304f43fd8b453bb2"),
}


def _every_program(arch: str) -> list[bytes]:
    return [
        sc.seccomp_program(
            arch, net_off=n, truncate=t, connect_ok=c, metadata=m, others=o
        )
        for n, t, c, m, o in itertools.product(
            (False, True), (False, True), (False, True), ("", "brokered", "all"), (False, True)
        )
    ]  # fmt: skip


def _digest(programs: list[bytes]) -> str:
    return hashlib.sha256(b"".join(programs)).hexdigest()[:16]


def _instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]


@pytest.mark.parametrize("arch", sorted(PINNED))
def test_every_program_is_the_bytes_it_was(arch):
    notify = [sc.notify_program(arch, connect=c, metadata=m) for c in (0, 1) for m in (0, 1)]
    assert (_digest(_every_program(arch)), _digest(notify)) == PINNED[arch]


def test_the_connect_filter_instruction_by_instruction():
    """aarch64's connect filter: another architecture killed, connect (203) handed to Conch,
    everything else allowed."""
    assert _instructions(sc.notify_program("aarch64")) == [
        (0x20, 0, 0, 4),  # load the architecture
        (0x15, 1, 0, 0xC00000B7),  # AUDIT_ARCH_AARCH64: skip the kill
        (0x06, 0, 0, sc.RET_KILL),
        (0x20, 0, 0, 0),  # load the syscall number
        (0x15, 1, 0, 203),  # connect: to the USER_NOTIF
        (0x06, 0, 0, sc.RET_ALLOW),
        (0x06, 0, 0, sc.RET_USER_NOTIF),
    ]


def test_the_same_options_give_the_same_bytes_without_the_cache():
    """Pure: built afresh (the cache bypassed), a program is byte for byte the cached one."""
    for arch in PINNED:
        for kw in ({}, {"net_off": False, "metadata": "all", "others": True}):
            cached = sc.seccomp_program(arch, **kw)
            assert sc.seccomp_program.__wrapped__(arch, **kw) == cached
