"""``manage.py bootstrap``: the demo organization and a first admin, created once."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Membership, Organization, Repository, Role
from accounts.permissions import SYSTEM
from contexts.models import IngestionJob
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource

DEMO_ORG = "demo"
DEMO_REPO = "contexts"


class Command(BaseCommand):
    help = "Create the demo organization and an admin account if they do not exist."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--demo", action="store_true", default=True)
        parser.add_argument("--no-demo", dest="demo", action="store_false")
        parser.add_argument("--admin", default="admin", help="admin username")

    @transaction.atomic
    def handle(self, *args, demo: bool, admin: str, **options) -> None:
        org, _ = Organization.objects.get_or_create(slug=DEMO_ORG,
                                                    defaults={"name": "Demo organization"})
        repo, _ = Repository.objects.get_or_create(
            org=org, slug=DEMO_REPO, defaults={"name": "Contexts (this repository)"})
        user_model = get_user_model()
        user = user_model.objects.filter(username=admin).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = user_model.objects.create_superuser(admin, f"{admin}@localhost", password)
            self.stdout.write(self.style.WARNING(
                f"Created the admin account — log in as {admin!r} with password {password!r} "
                "(shown only now; change it with `manage.py changepassword`)."
            ))
        Membership.objects.get_or_create(user=user, org=org, defaults={"role": Role.ADMIN})
        if demo and not IngestionJob.objects.filter(org=org).exists():
            # The project's own README, docs (with ADRs) and code: real content to curate and
            # search at once. The worker runs it; the console shows its progress. Tracked files
            # only: a stray untracked note or key in the checkout is not demo knowledge, and the
            # defaults leave test fixtures out (contexts/ingestion/policy.py).
            job = ingestion.submit(SYSTEM, SubmitSource(scope=repo.scope,
                                                        path=str(settings.BASE_DIR), owner=user))
            self.stdout.write(f"Ingesting this repository into demo/{DEMO_REPO} in the "
                              f"background (job {job.public_id}).")
