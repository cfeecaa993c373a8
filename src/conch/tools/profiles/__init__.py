"""The tool profiles, one module each: ``conch`` (the default) and the three seed-compatible ones
(``ai_device_bash``, ``tfbash``, ``bash_mcp``), each exporting ``PROFILE``; what they share is in
``_common.py``. The registry of profiles is ``conch.tools.registry``."""
