"""Console routes of the review queue (included by contexts/console/urls.py, app namespace
'console'): agents' proposals of an organization, approved, rejected or merged by its tech
leads and administrators (``contexts.usecases.proposals``); and a source conflict, answered by
a fragment's owner (``contexts.usecases.source_conflicts``)."""

from django.urls import path

from contexts.console.views import conflicts, review

urlpatterns: list = [
    path("o/<slug:slug>/review/", review.review, name="review"),
    path("o/<slug:slug>/review/policy", review.policy, name="review-policy"),
    path("o/<slug:slug>/review/<pid:proposal_id>/approve", review.approve,
         name="review-approve"),
    path("o/<slug:slug>/review/<pid:proposal_id>/reject", review.reject, name="review-reject"),
    path("o/<slug:slug>/review/<pid:proposal_id>/merge", review.merge, name="review-merge"),
    # A person's edit and an upstream change of the same lines: base, upstream, curated.
    path("inbox/<pid:fragment_id>/conflict", conflicts.conflict, name="source-conflict"),
]
