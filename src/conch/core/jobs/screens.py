"""The screens of terminal jobs (pty, shell), emulated only while someone looks (docs/spec.md §8).

Nothing runs on a job's output path but the recording's marks (core/output/cast.py): the
emulator (core/output/screen.py) costs microseconds a byte, far more than reading a busy job's
output, so it is fed from the job's log when the screen is looked at (the dashboard's poll, the
``screen`` resource, ``read {screen: true}``), with what arrived since the last look. A look
feeds at most 4 x ``catchup`` bytes: after a longer gap the screen restarts from the last full
repaint within them (a clear, the alternate screen, a reset), else from the last cursor home in
them (where a program that redraws in place starts a frame), else from the last ``catchup``
bytes, so a look costs milliseconds however much the job printed. A program that repaints only
what changed (top redraws its column header once) and is first looked at more than 4 x
``catchup`` bytes after its last full repaint can miss rows it has not drawn since. At most
``keep`` screens are held (least recently looked at dropped first, rebuilt from the log if
looked at again). The
terminal's size follows the recording's resizes, each at the place in the log where it came.
"""

from __future__ import annotations

from collections import OrderedDict

from conch.core.jobs.job import Job
from conch.core.output.cast import Recording
from conch.core.output.screen import Screen, ScreenSnapshot
from conch.core.output.utf8 import boundary_at_or_after
from conch.errors import ConchError

# where a screen may be rebuilt from: everything before it is painted over
_REPAINTS = (b"\x1b[2J", b"\x1b[?1049h", b"\x1b[?1047h", b"\x1bc", b"\x1b[H\x1b[J")
_HOME = b"\x1b[H"
_ALT_ON = (b"\x1b[?1049h", b"\x1b[?1047h", b"\x1b[?47h")
_ALT_OFF = (b"\x1b[?1049l", b"\x1b[?1047l", b"\x1b[?47l")


class _Entry:
    __slots__ = ("fed_to", "resized", "screen", "snap", "version")

    def __init__(self, rows: int, cols: int) -> None:
        self.screen = Screen(rows, cols)
        self.fed_to = 0  # log offset fed so far
        self.resized = 0  # how many of the recording's resizes the screen has had
        self.snap: ScreenSnapshot | None = None
        self.version = -1


def _recording(job: Job) -> Recording:
    if job.recording is None:
        raise ConchError(
            "invalid_argument", f"job {job.job_id} has no terminal (only pty and shell jobs)"
        )
    return job.recording


class Screens:
    def __init__(self, *, keep: int, catchup: int) -> None:
        self.keep = keep
        self.catchup = catchup
        self._held: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes_fed = 0  # for the bench: what the emulator has been given in all

    def look(self, job: Job) -> ScreenSnapshot:
        """The job's screen now."""
        rec = _recording(job)
        entry = self._held.get(job.job_id)
        if entry is None:
            entry = self._held[job.job_id] = _Entry(*rec.first_size)
            while len(self._held) > self.keep:
                self._held.popitem(last=False)
        else:
            self._held.move_to_end(job.job_id)
        if entry.snap is not None and entry.version == job.version:
            return entry.snap  # a resize changes the version too (core/ops.py)
        end = job.log.size()
        fed, entry.resized = feed_to(
            entry.screen, job, entry.fed_to, end, self.catchup, entry.resized
        )
        self.bytes_fed += fed
        entry.fed_to = end
        entry.snap = entry.screen.snapshot()
        entry.version = job.version
        return entry.snap

    def drop(self, job_id: str) -> None:
        self._held.pop(job_id, None)

    def at(self, job: Job, t: float) -> tuple[ScreenSnapshot, float]:
        """The job's screen ``t`` seconds into its recording (the dashboard's replay), and the
        recording's length in seconds. Built afresh, at the same bounded cost as a look."""
        rec = _recording(job)
        screen = Screen(*rec.first_size)
        end = min(rec.offset_at(t), job.log.size())
        fed, _ = feed_to(screen, job, 0, end, self.catchup, 0)
        self.bytes_fed += fed
        return screen.snapshot(), rec.duration


def feed_to(
    screen: Screen, job: Job, start: int, end: int, catchup: int, resized: int
) -> tuple[int, int]:
    """Feed ``screen`` (which has had the log up to ``start`` and the first ``resized`` of the
    recording's resizes) the log up to ``end``, at most ``catchup`` bytes of it, each resize at
    its place in the log. Returns how many bytes were fed and how many resizes it has had."""
    rec = _recording(job)
    if end - start > catchup:
        start = _restart_point(screen, job, end, catchup)
        # the screen was reset: it gets the size the terminal had there
        resized = sum(1 for r in rec.resizes if r[1] <= start)
        screen.resize(*rec.size_at(start))
    fed = 0
    for _, at, rows, cols in rec.resizes[resized:]:
        if at > end:
            break
        if at > start:
            fed += _feed(screen, job, start, at)
            start = at
        screen.resize(rows, cols)
        resized += 1
    return fed + _feed(screen, job, start, end), resized


def _feed(screen: Screen, job: Job, start: int, end: int) -> int:
    if end <= start:
        return 0
    data = job.log.read(start, end)
    screen.feed(data)
    return len(data)


def _restart_point(screen: Screen, job: Job, end: int, catchup: int) -> int:
    """Where to rebuild a screen that fell too far behind: the last full repaint within 4 x
    ``catchup`` bytes (then the screen is exact), else the last cursor home within them, else
    the
    last ``catchup`` bytes (then a screen drawn piecemeal may miss what was drawn before;
    scrolling text is exact)."""
    reach = max(0, end - 4 * catchup)
    window = job.log.read(reach, end)
    cut = max(0, len(window) - catchup)
    screen.reset()
    best = max(window.rfind(m) for m in _REPAINTS)
    if best >= 0:  # exact from there: a program that repaints only what changed (top) needs it
        return reach + best
    # else the last cursor home within reach (4 x catchup, the most a look then feeds): a
    # program that redraws in place (top: a home, then each line and its erase, frames of
    # tens of KB at 200 columns) starts a frame there, so the screen is exact from it; else
    # the cut itself
    home = window.rfind(_HOME)
    start = home if home >= 0 else cut + boundary_at_or_after(window[cut : cut + 4], 0)
    # the last alternate-screen switch before the start still holds
    before = window[: start + 8]
    if max(before.rfind(m) for m in _ALT_ON) > max(before.rfind(m) for m in _ALT_OFF):
        screen.feed(b"\x1b[?1049h")
    return reach + start
