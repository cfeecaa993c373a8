"""One persistent shell (bash or zsh) on a PTY, and the driver of the job running in it.

Design (why it is exact and quiet):

* The shell runs without line editing (``bash --noediting``, zsh ``unsetopt zle``), so nothing
  redraws the command line, there is no bracketed paste, and the only echo is the kernel's
  echo of what we type — one short *trigger line* that the echo filter removes.
* The command itself never crosses the terminal: it is written to a private file that the
  trigger line sources (``. file``) in the shell itself, so heredocs, quotes, multi-line text and
  any length are safe, and cwd/variables/functions persist as if typed.
* The end of a command is written by the prompt hook (``PROMPT_COMMAND`` / ``precmd``), which
  runs however the command line ended — normally, by Ctrl-C in the middle of a list, by a syntax
  error — with ``$?`` and a per-command nonce (see ``markers.py``), not to the terminal but to
  the shell's marker channel (``channel.py``). When it comes, everything the command printed
  is in the terminal's buffers already (the shell waited for it first): they are read empty,
  then the job ends.
* Prompts are empty; job control is off (no ``[1]+ Done`` notices); before each command the
  terminal is reset to sane modes (echo on, canonical input, ``\\n`` line ends).

Why no command can end itself or a later command of its shell with a marker of its choosing:

* Nothing the terminal shows ends a command: markers never travel there. A command that prints
  a marker, with any token or nonce it reads from the shell's variables, prints output, and it
  never sees the next trigger line (none is typed while it runs).
* The channel is a Unix socket, descriptor 8 of the shell, and each command runs with it
  closed (``. file 8>&-``; the shell keeps its copy close-on-exec until the file returns), so no
  program a command starts holds it (a subshell, ``( … ) &``, keeps the copy, as a process of
  its own). A process cannot reopen a socket through
  ``/proc/<shell>/fd`` (ENXIO); one that takes a copy anyway (``pidfd_getfd``, which the same
  user may do where Yama's ptrace_scope is 0, sandboxed or not) writes messages that the
  kernel stamps with its own pid (``SCM_CREDENTIALS``), and only the shell's own pid counts.
  So neither a foreground child nor one left in the background, at any later time, ends a
  command — also while the shell itself runs a builtin, where no foreground child would give
  a forger away.

What it does not hold against (said in docs/security.md too):

* Code that runs in the shell process itself: the command's own text and the scripts it sources
  (``. venv/bin/activate``) are the shell. They can write to the shell's copy of descriptor 8
  (bash lets any descriptor be named; zsh's ``zsh/system`` module can), redefine the hook, set
  traps, or ``exec`` another program in the shell's place — and so make later commands of that
  shell report what they like. A shell is one trust domain with everything run in it.
* A process that can debug the shell (``ptrace``, writes to ``/proc/<pid>/mem``: the same user
  where Yama's ptrace_scope is 0, or root) can make the shell itself write.
* Elsewhere than Linux the kernel does not say who wrote a message: only the closed descriptor
  keeps the channel the shell's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import termios
import time
from datetime import datetime, timezone
from typing import Any

from conch.core.containment.fence import SpawnFence, inner_pid
from conch.core.jobs.job import Job
from conch.core.jobs.takeover import Attendance
from conch.core.output.cast import Recording
from conch.core.output.normalize import normalize
from conch.core.process import procfs, terminal
from conch.core.process.exit_watch import ExitWatch, decode_status
from conch.core.process.feeder import Feeder
from conch.core.process.hygiene import TAG_VAR, kill_tree_now, signal_pids, terminate_tree
from conch.core.process.spec import SpawnSpec
from conch.core.results import ShellSummary, timestamp
from conch.core.shell import channel
from conch.core.shell.boot import ARGV, BOOT, TRIGGER_END
from conch.core.shell.command import ShellCommandDriver
from conch.core.shell.command_file import CommandFile
from conch.core.shell.markers import EchoFilter, Markers
from conch.core.shell.state import UNAVAILABLE, ShellState, move
from conch.core.spawn import SpawnContext
from conch.errors import ConchError

_BOOT_TIMEOUT_S = 10.0
_STARTUP_TIMEOUT_S = 60.0
_PENDING_CAP = 16 * 1024 * 1024
_SIGINT_BIT = 1 << (signal.SIGINT - 1)
_SIGQUIT_BIT = 1 << (signal.SIGQUIT - 1)
_INT_BREAKS = (b"\r\n", b"\n")  # what bash and zsh print as Ctrl-C ends a command line
# what the terminal can hold when a command's end marker comes: all of it is the command's
# (the kernel's buffers of a PTY hold well under this)
_DRAIN_LIMIT = 4 << 20


class Shell:
    """A shell process and its terminal; restarted under the same id if it exits."""

    def __init__(
        self,
        ctx: SpawnContext,
        *,
        shell_id: str,
        name: str | None,
        kind: str,
        path: str,
        version: str,
        cwd: str,
        env: dict[str, str],
        startup_command: str | None,
        fence_args: dict[str, Any] | None = None,
        echo: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        self.ctx = ctx
        self.echo = echo  # False: the terminal never echoes what is written to it
        self.size = size or (terminal.ROWS, terminal.COLS)  # the terminal's rows × columns
        self._fence_args = fence_args or {}
        self._fence: SpawnFence | None = None
        self._inner: int | None = None  # the shell itself, when a bwrap monitor leads
        self.shell_id = shell_id
        self.name = name
        self.kind = kind
        self.path = path
        self.version = version
        self.cwd = cwd
        self._env = env
        self._startup = startup_command
        self.state = ShellState.STARTING
        self.created_at = datetime.now(timezone.utc)
        self.job: Job | None = None  # the command running now
        self.last_job_id: str | None = None  # the latest command it was given
        # a command a person ran here from the dashboard, not yet told to the agent
        self.human: Attendance | None = None
        self.generation = 0
        self.pid: int | None = None
        self._loop = asyncio.get_running_loop()
        self._master: int | None = None
        self._tty = ""
        self._tag = b""
        self._sane: list[Any] = []
        self._watch: ExitWatch | None = None
        self._echo = EchoFilter()  # the terminal stream less the trigger line's echo
        self._markers = Markers()  # which end marker ends the command that runs
        self._chan: channel.Channel | None = None  # Conch's end of the marker channel
        self._hello: asyncio.Future[None] | None = None  # the launcher made the channel
        self._cmd: CommandFile | None = None  # where each command goes (core/shell/command_file)
        self._pending = bytearray()  # output while no job runs: it goes to the next job
        self._input: Feeder | None = None  # typed for the running command, not yet taken
        self._capture: bytearray | None = None  # output of internal commands (startup)
        self._internal: asyncio.Future[int] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._reaped: asyncio.Event = asyncio.Event()
        self._cleanup: asyncio.Task[Any] | None = None
        # after Ctrl-C: what the terminal showed since, held while it may be bash's own line
        # break for the interrupted command line (terminal noise, docs/spec.md §4), else None
        self._since_int: bytearray | None = None

    # -- state -------------------------------------------------------------------------------

    def _to(self, new: ShellState) -> None:
        """The one place the shell's state moves (see state.py for the moves)."""
        self.state = move(self.state, new)

    # -- start -------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.job is not None or self.state in UNAVAILABLE

    async def start(self) -> None:
        """Spawn, bootstrap and run the startup command; on failure nothing is left running."""
        self._to(ShellState.STARTING)
        try:
            await self._spawn()
            if self._startup:
                status, out = await self._run_internal(self._startup)
                if status != 0:
                    text = normalize(out).strip()[-4000:]
                    raise ConchError(
                        "spawn_failed",
                        f"startup_command failed with exit status {status}"
                        + (f": {text}" if text else ""),
                    )
                self.cwd = self._current_cwd()  # the startup command may have cd'ed
        except BaseException:
            await self._kill(0.0)
            self._to(ShellState.EXITED)
            raise
        self._to(ShellState.READY)

    async def _spawn(self) -> None:
        self.generation += 1
        tag_id = self.shell_id if self.generation == 1 else f"{self.shell_id}.{self.generation}"
        env = self.ctx.child_env(tag_id, pty=True, env=self._env)
        cwd = self.cwd if os.path.isdir(self.cwd) else self.ctx.config.resolved_default_cwd
        self.cwd = cwd
        self._tag = env[TAG_VAR].encode()
        self._echo, self._markers = EchoFilter(), Markers()
        self._reaped = asyncio.Event()
        if self._cmd is None:
            self._cmd = CommandFile(self.ctx.data, self.shell_id, self.kind)
        self._drop_cgroup()
        self._fence = await self.ctx.fence(tag_id, shell=True, **self._fence_args)
        spawner = self._fence.spawner if self._fence is not None else None
        mine: channel.Channel | None = None
        theirs = None
        try:
            argv, place = [self.path, *ARGV[self.kind]], None
            if spawner is not None:  # (it passes no descriptor: a launcher makes the pair)
                argv = channel.launcher_argv(argv)
            else:
                mine, theirs = channel.pair()
            if self._fence is not None:
                exposed = [self._cmd.path]
                argv, env, place = self._fence.prepare(argv, cwd=cwd, env=env, exposed=exposed)
            spec = SpawnSpec(
                None,
                argv,
                env,
                cwd,
                cgroup=place,
                fds=(theirs.fileno(),) if theirs is not None else (),
                first_fd=channel.FD,
            )
            pid, master, self._tty, self._sane = terminal.spawn(
                spec, echo=self.echo, size=self.size, spawner=spawner
            )
        except BaseException:
            if mine is not None:
                mine.close()
            self._drop_cgroup()
            raise
        finally:
            if theirs is not None:
                theirs.close()
        self.pid, self._master = pid, master
        self._inner = None
        self._input = Feeder(master)
        self.ctx.reaper.known_sids.add(str(pid))
        self._capture = bytearray()
        self._internal = self._loop.create_future()
        self._loop.add_reader(master, self._on_readable)
        self._watch = ExitWatch(pid, self._on_exit, self.ctx.reaper.awaited)
        try:
            if mine is None:
                mine = await self._take_channel(pid)
            self._chan = mine
            self._loop.add_reader(mine.fileno(), self._on_channel)
            nonce = secrets.token_hex(6)
            self._markers.expect(nonce)
            self._echo.expect(None)
            self._write(BOOT[self.kind].replace("@NONCE@", nonce).encode())
            await asyncio.wait_for(asyncio.shield(self._internal), _BOOT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ConchError("spawn_failed", f"{self.kind} did not start in time") from None
        finally:
            self._capture = None
            self._internal = None
        if self._fence is not None and self._fence.monitor and self._inner is None:
            self._inner = inner_pid(pid)

    async def _take_channel(self, pid: int) -> channel.Channel:
        """Conch's end of the channel from the shell's launcher (channel.py), once it says so."""
        self._hello = self._loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._hello), _BOOT_TIMEOUT_S)
            return channel.take(pid)
        except OSError as e:
            raise ConchError(
                "spawn_failed", f"cannot connect to the {self.kind} it starts: {e.strerror or e}"
            ) from None
        finally:
            self._hello = None

    @property
    def sandboxed(self) -> bool:
        return self._fence is not None and self._fence.sandbox is not None

    @property
    def shell_pid(self) -> int | None:
        """The shell process (under a sandbox, not the bwrap monitor that leads its session)."""
        return self._inner or self.pid

    def _drop_cgroup(self) -> None:
        """Remove the previous incarnation's cgroup (killing what is left in it)."""
        cg = self._fence.cgroup if self._fence is not None else None
        if cg is not None:
            cg.kill()
            cg.remove()
        if self._fence is not None:
            self._fence.drop_tmp()
        self._fence = None

    async def _run_internal(self, command: str) -> tuple[int, bytes]:
        self._capture = bytearray()
        self._internal = self._loop.create_future()
        self._send(command, {})
        try:
            status = await asyncio.wait_for(asyncio.shield(self._internal), _STARTUP_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ConchError(
                "spawn_failed", f"startup_command did not finish within {_STARTUP_TIMEOUT_S:g} s"
            ) from None
        except ConchError as e:  # the shell exited: the command ended it (`exit 3`)
            text = normalize(bytes(self._capture or b"")).strip()[-4000:]
            raise ConchError(
                "spawn_failed",
                f"startup_command ended the shell ({e.message})" + (f": {text}" if text else ""),
            ) from None
        finally:
            out = bytes(self._capture or b"")
            self._capture = None
            self._internal = None
        return status, out

    # -- commands ----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """Type into the terminal; what it cannot take now is written when it can (never
        blocking the event loop)."""
        assert self._input is not None
        self._input.put(data)

    def _send(self, command: str, assign: dict[str, str]) -> None:
        """Put the command in the command file and type the trigger line that sources it."""
        assert self._cmd is not None
        nonce = secrets.token_hex(6)
        line = self._cmd.write(command, assign, nonce)
        line = line.removesuffix(b"\n") + TRIGGER_END  # (it runs with the channel closed)
        echo: bytes | None = line
        assert self._master is not None
        try:
            attrs = termios.tcgetattr(self._master)
            if attrs != self._sane:
                # reset what a previous program left (stty raw, -echo, onlcr); setting is
                # much dearer than looking, so only when something changed
                termios.tcsetattr(self._master, termios.TCSANOW, self._sane)
                attrs = termios.tcgetattr(self._master)
            if not attrs[3] & termios.ECHO:
                echo = None
        except termios.error:
            pass
        held = self._echo.flush()  # (a possible start of an earlier echo that never came)
        if held:
            self._terminal_output(held)
        self._echo.expect(echo)
        self._markers.expect(nonce)
        self._write(line)

    async def claim(self) -> bool:
        """Make the shell ready for a command: ``shell_busy`` if it runs one (or is starting or
        closing); a shell that exited is restarted first. True if it was restarted."""
        if self.busy:
            raise ConchError(
                "shell_busy",
                f"shell {self.shell_id} is running "
                f"{self.job.job_id if self.job else 'something'}; "
                "wait for it, or signal it",
            )
        if self.state is not ShellState.EXITED:
            return False
        self._to(ShellState.STARTING)  # holds the shell against a concurrent exec
        try:
            await self.restart()
        except BaseException:
            self._to(ShellState.EXITED)
            raise
        return True

    def run(self, job: Job, command: str, assign: dict[str, str]) -> None:
        """Start a job: the command runs in the shell; the job ends at its end marker."""
        job.driver = ShellCommandDriver(self, job)
        job.recording = Recording(*self.size)
        self.job = job
        self.last_job_id = job.job_id
        self._to(ShellState.BUSY)
        self._stop_task = None
        if self._fence is not None and self._fence.cgroup is not None:
            self._fence.cgroup.mark_oom()
        try:
            if self._pending:
                self._append(bytes(self._pending))
                self._pending.clear()
            self._send(command, assign)
        except BaseException:
            self.job = None
            if self.state is ShellState.BUSY:
                self._to(ShellState.READY)
            job.finish("cancelled")
            job.log.close_writer()
            raise

    # -- terminal output ---------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._master is None:
            return
        data = terminal.read_master(self._master)
        if data is None:
            self._close_master()
            return
        if data:
            self._terminal_output(self._echo.feed(data))

    def _terminal_output(self, data: bytes) -> None:
        self._output(self._cmd.scrub.feed(data) if self._cmd else data)

    def _on_channel(self) -> None:
        """Messages on the marker channel: the shell's end marker ends its command; whatever
        another process wrote (one that took a copy of the shell's end) ends nothing."""
        if self._chan is None:
            return
        for pid, message in self._chan.receive():
            if pid is not None and pid != self._marker_writer():
                continue
            done = self._markers.take(message)
            if done is not None:
                self._ended(done.status)

    def _marker_writer(self) -> int | None:
        """The one process whose end markers count: the shell itself (under bwrap, not the
        monitor that leads its session)."""
        fence = self._fence
        if self._inner is None and fence is not None and fence.monitor and self.pid is not None:
            self._inner = inner_pid(self.pid)
        return self.shell_pid

    def _ended(self, status: int) -> None:
        """The command ended with ``status``: what it printed is all in the terminal's
        buffers by now (the shell wrote the marker after it ended), so read them empty first."""
        got = 0
        while self._master is not None and got < _DRAIN_LIMIT:
            data = terminal.read_master(self._master)
            if data is None:
                self._close_master()
                break
            if not data:
                break
            got += len(data)
            self._terminal_output(self._echo.feed(data))
        self._terminal_output(self._echo.flush())
        if self._cmd:
            self._output(self._cmd.scrub.flush())
        held, self._since_int = self._since_int, None
        if held and held not in _INT_BREAKS:
            self._append(bytes(held))
        self._done(status)

    def _output(self, data: bytes) -> None:
        """The command's output, less the lone line break an interactive shell (bash, zsh)
        prints when Ctrl-C ends the command line: after an interrupt, output that is still
        nothing but (a prefix of) one line break is held; more output releases it, the end
        marker drops it."""
        held = self._since_int
        if held is None:
            self._append(data)
            return
        held += data
        if not any(b.startswith(held) for b in _INT_BREAKS):
            self._since_int = None
            self._append(bytes(held))

    def _append(self, data: bytes) -> None:
        job = self.job
        if self._capture is not None:
            self._capture += data
            hello = self._hello
            if hello is not None and not hello.done() and channel.HELLO in self._capture:
                hello.set_result(None)
        elif job is not None and not job.terminal:
            job.log.append(data, 0)
            job.output_arrived()
            if job.log.full:
                self.ctx.output_limit(job)
        elif len(self._pending) < _PENDING_CAP:
            self._pending += data[: _PENDING_CAP - len(self._pending)]

    def _current_cwd(self) -> str:
        pid = self.shell_pid
        if pid is not None:
            try:
                if procfs.LINUX:
                    return os.readlink(f"/proc/{pid}/cwd")
                import psutil

                return psutil.Process(pid).cwd()
            except Exception:
                pass
        return self.cwd

    def _blank_command_file(self) -> None:
        if self._cmd is not None:
            self._cmd.blank()

    def _done(self, status: int) -> None:
        self._blank_command_file()
        if self._internal is not None:
            if not self._internal.done():
                self._internal.set_result(status)
            return
        job = self.job
        if job is None:
            return
        self.cwd = self._current_cwd()
        job.cwd = self.cwd
        self.job = None
        if self._input is not None:
            self._input.clear()  # what the command did not read must not become shell input
        if self.state is ShellState.BUSY:
            self._to(ShellState.READY)
        if job.kill_reason:
            state = job.kill_reason
        elif self._oom():
            state, job.limit = "limit", "memory_max"
        elif status > 128 and status - 128 in job.sent_signals:
            state = "cancelled"
        else:
            state = "exited"
        signum = status - 128 if state == "cancelled" and status > 128 else None
        job.finish(state, exit_code=status, signum=signum)
        job.log.close_writer()

    # -- shell exit --------------------------------------------------------------------------

    def _on_exit(self, status: int) -> None:
        self._blank_command_file()
        self._reaped.set()
        self._drain()
        self._terminal_output(self._echo.flush())
        if self._cmd:
            self._output(self._cmd.scrub.flush())
        held, self._since_int = self._since_int, None
        if held:  # no end marker came: the shell died, and what it printed is output
            self._append(bytes(held))
        code, signum = decode_status(status)
        for starting in (self._internal, self._hello):
            if starting is not None and not starting.done():
                starting.set_exception(
                    ConchError(
                        "spawn_failed",
                        f"{self.kind} exited during startup ("
                        + (f"exit status {code}" if signum is None else f"signal {signum}")
                        + ")",
                    )
                )
                starting.exception()  # mark retrieved
        job = self.job
        if self.state in (ShellState.READY, ShellState.BUSY):
            self._to(ShellState.EXITED)
        if job is not None:
            self.job = None
            job.cwd = self.cwd
            state = job.kill_reason or "exited"
            if not job.kill_reason and self._oom():
                state, job.limit = "limit", "memory_max"
            job.finish(state, exit_code=code, signum=signum)
            job.log.close_writer()
        if self.state is ShellState.EXITED and self._cleanup is None:
            # what the shell left behind (background jobs) goes with it, like a closed terminal
            self._cleanup = self.ctx.spawn_task(self._kill(0.0))

    def _oom(self) -> bool:
        cg = self._fence.cgroup if self._fence is not None else None
        return cg is not None and cg.oom_since_mark() > 0

    def _drain(self) -> None:
        deadline = time.monotonic() + 0.05
        while self._master is not None and time.monotonic() < deadline:
            data = terminal.read_master(self._master)
            if not data:
                break
            self._terminal_output(self._echo.feed(data))

    def _close_master(self) -> None:
        if self._chan is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._chan.fileno())
            self._chan.close()
            self._chan = None
        if self._input is not None:
            self._input.clear()
            self._input = None
        if self._master is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._master)
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_writer(self._master)
            os.close(self._master)
            self._master = None

    # -- signals -----------------------------------------------------------------------------

    def cgroup_pids(self) -> set[int]:
        cg = self._fence.cgroup if self._fence is not None else None
        return cg.pids() if cg is not None else set()

    def _collect(self) -> set[int]:
        if self.pid is None:
            return set()
        pids = procfs.scan_job(self.pid, self.pid, TAG_VAR.encode(), self._tag)
        if self._fence is not None and self._fence.cgroup is not None:
            pids |= self._fence.cgroup.pids()
        if not self._reaped.is_set():
            pids.add(self.pid)
        return pids

    def _foreground(self) -> set[int]:
        """Processes of the running command: the shell's descendants minus background jobs."""
        shell = self.shell_pid
        if shell is None:
            return set()
        shell_ignores_int = procfs.ignored(shell) & _SIGINT_BIT
        fg: set[int] = set()
        for child in procfs.children(shell):
            mask = procfs.ignored(child)
            if not shell_ignores_int and mask & _SIGINT_BIT and mask & _SIGQUIT_BIT:
                continue  # started with `&`: job control is off, so it ignores INT and QUIT
            fg.add(child)
        return fg | procfs.descendants(fg)

    def interrupt(self) -> None:
        """What Ctrl-C does: SIGINT to the terminal's foreground group (the shell included)."""
        if self.pid is None:
            return
        if self.job is not None and self._since_int is None:
            self._since_int = bytearray()
        groups = {self.pid}
        if self._master is not None:
            with contextlib.suppress(OSError):
                groups.add(os.tcgetpgrp(self._master))
        for g in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, signal.SIGINT)

    def signal_command(self, signum: int) -> None:
        if signum == signal.SIGINT:
            self.interrupt()
        else:
            signal_pids(self._foreground(), signum)

    async def stop_job(self, job: Job, reason: str, grace_s: float) -> None:
        if job.terminal or job is not self.job:
            return
        if job.kill_reason is None:
            job.kill_reason = reason
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(job, grace_s))
        await asyncio.shield(self._stop_task)

    async def _stop(self, job: Job, grace_s: float) -> None:
        """Stop the command and the rest of its command line; the shell survives if it can."""

        async def ended(limit: float) -> bool:
            return await job.wait_until(lambda: job.terminal, limit)

        self.interrupt()  # aborts the whole command line, like Ctrl-C
        if await ended(0.3):
            return
        self.interrupt()
        fg = self._foreground()
        signal_pids(fg, signal.SIGCONT)
        signal_pids(fg, signal.SIGTERM)
        if await ended(min(grace_s, 0.4)):
            return
        self.interrupt()
        signal_pids(self._foreground(), signal.SIGKILL)
        if await ended(0.5):
            return
        # the shell did not come back: start a fresh one in the same place, then end the job
        self.job = None
        closing = self.state in (ShellState.CLOSING, ShellState.CLOSED)
        if not closing:
            self._to(ShellState.STARTING)
        await self._kill(0.0)
        job.restarted = True
        if not closing:
            with contextlib.suppress(Exception):
                await self.restart()
        job.cwd = self.cwd
        job.finish(job.kill_reason or "cancelled")
        job.log.close_writer()

    async def restart(self) -> None:
        if self._cleanup is not None:
            with contextlib.suppress(Exception):
                await self._cleanup
            self._cleanup = None
        await self._kill(0.0)
        self._close_master()
        await self.start()

    # -- input (write) -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Type into the running command; what the terminal cannot take yet is queued."""
        if self._master is None or self._input is None:
            raise ConchError("stdin_closed", "the shell's terminal is closed")
        if self.job is not None:
            self._input.put(data)

    def eof(self) -> None:
        if self._master is not None:
            self.write(terminal.eof_byte(self._master))

    def resize(self, rows: int, cols: int) -> None:
        """Set the terminal's size, for the running command and the ones after it."""
        if self._master is None:
            raise ConchError("stdin_closed", "the shell's terminal is closed")
        terminal.set_size(self._master, rows, cols)
        self.size = (rows, cols)

    def input_state(self) -> tuple[bool, bool]:
        if self._master is None or self.pid is None:
            return False, False
        pids = [self.pid, *procfs.descendants([self.pid])]
        return terminal.input_state(self._master, self._tty, pids)

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        if self._master is None or self.pid is None:
            return ()
        pids = [self.pid, *procfs.descendants([self.pid])]
        return tuple((p, procfs.exe(p)) for p in terminal.readers(self._master, self._tty, pids))

    # -- close -------------------------------------------------------------------------------

    async def _kill(self, grace_s: float, limit_s: float = 1.5) -> bool:
        """Kill the shell and every process in it; True if all are gone and reaped."""
        pid, tag, reaped = self.pid, self._tag, self._reaped
        if pid is None:
            return True

        cg = self._fence.cgroup if self._fence is not None else None

        def collect() -> set[int]:  # bound to this incarnation, not to a restarted one
            pids = procfs.scan_job(pid, pid, TAG_VAR.encode(), tag)
            if cg is not None:
                pids |= cg.pids()
            if not reaped.is_set():
                pids.add(pid)
            return pids

        if not reaped.is_set():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)  # the shell ignores TERM: no point waiting
        if grace_s > 0:
            await terminate_tree(collect, [pid], grace_s, self.ctx.reaper)
        else:
            await kill_tree_now(collect, [pid], self.ctx.reaper, limit_s=limit_s)
        if cg is not None:  # nothing that left the session or cleared its environment survives
            await cg.kill_and_wait(self.ctx.reaper.sweep, limit_s=limit_s)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(reaped.wait(), limit_s)
        if cg is not None and not cg.populated:
            cg.remove()
        if self.pid == pid:
            self._drain()
            self._close_master()
        return reaped.is_set() and not collect()

    async def close(self, timeout_s: float) -> bool:
        """End the shell and everything in it within timeout_s; True if cleanup completed.
        Cancelled (the runtime's shutdown ran out of time), it still ends the job and closes
        its files; what is left alive is the runtime's final sweep's."""
        self._to(ShellState.CLOSING)
        job = self.job
        if job is not None and job.kill_reason is None:
            job.kill_reason = "cancelled"
        t0 = time.monotonic()
        grace = min(self.ctx.config.kill_grace_ms / 1000, timeout_s * 0.4)
        ok = False
        try:
            try:
                ok = await asyncio.wait_for(self._kill(grace, limit_s=timeout_s * 0.4), timeout_s)
            except asyncio.TimeoutError:
                ok = False
            if not ok:
                remaining = max(0.1, timeout_s - (time.monotonic() - t0))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(
                        kill_tree_now(
                            self._collect, [self.pid or 0], self.ctx.reaper, limit_s=remaining
                        ),
                        remaining,
                    )
                ok = not self._collect()
        finally:
            self._release(job)
        return ok

    def _release(self, job: Job | None) -> None:
        """The shell is closed: its job ends, every file it holds is closed."""
        if job is not None and not job.terminal:
            self.job = None
            job.cwd = self.cwd
            job.finish("cancelled")
            job.log.close_writer()
        if self._watch is not None:
            self._watch.close()
        if self.pid is not None and not self._reaped.is_set():
            self.ctx.reaper.awaited.discard(self.pid)
        self._close_master()
        self._drop_cgroup()
        if self._cmd is not None:
            self._cmd.close()
            self._cmd = None
        self._to(ShellState.CLOSED)

    def summary(self) -> ShellSummary:
        return {
            "shell_id": self.shell_id,
            "name": self.name,
            "shell": self.kind,
            "state": "busy" if self.job is not None else self.state.value,
            "cwd": self.cwd,
            "job_id": self.job.job_id if self.job is not None else None,
            "last_job_id": self.last_job_id,
            "created_at": timestamp(self.created_at),
        }
