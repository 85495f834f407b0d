"""The one place that decides a request's client address.

Every throttle (the console's login limit, the API's per-address bucket) and every address
check (``contexts.web.restricted``) asks :func:`client_address`. It is the TCP peer
(``REMOTE_ADDR``) unless that peer is one of ``CONTEXTS_TRUSTED_PROXIES`` (empty by default):
only then is ``X-Forwarded-For`` read, from the right, skipping proxies, and the first address
that is not a proxy is the client. Entries further left were written by the client itself and
prove nothing, so a client cannot pick its own throttle bucket.

The web server applies the same list (``contexts.web.worker``): uvicorn's default trusted
``X-Forwarded-For`` from loopback, so behind no proxy at all anyone on the host could name any
address. Both walk a well-formed header the same way, so this function returns the server's
answer unchanged (uvicorn would take a malformed hop as the client, this stops before it).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_CACHED = "contexts.kernel.client_address"  # request.META key: decided once per request


def client_address(request: HttpRequest) -> str:
    """The client's address as a string (``REMOTE_ADDR`` when no proxy is configured)."""
    meta = request.META
    cached = meta.get(_CACHED)
    if cached is None:
        cached = meta[_CACHED] = resolve(
            meta.get("REMOTE_ADDR", ""), meta.get("HTTP_X_FORWARDED_FOR", ""),
            networks(tuple(settings.TRUSTED_PROXIES)))
    return cached


def resolve(peer: str, forwarded_for: str, trusted: tuple[Network, ...]) -> str:
    if not trusted or not is_in(peer, trusted):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    client = peer
    for hop in reversed(hops):
        address = parse_address(hop)
        if address is None:
            # Not an address: the chain cannot be followed further than the last proxy that
            # vouched for it, and that proxy answers for the request.
            return client
        client = str(address)
        if not any(address in network for network in trusted):
            return client
    return client  # every hop a proxy: the left-most is as close to the client as we get


def is_in(address: str, allowed: tuple[Network, ...]) -> bool:
    parsed = parse_address(address)
    return parsed is not None and any(parsed in network for network in allowed)


@lru_cache(maxsize=16)
def networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """Settings hold normalised strings (``settings.env_networks`` validated them)."""
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def parse_address(text: str) -> Address | None:
    """``203.0.113.5``, ``203.0.113.5:4711``, ``2001:db8::5`` or ``[2001:db8::5]:443``."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else text
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:10.0.0.1 is 10.0.0.1
    return mapped or address
