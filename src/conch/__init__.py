"""Conch: a shell for AI agents, as a Python runtime and an MCP server."""

from conch._version import __version__
from conch.config import Config
from conch.errors import ConchError, ConfigError, RuntimeClosedError

__all__ = ["ConchError", "Config", "ConfigError", "Runtime", "RuntimeClosedError", "__version__"]


def __getattr__(name: str) -> object:
    # Runtime pulls in the core; keep `import conch` light for the CLI's fast paths.
    if name == "Runtime":
        from conch.runtime import Runtime

        return Runtime
    if name == "dialects":  # conch.dialects.openai_tools() / anthropic_tools()
        import importlib

        return importlib.import_module("conch.dialects")
    raise AttributeError(name)
