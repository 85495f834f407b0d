"""The governance pages, mounted at ``/governance/`` under their own URL namespace (the links in
nudge emails name it). They are console pages (``contexts.console.views.governance``)."""

from django.urls import path

from contexts.console.views import governance as views
from contexts.console.views import secrets

app_name = "governance"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("nudges/<signed:token>/<slug:answer>", views.nudge_answer, name="nudge-answer"),
    path("fragments/<pid:public_id>/chain", views.chain, name="chain"),
    path("dedup/", views.dedup_review, name="dedup"),
    path("dedup/<int:pk>/decide", views.dedup_decide, name="dedup-decide"),
    path("secrets/", secrets.secret_findings, name="secrets"),
]
