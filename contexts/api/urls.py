from django.urls import path

from contexts.api import jobs, views

app_name = "api"

urlpatterns = [
    path("", views.api_root, name="root"),
    path("whoami", views.whoami, name="whoami"),
    path("sources", jobs.upload_sources, name="sources"),
    path("jobs/<str:job_id>", jobs.job_detail, name="job-detail"),
]
