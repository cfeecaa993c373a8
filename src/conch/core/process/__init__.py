"""Process spawning, tagging and tree hygiene (SPEC §2 "Process hygiene")."""
