"""Persistent shells and terminal (PTY) jobs (docs/spec.md §3 `pty`, §4)."""
