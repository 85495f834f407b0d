from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from contexts.health import healthz, livez, readyz
from contexts.metrics import metrics_view
from contexts.restricted import restricted

handler400 = "contexts.api.errors.handler400"
handler403 = "contexts.api.errors.handler403"
handler404 = "contexts.api.errors.handler404"
handler500 = "contexts.api.errors.handler500"

urlpatterns = [
    path("livez", livez, name="livez"),
    path("readyz", readyz, name="readyz"),
    path("healthz", healthz, name="healthz"),
    # Every organization's traffic together: the operator's (contexts/restricted.py).
    path("metrics", restricted(metrics_view), name="metrics"),
    # One login form, the console's rate-limited one: the admin's own would be a second,
    # unthrottled place to guess passwords.
    path("admin/login/", lambda request: redirect_to_login(
        request.GET.get("next", "/admin/"), login_url="console:login"), name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its init script as a URL: no inline script (the CSP forbids it).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"),
         name="api-docs"),
    path("api/", include("contexts.api.urls")),
    path("governance/", include("contexts.console.governance_urls")),
    path("", include("contexts.console.urls")),
]
