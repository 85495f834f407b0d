"""Personas of an organization: created and edited by its administrators (the console's
Personas page), with their compose weights and per-kind freshness half-lives.

A persona's weights blend the compose stage's signals (``w_r·relevance + w_f·freshness +
w_c·authority + w_p·pinned``, ``accounts.models.Persona``); its half-lives map a fragment kind
(or ``default``) to days, read by ``contexts.retrieval.compose.halflife_days``. Invalid input is
:class:`InvalidOperation` naming the field, so every surface can put the message where it
belongs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.models import Organization, Persona
from accounts.permissions import may
from contexts.models import FragmentKind
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import NotVisible, Refused

WEIGHTS = ("w_r", "w_f", "w_c", "w_p")
MAX_WEIGHT = 100.0
HALFLIFE_KINDS = ("default", *FragmentKind.values)
MIN_HALFLIFE_DAYS, MAX_HALFLIFE_DAYS = 0.01, 36500.0


@dataclasses.dataclass(frozen=True)
class SavePersona:
    org: Organization
    slug: str
    name: str
    description: str = ""
    weights: Mapping[str, float] = dataclasses.field(default_factory=dict)
    halflife_days: Mapping[str, float] = dataclasses.field(default_factory=dict)
    persona: Persona | None = None  # None: a new one


def may_manage(principal: Any, org: Organization, persona: Persona | None = None) -> bool:
    scope = persona.scope if persona is not None else org.scope
    return may(principal, "administer", scope)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for name in WEIGHTS:
        if name not in weights or weights[name] is None:
            raise InvalidOperation(f"{name} is required", field=name)
        try:
            value = float(weights[name])
        except (TypeError, ValueError):
            raise InvalidOperation(f"{name} must be a number", field=name) from None
        if not math.isfinite(value) or not 0.0 <= value <= MAX_WEIGHT:
            raise InvalidOperation(f"{name} must be between 0 and {MAX_WEIGHT:g}", field=name)
        out[name] = value
    if not any(out.values()):
        raise InvalidOperation("at least one weight must be above 0", field="w_r")
    return out


def check_halflives(halflives: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for kind, days in halflives.items():
        if kind not in HALFLIFE_KINDS:
            raise InvalidOperation(f"unknown kind {kind!r} (one of {', '.join(HALFLIFE_KINDS)})",
                                   field="halflife_days")
        if days is None:
            continue
        try:
            value = float(days)
        except (TypeError, ValueError):
            raise InvalidOperation(f"the half-life of {kind} must be a number of days",
                                   field="halflife_days") from None
        if not math.isfinite(value) or not MIN_HALFLIFE_DAYS <= value <= MAX_HALFLIFE_DAYS:
            raise InvalidOperation(f"the half-life of {kind} must be between "
                                   f"{MIN_HALFLIFE_DAYS:g} and {MAX_HALFLIFE_DAYS:g} days",
                                   field="halflife_days")
        out[kind] = value
    return out


def _snapshot(persona: Persona) -> dict:
    return {"slug": persona.slug, "name": persona.name,
            **{name: getattr(persona, name) for name in WEIGHTS},
            "halflife_days": persona.halflife_days}


def save_persona(principal: Any, command: SavePersona) -> Persona:
    """Create a persona, or change one (``command.persona``)."""
    org, persona = command.org, command.persona
    if not may(principal, "view", org.scope if persona is None else persona.scope):
        raise NotVisible("persona" if persona else "organization")
    if persona is not None and persona.org_id != org.pk:
        raise NotVisible("persona")
    if not may_manage(principal, org, persona):
        raise Refused("only administrators manage personas")
    weights = check_weights(command.weights)
    halflives = check_halflives(command.halflife_days)
    with transaction.atomic():
        before = _snapshot(persona) if persona is not None else None
        target = persona if persona is not None else Persona(org=org)
        target.slug, target.name = command.slug.strip(), command.name.strip()
        target.description = command.description.strip()
        for name, value in weights.items():
            setattr(target, name, value)
        target.halflife_days = halflives
        taken = Persona.objects.filter(org=org, slug=target.slug).exclude(pk=target.pk)
        if taken.exists():
            raise InvalidOperation("another persona has this slug", field="slug")
        try:
            target.full_clean(exclude=["org", "scope", "public_id"])
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise InvalidOperation(messages[0], field=field) from None
        target.save()
        audit.record(principal, "persona.update" if before else "persona.create", target,
                     org=org, before=before, after=_snapshot(target))
    return target
