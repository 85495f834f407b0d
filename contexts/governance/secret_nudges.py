"""The owner of a file or fragment a secret was found in hears about it, as a nudge.

A receiver of ``contexts.services.secrets.secrets_found`` (connected in
``ContextsConfig.ready()``), after the finding's transaction committed. The nudge names the
kind, the file and the line — never the secret — and asks the owner to rotate it: a secret
that reached a knowledge base has been seen by whatever copied it there.

A finding from ingestion names its document: the nudge goes on the document's fragment that
holds the placeholder (its first fragment when the chunk was refused). A refused API write
has no fragment to ask about; its writer got the refusal as the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from contexts.governance import nudges
from contexts.models import Fragment, FragmentStatus, SecretFinding
from contexts.models.secrets import SecretAction, SecretOrigin
from contexts.secret_scan import PLACEHOLDER_MARK

logger = logging.getLogger(__name__)
REASON = "secret"


def detail(finding: SecretFinding) -> str:
    where = (f"line {finding.line} of {finding.path}" if finding.path
             else "the title" if finding.line == 0 else f"line {finding.line}")
    if finding.origin == SecretOrigin.RESCAN:
        # Stored before the scan existed: it has been served, and the history still holds it.
        done = ("was stored before secrets were scanned for; the fragment is now retired"
                if finding.action == SecretAction.REFUSED
                else "was stored before secrets were scanned for; its new version holds a "
                     "placeholder instead")
        return (f"A secret ({finding.kind}) on {where} {done}. Rotate it — it may have been "
                "served to agents, and the fragment's earlier versions still hold it — and "
                "keep it in a secret store rather than in documents.")
    done = ("was not stored" if finding.action == SecretAction.REFUSED
            else "was replaced by a placeholder before it was stored")
    return (f"A secret ({finding.kind}) on {where} {done}. Rotate it — it was in the source — "
            "and keep it in a secret store rather than in documents.")


def _fragment_of(finding: SecretFinding) -> Fragment | None:
    if finding.fragment_id is not None:
        return finding.fragment
    if finding.document_id is None:
        return None
    fragments = list(Fragment.objects.filter(sources__document_id=finding.document_id,
                                             status=FragmentStatus.ACTIVE)
                     .select_related("owner", "org").order_by("sources__start_line")[:50])
    holding = [f for f in fragments if PLACEHOLDER_MARK in f.body]
    return (holding or fragments or [None])[0]


def nudge_owners(sender: Any, finding_ids: list[int], **kwargs: Any) -> None:
    """Open (or extend) a nudge per fragment. Never raises: the findings are committed and
    listed on the findings page whatever happens to the e-mail."""
    try:
        _nudge(finding_ids)
    except Exception:  # noqa: BLE001 - see docstring
        logger.exception("could not nudge the owners of %d secret findings", len(finding_ids))


def _nudge(finding_ids: list[int]) -> None:
    reasons: dict[int, tuple[Fragment, list[dict]]] = {}
    for finding in (SecretFinding.objects.filter(pk__in=finding_ids)
                    .select_related("fragment__owner", "fragment__org").order_by("line")):
        fragment = _fragment_of(finding)
        if fragment is None:
            continue
        reasons.setdefault(fragment.pk, (fragment, []))[1].append(
            {"code": REASON, "detail": detail(finding)})
    for fragment, new in reasons.values():
        # An open nudge keeps its other questions; open_nudge replaces the reasons it is given.
        existing = nudges.unanswered(fragment)
        kept = list(existing.reasons) if existing is not None else []
        nudges.ensure_nudge(fragment, kept + [r for r in new if r not in kept])
