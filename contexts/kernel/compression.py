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


def compress(body: str, heading_path: Sequence[str]) -> str:
    first, _, rest = body.partition("\n")
    breadcrumb = " > ".join(heading_path)
    is_header = (first.startswith(("# ", "// ", "-- ")) and " · " in first) or (
        breadcrumb and first.strip() == breadcrumb)
    text = rest.lstrip("\n") if is_header and rest.strip() else body
    return BLANK_RUNS.sub("\n\n", text).strip()


def packed_tokens(body: str, heading_path: Sequence[str]) -> int:
    """Tokens of the compressed text (cl100k)."""
    return count_tokens(compress(body, heading_path))
