"""The job model: one state machine for every kind of execution (SPEC §2)."""
