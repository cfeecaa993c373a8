"""Persistent shells and terminal (PTY) jobs (SPEC §3 `pty`, §4)."""
