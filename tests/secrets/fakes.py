"""Realistic-looking but fake secrets, assembled at run time from a seed.

Never written into the repository as literals: the repository itself is scanned for secrets
(``manage.py scan_secrets``, ``test_repository_scan.py``), and a literal key here would be a
finding there — and would teach whoever reads the scan to shrug at a real-looking key.
"""

from __future__ import annotations

import base64
import json
import random
import string

from accounts.models import PUBLIC_ID_ALPHABET as BASE32

UPPER_DIGITS = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
BEGIN, END = "-----BEGIN RSA " + "PRIVATE KEY-----", "-----END RSA " + "PRIVATE KEY-----"


class Secrets:
    """One set of secrets, different for every seed, and the files that leak them."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)

        def pick(alphabet: str, n: int) -> str:
            return "".join(rng.choice(alphabet) for _ in range(n))

        self.aws_access_key_id = "AK" + "IA" + pick(UPPER_DIGITS, 16)
        self.aws_secret_access_key = pick(ALNUM + "/+", 40)
        self.github_token = "gh" + "p_" + pick(ALNUM, 36)
        self.gitlab_token = "gl" + "pat-" + pick(ALNUM, 20)
        self.slack_webhook = ("https://hooks." + "slack.com/services/T" + pick(UPPER_DIGITS, 8)
                              + "/B" + pick(UPPER_DIGITS, 10) + "/" + pick(ALNUM, 24))
        self.pg_password = pick(ALNUM, 10) + "-" + pick(ALNUM, 8)
        self.postgres_url = (f"postgresql://billing:{self.pg_password}"
                             "@db.internal.example:5432/billing")
        self.pem_body = [pick(ALNUM + "+/", 64) for _ in range(8)]
        self.private_key = "\n".join([BEGIN, *self.pem_body, END])
        self.contexts_token = "ctx" + "_" + pick(BASE32, 10) + "_" + pick(BASE32, 40)
        claims = {"sub": pick(ALNUM, 12), "role": "admin", "iat": 1764547200}
        self.jwt = ".".join(base64.urlsafe_b64encode(part).decode().rstrip("=") for part in (
            json.dumps({"alg": "HS256", "typ": "JWT"}).encode(), json.dumps(claims).encode(),
            pick(ALNUM, 32).encode()))

    def values(self) -> list[str]:
        """Every value that must never come back out of Contexts (a key line by line)."""
        return [self.aws_access_key_id, self.aws_secret_access_key, self.github_token,
                self.slack_webhook, self.pg_password, *self.pem_body, self.contexts_token,
                self.gitlab_token, self.jwt,
                # the random parts alone: a redaction that kept them would leak the token
                self.aws_access_key_id[4:], self.github_token[4:], self.gitlab_token[6:],
                self.slack_webhook.rsplit("/", 1)[1], self.contexts_token[4:],
                self.jwt.rsplit(".", 1)[1]]

    # --- the leaking files ---------------------------------------------------------------------
    def env_md(self) -> str:
        return ("# Staging environment\n\n"
                "Copy these into your shell before running the billing sync.\n\n"
                "```\n"
                f"AWS_ACCESS_KEY_ID={self.aws_access_key_id}\n"
                f"AWS_SECRET_ACCESS_KEY={self.aws_secret_access_key}\n"
                "AWS_REGION=eu-west-1\n"
                "```\n")

    def runbook_md(self) -> str:
        return ("# Runbook: rotating the billing TLS key\n\n"
                "When the certificate expires, install the key below on the load balancer\n"
                "and restart nginx.\n\n"
                f"```\n{self.private_key}\n```\n\n"
                "## Afterwards\n\nCheck that the handshake succeeds with openssl s_client.\n")

    def settings_py(self) -> str:
        return ('"""Deployment settings of the billing service."""\n\n'
                "DEBUG = False\n"
                f'GITHUB_TOKEN = "{self.github_token}"\n'
                f'SLACK_WEBHOOK_URL = "{self.slack_webhook}"\n'
                'TIMEZONE = "UTC"\n\n\n'
                "def notify(message: str) -> None:\n"
                '    """Post a message to the billing channel."""\n'
                "    print(SLACK_WEBHOOK_URL, message)\n")

    def database_yaml(self) -> str:
        return ("# Database of the billing service\n"
                "database:\n"
                f"  url: {self.postgres_url}\n"
                "  pool_size: 10\n"
                "  timeout_seconds: 5\n")

    def database_md(self) -> str:
        """The YAML above, as a runbook quotes it (YAML files are not an ingested format)."""
        return ("# Billing database\n\n"
                "The service reads its database from `config/database.yaml`:\n\n"
                f"```yaml\n{self.database_yaml()}```\n\n"
                "Raise `pool_size` before a migration that rewrites a large table.\n")

    def tokens_md(self) -> str:
        return ("# Agent access\n\n"
                f"The CI agent calls Contexts with {self.contexts_token} and GitLab with\n"
                f"{self.gitlab_token}; the session cookie was {self.jwt}.\n")
