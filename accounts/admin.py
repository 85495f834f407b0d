import re

from django.contrib import admin
from django.urls import URLPattern, path
from guardian.admin import GuardedModelAdmin as _GuardedModelAdmin

from accounts.models import (
    ApiToken,
    ExternalIdentity,
    Invitation,
    Membership,
    Organization,
    Persona,
    Repository,
    Scope,
    Session,
    TokenScope,
    VerifiedEmail,
)


class GuardedModelAdmin(_GuardedModelAdmin):
    """django-guardian's admin with its object-permission URLs taking digits only: its views
    look ``<object_pk>`` (and the user or group id) up as given, and anything but a number was
    a 500 there (red-team finding 5). ``<digits:…>`` is registered in ``contexts/kernel/ids.py``."""

    def get_urls(self) -> list:
        return [_digits_only(url) if "permissions/" in str(url.pattern) else url
                for url in super().get_urls()]


def _digits_only(url: URLPattern) -> URLPattern:
    route = re.sub(r"<(?:str:)?(object_pk|user_id|group_id)>", r"<digits:\1>", str(url.pattern))
    return path(route, url.callback, url.default_args, url.name)


@admin.register(Organization)
class OrganizationAdmin(GuardedModelAdmin):
    list_display = ("slug", "name", "public_id", "created_at")
    search_fields = ("slug", "name", "public_id")
    readonly_fields = ("public_id", "scope")


@admin.register(Repository)
class RepositoryAdmin(GuardedModelAdmin):
    list_display = ("slug", "org", "name", "public_id")
    list_filter = ("org",)
    search_fields = ("slug", "name", "public_id")
    readonly_fields = ("public_id", "scope")


@admin.register(Persona)
class PersonaAdmin(GuardedModelAdmin):
    list_display = ("slug", "org", "w_r", "w_f", "w_c", "w_p", "public_id")
    list_filter = ("org",)
    readonly_fields = ("public_id", "scope")


@admin.register(Session)
class SessionAdmin(GuardedModelAdmin):
    list_display = ("external_id", "org", "repository", "persona", "expires_at")
    list_filter = ("org",)
    readonly_fields = ("public_id", "scope")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """``role`` is computed (the higher of the two grants): only the hand grant is edited
    here; the mapped one belongs to single sign-on."""

    list_display = ("user", "org", "role", "hand_role", "mapped_role")
    list_filter = ("org", "role")
    fields = ("user", "org", "hand_role", "role", "mapped_role", "created_at")
    readonly_fields = ("role", "mapped_role", "created_at")


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Who an account is at the identity provider. Deleting one unlinks the account (its next
    sign-in through the provider links or creates again, by the usual rules)."""

    list_display = ("user", "issuer", "subject", "email", "email_verified", "last_login_at",
                    "checked_at", "deprovisioned_at")
    search_fields = ("user__username", "email", "subject")
    exclude = ("sealed_refresh_token",)
    readonly_fields = ("user", "issuer", "subject", "email", "email_verified", "groups",
                       "created_at", "last_login_at", "checked_at", "deprovisioned_at")

    def has_add_permission(self, request) -> bool:
        return False  # made by a sign-in


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    list_display = ("label", "kind", "org", "public_id")
    list_filter = ("kind", "org")

    def has_add_permission(self, request) -> bool:
        return False  # scopes are created with their objects

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class TokenScopeInline(admin.TabularInline):
    """A token's scopes (``ApiToken.scopes`` has a through model, which Django's form leaves
    out); each row takes the token's organization."""

    model = TokenScope
    extra = 0
    raw_id_fields = ("scope",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    inlines = [TokenScopeInline]
    list_display = ("name", "prefix", "org", "created_at", "expires_at", "revoked_at",
                    "last_used_at")
    list_filter = ("org",)
    readonly_fields = ("public_id", "prefix", "secret_hash", "last_used_at", "created_at")

    def has_add_permission(self, request) -> bool:
        return False  # minted by create_token / the console, which show the secret once


@admin.register(VerifiedEmail)
class VerifiedEmailAdmin(admin.ModelAdmin):
    """Addresses owners proved theirs (``accounts.emails``). Single sign-on links a first
    sign-in to an existing account only through one. The operator adds one here ("how":
    operator) after checking with the person — before their first sign-in, or after deleting
    the identity a sign-in made on a new account, so that the next one links."""

    list_display = ("user", "email", "how", "verified_at")
    search_fields = ("user__username", "email")
    raw_id_fields = ("user",)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ("identifier", "org", "user", "role", "state", "created_at", "answered_at")
    list_filter = ("org", "state")
    readonly_fields = ("public_id", "created_at", "answered_at")
    raw_id_fields = ("user", "invited_by")
