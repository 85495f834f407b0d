import os

from django.core.wsgi import get_wsgi_application

from contexts.kernel import local_secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")
local_secrets.prepare()  # before the settings read them
application = get_wsgi_application()

from contexts.config.checks import refuse_to_start  # noqa: E402

refuse_to_start("web", exit_status=3)  # gunicorn's "worker failed to boot": it stops

from contexts.web import serving  # noqa: E402 - needs Django set up

serving.prepare()
