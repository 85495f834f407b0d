"""A refused import says why, naming the field, and writes nothing: an unknown format
version, member names that leave the archive, an existing slug, a file that is not an archive,
a row that names what the archive lacks, an archive over the size bound."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import Organization, Scope
from contexts.models import AuditEvent, Fragment, FragmentVersion
from contexts.models.changes import Change

pytestmark = pytest.mark.django_db


@pytest.fixture
def archive(small, tmp_path) -> Path:
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    return out


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def write(path: Path, files: dict[str, bytes], *, reseal: bool = True) -> Path:
    """Write ``files`` as a tar.gz; ``reseal``: the manifest lists every other member with
    its true sha256 (so only the change under test is wrong)."""
    if reseal:
        manifest = json.loads(files["manifest.json"])
        manifest["files"] = {name: {"sha256": hashlib.sha256(data).hexdigest(),
                                    "rows": data.count(b"\n"), "bytes": len(data)}
                             for name, data in files.items() if name != "manifest.json"}
        files = {**files, "manifest.json": json.dumps(manifest).encode()}  # stays first
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def counts() -> dict[str, int]:
    return {"orgs": Organization.objects.count(), "scopes": Scope.objects.count(),
            "users": get_user_model().objects.count(), "fragments": Fragment.objects.count(),
            "versions": FragmentVersion.objects.count(), "audit": AuditEvent.objects.count(),
            "changes": Change.objects.count()}


def refused(path: Path, *extra: str) -> str:
    before = counts()
    with pytest.raises(CommandError) as caught:
        call_command("import_org", str(path), *extra)
    assert counts() == before  # nothing written
    message = str(caught.value)
    assert message.startswith("import refused, nothing written")
    return message


def test_an_unknown_format_version_is_refused(archive, tmp_path):
    files = members(archive)
    manifest = json.loads(files["manifest.json"])
    manifest["version"] = 2
    files["manifest.json"] = json.dumps(manifest).encode()
    message = refused(write(tmp_path / "v2.tar.gz", files, reseal=False), "--as", "v2")
    assert "manifest.version" in message and "version 2 is not supported" in message


def test_another_format_is_refused(archive, tmp_path):
    files = members(archive)
    files["manifest.json"] = json.dumps({"format": "something-else", "version": 1}).encode()
    message = refused(write(tmp_path / "other.tar.gz", files, reseal=False), "--as", "x")
    assert "manifest.format" in message


@pytest.mark.parametrize("name", ["../organization.jsonl", "/etc/passwd",
                                  "fragments/../../x.jsonl", "notes.txt"])
def test_member_names_outside_the_format_are_refused(archive, tmp_path, name):
    files = members(archive)
    files[name] = b"{}\n"
    message = refused(write(tmp_path / "evil.tar.gz", files, reseal=False), "--as", "evil")
    assert "archive.members" in message and repr(name) in message


def test_a_link_member_is_refused(archive, tmp_path):
    path = write(tmp_path / "link.tar.gz", members(archive), reseal=False)
    with tarfile.open(path, "r:gz") as tar:
        kept = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in kept.items():
            if name == "pins.jsonl":
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert "not a regular file" in refused(path, "--as", "linked")


def test_an_existing_slug_is_refused(archive):
    message = refused(archive)  # the archive's own slug, "small", exists here
    assert "slug" in message and "exists already" in message
    assert "exists already" in refused(archive, "--as", "small")


def test_a_bad_slug_is_refused(archive):
    assert "slug" in refused(archive, "--as", "Not A Slug")


def test_a_file_that_is_not_an_archive_is_refused(tmp_path):
    text = tmp_path / "notes.tar.gz"
    text.write_text("just some notes, not an archive\n")
    assert "not a gzip-compressed tar archive" in refused(text, "--as", "notes")
    assert "cannot read" in refused(tmp_path / "missing.tar.gz", "--as", "missing")


def test_a_changed_member_is_refused(archive, tmp_path):
    files = members(archive)
    files["fragments.jsonl"] = files["fragments.jsonl"].replace(b"Tuesday", b"Friday")
    message = refused(write(tmp_path / "changed.tar.gz", files, reseal=False), "--as", "chg")
    assert "fragments.jsonl does not match its sha256" in message


def test_a_bad_row_late_in_the_archive_rolls_everything_back(archive, tmp_path, settings):
    """The organization, its scopes, users and fragments are written before the pins: a pin
    naming a fragment the archive lacks undoes all of it, and the index directory too."""
    files = members(archive)
    files["users.jsonl"] += b'{"username":"newbie"}\n'
    files["memberships.jsonl"] += b'{"user":"newbie","role":"viewer"}\n'
    files["pins.jsonl"] = (b'{"fragment":"frag_00000000000000000000","scope":"x",'
                           b'"created_at":"2026-01-01T00:00:00+00:00"}\n')
    before = {p.name for p in Path(settings.LEXICAL_INDEX_DIR).glob("org-*")}
    message = refused(write(tmp_path / "bad-pin.tar.gz", files), "--as", "badpin")
    assert "pins.jsonl line 1: fragment names 'frag_00000000000000000000'" in message
    assert not get_user_model().objects.filter(username="newbie").exists()
    assert {p.name for p in Path(settings.LEXICAL_INDEX_DIR).glob("org-*")} == before


def test_a_row_with_a_wrong_type_names_its_field(archive, tmp_path):
    files = members(archive)
    rows = [json.loads(line) for line in files["fragments.jsonl"].splitlines()]
    rows[0]["negative"] = "yes"
    files["fragments.jsonl"] = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    message = refused(write(tmp_path / "type.tar.gz", files), "--as", "typed")
    assert "fragments.jsonl.negative" in message and "wrong type" in message


def test_the_archive_size_is_bounded(archive, settings):
    settings.IMPORT_MAX_BYTES = 100
    assert "CONTEXTS_IMPORT_MAX_BYTES" in refused(archive, "--as", "big")


def test_the_uncompressed_size_is_bounded(archive, settings):
    settings.IMPORT_MAX_TOTAL_BYTES = 2000
    assert "uncompressed" in refused(archive, "--as", "big")


def test_a_long_name_header_is_bounded_before_it_is_read(archive, tmp_path, settings):
    """tarfile reads a GNU long-name header whole: the decompressed stream is capped first,
    so a highly compressible header cannot fill memory."""
    settings.IMPORT_MAX_TOTAL_BYTES = 4000
    path = tmp_path / "long.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("a" * 1_000_000 + ".jsonl")
        tar.addfile(info, io.BytesIO(b""))
    assert "uncompressed" in refused(path, "--as", "long")


@pytest.mark.django_db(transaction=True)
def test_the_same_refused_import_many_times_leaves_no_partition(archive, tmp_path):
    """Outside a caller's transaction an import makes its organization's partition before
    its own transaction; refused again and again, it leaves none behind."""
    from django.db import connection

    files = members(archive)
    files["pins.jsonl"] = (b'{"fragment":"frag_00000000000000000000","scope":"x",'
                           b'"created_at":"2026-01-01T00:00:00+00:00"}\n')
    bad = write(tmp_path / "bad-pin.tar.gz", files)

    def partitions() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = "
                           "'contexts_embedding'::regclass")
            return cursor.fetchone()[0]

    before = partitions()
    for n in range(25):
        assert "pins.jsonl line 1" in refused(bad, "--as", f"again{n}")
        assert "small" in refused(bad)  # the slug is taken: refused before anything is made
    assert partitions() == before
