import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")
application = get_wsgi_application()

from contexts.web import serving  # noqa: E402 - needs Django set up

serving.prepare()
