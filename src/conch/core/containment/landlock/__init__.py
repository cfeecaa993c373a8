"""The ``landlock`` sandbox backend: Landlock and seccomp, no namespaces, no root.

``rules.py`` says what one job's ruleset and filters hold; ``seccomp.py`` says what each
filter does to which call, ``bpf.py`` assembles it into bytes and ``syscalls.py`` holds the
numbers of the calls, per architecture (all three pure: the filters are loaded by
``lockdown.load_seccomp``, or by bwrap); ``spawner.py`` starts the job (a restricted thread,
or the fork server where it starts in its cgroup); ``lockdown.py`` is what runs where Conch
cannot be imported (the fork server) and the restriction steps both spawn paths take;
``shim.py`` the bwrap socket broker's shim, standalone too (the filters it loads come from
seccomp.py over its channel); ``tmpdirs.py`` each job's own TMPDIR.
"""
