"""``manage.py create_token --name NAME --scope org:SLUG [...]``: mint an agent token."""

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import LookupError_, parse_scope_ref
from accounts.tokens import create_token


class Command(BaseCommand):
    help = "Create an agent API token bound to scopes; prints the token (once) as the last line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--scope", action="append", required=True,
                            help="org:SLUG, repo:ORG/REPO, persona:ORG/SLUG or "
                                 "session:ORG/EXTERNAL_ID (repeatable)")
        parser.add_argument("--expires", type=int, default=None, metavar="DAYS")

    def handle(self, *args, name: str, scope: list[str], expires: int | None, **options) -> None:
        try:
            scopes = [parse_scope_ref(ref) for ref in scope]
        except LookupError_ as exc:
            raise CommandError(str(exc)) from exc
        orgs = {s.org_id for s in scopes}
        if len(orgs) != 1:
            raise CommandError("all scopes of a token must be in one organization")
        if expires is not None and expires <= 0:
            raise CommandError("--expires must be a positive number of days")
        token, raw = create_token(scopes[0].org, name, scopes, expires_in_days=expires)
        self.stdout.write(f"token {token.public_id} ({token.name}) for "
                          + ", ".join(str(s) for s in scopes)
                          + (f", expires {token.expires_at:%Y-%m-%d}" if token.expires_at else ""))
        self.stdout.write("store it now; it is not shown again:")
        self.stdout.write(raw)
