"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
members, personas and sessions of an organization, a new member's set-password link, and the
instance's organizations (superusers)."""

from django.urls import path

from contexts.console.views import members, organizations, personas, sessions

urlpatterns: list = [
    path("organizations/", organizations.organizations, name="organizations"),
    path("organizations/create", organizations.organization_create,
         name="organization-create"),
    path("organizations/repositories/create", organizations.repository_create,
         name="repository-create"),
    path("o/<slug:slug>/members/", members.members, name="members"),
    path("o/<slug:slug>/members/add", members.member_add, name="member-add"),
    path("o/<slug:slug>/members/invitations/<pid:invitation_id>/withdraw",
         members.invitation_withdraw, name="invitation-withdraw"),
    path("invitations/<pid:invitation_id>/answer", members.invitation_answer,
         name="invitation-answer"),
    path("o/<slug:slug>/members/create", members.member_create, name="member-create"),
    path("o/<slug:slug>/members/<username:username>/role", members.member_role,
         name="member-role"),
    path("o/<slug:slug>/members/<username:username>/repository-role",
         members.member_repository_role, name="member-repository-role"),
    path("o/<slug:slug>/members/<username:username>/revoke-tokens",
         members.member_revoke_tokens, name="member-revoke-tokens"),
    path("o/<slug:slug>/members/<username:username>/deactivate", members.member_deactivate,
         name="member-deactivate"),
    path("o/<slug:slug>/members/<username:username>/reactivate", members.member_reactivate,
         name="member-reactivate"),
    path("account/set-password/<urlsafe:uidb64>/<urlsafe:token>/",
         members.SetPasswordView.as_view(), name="password-set"),
    path("account/set-password/done/", members.password_set_done, name="password-set-done"),
    path("o/<slug:slug>/personas/", personas.personas, name="personas"),
    path("o/<slug:slug>/personas/new", personas.persona_new, name="persona-new"),
    path("o/<slug:slug>/personas/<pid:persona_id>/edit", personas.persona_edit,
         name="persona-edit"),
    path("o/<slug:slug>/sessions/", sessions.sessions, name="sessions"),
    path("o/<slug:slug>/sessions/<pid:session_id>/close", sessions.session_close,
         name="session-close"),
    path("o/<slug:slug>/sessions/<pid:session_id>/expire", sessions.session_expire,
         name="session-expire"),
]
