from django.urls import path

from contexts.api import (
    fragments,
    jobs,
    portability,
    proposals,
    retrieve,
    views,
)

app_name = "api"

urlpatterns = [
    path("", views.api_root, name="root"),
    path("whoami", views.whoami, name="whoami"),
    path("contexts/retrieve", retrieve.retrieve_view, name="retrieve"),
    path("fragments", fragments.fragments_view, name="fragments"),
    path("fragments/<pid:fragment_id>", fragments.fragment_view, name="fragment"),
    path("fragments/<pid:fragment_id>/feedback", fragments.feedback_view, name="feedback"),
    path("fragments/<pid:fragment_id>/propose", proposals.propose_view, name="propose"),
    path("proposals", proposals.proposals_view, name="proposals"),
    path("proposals/<pid:proposal_id>", proposals.proposal_view, name="proposal"),
    path("traces/<pid:trace_id>", fragments.trace_view, name="trace"),
    path("sources", jobs.upload_sources, name="sources"),
    path("jobs/<pid:job_id>", jobs.job_detail, name="job-detail"),
    # An organization's export.
    path("orgs/<slug:org>/export", portability.export_view, name="org-export"),
]
