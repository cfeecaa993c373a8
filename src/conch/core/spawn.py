"""What the objects the engine owns (drivers, shells, the shell manager, search) get from it:
the one recipe for a child's environment, the tag, the reaper, private files, the owned task
set and the change callback — never the engine itself (the httpcore pool/connection rule).

Every child Conch starts — jobs, PTY programs, shells, ``bash -n``, ripgrep — takes its
environment from :meth:`SpawnContext.child_env`, so none of them sees Conch's own secrets.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from conch.config import Config
from conch.core.containment.containment import Containment
from conch.core.containment.fence import SpawnFence
from conch.core.datadir import DataDir
from conch.core.env import build_env
from conch.core.jobs.job import Job
from conch.core.process import hygiene, peer
from conch.errors import ConchError


def resolve_cwd(base: str, cwd: str | None) -> str:
    """``cwd`` made absolute against ``base`` (the default cwd); it must exist."""
    if cwd is None or cwd == "":
        path = base
    else:
        if "\x00" in cwd:
            raise ConchError("invalid_argument", "cwd must not contain NUL", field="cwd")
        path = os.path.normpath(os.path.join(base, os.path.expanduser(cwd)))
    if not os.path.isdir(path):
        raise ConchError(
            "cwd_not_found", f"working directory does not exist: {path}", field="cwd", value=path
        )
    return path


@dataclass
class SpawnContext:
    """One runtime's spawning facts, handed to everything that starts or watches a child."""

    config: Config
    data: DataDir
    reaper: hygiene.Reaper
    on_change: Callable[[Job | None], None]
    instance: str = ""  # set when the engine starts (hygiene.instance_id())
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    containment: Containment | None = None  # set when the engine starts (docs/spec.md §9a)
    # whether any spawn of this runtime was sandboxed (until then no process of it can be
    # inside a fence: the HTTP guard has nothing to look for), and whether one was without a
    # fence the kernel marks (Landlock where seccomp does not load): then the guard cannot
    # tell a leftover of it from an unsandboxed one and refuses both
    fenced: bool = False
    unmarked: bool = False
    # the cgroup v2 of every sandboxed spawn (the guard's first answer: a socket's cgroup)
    cgroup_marks: peer.CgroupMarks = field(default_factory=peer.CgroupMarks)

    @property
    def grace_s(self) -> float:
        return self.config.kill_grace_ms / 1000

    def resolve_cwd(self, cwd: str | None) -> str:
        return resolve_cwd(self.config.resolved_default_cwd, cwd)

    def tag(self, tag_id: str) -> tuple[str, str]:
        return hygiene.TAG_VAR, f"{self.instance}/{tag_id}"

    def child_env(
        self,
        tag_id: str,
        *,
        pty: bool,
        env: Mapping[str, str] | None = None,
        shell_env: Mapping[str, str] | None = None,
        caller_session_id: str = "",
        inherit_not: tuple[str, ...] = (),
        cwd: str | None = None,
    ) -> dict[str, str]:
        """The environment of a child tagged ``tag_id`` (a job id, a shell id, ``search``);
        ``inherit_not``: more server variables it must not inherit (a profile's list);
        ``cwd``: a one-shot job's working directory (``PWD`` names it)."""
        cfg = self.config
        secrets = tuple(s for s in (cfg.auth_token, cfg.caller_context_token) if s)
        return build_env(
            agent_env=cfg.agent_env,
            pty=pty,
            secrets=secrets,
            env=env,
            shell_env=shell_env,
            caller_session_id=caller_session_id,
            tag=self.tag(tag_id),
            inherit_not=inherit_not,
            pwd=cwd,
        )

    def check_fence(
        self,
        *,
        sandbox: str | None = None,
        network: str | None = None,
        memory_max: int | None = None,
        pids_max: int | None = None,
    ) -> bool:
        """Check a call's containment values (before anything runs); True when the child
        is exec'd through a wrapper (a cgroup or a sandbox), not directly."""
        assert self.containment is not None
        self.containment.resolve_limits({"memory_max": memory_max, "pids_max": pids_max})
        fenced = self.containment.resolve_policy(sandbox, network).active
        return fenced or self.containment.level == "cgroup"

    async def fence(self, name: str, **fence_args: Any) -> SpawnFence:
        """The cgroup and sandbox of the job or shell ``name`` (docs/spec.md §9a)."""
        assert self.containment is not None
        out = await self.containment.fence(name, **fence_args)
        if out.sandbox is not None:
            self.fenced = True
            if out.bwrap is None and (out.layout is None or not out.layout.seccomp):
                self.unmarked = True
            cg = out.cgroup
            self.cgroup_marks.add(name, cg.track if cg is not None and cg.kind == "v2" else None)
        return out

    def spawn_task(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A background task the runtime owns (cancelled at close if still running)."""
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)
        return t

    def stop_job(self, job: Job, reason: str) -> None:
        """End a running job as ``reason`` (its tree killed with the configured grace)."""
        if not job.terminal and job.driver is not None and job.kill_reason is None:
            self.spawn_task(job.driver.stop(reason, self.grace_s))

    def output_limit(self, job: Job) -> None:
        """The job's log hit its cap: the job ends as ``output_limit``."""
        self.stop_job(job, "output_limit")

    def deadline(self, job: Job, timeout_ms: int) -> None:
        """Kill the job at ``timeout_ms`` (0 = never) unless it ended first."""
        if timeout_ms <= 0:
            return

        def fire() -> None:
            if not job.terminal and job.driver is not None:
                self.spawn_task(job.driver.stop("timed_out", self.grace_s))

        handle = asyncio.get_running_loop().call_later(timeout_ms / 1000, fire)
        job.on_finish(lambda _job: handle.cancel())
