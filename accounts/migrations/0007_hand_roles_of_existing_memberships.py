"""Every membership written before issue 26 was given by hand: its role becomes its hand role
(``Membership.hand_role``), so the single-sign-on mapping never takes it away."""

from django.db import migrations
from django.db.models import F


def forwards(apps, schema_editor):
    Membership = apps.get_model("accounts", "Membership")
    Membership.objects.filter(hand_role__isnull=True, mapped_role__isnull=True).update(
        hand_role=F("role"))


class Migration(migrations.Migration):

    dependencies = [("accounts", "0006_sso_identities_and_role_sources")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
