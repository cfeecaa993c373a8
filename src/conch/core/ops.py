"""What ``read``, ``write`` and ``signal`` do to a job (docs/spec.md §6), once the engine has found
it and checked the request: waits, input, signals and the window of output each result shows."""

from __future__ import annotations

import asyncio
import contextlib
import signal as signal_mod
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

from conch.core.jobs import waits
from conch.core.jobs.job import Job, JobDriver
from conch.core.jobs.screens import Screens
from conch.core.jobs.snapshot import STREAMS, observe, snapshot, summary
from conch.core.jobs.takeover import Attendance
from conch.core.jobs.view import JobView
from conch.core.jobs.waits import Watch
from conch.core.output import window as win
from conch.core.output.digest_log import FOLLOW_FROM, LogDigest, digest_of, follow
from conch.core.output.screen import screen_text
from conch.core.process.keys import encode_keys, pipe_keys
from conch.core.requests import CallContext, CheckedRead, SignalRequest, WriteRequest
from conch.core.results import JobSnapshot, JobSummary
from conch.core.spawn import SpawnContext
from conch.errors import ConchError


def _job(view: JobView) -> Job:
    assert isinstance(view, Job), "a JobView comes from this engine"
    return view


def peek(
    view: JobView, start: int, budget: int, *, raw: bool = True
) -> tuple[JobSnapshot, win.Window]:
    """The job's snapshot with at most ``budget`` bytes of its log from ``start`` (raw: as
    printed, decoded but not normalized), and that window. No read cursor moves: for views
    of their own (a profile's buffer)."""
    job = _job(view)
    observe(job)
    w = log_window(job, start, budget, raw=raw)
    return snapshot(job, w), w


def log_window(view: JobView, start: int, budget: int, *, raw: bool = True) -> win.Window:
    """At most ``budget`` bytes of the job's log from ``start``, cut at character
    boundaries, as text (raw: decoded, not normalized) with its cursors."""
    job = _job(view)
    return win.forward(
        job.log, start, job.log.size(), budget, stream=None, raw=raw, final=job.terminal
    )


def job_summary(view: JobView) -> JobSummary:
    """The job's ``list`` entry."""
    return summary(_job(view))


def window_from(job: Job, start: int | None, budget: int) -> JobSnapshot:
    """The job's snapshot with the output after ``start`` (the exec preview when None)."""
    observe(job)
    if start is None:
        w = win.preview(job.log, budget, final=job.terminal)
    else:
        w = win.following(job.log, start, budget, final=job.terminal)
    job.read_cursor[None] = w.next_cursor
    return snapshot(job, w)


async def with_digest(job: Job, snap: JobSnapshot, want: bool | None) -> JobSnapshot:
    """``snap`` with the digest of the job's output (core/output/digest.py) when it has one:
    ``want`` None: when the job has finished, the window left output out and no result
    carried the digest yet; True: whenever the job has finished; False: never. A window
    that shows all there is costs nothing here."""
    if want is False or not job.terminal:
        return snap
    held = job.digest
    fits = not (snap["truncated"] or snap["omitted_bytes"])
    if want is None and (fits or (held is not None and held.shown)):
        return snap
    if held is None:
        held = job.digest = LogDigest()
    found = await digest_of(job.log, held, cut=job.state == "output_limit", always=want is True)
    if found is not None:
        held.shown = True
        snap["digest"] = found
    return snap


def follow_digests(
    jobs: Iterable[Job], spawn_task: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
) -> None:
    """Start digesting the log of each running job that printed more than any window holds
    (``FOLLOW_FROM``), unless its exec said ``digest: false``: the digest of a job printing
    100 MB is then built while it prints, not after (core/output/digest_log.py). An exec's
    job starts as soon as its log passes the mark (``follow_when_big``); this sweep catches
    the others."""
    for job in jobs:
        if job.terminal or job.digest_off or job.log.size() < FOLLOW_FROM:
            continue
        follow_digest(job, spawn_task)


def follow_when_big(
    job: Job, spawn_task: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
) -> None:
    """Follow the job's digest from the moment its log passes ``FOLLOW_FROM``."""
    job.on_big_output = lambda j: follow_digest(j, spawn_task)


def follow_digest(
    job: Job, spawn_task: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]
) -> None:
    if job.terminal or job.digest_off:
        return
    held = job.digest
    if held is None:
        held = job.digest = LogDigest()
    if not held.following:
        held.following = True
        spawn_task(follow(job.log, held, _runs(job), _more(job)))


def _runs(job: Job) -> Callable[[], bool]:
    return lambda: not job.terminal


def _more(job: Job) -> Callable[[float], Awaitable[bool]]:
    return lambda timeout_s: job.wait_change(job.version, timeout_s)


async def read(jobs: Sequence[Job], req: CheckedRead, screens: Screens) -> JobSnapshot:
    """The window of the job (the first of ``jobs`` to meet ``until``, waiting up to
    ``wait_ms``; the first listed when none did), from where its last read stopped or from
    ``cursor``. Only that job's read cursor moves. ``screen``: the window is the terminal's
    screen as it looks now (its text, then where the cursor is), and the cursor moves to the
    log's end (what the screen shows was seen)."""
    r = req.request
    stream, cursor = r.stream, r.cursor
    sidx = STREAMS[stream]
    watches = []
    for job in jobs:
        if stream is not None and not job.streams:
            raise ConchError("invalid_argument", "pty and shell jobs have a single stream")
        start = job.read_cursor.get(stream, 0) if cursor is None else cursor
        total = job.log.size(sidx)
        if start > total:
            raise ConchError("invalid_argument", f"cursor {start} is past the end ({total} bytes)")
        watches.append(Watch(job, req.until, start, sidx))
    met = await waits.first(watches, r.wait_ms / 1000) if r.wait_ms > 0 else None
    watch = met or watches[0]
    job, start = watch.job, watch.start
    observe(job)
    if r.screen:
        return screen_snapshot(job, screens, start)
    if r.tail:
        floor = start if cursor is not None else 0
        w = win.last(job.log, floor, req.budget, stream=sidx, raw=r.raw)
    else:
        w = win.following(job.log, start, req.budget, stream=sidx, raw=r.raw, final=job.terminal)
    job.read_cursor[stream] = w.next_cursor
    snap = snapshot(job, w, stream=stream)
    if met is None and r.wait_ms > 0:
        snap["output"] += _unsearched(watches, r.wait_ms)
    # a digest's cursors are of the whole log: a read of one stream gets one on request only
    want = r.digest if stream is None or r.digest is not None else False
    return await with_digest(job, snap, want)


def _unsearched(watches: Sequence[Watch], wait_ms: int) -> str:
    """A note on a read whose wait ran out before its pattern was searched in all the output
    (a slow pattern over much output): the result alone would read as 'not found'."""
    behind = max(w.pattern_behind() for w in watches)
    if not behind:
        return ""
    return (
        f"\n[... until.pattern: {behind} bytes of output were not searched yet when wait_ms "
        f"({wait_ms}) ran out (a slow pattern over much output); a simpler pattern searches "
        "faster ...]"
    )


def screen_snapshot(job: Job, screens: Screens, start: int) -> JobSnapshot:
    """The job's snapshot whose output is its screen (see :func:`read`)."""
    shown = screens.look(job)
    total = job.log.size()
    snap = snapshot(job, win.Window(screen_text(shown), start, total))
    snap["screen"] = {
        "rows": shown["rows"],
        "cols": shown["cols"],
        "cursor": dict(shown["cursor"]),
        "alternate": shown["alternate"],
    }
    job.read_cursor[None] = total
    return snap


def _running(job: Job) -> JobDriver:
    """The driver of a job that runs (``not_running`` for one that does not)."""
    if job.terminal or job.driver is None:
        raise ConchError("not_running", f"job {job.job_id} is {job.state}; nothing to write to")
    return job.driver


def _check_sized(job: Job) -> None:
    """Only a terminal has a size (``resize``'s error for a pipe job)."""
    if job.streams:
        raise ConchError(
            "invalid_argument",
            f"job {job.job_id} runs on pipes, not a terminal: only pty and shell jobs have a "
            "size (exec with pty: true, or a shell)",
            field="resize",
        )


async def write(job: Job, req: WriteRequest, budget: int) -> JobSnapshot:
    driver = _running(job)
    if job.attendance is not None and job.attendance.attended:
        raise ConchError(
            "busy",
            f"a person is typing into job {job.job_id} from the dashboard; retry after they "
            f"hand back or in {job.attendance.idle_in_s:.0f} s (when they stop typing)",
        )
    size = req.size
    if size is not None:
        _check_sized(job)
    data = req.text.encode("utf-8") if req.text is not None else b""
    eof = req.eof
    if req.keys:
        if not job.streams:  # a terminal: keys are what the terminal sends for them
            data += encode_keys(list(req.keys))
        else:  # a pipe has no terminal: keys mean what they would mean to a person
            more, signals, close = pipe_keys(req.keys)
            for sig in signals:
                driver.send_signal(sig)
            data, eof = data + more, eof or close
    before = job.log.size()
    if size is not None:
        resize(job, *size)
    if data:
        await driver.write(data)
    if eof:
        await driver.close_stdin()
    await settle_output(job, req.yield_ms / 1000)
    return window_from(job, before, budget)


def resize(job: Job, rows: int, cols: int) -> None:
    """Set a terminal job's size: its terminal (the program gets SIGWINCH), its recording
    (a resize event where its log stands now) and so its screen (core/jobs/screens.py)."""
    assert job.driver is not None and job.recording is not None
    job.driver.resize(rows, cols)
    job.recording.resize(rows, cols, job.log.size())
    job.notify()


def resize_human(job: Job, rows: int, cols: int) -> None:
    """A person's resize (the dashboard's Fit button): ``write {resize}``'s checks and
    :func:`resize`, but neither the busy check nor attendance: a size is no input, so the
    person may resize while they type, and the agent hears of no ``human_input``."""
    _running(job)
    _check_sized(job)
    resize(job, rows, cols)


def _keys_bytes(job: Job, text: str | None, keys: Sequence[str]) -> bytes:
    data = text.encode("utf-8") if text else b""
    return data + encode_keys(list(keys)) if keys else data


async def type_human(job: Job, text: str | None, keys: Sequence[str], *, idle_s: float) -> int:
    """A person's keys into a terminal job (the dashboard's take-over): the same terminal
    input as ``write`` (text, then keys by ``write``'s names), and the job is attended. Returns
    how many bytes were typed; nothing typed is returned, logged or kept."""
    if job.terminal or job.driver is None or job.streams:
        raise ConchError("not_running", f"job {job.job_id} has no running terminal to type into")
    data = _keys_bytes(job, text, keys)
    if not data:
        return 0
    await job.driver.write(data)
    attend(job, len(data), idle_s=idle_s)
    return len(data)


def attend(job: Job, n: int, *, idle_s: float) -> Attendance:
    """A person gave ``job`` ``n`` bytes (typed, or a command they ran): it is attended."""
    if job.attendance is None:
        job.attendance = Attendance(idle_s)
    job.attendance.idle_s = idle_s
    job.attendance.typed(n)
    job.notify()
    return job.attendance


def hand_back(job: Job) -> None:
    """The person is done: the agent may write again."""
    if job.attendance is not None:
        job.attendance.hand_back()
        job.notify()


async def type_secret(job: Job, text: str) -> None:
    """``text`` and Enter into a job's terminal, and nothing else: no snapshot (no output
    is read, no cursor moves), nothing returned (a password must reach no result)."""
    if job.terminal or job.driver is None or job.streams:
        raise ConchError("not_running", f"job {job.job_id} has no terminal waiting for input")
    await job.driver.write(text.encode("utf-8") + encode_keys(["enter"]))


async def cancelled(job: Job, context: CallContext, spawn: SpawnContext) -> None:
    """An exec's caller gave up while the job ran: stop it (``cancelled``), unless the call
    context says the host gave up for its own timeout (the job then runs on)."""
    if context.keep_on_cancel is not None:
        try:
            keep = await context.keep_on_cancel()
        except Exception:
            keep = False
        if keep:
            return
    if not job.terminal and job.driver is not None:
        await job.driver.stop("cancelled", spawn.grace_s)


async def settle_output(job: Job, limit_s: float, quiet_s: float = 0.05) -> None:
    """Wait until output went quiet for quiet_s after some arrived, the job ended, or limit."""
    deadline = time.monotonic() + limit_s
    start_size = job.log.size()
    while not job.terminal:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        if job.log.size() > start_size:
            changed = await job.wait_change(job.version, min(quiet_s, remaining))
            if not changed:
                return
        else:
            await job.wait_change(job.version, remaining)


async def send_signal(
    job: Job,
    req: SignalRequest,
    signame: str,
    *,
    grace_s: float,
    budget: int,
    spawn_task: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
) -> JobSnapshot:
    """``terminate``/``kill`` stop the whole tree (TERM, grace, KILL: in a task of the
    runtime's, so a caller that stops waiting does not stop the stop); others are sent."""
    driver = job.driver
    if driver is None:
        raise ConchError("not_running", f"job {job.job_id} has no process")
    wait_s = req.wait_ms / 1000
    if job.terminal:
        # finished: the only thing left to stop is what it left behind
        if job.lingering_pids or driver.lingering():
            await driver.kill_lingering()
            job.lingering_pids = []
            job.notify()
        w = win.Window("", job.read_cursor.get(None, 0), job.read_cursor.get(None, 0))
        return snapshot(job, w)
    if req.signal in ("terminate", "kill"):
        task = spawn_task(driver.stop("cancelled", 0.0 if req.signal == "kill" else grace_s))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), wait_s)
    else:
        driver.send_signal(getattr(signal_mod, signame))
        if req.signal not in ("stop", "continue"):
            await job.wait_until(lambda: job.terminal, wait_s)
    return window_from(job, job.read_cursor.get(None, 0), budget)
