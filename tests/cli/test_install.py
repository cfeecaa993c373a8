"""``conch install HOST``: Conch's entry written into each host's own config file in place.

The pure part (plan.py) is checked against golden files (golden/install/: a fresh file and a
file with comments and other servers, per host; ``CONCH_UPDATE_GOLDEN=1`` rewrites them), then
the command itself runs as a subprocess with the host's location variables pointed at a tmp
dir. The real hosts starting Conch from what install wrote: tests/hosts/*/test_*_install.py.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from conch.cli.install import json_text, plan, yaml_text
from conch.cli.install.errors import EditError, Refused
from conch.cli.install.hosts import HOSTS

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden" / "install"
UPDATE = os.environ.get("CONCH_UPDATE_GOLDEN") == "1"
LAUNCHER = ["/opt/conch/bin/conch"]
SERVE = ["serve"]
EXT = {"toml": "toml", "json": "json", "yaml": "yaml"}
# golden/install/<case>.existing.<ext>: case -> host
EXISTING = {name: name for name in HOSTS} | {"opencode2": "opencode"}


def ext(host: str) -> str:
    return EXT[HOSTS[host].fmt]


def existing(case: str) -> str:
    return (GOLDEN / f"{case}.existing.{ext(EXISTING[case])}").read_text()


def matches_golden(name: str, text: str | None) -> None:
    assert text is not None
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
        return
    assert path.exists(), f"no golden file {path}: CONCH_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(), f"{name} differs from its golden file; now:\n{text}"


def install(host: str, text: str | None, **kw) -> plan.Outcome:
    return plan.install(HOSTS[host], text, LAUNCHER, SERVE, **kw)


def remove(host: str, text: str | None, **kw) -> plan.Outcome:
    return plan.remove(HOSTS[host], text, LAUNCHER, SERVE, **kw)


# -- the entry in each host's format --------------------------------------------------------


@pytest.mark.parametrize("host", list(HOSTS))
def test_install_into_no_file_writes_the_hosts_format(host: str) -> None:
    o = install(host, None)
    assert (o.action, o.before) == ("added", None)
    matches_golden(f"{host}.fresh.{ext(host)}", o.after)


@pytest.mark.parametrize("case", list(EXISTING))
def test_install_keeps_the_files_comments_and_other_servers(case: str) -> None:
    o = install(EXISTING[case], existing(case))
    assert o.action == "added"
    matches_golden(f"{case}.installed.{ext(EXISTING[case])}", o.after)


@pytest.mark.parametrize("case", [*EXISTING, *(f"{h}:fresh" for h in HOSTS)])
def test_a_second_install_changes_nothing(case: str) -> None:
    host, _, fresh = case.partition(":")
    first = install(EXISTING.get(host, host), None if fresh else existing(host))
    second = install(EXISTING.get(host, host), first.after)
    assert (second.action, second.changed, second.after) == ("unchanged", False, first.after)


@pytest.mark.parametrize("case", list(EXISTING))
def test_remove_gives_back_the_file_byte_for_byte(case: str) -> None:
    before = existing(case)
    after = remove(EXISTING[case], install(EXISTING[case], before).after)
    assert after.action == "removed"
    assert after.after == before


@pytest.mark.parametrize(
    ("host", "text"),
    [
        ("claude-code", '{"a": 1, "mcpServers": {"x": {"command": "y"}}}\n'),  # one line
        ("claude-code", '{\r\n  "mcpServers": {\r\n    "x": {"command": "y"}\r\n  }\r\n}\r\n'),
        ("claude-code", '\ufeff{\n  "a": 1\n}\n'),  # a byte-order mark
        ("vscode", '{\n  "servers": {\n    "x": {"command": "y"}, // mine\n  },\n}\n'),
        ("vscode", '{\n  "inputs": [] /* none */\n}'),  # no final newline
        ("cursor", '{\n  "mcpServers": {\n    "x": {"command": "y"}\n  } // all\n}\n'),
        ("codex", 'a = 1\nmcp_servers = { docs = { command = "d" } }\n'),  # an inline table
        ("codex", "[mcp_servers]\n\n[mcp_servers.docs]\ncommand = 'd'\n"),
        ("codex", "# only a comment\n"),
        ("goose", "GOOSE_MODE: auto\n"),
        ("goose", "extensions:\n    developer:\n        type: builtin\n# the end\n"),
    ],
)
def test_install_then_remove_gives_back_any_layout(host: str, text: str) -> None:
    installed = install(host, text)
    assert installed.action == "added"
    assert install(host, installed.after).action == "unchanged"
    assert remove(host, installed.after).after == text


@pytest.mark.parametrize("host", list(HOSTS))
def test_remove_deletes_a_file_install_created(host: str) -> None:
    o = remove(host, install(host, None).after)
    assert (o.action, o.after) == ("removed", None)


def test_remove_without_an_entry_changes_nothing() -> None:
    text = existing("claude-code")
    assert (remove("claude-code", text).action, remove("claude-code", text).after) == (
        "absent",
        text,
    )
    assert remove("codex", None).action == "absent"


# -- timeouts --------------------------------------------------------------------------------


def test_codex_gets_a_tool_timeout_for_ten_minute_waits_and_the_server_is_told() -> None:
    entry = tomlkit.parse(install("codex", None).after or "")["mcp_servers"]["conch"]
    assert entry["tool_timeout_sec"] == 700 and entry["required"] is True
    assert entry["args"][-2:] == ["--host-timeout-ms", "700000"]


def test_a_longer_timeout_the_user_set_is_kept_and_told_to_the_server() -> None:
    text = '[mcp_servers.conch]\ncommand = "/old/conch"\ntool_timeout_sec = 1200  # mine\n'
    o = install("codex", text)
    assert "tool_timeout_sec = 1200  # mine" in (o.after or "")
    assert '"--host-timeout-ms", "1200000"' in (o.after or "")
    assert o.host_timeout_ms == 1_200_000


def test_a_shorter_timeout_is_raised_to_fit_a_ten_minute_wait() -> None:
    o = install("gemini", '{"mcpServers": {"conch": {"command": "x", "timeout": 30000}}}')
    entry = json_text.load(o.after or "")["mcpServers"]["conch"]
    assert entry["timeout"] == 700_000 and entry["args"][-1] == "700000"


def test_claude_code_gets_no_timeout_but_keeps_and_reports_one_the_user_set() -> None:
    fresh = json_text.load(install("claude-code", None).after or "")["mcpServers"]["conch"]
    assert "timeout" not in fresh and "--host-timeout-ms" not in fresh["args"]
    text = '{"mcpServers": {"conch": {"command": "x", "args": [], "timeout": 120000}}}'
    entry = json_text.load(install("claude-code", text).after or "")["mcpServers"]["conch"]
    assert entry["timeout"] == 120_000
    assert entry["args"] == ["serve", "--host-timeout-ms", "120000"]


@pytest.mark.parametrize(
    ("host", "ms"), [("claude-desktop", 60_000), ("antigravity", 180_000), ("vscode", 700_000)]
)
def test_a_hosts_fixed_limit_is_told_to_the_server(host: str, ms: int) -> None:
    o = install(host, None)
    assert o.host_timeout_ms == ms and f'"{ms}"' in (o.after or "")


def test_cursor_with_no_known_limit_gets_no_timeout() -> None:
    o = install("cursor", None)
    assert o.host_timeout_ms is None and "--host-timeout-ms" not in (o.after or "")


def test_opencode_two_gets_its_request_timeout_under_mcp_servers() -> None:
    data = json_text.load(install("opencode", existing("opencode2")).after or "")
    entry = data["mcp"]["servers"]["conch"]
    assert entry["timeout"] == {"request": 700_000} and "conch" not in data["mcp"]


# -- an entry already there ----------------------------------------------------------------


def test_a_stale_entry_is_updated_in_place_with_the_users_keys_and_comments() -> None:
    text = (
        "[mcp_servers.conch]\n"
        'command = "/old/checkout/bin/conch"  # moved since\n'
        'args = ["serve"]\n\n'
        "[mcp_servers.conch.env]\n"
        'CONCH_PROFILES = "codex"\n'
    )
    o = install("codex", text)
    assert o.action == "updated"
    assert set(o.keys) == {"command", "args", "required", "startup_timeout_sec", "tool_timeout_sec"}
    after = o.after or ""
    assert 'command = "/opt/conch/bin/conch"  # moved since' in after
    assert tomlkit.parse(after)["mcp_servers"]["conch"]["env"] == {"CONCH_PROFILES": "codex"}


def test_a_stale_jsonc_entry_keeps_its_comments() -> None:
    text = (
        '{\n  "servers": {\n    "conch": {\n      // started by hand before\n'
        '      "command": "conch",\n      "args": ["serve"]\n    }\n  }\n}\n'
    )
    after = install("vscode", text).after or ""
    assert "// started by hand before" in after
    entry = json_text.load(after)["servers"]["conch"]
    assert entry["command"] == "/opt/conch/bin/conch" and entry["type"] == "stdio"


def test_a_goose_entry_with_comments_is_rewritten_only_when_forced() -> None:
    text = "extensions:\n  conch:\n    # mine\n    cmd: /old/conch\n    type: stdio\n"
    with pytest.raises(Refused, match="comments"):
        install("goose", text)
    after = install("goose", text, force=True).after or ""
    entry = yaml_text.load(after)["extensions"]["conch"]
    assert entry["cmd"] == "/opt/conch/bin/conch" and "# mine" not in after


def test_an_entry_install_cannot_read_is_replaced_only_when_forced() -> None:
    text = "extensions:\n  conch: {cmd: /old/conch}\n"
    with pytest.raises(Refused, match="--force"):
        install("goose", text)
    o = install("goose", text, force=True)
    assert o.action == "replaced" and "{cmd: /old/conch}" not in (o.after or "")


@pytest.mark.parametrize(
    ("host", "changed"),
    [
        ("codex", lambda t: t + "\n[mcp_servers.conch.env]\nTOKEN_FILE = '/x'\n"),
        (
            "claude-code",
            lambda t: t.replace('"type": "stdio"', '"type": "stdio", "env": {"A": "1"}'),
        ),
        ("goose", lambda t: t.replace("enabled: true", "enabled: false")),
        ("vscode", lambda t: t.replace('"serve"', '"serve", "--profile", "codex"')),
    ],
)
def test_remove_leaves_an_entry_the_user_changed_unless_forced(host: str, changed) -> None:
    text = changed(install(host, None).after)
    assert text != install(host, None).after
    with pytest.raises(Refused, match="not what `conch install"):
        remove(host, text)
    assert remove(host, text, force=True).action == "removed"


def test_remove_takes_an_entry_with_empty_keys_a_host_added() -> None:
    text = (install("goose", None).after or "").replace(
        "    timeout: 700\n", "    timeout: 700\n    bundled: null\n    description: ''\n"
    )
    assert remove("goose", text).after is None


def test_remove_of_an_entry_installed_with_other_settings_needs_them() -> None:
    text = plan.install(HOSTS["cursor"], None, LAUNCHER, [*SERVE, "--profiles", "codex"]).after
    with pytest.raises(Refused):
        remove("cursor", text)
    assert (
        plan.remove(HOSTS["cursor"], text, LAUNCHER, [*SERVE, "--profiles", "codex"]).after is None
    )


# -- files it cannot read ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "text", "says"),
    [
        ("codex", 'model = "x"\n[mcp_servers.conch\n', "line 2"),
        ("claude-code", '{\n  "a": 1,,\n}\n', "line 2"),
        ("claude-code", '{"mcpServers": {}, "mcpServers": {}}', "appears twice"),
        ("claude-code", "[1, 2]", "top level is not an object"),
        ("gemini", '{"mcpServers": []}', "mcpServers is not an object"),
        ("goose", "extensions: {developer: {type: builtin}}\n", "inline"),
        ("goose", "extensions:\n\tconch: {}\n", "tab"),
        ("goose", "a: 1\n---\nextensions:\n", "more than one YAML document"),
    ],
)
def test_a_file_it_cannot_read_is_an_error(host: str, text: str, says: str) -> None:
    with pytest.raises(EditError, match=says):
        install(host, text)


# -- the command -----------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def conch_install(
    *args: str, home: Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "CLAUDE_CONFIG_DIR")}
    base.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "conch", "install", *args],
        env={**base, "HOME": str(home), **(env or {})},
        cwd=cwd or home,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_entry_starts_this_checkouts_conch(home: Path) -> None:
    r = conch_install("cursor", home=home)
    assert r.returncode == 0, r.stderr
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["conch"]
    assert entry == {"command": str(REPO / "bin" / "conch"), "args": ["serve"]}


@pytest.mark.parametrize(
    ("host", "env", "where"),
    [
        ("codex", {}, "{home}/.codex/config.toml"),
        ("codex", {"CODEX_HOME": "{tmp}/ch"}, "{tmp}/ch/config.toml"),
        ("claude-code", {}, "{home}/.claude.json"),
        ("claude-code", {"CLAUDE_CONFIG_DIR": "{tmp}/cc"}, "{tmp}/cc/.claude.json"),
        ("goose", {}, "{home}/.config/goose/config.yaml"),
        ("goose", {"XDG_CONFIG_HOME": "{tmp}/xdg"}, "{tmp}/xdg/goose/config.yaml"),
        ("opencode", {"XDG_CONFIG_HOME": "{tmp}/xdg"}, "{tmp}/xdg/opencode/opencode.json"),
        ("vscode", {"XDG_CONFIG_HOME": "{tmp}/xdg"}, "{tmp}/xdg/Code/User/mcp.json"),
        ("claude-desktop", {}, "{home}/.config/Claude/claude_desktop_config.json"),
        ("gemini", {}, "{home}/.gemini/settings.json"),
        ("antigravity", {}, "{home}/.gemini/config/mcp_config.json"),
    ],
)
def test_each_hosts_file_is_found_where_the_host_reads_it(
    home: Path, tmp_path: Path, host: str, env: dict[str, str], where: str
) -> None:
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    r = conch_install(host, home=home, env=env)
    assert r.returncode == 0, r.stderr
    path = Path(where.format(home=home, tmp=tmp_path))
    assert path.is_file(), (r.stdout, sorted(p for p in tmp_path.rglob("*") if p.is_file()))
    assert str(path) in r.stdout


@pytest.mark.parametrize(
    ("host", "where"),
    [
        ("claude-code", ".mcp.json"),
        ("codex", ".codex/config.toml"),
        ("vscode", ".vscode/mcp.json"),
        ("cursor", ".cursor/mcp.json"),
        ("antigravity", ".agents/mcp_config.json"),
    ],
)
def test_project_scope_writes_in_the_current_directory(
    home: Path, tmp_path: Path, host: str, where: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    r = conch_install(host, "--scope", "project", home=home, cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / where).is_file()
    assert not any(p.is_file() for p in home.rglob("*"))


def test_opencode_project_scope_uses_an_existing_jsonc_file(home: Path, tmp_path: Path) -> None:
    (tmp_path / "opencode.jsonc").write_text('{\n  // mine\n  "theme": "x"\n}\n')
    r = conch_install("opencode", "--scope", "project", home=home, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "// mine" in (tmp_path / "opencode.jsonc").read_text()
    assert not (tmp_path / "opencode.json").exists()


def test_a_host_without_project_config_says_so(home: Path) -> None:
    r = conch_install("goose", "--scope", "project", home=home)
    assert r.returncode == 2 and "no project-scope" in r.stderr


def test_print_shows_the_change_and_writes_nothing(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "x"\n')
    r = conch_install("codex", "--print", home=home)
    assert r.returncode == 0, r.stderr
    assert f"+++ {config}" in r.stdout and "+[mcp_servers.conch]" in r.stdout
    assert config.read_text() == 'model = "x"\n'
    r = conch_install("codex", "--print", "--remove", home=home)
    assert (r.returncode, r.stdout) == (0, "no change\n")


def test_a_second_install_does_not_touch_the_file(home: Path) -> None:
    assert conch_install("claude-code", home=home).returncode == 0
    before = (home / ".claude.json").stat()
    r = conch_install("claude-code", home=home)
    assert r.returncode == 0 and "nothing changed" in r.stdout
    after = (home / ".claude.json").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_settings_go_into_the_command_and_relative_paths_become_absolute(home: Path) -> None:
    r = conch_install("cursor", "--profile", "codex", "--data-dir", "data", home=home)
    assert r.returncode == 0, r.stderr
    args = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["conch"]["args"]
    assert args == ["serve", "--data-dir", str(home / "data"), "--profiles", "codex"]


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        (["--auth-token", "s3cret"], "a secret does not belong"),
        (["--host-timeout-ms", "5000"], "is what install writes"),
        (["--max-running", "many"], "expected an integer"),
    ],
)
def test_settings_it_will_not_write_are_refused(home: Path, flag: list[str], says: str) -> None:
    r = conch_install("codex", *flag, home=home)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert not (home / ".codex").exists()


@pytest.mark.parametrize(
    ("host", "rel", "text"),
    [
        ("codex", ".codex/config.toml", 'model = "x"\n[mcp_servers.conch\n'),
        ("claude-code", ".claude.json", '{"numStartups": 3,, }'),
        ("goose", ".config/goose/config.yaml", "extensions: [developer]\n"),
        ("cursor", ".cursor/mcp.json", b"\xff\xfe{}"),
    ],
)
def test_a_file_it_cannot_read_is_left_untouched_with_exit_2(
    home: Path, host: str, rel: str, text: str | bytes
) -> None:
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(data)
    for args in ([host], ["--remove", host], ["--force", host]):
        r = conch_install(*args, home=home)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert str(path) in r.stderr and "left as it was" in r.stderr
        assert path.read_bytes() == data
    assert not list(path.parent.glob(".*.conch-tmp"))


def test_remove_refusal_is_exit_1_and_leaves_the_file(home: Path) -> None:
    assert conch_install("claude-code", home=home).returncode == 0
    path = home / ".claude.json"
    data = json.loads(path.read_text())
    data["mcpServers"]["conch"]["env"] = {"A": "1"}
    path.write_text(json.dumps(data))
    r = conch_install("--remove", "claude-code", home=home)
    assert r.returncode == 1 and "differs in env" in r.stderr, r.stderr
    assert json.loads(path.read_text()) == data
    assert conch_install("--remove", "--force", "claude-code", home=home).returncode == 0
    assert path.exists() is False


def test_a_symlinked_config_is_edited_where_it_points(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"theme": "dark"}\n')
    (home / ".claude.json").symlink_to(real)
    assert conch_install("claude-code", home=home).returncode == 0
    assert (home / ".claude.json").is_symlink()
    assert "conch" in json.loads(real.read_text())["mcpServers"]


def test_the_files_mode_is_kept_and_a_new_user_file_is_private(home: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text("{}\n")
    path.chmod(0o640)
    assert conch_install("gemini", home=home).returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert conch_install("cursor", home=home).returncode == 0
    assert stat.S_IMODE((home / ".cursor" / "mcp.json").stat().st_mode) == 0o600


# -- never half a file ----------------------------------------------------------------------

# runs `conch install` with a file size limit below the new file's size: the write of the
# temporary file fails part way (EFBIG), or with SIGXFSZ left at its default the process is
# killed by the kernel in the middle of writing it
_LIMITED = """
import resource, runpy, signal, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
# Python ignores SIGXFSZ; with its default action the kernel kills the process at the write
signal.signal(signal.SIGXFSZ, signal.SIG_IGN if sys.argv[1] == "ignore" else signal.SIG_DFL)
sys.argv = ["conch", "install", *sys.argv[2:]]
runpy.run_module("conch", run_name="__main__")
"""


@pytest.mark.parametrize("how", ["ignore", "killed"])
def test_a_failed_write_leaves_the_original_byte_identical(home: Path, how: str) -> None:
    path = home / ".claude.json"
    original = '{\n  "theme": "dark",\n  "numStartups": 3\n}\n'
    path.write_text(original)
    r = subprocess.run(
        [sys.executable, "-c", _LIMITED, how, "claude-code"],
        env={**os.environ, "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if how == "ignore":
        assert r.returncode == 2 and "cannot write" in r.stderr, (r.returncode, r.stderr)
        assert sorted(p.name for p in home.iterdir()) == [".claude.json"]  # no temp file left
    else:
        assert r.returncode == -signal.SIGXFSZ, (r.returncode, r.stderr)
    assert path.read_text() == original


def test_remove_of_an_entry_before_others_keeps_their_comments() -> None:
    text = (
        '{\n  "servers": {\n    "conch": {"type": "stdio", "command": "/opt/conch/bin/conch",'
        ' "args": ["serve", "--host-timeout-ms", "700000"]}, // Conch\n'
        '    // added later, by hand\n    "docs": {"command": "docs"}\n  }\n}\n'
    )
    after = remove("vscode", text).after
    assert after == (
        '{\n  "servers": {\n    // added later, by hand\n    "docs": {"command": "docs"}\n  }\n}\n'
    )


def test_the_parser_names_every_host() -> None:
    from conch.cli.install import HOST_NAMES

    assert tuple(HOSTS) == HOST_NAMES


def test_goose_entries_read_as_goose_writes_them() -> None:
    text = (
        "extensions:\n"
        "  conch:\n"
        "    args:\n"
        "    - serve\n"
        "    - '--host-timeout-ms'\n"
        '    - "700000"\n'
        "    bundled: null\n"
        "    cmd: /opt/conch/bin/conch  # moved\n"
        '    description: ""\n'
        "    enabled: true\n"
        "    env_keys: []\n"
        '    envs: {"A": "b \\" #c", B: \'it\'\'s\'}\n'
        "    name: conch\n"
        "    timeout: 700\n"
        "    type: stdio\n"
    )
    entry = yaml_text.load(text)["extensions"]["conch"]
    assert entry["args"] == ["serve", "--host-timeout-ms", "700000"]
    assert entry["envs"] == {"A": 'b " #c', "B": "it's"}
    assert (entry["cmd"], entry["bundled"], entry["timeout"]) == ("/opt/conch/bin/conch", None, 700)
