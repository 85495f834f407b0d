"""Answering the questions governance asks a fragment's owner (staleness, a source conflict,
changed evidence, a verification due): what a person's inbox holds, who may answer, and the
answer itself — for the console's inbox, the fragment page and the login-free e-mail links."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from contexts.governance import nudges
from contexts.governance.nudges import (  # noqa: F401 - what adapters read of a nudge
    ANSWER_SLUGS,
    NudgeAlreadyAnswered,
    by_token_id,
    candidates_for_handover,
    may_answer,
    read_token,
)
from contexts.models import Nudge


def inbox(user: AbstractBaseUser) -> QuerySet[Nudge]:
    """Unanswered nudges addressed to ``user``, and the escalated ones of organizations they
    lead."""
    return nudges.inbox(user)


def answer(user: AbstractBaseUser, nudge: Nudge, choice: str, new_owner: Any = None, *,
           body: str | None = None, title: str | None = None,
           based_on_version: int | None = None, now: dt.datetime | None = None) -> Nudge:
    """Apply an answer (still accurate, edited, retired, handed over — a value or its URL slug);
    the rules and the audit trail are ``contexts.governance.nudges.answer_nudge``'s."""
    return nudges.answer_nudge(user, nudge, choice, new_owner, body=body, title=title,
                               based_on_version=based_on_version, now=now)
