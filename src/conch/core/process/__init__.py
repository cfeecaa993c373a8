"""Process spawning, tagging and tree hygiene (docs/spec.md §2 "Process hygiene")."""
