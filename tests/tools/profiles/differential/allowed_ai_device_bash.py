"""Differences between ai-device-bash 0.2.0 and `conch serve --profile ai-device-bash` that are
accepted, each citing a bug listed in the reference (seed-contracts.md §4, "Bugs and
limitations seen, to avoid in the superset") or a SPEC sentence. Everything else must match."""

from __future__ import annotations

from harness import Allowed


def _agent_env(original: object) -> str | None:
    """The seed's `NAME=value` probe lines as Conch's agent defaults change them."""
    if not isinstance(original, str):
        return None
    defaults = {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}
    lines = []
    for line in original.splitlines():
        name = line.split("=", 1)[0]
        lines.append(f"{name}={defaults[name]}" if name in defaults else line)
    return "".join(x + "\n" for x in lines)


def _both_counts(original: object, ours: object) -> bool:
    return isinstance(original, int) and isinstance(ours, int)


ALLOWED: list[Allowed] = [
    # A negative exec timeout: the seed runs the command and waits forever; Conch refuses it.
    Allowed(
        r"timeout_negative",
        r"content\[0\]\.json\.(success|code|message|exit_code)",
        'seed-contracts §4, ai-device bugs: "a negative timeout is not validated" (the profile '
        "keeps the contract and drops the bug, docs/spec.md §7: it answers INVALID_TIMEOUT)",
    ),
    # `(sleep 1; echo late) & echo early`: the seed waits for the grandchild to close stdout
    # and shows both lines; Conch answers when the leader exits (the late line still goes to
    # the output file).
    Allowed(
        r"grandchild_holds_stdout",
        r"content\[0\]\.json\.(output|returned_output_bytes|total_bytes)",
        'docs/spec.md §2 "Completion": "A one-shot job is finished when its leader process exits. '
        "The "
        "call returns within 100 ms of that even if descendants still hold stdout/stderr (seed "
        '1 blocks here — must not)."',
        lambda original, ours: original in ("early\nlate\n", 11) and ours in ("early\n", 6),
    ),
    # The child environment: the seed passes the server's environment on untouched; Conch adds
    # its agent-friendly defaults (the rest, HOME and LANG included, is the same).
    *(
        Allowed(
            r"agent_env",
            rf"content\[0\]\.json\.{field}",
            'docs/spec.md §2 "Environment": children inherit the server environment "plus '
            "agent-friendly "
            "defaults that the config can turn off (`PAGER=cat`, `GIT_PAGER=cat`, "
            '`GIT_TERMINAL_PROMPT=0`, `TERM=dumb` for pipes)"',
            check,
        )
        for field, check in (
            ("output", lambda original, ours: _agent_env(original) == ours),
            # the sizes of that exactly checked output
            ("(returned_output_bytes|total_bytes)", _both_counts),
        )
    ),
    # A kill-mode timeout: the seed sends SIGKILL at once, so a TERM trap never runs; Conch's
    # deadline sends TERM first, then KILL after the grace (bash reports the TERM, runs the trap).
    Allowed(
        r"kill_term_trap",
        r"content\[0\]\.json\.(output|returned_output_bytes|total_bytes)",
        'docs/spec.md §2 "Process hygiene": "Killing a job kills its whole tree, escaped '
        'descendants included, with TERM → grace → KILL"; and "Yield, not block": the deadline '
        'terminates the tree "(TERM, kill_grace_ms default 2000, then KILL)"',
        lambda original, ours: (
            (original == "x\n" and str(ours).endswith("term\n"))
            or (original == 2 and isinstance(ours, int) and ours > 2)
        ),
    ),
    # stdout and stderr of one job: the seed reads both through one pipe (the writer's order);
    # Conch keeps them apart on two pipes, and when the server reads late (a loaded machine)
    # both hold data at once and the order between them is the order Conch read them in.
    Allowed(
        r"ok|runtime_error",
        r"content\[0\]\.json\.output",
        'docs/spec.md §3 "Pipes keep **stdout and stderr apart and in arrival order**: reads '
        "default "
        "to the combined stream\" (the arrival order across two pipes, not the writer's)",
        lambda original, ours: (
            isinstance(original, str)
            and isinstance(ours, str)
            and original != ours
            and sorted(original.splitlines(keepends=True)) == sorted(ours.splitlines(keepends=True))
        ),
    ),
]
