from django.urls import path

from contexts.api import views

app_name = "api"

urlpatterns = [
    path("", views.api_root, name="root"),
    path("whoami", views.whoami, name="whoami"),
]
