"""Forms of the Members, Personas and Sessions pages. They check the shape of the input; the
use cases (``contexts.usecases.members``, ``personas``, ``session_admin``) check the rules and
name the field of what they refuse, which the views put back on the form."""

from __future__ import annotations

from django import forms
from django.conf import settings

from accounts.models import Role
from contexts.console.forms import ConsoleForm
from contexts.usecases.members import NO_ROLE
from contexts.usecases.personas import (
    HALFLIFE_KINDS,
    MAX_HALFLIFE_DAYS,
    MAX_WEIGHT,
    MIN_HALFLIFE_DAYS,
)

ROLE_CHOICES = [(value, label) for value, label in Role.choices]


class _OnePageForm(ConsoleForm):
    """A form that shares its page with another of the same fields (Members: both have a
    ``role``): its element ids carry ``ID_PREFIX`` so that each is unique on the page; the
    field names, which the views read, stay as they are."""

    ID_PREFIX = "id"

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", f"{self.ID_PREFIX}_%s")
        super().__init__(*args, **kwargs)


class AddMemberForm(_OnePageForm):
    ID_PREFIX = "invite"
    identifier = forms.CharField(label="Username or e-mail", max_length=254,
                                 help_text="an account that already exists")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Role.VIEWER)


class CreateMemberForm(_OnePageForm):
    ID_PREFIX = "create"
    username = forms.CharField(max_length=150)
    email = forms.EmailField(label="E-mail", max_length=254)
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Role.VIEWER)


class RoleForm(ConsoleForm):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class RepositoryRoleForm(ConsoleForm):
    repository = forms.ChoiceField()
    role = forms.ChoiceField(choices=[(NO_ROLE, "none (organization role only)"),
                                      *ROLE_CHOICES], required=False)

    def __init__(self, *args, repositories, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["repository"].choices = [(r.public_id, r.slug) for r in repositories]


def halflife_field(kind: str) -> str:
    return "halflife_" + kind.replace("-", "_")


def _weight(label: str) -> forms.FloatField:
    return forms.FloatField(label=label, min_value=0, max_value=MAX_WEIGHT,
                            widget=forms.NumberInput(attrs={"step": "any"}))


class PersonaForm(ConsoleForm):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(max_length=63, help_text="what agents name as persona_id")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    w_r = _weight("w_r relevance")
    w_f = _weight("w_f freshness")
    w_c = _weight("w_c authority")
    w_p = _weight("w_p pinned")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        defaults = settings.FRESHNESS_HALFLIFE_DAYS
        for kind in HALFLIFE_KINDS:
            fallback = defaults.get(kind, defaults.get("default"))
            self.fields[halflife_field(kind)] = forms.FloatField(
                label=f"{kind} (days)", required=False, min_value=MIN_HALFLIFE_DAYS,
                max_value=MAX_HALFLIFE_DAYS,
                widget=forms.NumberInput(attrs={"step": "any", "placeholder": f"{fallback:g}"}),
                help_text="" if kind != "default" else "kinds left blank use this")

    def halflife_fields(self):
        return [self[halflife_field(kind)] for kind in HALFLIFE_KINDS]

    def weights(self) -> dict[str, float]:
        return {name: self.cleaned_data[name] for name in ("w_r", "w_f", "w_c", "w_p")}

    def halflives(self) -> dict[str, float]:
        return {kind: self.cleaned_data[halflife_field(kind)] for kind in HALFLIFE_KINDS
                if self.cleaned_data.get(halflife_field(kind)) is not None}

    @staticmethod
    def initial_for(persona) -> dict:
        initial = {"name": persona.name, "slug": persona.slug,
                   "description": persona.description,
                   **{name: getattr(persona, name) for name in ("w_r", "w_f", "w_c", "w_p")}}
        for kind, days in (persona.halflife_days or {}).items():
            initial[halflife_field(kind)] = days
        return initial


class CompareForm(ConsoleForm):
    query = forms.CharField(max_length=settings.RETRIEVAL["max_query_chars"])
    a = forms.ChoiceField(label="Persona A")
    b = forms.ChoiceField(label="Persona B")
    repo = forms.ChoiceField(label="Repository", required=False)
    budget_tokens = forms.IntegerField(label="Budget (tokens)", initial=3200, min_value=1,
                                       max_value=settings.RETRIEVAL["max_budget_tokens"],
                                       required=False)

    def __init__(self, *args, personas, repos, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        choices = [(p.public_id, p.slug) for p in personas]
        self.fields["a"].choices = choices
        self.fields["b"].choices = choices
        self.fields["repo"].choices = [("*", "all repositories I can read"),
                                       *((r.public_id, r.slug) for r in repos)]


class ExpireForm(ConsoleForm):
    expires_at = forms.DateTimeField(
        label="Expires", required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="blank: now")


class OrganizationForm(ConsoleForm):
    """The Organizations page (superusers): an organization and its first administrator."""

    prefix = "org"  # beside the repository form on one page: ids and names stay apart

    slug = forms.CharField(max_length=63, help_text="lowercase letters, digits, '-' or '_'")
    name = forms.CharField(max_length=200)
    admin = forms.CharField(label="First administrator", max_length=150,
                            help_text="a username; created when new")
    email = forms.EmailField(label="Their e-mail", max_length=254, required=False,
                             help_text="needed for a new account")


class NewRepositoryForm(ConsoleForm):
    prefix = "repo"
    org = forms.ChoiceField(label="Organization")
    slug = forms.CharField(max_length=63, help_text="lowercase letters, digits, '-' or '_'")
    name = forms.CharField(max_length=200, required=False, help_text="default: the slug")

    def __init__(self, *args, orgs, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["org"].choices = [(o.slug, f"{o.name} ({o.slug})") for o in orgs]
