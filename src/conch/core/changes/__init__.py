"""Changes and undo: per job, what it changed under its workspace, and taking it back.

Map:
* ``entry``   — what one path holds (type, mode, size, content digest, symlink target); pure.
* ``inotify`` — the kernel's inotify through libc.
* ``store``   — the data dir's ``changes/``: contents by digest, one record per job, held by
  descriptor, every file whole or absent.
* ``safefs``  — the workspace reached by descriptor: reads and writes that never follow a
  symlink nor leave the workspace.
* ``tracker`` — the index of the workspace kept by inotify, and the running jobs' touched
  paths; a job's record when it ends.
* ``confine`` — the undo's writes in a thread Landlock confines to the workspace.
* ``undo``    — the check (``conflict``) and the restore; an undo is a record of its own.
* ``view``    — a record as the ``changes`` result shows it (pages, bounded diff).

The engine (core/engine.py) starts the tracker, begins a job's tracking before its process
starts and ends it when the job ends. docs/design/changes.md says why this design."""
