"""The undo's writes run in a thread of their own that Landlock confines to the workspace.

The walk by descriptor (core/changes/safefs.py) never follows a symlink, but a directory it
holds can still be renamed out of the workspace by a job running meanwhile (a sandboxed one
may rename within what it may write). Landlock checks every open, create, rename and unlink
against where the file is *at that moment*: a directory moved out of the workspace is no
longer beneath the rule, so the confined thread cannot write there, whatever it holds. The
thread restricts only itself (Landlock, ``no_new_privs``: per thread) and ends with its
work; the collector is kept off meanwhile, so no finalizer of another's object runs in it."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Sequence

from conch.core.containment.landlock import lockdown as ld


def available() -> tuple[bool, str]:
    """Whether this kernel confines the undo (and why not)."""
    abi, why = ld.abi_version()
    return abi > 0, why


def run(workspace_fd: int, read_fds: Sequence[int], fn: Callable[[], None]) -> bool:
    """fn() in a thread that may write only beneath ``workspace_fd`` and read only beneath
    it and ``read_fds``. False when Landlock is missing (fn then ran unconfined)."""
    abi, _why = ld.abi_version()
    if abi <= 0:
        fn()
        return False
    rights = ld.fs_rights(abi)
    ruleset = ld.create_ruleset(abi, rights)
    failure: list[BaseException] = []

    def body() -> None:
        try:
            ld.no_new_privs()
            ld.restrict_self(ruleset)
            fn()
        except BaseException as e:  # handed to the caller's thread
            failure.append(e)

    was_enabled = gc.isenabled()
    try:
        ld.add_path_rule(ruleset, workspace_fd, rights)
        for fd in read_fds:
            ld.add_path_rule(ruleset, fd, ld.READ)
        gc.disable()
        t = threading.Thread(target=body, name="conch-undo", daemon=True)
        t.start()
        t.join()
    finally:
        os.close(ruleset)
        if was_enabled:
            gc.enable()
    if failure:
        raise failure[0]
    return True
