"""Console routes of the review queue (included by contexts/console/urls.py, app namespace
'console'): agents' proposals of an organization, approved, rejected or merged by its tech
leads and administrators (``contexts.usecases.proposals``)."""

from django.urls import path

from contexts.console.views import review

urlpatterns: list = [
    path("o/<slug:slug>/review/", review.review, name="review"),
    path("o/<slug:slug>/review/policy", review.policy, name="review-policy"),
    path("o/<slug:slug>/review/<pid:proposal_id>/approve", review.approve,
         name="review-approve"),
    path("o/<slug:slug>/review/<pid:proposal_id>/reject", review.reject, name="review-reject"),
    path("o/<slug:slug>/review/<pid:proposal_id>/merge", review.merge, name="review-merge"),
]
