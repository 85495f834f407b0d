"""What every console page needs: the current organization, the switcher, object lookups
through the user's visible querysets (404 outside them)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from accounts.models import Membership, Organization, Scope
from contexts.console.querysets import visible
from contexts.kernel.ids import parse_public_id
from contexts.models import Fragment
from contexts.usecases import proposals

PAGE_SIZE = 25
SESSION_ORG = "console_org"


def get_org(request: HttpRequest, slug: str) -> Organization:
    org = get_object_or_404(visible(request).orgs(), slug=slug)
    request.session[SESSION_ORG] = org.slug
    return org


# The URL converters have already checked ids from paths; ``field`` names the form field or
# query parameter an id came from otherwise (a malformed one is a 400 naming it).
def get_scope(request: HttpRequest, public_id: str, field: str = "scope_id") -> Scope:
    return get_object_or_404(visible(request).scopes().select_related("org__scope"),
                             public_id=parse_public_id(public_id, field))


def get_fragment(request: HttpRequest, public_id: str, field: str = "fragment_id") -> Fragment:
    return get_object_or_404(
        visible(request).fragments().select_related("owner", "scope", "org", "superseded_by"),
        public_id=parse_public_id(public_id, field))


def paginate(request: HttpRequest, queryset, per_page: int = PAGE_SIZE) -> Page:
    return Paginator(queryset, per_page).get_page(request.GET.get("page"))


def remembered_org(request: HttpRequest) -> Organization | None:
    """The organization a page without one of its own shows in the navigation: the one the
    console last showed, else the user's first (by slug), so that the organization's links
    stay in the navigation on every page (inbox, governance, error pages)."""
    if not request.user.is_authenticated:
        return None
    orgs = visible(request).org_list
    slug = request.session.get(SESSION_ORG)
    return next((org for org in orgs if org.slug == slug), orgs[0] if orgs else None)


def org_context(request: HttpRequest, org: Organization | None, active: str = "",
                **extra: Any) -> dict[str, Any]:
    """Layout context: organization switcher, current organization, active navigation item."""
    seen = visible(request)
    return {
        "org": org,
        "orgs": seen.org_list,
        "nav_active": active,
        "can_administer_org": bool(org) and seen.may("administer", org.scope),
        # Tech leads and administrators: the Review item with its count of open proposals
        # (counted only when the layout shows it), and the Sources item.
        "can_review_org": bool(org) and seen.may("pin", org.scope),
        # The Review item also for a repository's tech lead (asked only when the layout
        # shows the navigation).
        "can_review_proposals": ((lambda: proposals.reviews_in(request.user, org,
                                                               known=seen.scope_ids))
                                 if org else False),
        "review_open": ((lambda: proposals.open_count(request.user, org, known=seen.scope_ids))
                        if org else 0),
        # Personal tokens are a member's own (a superuser who administers an organization
        # without belonging to it has none): asked only where a page links them.
        "is_member": ((lambda: Membership.objects.filter(user=request.user, org=org).exists())
                      if org else False),
        **extra,
    }
