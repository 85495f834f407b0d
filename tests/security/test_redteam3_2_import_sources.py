"""Red-team 3, finding 2 (medium): ``import_org`` restored git sources without the checks
``source add`` applies. A tampered export made an organization follow another tenant's git
mirror under ``var/sources`` (and serve its text) and accepted a ``javascript:`` permalink
template; owners were any account of the instance, member or not.

After: every imported row that names a URL, a path, a template or an owner passes the rules of
its live creation path, from the same code — a git source's settings through
``contexts.usecases.sources.check_settings`` (a local path in an archive held to the ingest
roots whoever imports: never the instance's own data), an owner through
``accounts.permissions.may_own`` (a member of the organization). The first violation refuses
the whole import, naming the row and the field, with nothing written. A restored source's
public id — which names its mirror on disk — is always new, never the archive's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from accounts.models import Repository
from contexts.ingestion.git_mirror import Mirror
from contexts.models import Source
from tests.factories import OrganizationFactory, RepositoryFactory, UserFactory
from tests.portability.conftest import small  # noqa: F401 - fixture
from tests.portability.test_refusals import members, refused, write

pytestmark = pytest.mark.django_db

TEMPLATE = "https://git.example.com/acme/api/blob/{commit}/{path}#L{start_line}-L{end_line}"


@pytest.fixture
def var(settings, tmp_path) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = settings.VAR_DIR / "media"
    (settings.VAR_DIR / "sources").mkdir(parents=True)
    return settings.VAR_DIR


@pytest.fixture
def victim(var) -> Source:
    """Another tenant's git source, with its mirror on this node's disk."""
    org = OrganizationFactory(slug="victim")
    source = Source.objects.create(org=org, repository=RepositoryFactory(org=org, slug="core"),
                                   url="https://git.example.com/victim/core.git")
    Mirror.of(source.public_id).ensure()
    return source


@pytest.fixture
def archive(small, var, tmp_path) -> Path:  # noqa: F811 - the fixture imported above
    """The small organization's export, with one honest git source."""
    Source.objects.create(org=small.org, repository=Repository.objects.get(org=small.org,
                                                                          slug="api"),
                          url="https://git.example.com/acme/api.git", branch="main",
                          include=["docs/**"], web_url_template=TEMPLATE,
                          created_by=small.admin, last_commit="a" * 40)
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    return out


def tampered(archive: Path, tmp_path: Path, name: str, change) -> Path:
    """The archive with ``change(rows)`` applied to the rows of ``name`` (resealed)."""
    files = members(archive)
    rows = [json.loads(line) for line in files[name].decode().splitlines()]
    change(rows)
    files[name] = "".join(json.dumps(row) + "\n" for row in rows).encode()
    return write(tmp_path / f"tampered-{len(list(tmp_path.iterdir()))}.tar.gz", files)


def source_row(**values):
    def change(rows):
        rows[0].update(values)
    return change


@pytest.mark.parametrize(("values", "field", "why"), [
    ({"web_url_template": "javascript:alert(document.cookie)//{path}"},
     "sources.jsonl.web_url_template", "http(s) URL"),
    ({"web_url_template": "https://x.example/{commit.__class__}/{path}"},
     "sources.jsonl.web_url_template", "unknown placeholder"),
    ({"url": "ext::sh -c touch% /tmp/pwned"}, "sources.jsonl.url", "transport::address"),
    ({"url": "--upload-pack=touch /tmp/pwned"}, "sources.jsonl.url", "git URL"),
    ({"url": "file:///etc"}, "sources.jsonl.url", "CONTEXTS_INGEST_ROOTS"),
    ({"url": "/etc"}, "sources.jsonl.url", "CONTEXTS_INGEST_ROOTS"),
    ({"url": "ftp://git.example.com/r.git"}, "sources.jsonl.url", "ftp:// is not accepted"),
    ({"branch": "main..evil"}, "sources.jsonl.branch", "branch name"),
    ({"include": ["docs/\x00"]}, "sources.jsonl.include", "pattern"),
    ({"include": "docs/**"}, "sources.jsonl.include", "list of patterns"),
    ({"interval_seconds": 1}, "sources.jsonl.interval_seconds", "interval"),
    ({"interval_seconds": "900"}, "sources.jsonl.interval_seconds", "whole number"),
])
def test_a_source_setting_source_add_refuses_refuses_the_import(archive, tmp_path, values,
                                                                field, why):
    message = refused(tampered(archive, tmp_path, "sources.jsonl", source_row(**values)),
                      "--as", "copy")
    assert f"{field}:" in message and "sources.jsonl line 1" in message, message
    assert why in message, message
    assert not Source.objects.filter(org__slug="copy").exists()


def test_a_url_into_another_tenants_mirror_is_refused(archive, victim, tmp_path):
    mirror = Mirror.of(victim.public_id).path
    for url in (str(mirror), f"file://{mirror}", f"{mirror}/../{mirror.name}"):
        message = refused(tampered(archive, tmp_path, "sources.jsonl", source_row(url=url)),
                          "--as", "copy")
        # No ingest root here: refused before the disk is even looked at.
        assert "sources.jsonl.url" in message and "CONTEXTS_INGEST_ROOTS" in message, message


def test_under_an_ingest_root_a_path_passes_but_never_into_var(archive, victim, settings,
                                                                tmp_path):
    # The root holds var/ itself: the rule of the instance's own data still refuses the mirror.
    settings.INGEST_ROOTS = [str(tmp_path)]
    mirror = Mirror.of(victim.public_id).path
    message = refused(tampered(archive, tmp_path, "sources.jsonl",
                               source_row(url=f"file://{mirror}")), "--as", "copy")
    assert "instance's own data" in message
    repo = tmp_path / "checkouts" / "api"
    repo.mkdir(parents=True)
    call_command("import_org", str(tampered(archive, tmp_path, "sources.jsonl",
                                            source_row(url=str(repo)))), "--as", "copy")
    assert Source.objects.get(org__slug="copy").url == str(repo)


def test_the_archives_public_id_never_names_the_mirror(archive, var, tmp_path):
    # A mirror left on disk by a deleted source of another tenant: an archive naming its id
    # (free in the database) must not make the new source read it.
    leftover = "src_" + "leftovermirror"
    Mirror.of(leftover).ensure()
    call_command("import_org", str(tampered(archive, tmp_path, "sources.jsonl",
                                            source_row(public_id=leftover))), "--as", "copy")
    source = Source.objects.get(org__slug="copy")
    assert source.public_id != leftover
    assert Mirror.of(source.public_id).path != Mirror.of(leftover).path


@pytest.mark.parametrize(("name", "change", "field"), [
    ("sources.jsonl", source_row(created_by="mallory"), "sources.jsonl.created_by"),
    ("fragments.jsonl", source_row(owner="mallory"), "fragments.jsonl.owner"),
    ("contexts.jsonl", None, "contexts.jsonl.owners"),
    ("nudges.jsonl", None, "nudges.jsonl.owner"),
])
def test_an_owner_who_is_not_a_member_refuses_the_import(archive, small, tmp_path, name,  # noqa: F811
                                                         change, field):
    # Another tenant's account: an owner gets the organization's nudges (and their texts).
    UserFactory(username="mallory")
    files = members(archive)
    if change is None:  # a row of a file the small organization has none of
        fragment = json.loads(files["fragments.jsonl"].decode().splitlines()[0])["public_id"]
        scope = json.loads(files["organization.jsonl"].decode())["public_id"]
        row = ({"public_id": "ctx_" + "tamperedctx001", "slug": "ops", "name": "Ops",
                "home": scope, "created_at": "2026-01-01T00:00:00+00:00",
                "owners": ["sam", "mallory"]} if name == "contexts.jsonl" else
               {"fragment": fragment, "owner": "mallory", "state": "open",
                "created_at": "2026-01-01T00:00:00+00:00"})
        change = lambda rows: rows.append(row)  # noqa: E731
    message = refused(tampered(archive, tmp_path, name, change), "--as", "copy")
    assert f"{field}:" in message and "'mallory', who is not a member" in message, message


def test_a_member_owner_and_the_honest_archive_import(archive, small, tmp_path):  # noqa: F811
    # The refusals above are not a refusal of everything: the untampered archive imports,
    # its source checked and kept, with a new public id.
    call_command("import_org", str(archive), "--as", "copy")
    copy = Source.objects.get(org__slug="copy")
    original = Source.objects.get(org=small.org)
    assert copy.public_id != original.public_id
    assert (copy.url, copy.branch, copy.include, copy.web_url_template) == (
        "https://git.example.com/acme/api.git", "main", ["docs/**"], TEMPLATE)
    assert copy.created_by == small.admin and copy.last_commit == "a" * 40


def test_the_live_path_and_the_import_share_one_rule():
    """``source add`` itself still refuses what the import refuses (the shared checks)."""
    from accounts.permissions import SYSTEM
    from contexts.services.errors import InvalidOperation
    from contexts.usecases import sources

    settings = sources.SourceSettings(url="https://git.example.com/r.git",
                                      web_url_template="javascript:alert(1)")
    with pytest.raises(InvalidOperation) as caught:
        sources.check_settings(SYSTEM, settings)
    assert caught.value.field == "web_url_template"
