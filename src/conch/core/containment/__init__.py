"""Containment: the level a job runs at (its cgroup: limits, whole-tree kills) and its sandbox
(bubblewrap or Landlock + seccomp on Linux, Seatbelt on macOS), applied to every spawn.

Responsibilities
- One runtime's containment (``Containment``, containment.py): made from
  ``Config.containment()`` at start; owns the Conch parent cgroups, the sandbox backend and
  the socket broker; checks each call's limits and sandbox values.
- One spawn's fence (``SpawnFence``, fence.py): what a job or shell is wrapped in.
- The choice of a backend and what it guarantees here (``Backends``, backends.py).

Flow of one spawn
1. ``Containment.fence`` (containment.py) checks the call's limits and policy, asks
   ``Backends.check`` (backends.py) for a backend that guarantees what the policy needs, makes
   the job's cgroup (``Cgroups.new``, cgroup/tree.py; the ``JobCgroup`` of cgroup/job.py) and
   returns its ``SpawnFence``.
2. ``SpawnFence.prepare`` (fence.py) turns the argv: under bwrap or Seatbelt into the sandbox's
   command line (sandbox.py) behind a tiny ``sh`` that enters the cgroup (shenv.py restores
   the environment it changes); under Landlock it only notes the files the job must see.
3. The driver builds one ``SpawnSpec`` (core/process/spec.py) and hands it to
   ``popen.spawn`` with the fence's ``spawner`` (None but under Landlock).
4. Under Landlock the spawner builds the job's rules and filters (landlock/rules.py, the BPF
   from landlock/seccomp.py, assembled by landlock/bpf.py) and starts it: a thread that
   restricts itself and spawns it (landlock/spawner.py), or, where it starts in its cgroup,
   the fork server (landlock/lockdown.py, the standalone script), whose child takes the same
   steps (``lockdown.Restriction``). Under bwrap with ``sandbox_sockets`` the first program in the
   sandbox is landlock/shim.py, which loads the filters fence.py sends it.
5. Calls a filter hands to Conch (``sandbox_sockets`` connects, a ``workspace-write`` job's
   mode and time changes) are answered by the broker (unotify.py, metaops.py) until the job's
   last process is gone; a bwrap job's ``.git`` placeholder is gitdir.py's.

Files
- containment.py   the runtime's owner (``Containment``)
- fence.py         one spawn's fence (``SpawnFence``), the cgroup-entering sh, the shim argv
- backends.py      which backend, probed once, and the guarantees of each
- cgroup/          cgroups v2/v1: the runtime's parents (tree.py), a job's cgroup, its limits
                   and kill (job.py, kill.py), the sweep of dead servers' leftovers (sweep.py)
- sandbox.py       policies, the bwrap and Seatbelt command lines
- shenv.py         the environment a wrapping sh changes, given back
- unotify.py       seccomp user notification: the broker of a job's connects
- metaops.py       a workspace-write job's brokered mode and time changes
- gitdir.py        the workspace's ``.git`` placeholder under bwrap
- landlock/        the Landlock backend: rules, seccomp filters (seccomp.py; bpf.py
                   assembles them, syscalls.py numbers the calls), spawner, the standalone
                   fork server (lockdown.py) and bwrap broker shim (shim.py)
"""
