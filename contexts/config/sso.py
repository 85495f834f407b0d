"""Single sign-on (OpenID Connect; docs/operations.md, *Single sign-on*)."""

from contexts.config.schema import BOOL, INT, LIST, TEXT, Area, Setting

AREA = Area("Single sign-on", "OpenID Connect: on when OIDC_CLIENT_ID and a discovery URL (or "
            "an issuer) are set (`docs/operations.md`, *Single sign-on*).", (
    Setting("OIDC_ISSUER", TEXT, "",
            "The provider's issuer URL (a trailing `/` is dropped); the discovery document is "
            "read from its standard path."),
    Setting("OIDC_DISCOVERY_URL", TEXT, "",
            "The discovery document, when it is not at the issuer's standard path.",
            shown_default="`$OIDC_ISSUER/.well-known/openid-configuration` (empty without an "
                          "issuer)"),
    Setting("OIDC_CLIENT_ID", TEXT, "", "The client id registered at the provider."),
    Setting("OIDC_CLIENT_SECRET", TEXT, "", "The client secret.", secret=True),
    Setting("OIDC_SCOPES", TEXT, "openid email profile",
            "The scopes asked for, space-separated; must contain `openid`."),
    Setting("OIDC_AUTHORIZE_PARAMS", TEXT, "",
            "Extra parameters of the authorization request, as a query string (Google: "
            "`access_type=offline&prompt=consent`)."),
    Setting("OIDC_ALLOWED_DOMAINS", LIST, [],
            "E-mail domains allowed to sign in, comma-separated (empty: any the provider "
            "vouches for)."),
    Setting("OIDC_GROUPS_CLAIM", TEXT, "groups", "The claim that lists the person's groups."),
    Setting("OIDC_GROUP_MAPPING", TEXT, "{}",
            "Groups to roles, as JSON: `{\"group\": [{\"org\": \"acme\", \"role\": "
            "\"tech_lead\"}]}`; a mistake stops the start, naming where it is."),
    Setting("OIDC_RECHECK_SECONDS", INT, 900,
            "The longest a removal at the provider goes unnoticed: each signed-in person is "
            "asked about again within it.", minimum=60),
    Setting("OIDC_TIMEOUT_SECONDS", INT, 10, "Timeout of each call to the provider, in seconds.",
            minimum=1),
    Setting("OIDC_BUTTON_LABEL", TEXT, "Sign in with your company account",
            "The login page's button."),
    Setting("CONTEXTS_LOCAL_LOGIN", BOOL, True,
            "The username/password form; off, only the operator's staff and superusers sign in "
            "with a password (at `/login/?operator`), and single sign-on must be configured."),
))
