"""A fragment as a team's scripts read and edit it (issue 38): ``GET /api/fragments/{id}`` and
``PATCH /api/fragments/{id}``, usually with a personal token acting as a member.

Reading needs only that the principal reads the fragment (missing and unreadable alike are
:class:`NotVisible`); editing goes through the one door for versioned writes
(``services.fragments.edit_fragment``): the curator roles, secret screening, a version and an
audit event naming the person — and optimistic concurrency: an edit based on a version that is
no longer current raises ``EditConflict`` carrying both texts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from django.db.models import F

from accounts.permissions import may
from contexts.models import (
    Fragment,
    FragmentOrigin,
    FragmentVersion,
    Nudge,
    Proposal,
    SourcePointer,
    document_origin,
    written_origin,
)
from contexts.models.governance import NudgeState
from contexts.services import evidence as evidence_service
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import edit_fragment
from contexts.usecases.errors import Refused
from contexts.usecases.fragments import MAX_BODY_CHARS, visible_fragment


@dataclasses.dataclass(frozen=True)
class FragmentRecord:
    fragment: Fragment
    owner: str | None
    source: dict[str, Any]
    verified_at: dt.datetime | None
    evidence: list[dict[str, Any]]
    evidence_summary: dict[str, Any]
    open_nudges: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class EditText:
    fragment_id: str  # a public id, as the caller sent it
    text: str
    version: int      # the version the edit is based on
    reason: str = ""


def fragment_record(principal: Any, fragment_id: str) -> FragmentRecord:
    """What a script needs of a fragment: its text and version, owner, where it came from and
    how current that is, what it rests on, and what its owner is being asked."""
    fragment = visible_fragment(principal, fragment_id)
    fragment = (Fragment.objects.select_related("owner", "scope").get(pk=fragment.pk))
    return FragmentRecord(
        fragment=fragment,
        owner=fragment.owner.get_username() if fragment.owner_id else None,
        source=_source(fragment), verified_at=fragment.verified_at,
        # The same entries and summary as the console's fragment page and retrieval answers:
        # a source fragment's file lines first (state from its source state), then what its
        # text cites.
        evidence=evidence_service.public(evidence_service.entries(fragment)),
        evidence_summary=evidence_service.summary_of(fragment),
        open_nudges=[{"id": public_id, "kind": kind} for public_id, kind in Nudge.objects.filter(
            fragment=fragment).exclude(state=NudgeState.ANSWERED)
            .order_by("created_at", "pk").values_list("public_id", "kind")])


def _source(fragment: Fragment) -> dict[str, Any]:
    """Where it came from, as retrieval answers say it (``source.kind``, docs/api.md): its first
    file — path, repository, commit — or, for a fragment no file brought, where it was written
    (the console, a session or an approved proposal), by whom and when. The file keys are
    always there (null for a written fragment)."""
    pointer = (SourcePointer.objects.filter(fragment=fragment)
               .select_related("document__repository").order_by("document__path").first())
    state = fragment.source_state or None
    if pointer is None:
        none = {"path": None, "repository": None, "commit": None, "state": state}
        if state is not None:  # its file's lines are gone: still a file's fragment
            return {"kind": FragmentOrigin.FILE.value, **none}
        return {**_written(fragment), **none}
    document = pointer.document
    commit = document.source_commit or pointer.base_commit or None
    return {"kind": document_origin(document.origin, document.source_commit),
            "path": document.path,
            "repository": document.repository.public_id if document.repository_id else None,
            "commit": commit, "state": state}


def _written(fragment: Fragment) -> dict[str, Any]:
    """A fragment no file brought: who wrote its first version when, and where."""
    proposal_id = (Proposal.objects.filter(result_fragment=fragment)
                   .order_by(F("decided_at").desc(nulls_last=True))
                   .values_list("public_id", flat=True).first())
    first = (FragmentVersion.objects.filter(fragment=fragment, number=1)
             .select_related("editor").first())
    kind = written_origin(fragment.scope.kind, proposal_id)
    written = {"kind": kind,
               "written_by": first.editor.get_username() if first and first.editor else None,
               "written_at": first.created_at if first else fragment.recorded_at}
    if kind == FragmentOrigin.SESSION:
        written["session_id"] = fragment.scope.public_id
    if kind == FragmentOrigin.PROPOSAL:
        written["proposal_id"] = proposal_id
    return written


def edit_text(principal: Any, command: EditText) -> Fragment:
    """A new version of the fragment's text, as the principal (a curator of its scope)."""
    fragment = visible_fragment(principal, command.fragment_id)
    if not may(principal, "curate", fragment.scope):
        raise Refused("you may not edit fragments of this scope: curators, tech leads and "
                      "administrators do")
    if not command.text.strip():
        raise InvalidOperation("text must not be empty", field="text")
    if len(command.text) > MAX_BODY_CHARS:
        raise InvalidOperation(f"at most {MAX_BODY_CHARS} characters", field="text")
    try:
        return edit_fragment(principal, fragment, based_on_version=command.version,
                             body=command.text, reason=command.reason or "edited through the API")
    except InvalidOperation as exc:
        if exc.field == "body":
            raise InvalidOperation(str(exc).replace("body", "text"), field="text") from exc
        raise

