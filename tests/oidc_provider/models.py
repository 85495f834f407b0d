"""What the provider knows about a user beyond Django's ``User``.

Created by ``migrate --run-syncdb`` (the app has no migrations: the database lives as long as
one provider process).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Profile(models.Model):
    """The ``name`` and ``email_verified`` claims, which ``User`` has no field for."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="oidc_profile")
    name = models.CharField(max_length=300, blank=True, default="")
    email_verified = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"profile of {self.user_id}"
