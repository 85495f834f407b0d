"""A source fragment's owner is asked when a person's edit meets its file (ADR 0020).

The receiver of ``contexts.ingestion.upstream.source_nudge``, connected in ``contexts.signals``.
It runs *inside* the sync's transaction, so the nudge exists exactly when the fragment's
``conflict`` or ``gone`` state does (a sync that rolls back leaves neither); the e-mail goes
once that transaction commits.

* ``open``: a ``source_conflict`` (base, upstream and curated text) or ``source_gone`` nudge to
  the fragment's owner — escalated to the tech leads when there is none. A later sync that
  changes the text again refreshes the open nudge's detail instead of opening a second one.
* ``close``: the source settled it by itself (a later upstream text merged cleanly, a deleted
  text came back): answered ``source_settled``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from contexts.governance import nudges
from contexts.models import Fragment, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState

logger = logging.getLogger(__name__)


def follow_source(sender: Any, fragment: Fragment, kind: str, action: str,
                  detail: dict | None = None, reasons: list[dict] | None = None,
                  **kwargs: Any) -> None:
    if action == "close":
        settle(fragment, kind)
        return
    outcome, nudge = nudges.open_nudge(fragment, reasons or [], kind=kind, detail=detail)
    if nudge is None:
        return
    if outcome == nudges.OPENED:
        escalated = nudge.state == NudgeState.ESCALATED
        transaction.on_commit(lambda: _notify(nudge, escalated))


def settle(fragment: Fragment, kind: str) -> int:
    """Answer the fragment's open nudge of ``kind`` as settled by its source."""
    return (Nudge.objects.filter(fragment=fragment, kind=kind)
            .exclude(state=NudgeState.ANSWERED)
            .update(state=NudgeState.ANSWERED, answer=NudgeAnswer.SOURCE_SETTLED,
                    answered_at=timezone.now()))


def _notify(nudge: Nudge, escalated: bool) -> None:
    try:
        nudges.notify(escalated=[nudge]) if escalated else nudges.notify(opened=[nudge])
    except Exception:  # noqa: BLE001 - the nudge is in the inbox whatever happens to the mail
        logger.exception("could not e-mail nudge %s", nudge.pk)
