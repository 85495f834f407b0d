"""Single sign-on: the OpenID Connect client (:mod:`contexts.sso.oidc`) — the provider's
metadata, the authorization-code flow with PKCE, the ID token's validation, and the sealed
refresh tokens the periodic check uses (ADR 0019). Who a provider identity becomes is
governance's rule (``contexts.governance.identity``); the console's views and
``contexts.usecases.sso`` drive the flow."""
