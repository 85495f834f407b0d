from django.contrib.auth import views as auth_views
from django.urls import path

from contexts.console import (
    urls_people,
    urls_portability,
    urls_review,
    urls_sources,
    urls_write,
)
from contexts.console.views import (
    fragment_detail,
    fragments,
    home,
    inbox,
    jobs,
    login,
    pins,
    search,
    sso,
    tokens,
    traces,
)

app_name = "console"

urlpatterns = [
    path("login/", login.ThrottledLoginView.as_view(), name="login"),
    path("login/sso/", sso.start, name="sso-start"),
    path("login/sso/callback/", sso.callback, name="sso-callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", home.home, name="home"),
    path("switch/", home.switch_org, name="switch-org"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("inbox/<pid:fragment_id>/answer", inbox.nudge_answer, name="nudge-answer"),
    # An organization and its pages.
    path("o/<slug:slug>/", home.org_overview, name="org"),
    path("o/<slug:slug>/search/", search.search, name="search"),
    path("o/<slug:slug>/ingest/", jobs.ingest, name="ingest"),
    path("o/<slug:slug>/ingest/upload", jobs.ingest_upload, name="ingest-upload"),
    path("o/<slug:slug>/ingest/path", jobs.ingest_path, name="ingest-path"),
    path("o/<slug:slug>/traces/", traces.traces, name="traces"),
    path("o/<slug:slug>/tokens/", tokens.tokens, name="tokens"),
    path("o/<slug:slug>/tokens/personal", tokens.personal_tokens, name="personal-tokens"),
    path("o/<slug:slug>/tokens/personal/<pid:token_id>/revoke", tokens.personal_token_revoke,
         name="personal-token-revoke"),
    path("o/<slug:slug>/tokens/<pid:token_id>/revoke", tokens.token_revoke,
         name="token-revoke"),
    # A scope (organization, repository, persona, session or context) by its public id.
    path("scopes/<pid:scope_id>/fragments/", fragments.fragment_list, name="scope-fragments"),
    path("scopes/<pid:scope_id>/pins/", pins.pins_board, name="scope-pins"),
    path("scopes/<pid:scope_id>/pins/reorder", pins.pin_reorder, name="pin-reorder"),
    path("scopes/<pid:scope_id>/pins/<pid:fragment_id>/move", pins.pin_move, name="pin-move"),
    path("scopes/<pid:scope_id>/pins/<pid:fragment_id>/remove", pins.pin_remove,
         name="pin-remove"),
    path("scopes/<pid:scope_id>/pins/<pid:fragment_id>/expiry", pins.pin_expiry,
         name="pin-expiry"),
    # One fragment.
    path("fragments/<pid:fragment_id>/", fragment_detail.fragment_detail, name="fragment"),
    path("fragments/<pid:fragment_id>/edit", fragment_detail.fragment_edit,
         name="fragment-edit"),
    path("fragments/<pid:fragment_id>/diff", fragment_detail.fragment_diff,
         name="fragment-diff"),
    path("fragments/<pid:fragment_id>/supersede", fragment_detail.fragment_supersede,
         name="fragment-supersede"),
    path("fragments/<pid:fragment_id>/owner", fragment_detail.fragment_owner,
         name="fragment-owner"),
    path("fragments/<pid:fragment_id>/verify", fragment_detail.fragment_verify,
         name="fragment-verify"),
    path("fragments/<pid:fragment_id>/owner/follow", fragment_detail.fragment_owner_follow,
         name="fragment-owner-follow"),
    path("fragments/<pid:fragment_id>/pin", fragments.pin, name="fragment-pin"),
    path("fragments/<pid:fragment_id>/unpin", fragments.unpin, name="fragment-unpin"),
    path("fragments/<pid:fragment_id>/retire", fragments.retire, name="fragment-retire"),
    path("fragments/<pid:fragment_id>/restore", fragments.restore, name="fragment-restore"),
    path("fragments/<pid:fragment_id>/negative", fragments.negative, name="fragment-negative"),
    # Jobs and traces by public id.
    path("jobs/<pid:job_id>/", jobs.job_detail, name="job"),
    path("traces/<pid:trace_id>/", traces.trace_detail, name="trace"),
    # Writing fragments in the browser; members, personas and sessions.
    *urls_write.urlpatterns,
    *urls_people.urlpatterns,
    *urls_review.urlpatterns,
    # Sources Contexts follows, and exporting an organization.
    *urls_sources.urlpatterns,
    *urls_portability.urlpatterns,
]
