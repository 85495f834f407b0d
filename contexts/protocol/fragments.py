"""An agent's fragment write and feedback as REST (``POST /api/fragments``,
``…/{id}/feedback``) and MCP (``write_session_fragment``, ``feedback``) receive them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from contexts.models import Fragment, FragmentKind
from contexts.protocol.retrieval import scope_ref
from contexts.protocol.validation import StrictSerializer
from contexts.usecases.fragment_edits import EditText, FragmentRecord
from contexts.usecases.fragments import MAX_BODY_CHARS, SIGNALS, Feedback, WriteFragment


class TargetScopeSerializer(StrictSerializer):
    org_id = serializers.CharField(max_length=64)
    repo_id = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                    allow_null=True)
    persona_id = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                       allow_null=True)
    session_id = serializers.CharField(max_length=120, required=False, allow_blank=True,
                                       allow_null=True)


class FragmentInSerializer(StrictSerializer):
    """``text`` (or ``body``, its older name): the fragment's text. ``kind``: a session
    summary into a session, prose elsewhere, unless given."""

    scope = TargetScopeSerializer()
    text = serializers.CharField(max_length=MAX_BODY_CHARS, required=False)
    body = serializers.CharField(max_length=MAX_BODY_CHARS, required=False,
                                 help_text="the older name of text")
    title = serializers.CharField(max_length=300, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=FragmentKind.values, required=False)
    heading_path = serializers.ListField(child=serializers.CharField(max_length=300),
                                         required=False, max_length=20)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "text" in attrs and "body" in attrs:
            raise serializers.ValidationError({"text": ["give text or body, not both"]})
        if "text" not in attrs and "body" not in attrs:
            raise serializers.ValidationError({"text": ["This field is required."]})
        return attrs


class FragmentEditSerializer(StrictSerializer):
    text = serializers.CharField(max_length=MAX_BODY_CHARS, trim_whitespace=False)
    version = serializers.IntegerField(min_value=1, help_text="the version you read: a "
                                       "newer one answers 409 with both texts")
    reason = serializers.CharField(max_length=300, required=False, allow_blank=True)


class RecordSourceSerializer(serializers.Serializer):
    kind = serializers.CharField(
        help_text="file, git or archive (a file brought it: path, repository, commit say "
                  "which) — or console, session or proposal (written: written_by, written_at, "
                  "and session_id or proposal_id); as in a retrieval answer's source.kind")
    path = serializers.CharField(allow_null=True)
    repository = serializers.CharField(allow_null=True, help_text="the repository's id")
    commit = serializers.CharField(allow_null=True)
    state = serializers.CharField(allow_null=True,
                                  help_text="in_sync, merged, conflict or gone")
    written_by = serializers.CharField(allow_null=True, required=False,
                                       help_text="written: the username of its first version's "
                                                 "author; null for a token or the system")
    written_at = serializers.DateTimeField(required=False,
                                           help_text="written: when its first version was")
    session_id = serializers.CharField(required=False, help_text="session: the session's id")
    proposal_id = serializers.CharField(required=False,
                                        help_text="proposal: the approved proposal's id")


class RecordEvidenceSerializer(serializers.Serializer):
    ref = serializers.CharField(help_text="path#Lstart-Lend, a path, path::symbol or a "
                                "fragment id")
    kind = serializers.CharField(help_text="file (the source lines it was cut from), path, "
                                 "symbol or fragment (what its text cites)")
    path = serializers.CharField(required=False, allow_blank=True)
    symbol = serializers.CharField(required=False, allow_blank=True)
    fragment = serializers.CharField(required=False, allow_blank=True)
    lines = serializers.ListField(child=serializers.IntegerField(allow_null=True),
                                  required=False, help_text="a file entry's [start, end]")
    commit = serializers.CharField(required=False, allow_blank=True)
    state = serializers.CharField(help_text="current, changed or missing")


class RecordEvidenceSummarySerializer(serializers.Serializer):
    state = serializers.CharField(allow_null=True, help_text="the fragment's evidence state: "
                                  "current, changed, missing, or null when it cites nothing")
    refs = serializers.IntegerField(help_text="how many things it rests on (source lines and "
                                    "what its text cites)")
    changed = serializers.IntegerField(help_text="how many cited ones changed or are missing")


class RecordNudgeSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="the nudge's id (nud_...)")
    kind = serializers.CharField()


class FragmentRecordSerializer(serializers.Serializer):
    id = serializers.CharField()
    version = serializers.IntegerField()
    title = serializers.CharField()
    text = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    scope = serializers.CharField()
    owner = serializers.CharField(allow_null=True, help_text="the owner's username")
    source = RecordSourceSerializer()
    verified_at = serializers.DateTimeField(allow_null=True)
    evidence = RecordEvidenceSerializer(many=True)
    evidence_summary = RecordEvidenceSummarySerializer()
    open_nudges = RecordNudgeSerializer(many=True)


class FragmentCreatedSerializer(serializers.Serializer):
    id = serializers.CharField()
    version = serializers.IntegerField()
    scope = serializers.CharField()
    kind = serializers.CharField()


class FeedbackSerializer(StrictSerializer):
    signal = serializers.ChoiceField(choices=list(SIGNALS))
    trace_id = serializers.CharField(max_length=40, required=False, allow_blank=True)


class FeedbackAcceptedSerializer(serializers.Serializer):
    id = serializers.CharField()
    signal = serializers.CharField()


def write_command(data: Mapping[str, Any]) -> WriteFragment:
    """Validated :class:`FragmentInSerializer` data as the use case's command."""
    kind = data.get("kind") or (FragmentKind.SESSION_SUMMARY if data["scope"].get("session_id")
                                else FragmentKind.PROSE)
    return WriteFragment(scope=scope_ref(data["scope"]), body=data.get("text", data.get("body")),
                         title=data.get("title", ""), kind=kind,
                         heading_path=tuple(data.get("heading_path") or ()))


def edit_command(fragment_id: str, data: Mapping[str, Any]) -> EditText:
    return EditText(fragment_id=fragment_id, text=data["text"], version=data["version"],
                    reason=data.get("reason", ""))


def record_payload(record: FragmentRecord) -> dict[str, Any]:
    fragment = record.fragment
    return {"id": fragment.public_id, "version": fragment.version, "title": fragment.title,
            "text": fragment.body, "kind": fragment.kind, "status": fragment.status,
            "scope": fragment.scope.public_id, "owner": record.owner, "source": record.source,
            "verified_at": record.verified_at, "evidence": record.evidence,
            "evidence_summary": record.evidence_summary, "open_nudges": record.open_nudges}


def feedback_command(fragment_id: str, data: Mapping[str, Any]) -> Feedback:
    return Feedback(fragment_id=fragment_id, signal=data["signal"])


def created_payload(fragment: Fragment) -> dict[str, Any]:
    return {"id": fragment.public_id, "version": fragment.version,
            "scope": fragment.scope.public_id, "kind": fragment.kind}
