"""Secrets without the model (``--secret-prompt elicit``, docs/spec.md §8).

While a tool call waits on a PTY or shell job (``exec``, ``read``, ``write``) and the job
reports ``awaiting_secret`` (terminal echo off: a password prompt), and the client supports
URL-mode elicitation, Conch opens a one-time loopback page (``SecretPages``, served by the
front end) and asks the person to go there:

* handshake era: an ``elicitation/create`` (mode ``url``) request beside the waiting call,
  which goes on waiting; when the person submits the page the job continues.
* 2026-07-28: the call answers ``InputRequiredResult`` with the URL elicitation and a signed
  ``requestState``; the call's work keeps running, and the client's retry resumes waiting on
  it (never starting the command again).

Where no elicitation reaches a person (a client without URL mode, or one that declines it, as
headless hosts do), a result whose job waits for a secret names a one-time page of its own
instead (``secret_page``): the agent passes the address on to its person, who types the secret
there. The address is a capability to type into that terminal while it waits with echo off,
which the agent has anyway (``write``).

What the person types is written to the terminal followed by Enter, only while the job still
waits with echo off, and Conch puts it nowhere else: not into a result, a log line, a progress
message or the dashboard. But the program reading the terminal gets it, and the agent started
that program: a prompt that only looks like sudo's (``read -s`` in a shell) can save the value
where the agent reads it. So the page says what the agent ran and why, which program reads the
terminal, and warns when that is no known password program (``SecretAsk``); to such a program
the page sends a value only with the person's second confirmation. Form-mode elicitation is
never used for secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from conch.errors import ConchError
from conch.tools.views import last_line
from conch.tools.watch import visible, what_it_runs

if TYPE_CHECKING:
    from conch.core import JobView
    from conch.tools.host import Host

log = logging.getLogger("conch.mcp")
WATCH_INTERVAL_S = 0.1
#: after a page typed a value, how long a job that prints nothing and keeps echo off is taken as
#: still reading it (not yet asking again)
ANSWERED_S = 3.0
PENDING_TTL_S = 300.0  # a 2026-era call waiting for its retry (the page's own lifetime)
WATCHED_TOOLS = ("exec", "read", "write")
MAX_PENDING = 256


#: programs that ask for a password or passphrase to use it themselves (to authenticate, to
#: unlock a key), by their name as the system installs them; a prompt from anything else (a
#: shell's `read -s`, a script, an interpreter) may keep what is typed
PASSWORD_PROGRAMS = frozenset(
    {
        "sudo", "su", "doas", "pkexec", "login", "passwd",
        "ssh", "scp", "sftp", "ssh-add", "ssh-keygen",
        "gpg", "gpg2", "pinentry", "kinit", "openssl", "cryptsetup",
        "psql", "mysql", "mariadb",
    }
)  # fmt: skip
#: where the system installs them: root's directories, which a job of another user cannot change
SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/local/sbin")
WHAT_CHARS = 2000  # of the command shown on the page


def password_program(path: str | None) -> bool:
    """``path`` is a known password program as the system installed it: its name, a system
    directory, and the file and directory owned by root and writable by nobody else."""
    if path is None:
        return False
    where, name = os.path.split(path)
    if not (name in PASSWORD_PROGRAMS or name.startswith("pinentry-")) or where not in SYSTEM_DIRS:
        return False
    try:
        return all(
            st.st_uid == 0 and not st.st_mode & 0o022 for st in (os.stat(path), os.stat(where))
        )
    except OSError:
        return False


@dataclass(frozen=True)
class SecretAsk:
    """What a secret page shows the person before they type: the job, its prompt, what the
    agent ran and why (escaped as the dashboard shows them), and the processes reading its
    terminal now (what is typed goes to them), with those that are no known password program."""

    job_id: str
    prompt: str
    what: str | None
    purpose: str | None
    readers: tuple[tuple[int, str | None], ...]
    unknown: tuple[str, ...]

    @property
    def warn(self) -> bool:
        """The program that gets the value is not (or not surely) a known password program."""
        return bool(self.unknown) or not self.readers


def unnamed(pid: int) -> str:
    """A reader whose program cannot be told; pid 0 stands for the processes the search for
    the terminal's readers did not look at in time (conch/core/process/terminal.py)."""
    if pid == 0:
        return "processes Conch could not check in time"
    return f"process {pid} (its program cannot be told)"


def ask_of(job: JobView) -> SecretAsk:
    """The job's prompt as its page shows it, read now."""
    readers = job.terminal_readers()
    shown = what_it_runs(job)
    what = shown.get("what")
    if isinstance(what, str) and len(what) > WHAT_CHARS:
        what = what[:WHAT_CHARS] + f"… ({len(what) - WHAT_CHARS} more characters)"
    purpose = shown.get("purpose")
    return SecretAsk(
        job_id=job.job_id,
        prompt=visible(last_line(job, 120)),
        what=what,
        purpose=visible(purpose) if isinstance(purpose, str) else None,
        readers=readers,
        unknown=tuple(
            visible(path) if path is not None else unnamed(pid)
            for pid, path in readers
            if not password_program(path)
        ),
    )


class SecretPage(Protocol):
    @property
    def page_id(self) -> str:
        """The elicitation id (not the page's secret path)."""

    @property
    def url(self) -> str: ...


class SecretPages(Protocol):
    """One-time pages that collect a secret and hand it to ``deliver`` (front-end provided).
    ``describe`` says who asks, read again each time the page is shown and when a value comes
    (a value is not sent when the program reading the terminal changed since it was shown)."""

    async def open(
        self,
        message: str,
        deliver: Callable[[str], Awaitable[bool]],
        describe: Callable[[], SecretAsk] | None = None,
    ) -> SecretPage: ...

    def cancel(self, page_id: str) -> None: ...

    def usable(self, page_id: str) -> bool:
        """The page still takes a value (not used, cancelled or expired)."""

    async def aclose(self) -> None: ...


def url_elicitation_supported(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.elicitation and caps.elicitation.url is not None)


def awaiting_secret(job: JobView) -> bool:
    if job.terminal or job.mode not in ("pty", "shell"):
        return False
    try:
        return job.input_state()[1]
    except Exception:
        return False


@dataclass
class _Pending:
    work: asyncio.Future[types.CallToolResult]
    job_id: str | None
    binding: str
    expires: float


class SecretPrompter:
    def __init__(self, rt: Host, pages: SecretPages) -> None:
        self._rt = rt
        self._pages = pages
        self._key = secrets.token_bytes(32)
        self._pending: dict[str, _Pending] = {}
        self._prompted: dict[str, SecretPage] = {}  # job id -> the page of its current prompt
        self._side: set[asyncio.Future[Any]] = set()
        self._declined: set[str] = set()  # page ids the person declined (tasks)
        self._offered: dict[str, SecretPage] = {}  # job id -> the page named in its results
        # job id -> (its log size, monotonic time) when a page typed a value into it: until the
        # job prints or ANSWERED_S pass, it is taken as still reading that value
        self._typed: dict[str, tuple[int, float]] = {}

    # -- the waiting call ----------------------------------------------------------------------

    async def run(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: Mapping[str, Any] | None,
        request_state: str | None,
        call: Callable[[Callable[[JobView], None]], Awaitable[types.CallToolResult]],
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``call(on_started)`` runs the tool; the engine reports the job an ``exec`` starts
        through ``on_started`` (never guessed from the job table: a concurrent call's job
        could look the same)."""
        binding = _binding(name, arguments)
        started: list[JobView] = []
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        resumed = self._resume(request_state, binding) if modern and request_state else None
        if resumed is not None:
            work, job_id = resumed.work, resumed.job_id
        else:
            work = asyncio.ensure_future(call(started.append))
            job_id = None
        args = arguments or {}
        if job_id is None and name != "exec" and isinstance(args.get("job_id"), str):
            with contextlib.suppress(ConchError):
                job_id = self._rt.view.job(args["job_id"]).job_id
        parked = False
        try:
            while True:
                done, _ = await asyncio.wait({work}, timeout=WATCH_INTERVAL_S)
                if done:
                    return work.result()
                if job_id is None and started:
                    job_id = started[-1].job_id
                job = self._job(job_id)
                if job is None:
                    continue
                if not awaiting_secret(job):
                    self._prompted.pop(job.job_id, None)
                    continue
                if job.job_id in self._prompted:
                    continue  # this prompt has its page already
                page = await self._open(job)
                self._prompted[job.job_id] = page
                request = types.ElicitRequest(
                    params=types.ElicitRequestURLParams(
                        message=_message(job), url=page.url, elicitation_id=page.page_id
                    )
                )
                if modern:
                    state = self._park(work, job.job_id, binding)
                    parked = True  # the work is the pending table's now
                    return types.InputRequiredResult(
                        input_requests={page.page_id: request}, request_state=state
                    )
                self._ask_legacy(ctx, page, request)
        except BaseException:
            if not parked and not work.done():
                work.cancel()  # the caller gave up: as without prompts (exec stops its job)
            raise

    def _ask_legacy(
        self, ctx: ServerRequestContext[Any, Any], page: SecretPage, request: types.ElicitRequest
    ) -> None:
        async def ask() -> None:
            assert isinstance(request.params, types.ElicitRequestURLParams)
            try:
                answer = await ctx.session.elicit_url(
                    request.params.message,
                    page.url,
                    page.page_id,
                    related_request_id=ctx.request_id,
                )
            except Exception:
                log.info("the client did not take the secret prompt")
                self._pages.cancel(page.page_id)
                return
            if answer.action != "accept":
                self._pages.cancel(page.page_id)

        side = asyncio.ensure_future(ask())
        self._side.add(side)
        side.add_done_callback(self._side.discard)

    # -- the page named in a result ------------------------------------------------------------

    async def offer(self, result: types.CallToolResult) -> types.CallToolResult:
        """``result`` with ``secret_page`` added when its job waits for a secret now: the
        job's page while it still takes a value, else a new one (a page serves one value, so
        a prompt asked again after a wrong password gets another)."""
        snap = result.structured_content
        if result.is_error or not isinstance(snap, dict) or not snap.get("awaiting_secret"):
            return result
        job = self._job(snap.get("job_id"))
        if job is None or not awaiting_secret(job):
            return result
        for job_id in [j for j in self._offered if j != job.job_id]:  # jobs that moved on
            known = self._job(job_id)
            if known is None or known.terminal or not awaiting_secret(known):
                self._pages.cancel(self._offered.pop(job_id).page_id)
        page = self._offered.get(job.job_id)
        if page is None or not self._pages.usable(page.page_id):
            if self._answered(job):
                # the terminal still has echo off because the program is reading the value a
                # page typed a moment ago: a new page now would be for a prompt already answered
                return result
            page = await self._open_page(job)
            self._offered[job.job_id] = page
        content = list(result.content)
        line = (
            f"\na person can type the secret at {page.url} (the page shows which program "
            "reads the terminal: what they type goes to it, not into a result)"
        )
        if content and isinstance(content[0], types.TextContent):
            content[0] = types.TextContent(type="text", text=content[0].text + line)
        return result.model_copy(
            update={"structured_content": {**snap, "secret_page": page.url}, "content": content}
        )

    # -- tasks (conch.mcp.tasks) -----------------------------------------------------------------

    async def task_input(self, job: JobView) -> tuple[str, dict[str, Any]] | None:
        """For a task on ``job``: (key, the ``elicitation/create`` request) while the job waits
        for a secret — the same key and page on every poll until the prompt goes — or None."""
        if not awaiting_secret(job):
            self._prompted.pop(job.job_id, None)
            return None
        page = self._prompted.get(job.job_id)
        if page is None:
            page = await self._open(job)
            self._prompted[job.job_id] = page
        if page.page_id in self._declined:
            return None
        request = types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                message=_message(job), url=page.url, elicitation_id=page.page_id
            )
        )
        return page.page_id, request.model_dump(by_alias=True, mode="json", exclude_none=True)

    def task_answer(self, key: str, action: str) -> None:
        """A ``tasks/update`` answer to a prompt: a declined or cancelled page is closed."""
        if action != "accept" and any(p.page_id == key for p in self._prompted.values()):
            self._declined.add(key)
            self._pages.cancel(key)

    # -- pages ---------------------------------------------------------------------------------

    async def _open(self, job: JobView) -> SecretPage:
        for job_id, page in list(self._prompted.items()):  # prompts of jobs that have ended
            known = self._job(job_id)
            if known is None or known.terminal:
                del self._prompted[job_id]
                self._declined.discard(page.page_id)
        return await self._open_page(job)

    async def _open_page(self, job: JobView) -> SecretPage:
        return await self._pages.open(_message(job), self._deliverer(job), lambda: ask_of(job))

    def _deliverer(self, job: JobView) -> Callable[[str], Awaitable[bool]]:
        async def deliver(secret: str) -> bool:
            """Type the secret and Enter, only into a terminal still waiting with echo off."""
            if not awaiting_secret(job) or self._answered(job):
                return False
            await self._rt.view.type_secret(job.job_id, secret)
            now = time.monotonic()  # (older entries answer nothing any more: they go)
            self._typed = {j: t for j, t in self._typed.items() if now - t[1] <= ANSWERED_S}
            self._typed[job.job_id] = (job.log.size(), now)
            return True

        return deliver

    def _answered(self, job: JobView) -> bool:
        """A value was typed into the job's terminal and the job has printed nothing since (for
        at most ANSWERED_S): its prompt is taken as answered, though echo is still off."""
        typed = self._typed.get(job.job_id)
        if typed is None:
            return False
        size, at = typed
        if job.log.size() != size or time.monotonic() - at > ANSWERED_S:
            del self._typed[job.job_id]
            return False
        return True

    def _job(self, job_id: str | None) -> JobView | None:
        if job_id is None:
            return None
        try:
            return self._rt.view.job(job_id)
        except ConchError:
            return None

    # -- 2026-era retries ----------------------------------------------------------------------

    def _sign(self, state_id: str, binding: str) -> str:
        mac = hmac.new(self._key, f"{state_id}|{binding}".encode(), hashlib.sha256).hexdigest()
        return f"conch-secret.{state_id}.{mac}"

    def _park(self, work: asyncio.Future[types.CallToolResult], job_id: str, binding: str) -> str:
        self._expire()
        state_id = secrets.token_hex(12)
        self._pending[state_id] = _Pending(work, job_id, binding, time.monotonic() + PENDING_TTL_S)
        return self._sign(state_id, binding)

    def _resume(self, state: str, binding: str) -> _Pending | None:
        self._expire()
        parts = state.split(".")
        if len(parts) != 3 or parts[0] != "conch-secret":
            return None
        if not hmac.compare_digest(self._sign(parts[1], binding), state):
            return None
        return self._pending.pop(parts[1], None)

    def _expire(self) -> None:
        """Drop calls whose retry did not come in time (a finished one waits for its retry
        too: the person may have answered before the client retried)."""
        now = time.monotonic()
        for key, p in list(self._pending.items()):
            if p.expires < now:
                del self._pending[key]
                p.work.cancel()
        while len(self._pending) > MAX_PENDING:
            key = next(iter(self._pending))
            self._pending.pop(key).work.cancel()

    async def aclose(self) -> None:
        for p in self._pending.values():
            p.work.cancel()
        self._pending.clear()
        for side in list(self._side):
            side.cancel()
        await self._pages.aclose()


def _binding(name: str, arguments: Mapping[str, Any] | None) -> str:
    text = json.dumps([name, arguments or {}], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _message(job: JobView) -> str:
    """What an elicitation says (the page says more)."""
    ask = ask_of(job)
    asks = f" ({ask.prompt!r})" if ask.prompt else ""
    text = (
        f"A program the agent started in job {job.job_id} is asking for a password or other "
        f"secret{asks}. What you type on the page goes to that program; the page shows "
        "which program it is and what the agent ran."
    )
    if ask.warn:
        who = ", ".join(ask.unknown) or "a program Conch cannot tell"
        text += (
            f" Warning: it is {who}, not a known password program: it may keep what you type "
            "and hand it to the agent; the page sends nothing unless you also confirm that."
        )
    return text
