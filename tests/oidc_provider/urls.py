"""django-oauth-toolkit under ``o/`` (issuer ``http://127.0.0.1:<port>/o``), the login page and
the control API."""

from django.contrib.auth.views import LoginView
from django.urls import include, path

from . import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls")),
    path("accounts/login/", LoginView.as_view(template_name="registration/login.html"),
         name="login"),
    path("control/clients", views.clients),
    path("control/users", views.users),
    path("control/tamper", views.tamper),
    path("", views.index),
]
