"""The bundle's deliberately dumb compression: what an agent receives of a fragment.

It only drops the boilerplate first line — the code header ``# path · symbol`` or the prose
breadcrumb, both carried by ``source`` and ``heading_path`` — and collapses blank runs; it never
paraphrases. A pure function of the body and heading path, so its token count is stored with
the fragment when it is saved (``Fragment.packed_tokens``) instead of being counted on every
retrieval.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from contexts.kernel.tokens import count_tokens

BLANK_RUNS = re.compile(r"\n{3,}")


def split_header(body: str, heading_path: Sequence[str]) -> tuple[str, str]:
    """(the boilerplate first line with the blank lines after it, the rest): ``("", body)``
    when the body has no such line, or nothing after it. The console's editor shows the rest
    only and puts the line back on save."""
    first, _, rest = body.partition("\n")
    breadcrumb = " > ".join(heading_path)
    is_header = (first.startswith(("# ", "// ", "-- ")) and " · " in first) or (
        breadcrumb and first.strip() == breadcrumb)
    if not is_header or not rest.strip():
        return "", body
    text = rest.lstrip("\n")
    return body[:len(body) - len(text)], text


def compress(body: str, heading_path: Sequence[str]) -> str:
    return BLANK_RUNS.sub("\n\n", split_header(body, heading_path)[1]).strip()


def packed_tokens(body: str, heading_path: Sequence[str]) -> int:
    """Tokens of the compressed text (cl100k)."""
    return count_tokens(compress(body, heading_path))
