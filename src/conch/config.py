"""Conch settings: one name used three ways (``Config(x=1)``, ``CONCH_X=1``, ``--x 1``).

Precedence: flags > environment (``CONCH_*``) > env file (``--env-file``) > defaults.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conch.errors import ConfigError

MiB = 1024 * 1024

# Limits of every request (docs/spec.md §6), named once: the engine's checks (core/requests.py), the
# tool schemas (tools/schemas.py) and the settings below all read them here.
MAX_WAIT_MS = 600_000  # yield_ms / wait_ms (each clamped to the calling host's horizon)
MAX_OUTPUT_BYTES = MiB  # max_output_bytes / max_bytes: one inline window
# terminal screens (core/jobs/screens.py): how many are held at once, and the most log bytes one
# look feeds the emulator (pyte takes ~0.4-1 MB/s: 16 KiB is ~15-40 ms, and 2 of top's full repaints
# on a 50x200 terminal: bench/bench_screen.py)
SCREENS_KEPT = 16
SCREEN_CATCHUP_BYTES = 16 * 1024
# a terminal's size that `write {resize}` may set, rows and columns alike: 2 (a line and a status
# line: less, top) to 1000 (bounds the emulator's screen; a look that large is not measured yet)
TERMINAL_MIN_SIZE = 2
TERMINAL_MAX_SIZE = 1000
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9._-]{0,63}$"  # job and shell names
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # environment variable names
SEARCH_MAX_PATTERN_CHARS = 65536
SEARCH_MAX_GLOBS = 64
SEARCH_MAX_CONTEXT = 100  # lines before and after a match
SEARCH_MAX_MATCHES = 1000
SEARCH_MAX_TIMEOUT_MS = 300_000


def _setting(
    default: Any,
    help: str,
    *,
    lo: int | None = None,
    hi: int | None = None,
    secret: bool = False,
    choices: tuple[str, ...] | None = None,
) -> Any:
    meta = {"help": help, "lo": lo, "hi": hi, "secret": secret, "choices": choices}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def default_data_dir() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(base, "conch")


@dataclass(frozen=True, slots=True)
class ContainmentSettings:
    """What a runtime's containment is made from (``Config.containment()``), passed whole to
    ``Containment`` and by it to ``Backends``: the cgroup setting, the server's sandbox
    policy and limits, the workspace, the backend's settings and the files no sandboxed job
    may read (the --env-file)."""

    cgroups: bool = True
    sandbox: str = "off"
    network: str = "on"
    limits: Mapping[str, int] = field(default_factory=dict)
    workspace: str = "/"
    bwrap: str = ""
    private_files: tuple[str, ...] = ()
    backend: str = "auto"
    partial: str = "refuse"
    abi_max: int = 0
    sockets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """Every Conch setting, with its default. Invalid values raise ``ConfigError``."""

    # jobs
    max_running: int = _setting(32, "most jobs running at once; more get `busy`", lo=1, hi=4096)
    max_jobs: int = _setting(1000, "finished jobs kept (oldest evicted first)", lo=1, hi=1_000_000)
    retention_s: int = _setting(3600, "seconds a finished job stays readable", lo=0)
    max_log_bytes: int = _setting(100 * MiB, "per-job log cap; reaching it kills the job", lo=1)
    max_total_log_bytes: int = _setting(
        10 * 1024 * MiB,
        "most bytes the logs of this server's jobs take in the data dir together (0 = no "
        "cap): finished jobs are evicted oldest first to stay under it; past it, running "
        "jobs' output is cut (said) and new jobs get `capacity`",
        lo=0,
    )
    kill_grace_ms: int = _setting(2000, "TERM-to-KILL grace when stopping a job", lo=0, hi=600_000)
    default_yield_ms: int = _setting(10_000, "default `yield_ms` of exec", lo=0, hi=MAX_WAIT_MS)
    default_timeout_ms: int = _setting(1_800_000, "default `timeout_ms` of exec (0 = none)", lo=0)
    default_max_output_bytes: int = _setting(
        16384, "default inline output budget", lo=0, hi=MAX_OUTPUT_BYTES
    )
    warm_bash: bool = _setting(
        True, "keep one bash started ahead for the next plain `command` job (saves its startup)"
    )
    # shells
    max_shells: int = _setting(16, "most persistent shells open at once", lo=1, hi=1024)
    close_timeout_ms: int = _setting(2000, "time allowed to close a shell", lo=100, hi=600_000)
    shell: str = _setting("", "default shell for shell_open (bash or zsh; empty = bash)")
    # changes and undo (core/changes)
    changes: str = _setting(
        "on",
        "track what each job changes under its workspace, for `changes` and undo (on: where "
        "the workspace fits changes_max_files; off: never)",
        choices=("on", "off"),
    )
    changes_max_files: int = _setting(
        200_000, "tracking stays off in a workspace holding more entries than this", lo=1
    )
    changes_max_file_bytes: int = _setting(
        16 * MiB, "files larger than this are not kept for undo (reported as not covered)", lo=0
    )
    changes_max_store_bytes: int = _setting(
        256 * MiB,
        "most bytes the kept contents take in the data dir; a workspace needing more is not "
        "tracked (0 = no cap)",
        lo=0,
    )
    changes_exclude: list[str] = _setting(  # noqa: RUF009
        [], "globs of workspace paths not tracked (a name without / matches at any depth)"
    )
    # files
    data_dir: str = _setting("", "where job logs live (0700); default ~/.local/state/conch")
    log_ttl_s: int = _setting(7 * 86400, "logs older than this are removed at startup", lo=0)
    default_cwd: str = _setting("", "working directory for jobs (default: the server's cwd)")
    # containment (docs/spec.md §9a)
    cgroup: str = _setting(
        "auto",
        "a cgroup per job and shell where the host allows (auto) or never (off)",
        choices=("auto", "off"),
    )
    memory_max: int = _setting(0, "per-job memory limit in bytes (0 = none; needs cgroups)", lo=0)
    pids_max: int = _setting(0, "per-job process limit (0 = none; needs cgroups)", lo=0)
    sandbox: str = _setting(
        "off",
        "filesystem sandbox of every job and shell (calls may only tighten it)",
        choices=("off", "workspace-write", "read-only"),
    )
    network: str = _setting(
        "on",
        "network access of jobs and shells (off: no network, calls may only tighten)",
        choices=("on", "off"),
    )
    bwrap: str = _setting("", "path of bubblewrap for the Linux sandbox (empty: bwrap on PATH)")
    sandbox_backend: str = _setting(
        "auto",
        "Linux sandbox backend: bwrap (namespaces), landlock (Landlock + seccomp, works in "
        "unprivileged containers), or auto (bwrap where it can start, else landlock)",
        choices=("auto", "bwrap", "landlock"),
    )
    sandbox_partial: str = _setting(
        "refuse",
        "a call needing a guarantee the sandbox backend cannot give: refuse it "
        "(sandbox_unavailable) or allow it with what the backend gives",
        choices=("refuse", "allow"),
    )
    landlock_abi_max: int = _setting(
        0,
        "highest Landlock ABI the landlock backend uses (0 = the kernel's; 1-7 act as a kernel "
        "of that ABI: fewer rights handled, fewer guarantees)",
        lo=0,
        hi=7,
    )
    sandbox_sockets: list[str] = _setting(  # noqa: RUF009
        [],
        "host Unix socket paths a `network: off` job may still connect to (comma separated; "
        "Conch connects each for the job)",
    )
    # environment
    agent_env: bool = _setting(True, "set PAGER=cat, GIT_PAGER=cat, GIT_TERMINAL_PROMPT=0, TERM")
    # front ends
    profiles: list[str] = _setting(["conch"], "tool profiles to expose (comma separated)")  # noqa: RUF009
    text_format: str = _setting("text", "MCP text block format", choices=("text", "json"))
    result_detail: str = _setting(
        "lean",
        "conch profile results: lean (fields at their default left out) or full (every field)",
        choices=("lean", "full"),
    )
    host: str = _setting("127.0.0.1", "HTTP bind address")
    port: int = _setting(7785, "HTTP port", lo=0, hi=65535)
    auth_token: str = _setting("", "bearer token required on every HTTP route", secret=True)
    caller_context_token: str = _setting("", "token for the caller-context header", secret=True)
    register: str = _setting("", "gateway URL to register the manifest with")
    host_timeout_ms: int = _setting(
        0,
        "the MCP host's own tool timeout: every wait ends before it (0: the known host's "
        "default, from its clientInfo; 60000 for an unknown one)",
        lo=0,
        hi=86_400_000,
    )
    secret_prompt: str = _setting(
        "off",
        "terminal password prompts: `elicit` asks the person through URL-mode elicitation "
        "and a one-time loopback page; `off` leaves them to the agent (awaiting_secret)",
        choices=("off", "elicit"),
    )
    dashboard_control: bool = _setting(
        False, "dashboard: stop buttons on running jobs (signal), typing into terminal jobs"
    )
    attended_idle_ms: int = _setting(
        30_000,
        "dashboard take-over: a terminal job stays attended (the agent's write is busy) this "
        "long after the person's last key, unless they hand back first",
        lo=0,
        hi=3_600_000,
    )
    # fleet (docs/spec.md §9b)
    fleet: str = _setting("off", "run the tools on every node of a cluster", choices=("off", "ray"))
    ray_address: str = _setting(
        "", "Ray cluster the fleet attaches to (default: RAY_ADDRESS, else a local head)"
    )
    fleet_timeout_ms: int = _setting(
        10_000,
        "a node that does not answer within this (plus the call's own wait) is node_unreachable",
        lo=100,
        hi=600_000,
    )
    # not a setting: the --env-file the settings came from (it may hold the server's tokens),
    # kept so that no sandboxed job can read it
    env_file: str = field(
        default="",
        metadata={
            "help": "",
            "lo": None,
            "hi": None,
            "secret": False,
            "choices": None,
            "internal": True,
        },
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            meta = f.metadata
            kind = type(f.default) if f.default is not dataclasses.MISSING else list
            if kind is bool:
                if not isinstance(value, bool):
                    raise ConfigError(f"{f.name}: expected true or false, got {value!r}")
            elif kind is int:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigError(f"{f.name}: expected an integer, got {value!r}")
                if meta["lo"] is not None and value < meta["lo"]:
                    raise ConfigError(f"{f.name}: must be >= {meta['lo']}, got {value}")
                if meta["hi"] is not None and value > meta["hi"]:
                    raise ConfigError(f"{f.name}: must be <= {meta['hi']}, got {value}")
            elif kind is str:
                if not isinstance(value, str) or "\x00" in value:
                    raise ConfigError(f"{f.name}: expected a string, got {value!r}")
                if meta["choices"] and value not in meta["choices"]:
                    raise ConfigError(f"{f.name}: must be one of {', '.join(meta['choices'])}")
            elif kind is list and (
                not isinstance(value, list) or not all(isinstance(v, str) for v in value)
            ):
                raise ConfigError(f"{f.name}: expected a list of strings, got {value!r}")
        if self.default_cwd and not os.path.isdir(self.default_cwd):
            raise ConfigError(f"default_cwd: not an existing directory: {self.default_cwd}")
        if self.shell and self.shell not in ("bash", "zsh") and not os.path.isabs(self.shell):
            raise ConfigError("shell: must be bash, zsh or an absolute path")

    # -- derived ---------------------------------------------------------------------------

    @property
    def resolved_data_dir(self) -> Path:
        return Path(os.path.expanduser(self.data_dir or default_data_dir()))

    @property
    def resolved_default_cwd(self) -> str:
        return os.path.abspath(self.default_cwd or os.getcwd())

    # -- sources ---------------------------------------------------------------------------

    def limits(self) -> dict[str, int]:
        """The limits ``info`` reports (docs/spec.md §6)."""
        names = (
            "max_running", "max_jobs", "retention_s", "max_log_bytes", "kill_grace_ms",
            "max_shells", "close_timeout_ms", "default_yield_ms", "default_timeout_ms",
            "default_max_output_bytes",
        )  # fmt: skip
        return {n: getattr(self, n) for n in names}

    def containment(self) -> ContainmentSettings:
        """The settings of the runtime's containment, whole."""
        return ContainmentSettings(
            cgroups=self.cgroup != "off",
            sandbox=self.sandbox,
            network=self.network,
            limits={"memory_max": self.memory_max, "pids_max": self.pids_max},
            workspace=self.resolved_default_cwd,
            bwrap=self.bwrap,
            private_files=(self.env_file,),
            backend=self.sandbox_backend,
            partial=self.sandbox_partial,
            abi_max=self.landlock_abi_max,
            sockets=tuple(self.sandbox_sockets),
        )

    @staticmethod
    def settings() -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(Config) if not f.metadata.get("internal")]

    @classmethod
    def from_sources(
        cls,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        env_file: str | None = None,
    ) -> Config:
        """Build a Config from flags (typed), ``CONCH_*`` variables and an env file."""
        values: dict[str, Any] = {}
        if env_file:
            values.update(_parse_strings(read_env_file(env_file)))
            values["env_file"] = os.path.realpath(env_file)
        env = os.environ if environ is None else environ
        values.update(_parse_strings(env))
        for k, v in (flags or {}).items():
            if v is not None:
                values[k] = v
        return cls(**values)


def read_env_file(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"env_file: cannot read {path}: {e.strerror}") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        if "=" not in line:
            raise ConfigError(f"env_file: {path}:{n}: expected KEY=VALUE")
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        out[k.strip()] = v
    return out


def _parse_strings(values: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in Config.settings():
        key = "CONCH_" + f.name.upper()
        if key not in values:
            continue
        out[f.name] = parse_setting(f.name, values[key])
    return out


def parse_setting(name: str, text: str) -> Any:
    """Parse one setting from its string form (environment, env file or command line)."""
    f = {f.name: f for f in Config.settings()}.get(name)
    if f is None:
        raise ConfigError(f"unknown setting {name!r}")
    kind = type(f.default) if f.default is not dataclasses.MISSING else list
    text = text.strip()
    if kind is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {text!r}")
    if kind is int:
        try:
            return int(text.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {text!r}") from None
    if kind is list:
        return [p.strip() for p in text.split(",") if p.strip()]
    return text


def local_url(host: str, port: int | str) -> str:
    """The URL a client on this machine uses for a server bound to ``host:port``: a wildcard
    bind (or none) is reached on loopback; an IPv6 host gets its brackets."""
    host = host.strip().strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
