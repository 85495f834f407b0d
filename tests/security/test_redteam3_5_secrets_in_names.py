"""Red-team 3, finding 5 (low): the secret scan skipped names and encodings.

Before: a GitHub token used as a folder name and an AWS key id as an archive member's name
became documents' paths, titles and citations, served with every answer; a token written
URL-encoded or broken by zero-width characters, and an AWS secret access key written in prose
("the secret access key is …"), were stored as they came.

After: paths (so titles, headings and citations derived from them) and archive member names
are scanned like bodies, and the stored path holds the placeholder where the secret was — the
same placeholder on every run, so a re-ingest is still a no-op; every line is scanned again
normalised (NFKC, ``%XX`` decoded, invisible characters removed) and what hid a secret goes
with it; a random-looking value a few words after words naming a secret is a secret. No
retrieval answer (REST and MCP), no fragment, version or document row — no row of any table —
holds any of them.

The secrets are composed at run time: the repository is its own demo corpus (ADR 0016).
"""

from __future__ import annotations

import io
import json
import random
import string
import zipfile
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.ingestion.jobs import run_job
from contexts.mcp import server as mcp_server
from contexts.models import (
    Fragment,
    FragmentVersion,
    JobState,
    SecretFinding,
    SourceDocument,
    SourcePointer,
    tenancy,
)
from contexts.secret_scan import normalised, redact, scan
from contexts.usecases.ingestion import SubmitSource, create_job, submit
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.ingestion.conftest import ingest_target, write_tree  # noqa: F401 - fixtures

ALNUM = string.ascii_letters + string.digits
ZERO_WIDTH, WORD_JOINER, SOFT_HYPHEN = "\u200b", "\u2060", "\u00ad"


@dataclass
class Leaks:
    folder_token: str       # a GitHub token as a folder's name
    secret_key: str         # an AWS secret access key, written in prose
    encoded_token: str      # a GitHub token, %-encoded in a URL
    broken_token: str       # a GitHub token with invisible characters inside
    member_key_id: str      # an AWS access key id as an archive member's name
    upload_token: str       # a GitHub token as an uploaded file's name

    @classmethod
    def make(cls, seed: int) -> Leaks:
        rng = random.Random(seed)

        def pick(alphabet: str, n: int) -> str:
            return "".join(rng.choice(alphabet) for _ in range(n))

        def github() -> str:
            return "gh" + "p_" + pick(ALNUM, 36)

        return cls(folder_token=github(), secret_key=pick(ALNUM + "/+", 40),
                   encoded_token=github(), broken_token=github(),
                   member_key_id="AK" + "IA" + pick(string.ascii_uppercase + string.digits, 16),
                   upload_token=github())

    def values(self) -> list[str]:
        """What must never come back: each secret, and its random part alone."""
        tokens = [self.folder_token, self.encoded_token, self.broken_token, self.upload_token]
        return [*tokens, self.secret_key, self.member_key_id,
                *(t[4:] for t in tokens), self.member_key_id[4:]]

    # The forms the secrets arrive in.
    def encoded(self) -> str:
        return "".join(f"%{ord(c):02X}" for c in self.encoded_token)

    def broken(self) -> str:
        t = self.broken_token
        return t[:9] + ZERO_WIDTH + t[9:21] + SOFT_HYPHEN + t[21:30] + WORD_JOINER + t[30:]

    def written(self) -> list[str]:
        return [self.encoded(), self.broken(), self.encoded()[12:60], self.broken()[10:30]]


def holds(text: str, leaks: Leaks) -> list[str]:
    """Which secrets ``text`` holds, as written or once a reader reassembles it."""
    clear = "\n".join(normalised(line)[0] for line in text.split("\n"))
    return [v for v in leaks.values() if v in text or v in clear] + [
        w for w in leaks.written() if w in text]


def rows_holding(leaks: Leaks) -> dict[str, int]:
    """Every table of the schema, each row cast to text: which hold a secret in any form."""
    values = [*leaks.values(), *leaks.written()]
    found = {}
    with connection.cursor() as cursor:
        for table in tenancy.read_schema(connection):
            where = " OR ".join(["strpos(t::text, %s) > 0"] * len(values))
            cursor.execute(f"SELECT count(*) FROM {table} t WHERE {where}", values)
            count = cursor.fetchone()[0]
            if count:
                found[table] = count
    return found


def stored_text() -> str:
    """The texts the finding names: fragments, their versions, documents, pointers."""
    parts: list[str] = []
    for f in Fragment.objects.all():
        parts += [f.title, f.body, f.symbol, json.dumps(f.heading_path)]
    for v in FragmentVersion.objects.all():
        parts += [v.title, v.body, v.reason, json.dumps(v.metadata, default=str)]
    for d in SourceDocument.objects.all():
        parts += [d.path, json.dumps(d.links), json.dumps(d.front_links)]
    parts += [p.anchor for p in SourcePointer.objects.all()]
    return "\n".join(parts)


def the_tree(leaks: Leaks) -> dict[str, str]:
    return {
        f"{leaks.folder_token}/notes.md": (
            "# Weekday deploy notes\n\nDeploys of the ledger happen on weekdays only; roll "
            "back within ten minutes.\n"),
        "docs/aws.md": (
            "# Ledger archive bucket\n\nThe ledger archive bucket is written by the nightly "
            f"export. The secret access key is {leaks.secret_key} and it is rotated "
            "quarterly.\n"),
        "docs/ci.md": (
            "# Ledger CI mirror\n\nThe ledger CI mirror pulls through "
            f"https://mirror.example/pull?auth={leaks.encoded()} every hour.\n"),
        "docs/bot.md": (
            "# Ledger release bot\n\nThe ledger release bot signs in with "
            f"{leaks.broken()} when it tags a release.\n"),
    }


def the_archive(leaks: Leaks) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{leaks.member_key_id}.md", (
            "# Ledger cold storage\n\nCold storage of the ledger keeps seven years of "
            "statements.\n"))
        archive.writestr("handbook/ledger.md", "# Ledger handbook\n\nThe ledger closes at "
                                               "midnight UTC.\n")
    return buffer.getvalue()


QUERIES = ["weekday deploy notes for the ledger", "ledger archive bucket secret access key",
           "ledger CI mirror pull", "ledger release bot signs in", "ledger cold storage",
           "when is the ledger audited?",
           "which token does the release bot use?"]


def mcp_retrieve(token: ApiToken, query: str, scope: dict[str, str]) -> str:
    """The MCP ``retrieve`` tool itself, in-process, with the request's token as the served
    app's middleware leaves it."""
    ctx = SimpleNamespace(request_context=SimpleNamespace(
        request=SimpleNamespace(scope={mcp_server.TOKEN_SCOPE_KEY: token})))
    result = async_to_sync(mcp_server.retrieve)(
        query=query, scope=mcp_server.RetrievalScope(**scope), ctx=ctx, budget_tokens=4000)
    assert not result.is_error, result
    return json.dumps(result.model_dump(mode="json"))


@pytest.mark.django_db(transaction=True)  # the MCP tool reads what the test committed
def test_secrets_in_names_encodings_and_prose_are_nowhere(ingest_target, write_tree, tmp_path):
    t, leaks = ingest_target, Leaks.make(37_5)
    root = write_tree(tmp_path / "tree", the_tree(leaks))
    job = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert job.state == JobState.DONE, job.errors
    # The redacted path is the same every time: the same folder again changes nothing.
    versions = FragmentVersion.objects.count()
    again = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert again.state == JobState.DONE, again.errors
    assert (again.fragments_created, again.fragments_updated, again.fragments_retired) == (
        0, 0, 0)
    assert again.fragments_unchanged == job.fragments_created > 0
    assert FragmentVersion.objects.count() == versions
    upload = submit(SYSTEM, SubmitSource(scope=t.repo.scope, created_by=t.creator, files=[
        SimpleUploadedFile("ledger-export.zip", the_archive(leaks)),
        SimpleUploadedFile(f"{leaks.upload_token}.md", b"# Ledger audit\n\nThe ledger is "
                                                       b"audited every March.\n")]), queue=False)
    upload = run_job(upload.pk)
    assert upload.state == JobState.DONE, upload.errors

    # Every file is ingested, under a path that holds the placeholder where the secret was.
    paths = set(SourceDocument.objects.filter(org=t.org).values_list("path", flat=True))
    assert paths == {"[REDACTED:GitHub Token]/notes.md", "docs/aws.md", "docs/ci.md",
                     "docs/bot.md", "[REDACTED:AWS Access Key].md", "handbook/ledger.md",
                     "[REDACTED:GitHub Token].md"}
    bodies = {d: SourcePointer.objects.filter(document__path=d).first().fragment.body
              for d in ("docs/aws.md", "docs/ci.md", "docs/bot.md")}
    assert "The secret access key is [REDACTED:" in bodies["docs/aws.md"]
    assert "auth=[REDACTED:GitHub Token] every hour" in bodies["docs/ci.md"]
    assert "signs in with [REDACTED:GitHub Token] when" in bodies["docs/bot.md"]
    # Each is recorded, by kind and place, never by value.
    found = set(SecretFinding.objects.filter(org=t.org).values_list("path", "line", "kind"))
    assert ("[REDACTED:GitHub Token]/notes.md", 0, "GitHub Token") in found
    assert ("[REDACTED:AWS Access Key].md", 0, "AWS Access Key") in found
    assert {p for p, _, _ in found} >= {"docs/aws.md", "docs/ci.md", "docs/bot.md"}
    warnings = " ".join(w["reason"] for w in job.warnings)
    assert "GitHub Token in the path" in warnings

    # Retrieval — REST and the MCP tool — serves the knowledge and its citations, redacted.
    token, raw = create_token(t.org, "agent", [t.repo.scope])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    scope = {"org_id": t.org.slug, "repo_id": t.repo.slug}
    rest, mcp = [], []
    for query in [*QUERIES, leaks.folder_token, leaks.member_key_id, leaks.upload_token]:
        response = api.post("/api/contexts/retrieve", {"query": query, "scope": scope,
                                                       "budget_tokens": 4000}, format="json")
        assert response.status_code == 200, response.json()
        rest.append(json.dumps(response.json()))
        mcp.append(mcp_retrieve(token, query, scope))
    for answers in (rest, mcp):
        served = "\n".join(answers)
        assert holds(served, leaks) == []
        assert "[REDACTED:GitHub Token]/notes.md" in served  # the citation shows it
        assert "[REDACTED:AWS Access Key].md" in served
        assert "Deploys of the ledger happen on weekdays" in served

    # No fragment, version or document holds one, in any form — nor any row of any table.
    assert holds(stored_text(), leaks) == []
    assert rows_holding(leaks) == {}


@pytest.mark.django_db(transaction=True)
def test_under_policy_refuse_a_file_named_after_a_secret_is_not_read(
        ingest_target, write_tree, tmp_path, settings):
    settings.SECRET_POLICY = "refuse"
    t, leaks = ingest_target, Leaks.make(37_6)
    root = write_tree(tmp_path / "tree", the_tree(leaks))
    job = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert job.state == JobState.DONE, job.errors
    skipped = {s["path"]: s["reason"] for s in job.skipped}
    assert skipped["[REDACTED:GitHub Token]/notes.md"] == "not stored: GitHub Token in the path"
    assert SecretFinding.objects.filter(path="[REDACTED:GitHub Token]/notes.md",
                                        action="refused").exists()
    assert "Deploys of the ledger" not in stored_text()
    assert "[REDACTED:" not in stored_text()
    assert rows_holding(leaks) == {}


@pytest.mark.parametrize("text", [
    "The token bucket refills once a second; see commit 593ad699fc1f7cd5bb2e35cbf0f19c557067cbbe.",
    "The password reset flow reads configuration_management_v2 and getSecretAccessKeyFromVault2.",
    "Rotate the API key from release-2024-11-04-hotfix-branch, 100% of traffic, 50%off.",
    "Die Geheimnisse: Passwort ändern, token erneuern — ﬁne, « sûr ».",
])
def test_ordinary_prose_about_secrets_is_not_a_finding(text):
    assert scan(text) == []


# --- normalisation, mapped back to the original ---------------------------------------------
def test_each_normalised_character_maps_to_the_span_it_came_from():
    text, spans = normalised("a%5Fb" + ZERO_WIDTH + "c%255Fd%0Ae\uff47")
    assert text == "a_bc_d%0Aeg"  # a %0A would move the lines: left as written
    assert spans == [(0, 1), (1, 4), (4, 5), (6, 7), (7, 12), (12, 13), (13, 14), (14, 15),
                     (15, 16), (16, 17), (17, 18)]
    # An encoded zero-width space goes too; an encoded "é" is one character of six.
    assert normalised("x%E2%80%8By%C3%A9") == ("xy\u00e9", [(0, 1), (10, 11), (11, 17)])


@pytest.mark.parametrize("hide", [
    lambda t: "".join(f"%{ord(c):02X}" for c in t),
    lambda t: t[:3] + "%5F" + t[4:],
    lambda t: t[:3] + "%255F" + t[4:],
    lambda t: t[:8] + ZERO_WIDTH + t[8:16] + SOFT_HYPHEN + t[16:] + "\ufeff",
    lambda t: t[:8] + "%E2%80%8B" + t[8:],
    lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t),  # fullwidth
])
def test_a_hidden_token_goes_whole_and_nothing_else_does(hide):
    token = Leaks.make(5).folder_token
    line = f"The release bot signs in with {hide(token)} before tagging."
    found = scan(line)
    assert [f.kind for f in found] == ["GitHub Token"]
    assert redact(line, found) == ("The release bot signs in with [REDACTED:GitHub Token] "
                                   "before tagging.")


@pytest.mark.django_db
def test_headings_given_to_a_write_are_screened_at_the_door(cast):
    from contexts.services.fragments import create_fragment, edit_fragment

    token = Leaks.make(7).folder_token
    fragment = create_fragment(SYSTEM, cast.repo.scope, body="Deploy on weekdays.",
                               title="Deploys", heading_path=["Runbooks", f"CI {token}"])
    assert fragment.heading_path == ["Runbooks", "CI [REDACTED:GitHub Token]"]
    edited = edit_fragment(SYSTEM, fragment, based_on_version=fragment.version,
                           body="Deploy on weekdays only.", heading_path=[f"Bot {token}"])
    assert edited.heading_path == ["Bot [REDACTED:GitHub Token]"]
    assert holds(stored_text(), Leaks.make(7)) == []
