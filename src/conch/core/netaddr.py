"""Whether a host names this machine's loopback (the HTTP guard, --register, the fleet's Ray
address): one rule for every layer."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP (brackets of a v6 literal allowed)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
