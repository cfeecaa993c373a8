"""What Conch types into a persistent shell, as text (pure): the boot line that empties the
prompts and installs the end-marker hook, each kind's argv, the end of each trigger line, and
the per-command environment prelude whose old values the hook restores.

The hook writes ``NONCE:STATUS`` to descriptor 8, the shell's end of its marker channel, after
every command line (see markers.py, channel.py); each command runs with that descriptor closed.
"""

from __future__ import annotations

from conch.core.shell.channel import FD

_HOOK = (
    "__conch_p(){ local __conch_s=$?;PS1='';PS2='';"
    'if [ -n "$__conch_r" ];then eval "$__conch_r";__conch_r=;fi;'
    f'printf %s "$__conch_n:$__conch_s" >&{FD};}}'
)
BOOT = {
    "bash": (
        "PS1='';PS2='';PS3='';unset PROMPT_COMMAND HISTFILE;set +m;"
        "__conch_n=@NONCE@;__conch_r=;" + _HOOK + ";"
        'PROMPT_COMMAND=__conch_p;exit(){ builtin exit "$@" 2>/dev/null;}\n'
    ),
    "zsh": (
        "unsetopt zle prompt_sp prompt_cr prompt_subst;"
        "setopt no_monitor no_notify no_hup no_check_jobs no_beep;"
        "PS1='';PS2='';RPS1='';RPS2='';PROMPT_EOL_MARK='';unset HISTFILE;"
        "__conch_n=@NONCE@;__conch_r=;"
        + _HOOK.replace("PS1='';", "PS1='';RPS1='';")
        + ";precmd_functions=(__conch_p)\n"
    ),
}
#: what ends each trigger line: the command runs with the channel closed (bash and zsh put it
#: back when the sourced file returns, however it ended; each keeps its copy meanwhile
#: close-on-exec, zsh also out of reach of redirections)
TRIGGER_END = f" {FD}>&-\n".encode()
ARGV = {"bash": ["--noprofile", "--norc", "--noediting", "-i"], "zsh": ["-f", "-i"]}


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def env_prelude(assign: dict[str, str]) -> str:
    """Shell text exporting assign for one command; the prompt hook restores the old values."""
    parts = []
    for k, v in assign.items():
        parts.append(
            f'if [ -n "${{{k}+x}}" ];then __conch_o_{k}=${k};'
            f'__conch_r="$__conch_r {k}=\\$__conch_o_{k};unset __conch_o_{k};";'
            f'else __conch_r="$__conch_r unset {k};";fi;export {k}={_quote(v)}\n'
        )
    return "".join(parts)
