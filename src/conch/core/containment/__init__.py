"""Containment (docs/spec.md §9, §9a): the level a job runs at — its cgroup (limits, whole-tree
kills), its sandbox (bubblewrap, or Seatbelt on macOS) — and the fence one spawn is wrapped in."""
