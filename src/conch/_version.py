"""The distribution's version: one place, read by the core, the manifest and the MCP server."""

__version__ = "0.1.0"
