"""The job model: one state machine for every kind of execution (docs/spec.md §2)."""
