"""The screens of terminal jobs (pty, shell), emulated only while someone looks (SPEC §8).

Nothing runs on a job's output path but the recording's marks (core/output/cast.py): the
emulator (core/output/screen.py) costs microseconds a byte, far more than reading a busy job's
output, so it is fed from the job's log when the screen is looked at (the dashboard's poll, the
``screen`` resource, ``read {screen: true}``), with what arrived since the last look. A look
feeds at most ``catchup`` bytes: after a longer gap the screen restarts from the last full
repaint within reach (a clear, the alternate screen, a reset), else from the last ``catchup``
bytes, so a look costs milliseconds however much the job printed. At most ``keep`` screens are
held (least recently looked at dropped first, rebuilt from the log if looked at again).
"""

from __future__ import annotations

from collections import OrderedDict

from conch.core.jobs.job import Job
from conch.core.output.screen import Screen, ScreenSnapshot
from conch.core.output.utf8 import boundary_at_or_after
from conch.errors import ConchError

# where a screen may be rebuilt from: everything before it is painted over
_REPAINTS = (b"\x1b[2J", b"\x1b[?1049h", b"\x1b[?1047h", b"\x1bc", b"\x1b[H\x1b[J")
_ALT_ON = (b"\x1b[?1049h", b"\x1b[?1047h", b"\x1b[?47h")
_ALT_OFF = (b"\x1b[?1049l", b"\x1b[?1047l", b"\x1b[?47l")


class _Entry:
    __slots__ = ("fed_to", "screen", "snap", "version")

    def __init__(self, rows: int, cols: int) -> None:
        self.screen = Screen(rows, cols)
        self.fed_to = 0  # log offset fed so far
        self.snap: ScreenSnapshot | None = None
        self.version = -1


class Screens:
    def __init__(self, *, keep: int, catchup: int) -> None:
        self.keep = keep
        self.catchup = catchup
        self._held: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes_fed = 0  # for the bench: what the emulator has been given in all

    def look(self, job: Job) -> ScreenSnapshot:
        """The job's screen now."""
        rec = job.recording
        if rec is None:
            raise ConchError(
                "invalid_argument", f"job {job.job_id} has no terminal (only pty and shell jobs)"
            )
        rows, cols = rec.size
        entry = self._held.get(job.job_id)
        if entry is None:
            entry = self._held[job.job_id] = _Entry(rows, cols)
            while len(self._held) > self.keep:
                self._held.popitem(last=False)
        else:
            self._held.move_to_end(job.job_id)
        if (
            entry.snap is not None
            and entry.version == job.version
            and entry.screen.size
            == (
                rows,
                cols,
            )
        ):
            return entry.snap
        entry.screen.resize(rows, cols)
        self._catch_up(entry, job)
        entry.snap = entry.screen.snapshot()
        entry.version = job.version
        return entry.snap

    def drop(self, job_id: str) -> None:
        self._held.pop(job_id, None)

    def _catch_up(self, entry: _Entry, job: Job) -> None:
        end = job.log.size()
        self.bytes_fed += feed_to(entry.screen, job, entry.fed_to, end, self.catchup)
        entry.fed_to = end

    def at(self, job: Job, t: float) -> tuple[ScreenSnapshot, float]:
        """The job's screen ``t`` seconds into its recording (the dashboard's replay), and the
        recording's length in seconds. Built afresh, at the same bounded cost as a look."""
        rec = job.recording
        if rec is None:
            raise ConchError(
                "invalid_argument", f"job {job.job_id} has no terminal (only pty and shell jobs)"
            )
        screen = Screen(*rec.first_size)
        end = min(rec.offset_at(t), job.log.size())
        self.bytes_fed += feed_to(screen, job, 0, end, self.catchup)
        return screen.snapshot(), rec.duration


def feed_to(screen: Screen, job: Job, start: int, end: int, catchup: int) -> int:
    """Feed ``screen`` (which has had the log up to ``start``) the log up to ``end``, at most
    ``catchup`` bytes of it; returns how many bytes were fed."""
    if end - start > catchup:
        start = _restart_point(screen, job, end, catchup)
    if end <= start:
        return 0
    data = job.log.read(start, end)
    screen.feed(data)
    return len(data)


def _restart_point(screen: Screen, job: Job, end: int, catchup: int) -> int:
    """Where to rebuild a screen that fell too far behind: the last full repaint within
    ``catchup`` bytes (then the screen is exact), else the last ``catchup`` bytes (then a
    screen drawn piecemeal may miss what was drawn before; scrolling text is exact)."""
    reach = max(0, end - 4 * catchup)
    window = job.log.read(reach, end)
    cut = max(0, len(window) - catchup)
    screen.reset()
    best = max(window.rfind(m) for m in _REPAINTS)
    if best >= cut:
        return reach + best
    # the last alternate-screen switch before the cut still holds
    before = window[: cut + 8]
    if max(before.rfind(m) for m in _ALT_ON) > max(before.rfind(m) for m in _ALT_OFF):
        screen.feed(b"\x1b[?1049h")
    return reach + cut + boundary_at_or_after(window[cut : cut + 4], 0)
