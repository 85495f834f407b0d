"""``manage.py create_token --name NAME --scope org:SLUG [...]``: mint an agent token;
``manage.py create_token --user USERNAME --name NAME [--org SLUG]``: a personal token that acts
as that member, with their roles, in one organization (a team's scripts)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import LookupError_, parse_scope_ref
from accounts.models import Membership, Organization
from accounts.tokens import PersonalTokenRefused, create_personal_token, create_token


class Command(BaseCommand):
    help = ("Create an API token; prints the token (once) as the last line. With --scope: an "
            "agent's token bound to scopes; with --user: a personal token acting as that member.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--scope", action="append", default=[],
                            help="org:SLUG, repo:ORG/REPO, persona:ORG/SLUG or "
                                 "session:ORG/EXTERNAL_ID (repeatable; an agent's token)")
        parser.add_argument("--user", metavar="USERNAME",
                            help="a personal token acting as this member, with their roles")
        parser.add_argument("--org", metavar="SLUG",
                            help="the personal token's organization (needed when the member "
                                 "belongs to several)")
        parser.add_argument("--expires", type=int, default=None, metavar="DAYS")

    def handle(self, *args, name: str, scope: list[str], user: str | None, org: str | None,
               expires: int | None, **options) -> None:
        if expires is not None and expires <= 0:
            raise CommandError("--expires must be a positive number of days")
        if user is not None:
            if scope:
                raise CommandError("a personal token has its member's roles: give --user or "
                                   "--scope, not both")
            self._personal(name, user, org, expires)
            return
        if not scope:
            raise CommandError("give --scope (an agent's token) or --user (a personal token)")
        try:
            scopes = [parse_scope_ref(ref) for ref in scope]
        except LookupError_ as exc:
            raise CommandError(str(exc)) from exc
        orgs = {s.org_id for s in scopes}
        if len(orgs) != 1:
            raise CommandError("all scopes of a token must be in one organization")
        token, raw = create_token(scopes[0].org, name, scopes, expires_in_days=expires)
        self.stdout.write(f"token {token.public_id} ({token.name}) for "
                          + ", ".join(str(s) for s in scopes)
                          + (f", expires {token.expires_at:%Y-%m-%d}" if token.expires_at else ""))
        self._show(raw)

    def _personal(self, name: str, username: str, slug: str | None,
                  expires: int | None) -> None:
        member = get_user_model().objects.filter(username=username).first()
        if member is None:
            raise CommandError(f"no account {username!r}")
        orgs = Organization.objects.filter(memberships__user=member)
        if slug is not None:
            orgs = orgs.filter(slug=slug)
        found = list(orgs.distinct()[:2])
        if not found:
            raise CommandError(f"{username!r} is not a member of "
                               + (f"organization {slug!r}" if slug else "any organization"))
        if len(found) > 1:
            raise CommandError(f"{username!r} belongs to several organizations: give --org")
        try:
            token, raw = create_personal_token(found[0], member, name, expires_in_days=expires)
        except PersonalTokenRefused as exc:
            raise CommandError(str(exc)) from exc
        role = Membership.objects.get(user=member, org=found[0]).role
        self.stdout.write(f"personal token {token.public_id} ({token.name}) acting as "
                          f"{username} ({role}) in {found[0].slug}"
                          + (f", expires {token.expires_at:%Y-%m-%d}" if token.expires_at else ""))
        self._show(raw)

    def _show(self, raw: str) -> None:
        self.stdout.write("store it now; it is not shown again:")
        self.stdout.write(raw)
