"""The cgroup containment level: one cgroup per job and per shell, its limits, its kill.

Two layouts are supported:

* **cgroup v2** (a typical desktop: a delegated systemd user scope, or root): the server's own
  cgroup gets a ``conch-<instance>`` child, each job a cgroup below it. Killing is
  ``cgroup.kill``; ``memory.max``/``pids.max`` apply where the memory/pids controllers are
  delegated to that subtree.
* **v1 controllers** (older or hybrid hosts): ``memory`` and ``pids`` hierarchies under
  ``/sys/fs/cgroup/<controller>``, used for the limits; they also track processes where no
  writable v2 tree exists (killing is then: freeze, SIGKILL every pid in ``cgroup.procs``, thaw).

A hybrid host has both: a writable v2 tree without controllers tracks and kills, the v1
controllers limit. A child is placed into its cgroups by itself, between fork and exec
(a tiny ``sh`` writes ``0`` to each ``cgroup.procs`` and execs the program, see fence.py, or
the spawn starts it there), so no fork can escape between spawn and placement.

Files, in the order one runtime and one job use them
- layout.py  where this process's cgroups are (``parse_layout`` pure, ``read_layout``)
- tree.py    the runtime's parent cgroups and what they support (``Cgroups``, ``Support``):
             setup, the controllers handed down, a job's cgroup made (``Cgroups.new``), close
- job.py     one job's cgroups (``JobCgroup``): the procs files its child enters, its pids,
             populated, OOM kills, kill and wait, removal; ``set_memory`` (v2 or v1)
- kill.py    ``kill_now``: ``cgroup.kill``, or the v1 fallback (freeze, SIGKILL, thaw)
- sweep.py   the leftovers of dead servers, killed and removed at setup
- fs.py      the small reads and writes of cgroup files every file above shares
"""
