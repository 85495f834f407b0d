"""Sizes in words, one unit everywhere: the ingest page's limits and every error or skip
reason about a size say it the same way (decimal units: a 1,000,000-byte limit is "1 MB",
never "976.6 KB" beside "1000000 bytes")."""

from __future__ import annotations

_UNITS = ("kB", "MB", "GB", "TB")


def byte_size(count: int) -> str:
    """``508`` → "508 bytes", ``1_000_000`` → "1 MB", ``1_048_576`` → "1.05 MB"."""
    if abs(count) < 1000:
        return f"{count} byte{'' if count == 1 else 's'}"
    value = float(count)
    for unit in _UNITS:
        value /= 1000
        # Three significant digits; 999,999 bytes rounds to "1 MB", not "1e+03 kB".
        if round(abs(value), 3 - len(str(int(abs(value))))) < 1000 or unit == _UNITS[-1]:
            break
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:.0f} {unit}"


def size_over(size: int, limit: int) -> str:
    """"1.05 MB > limit 1 MB"; in bytes when rounding would make the two look the same."""
    said, allowed = byte_size(size), byte_size(limit)
    if said == allowed:
        said, allowed = f"{size} bytes", f"{limit} bytes"
    return f"{said} > limit {allowed}"
