"""CODEOWNERS as GitHub and GitLab read it (issue 38, contexts/ingestion/codeowners.py): patterns,
the last matching rule, comments, sections, escapes, and the kinds of owner entries."""

from __future__ import annotations

import pytest

from contexts.ingestion import codeowners
from contexts.ingestion.codeowners import EntryKind
from contexts.ingestion.owners import parse_author_log

FILE = r"""
# Lines starting with '#' are comments.
*                       @default-owner
*.js                    @js-owner   # a comment after the owners
/build/logs/            @logs-owner
docs/*                  docs@example.com
apps/                   @apps-owner
/scripts/               @scripts-owner @second
**/deploy               @deploy-owner
src/**/internal/*.py    @internal-owner
\#notes.md              @hash-owner
/empty/
[Frontend Section][2]   @section-default
^[Optional]
frontend/               @acme/frontend-team @fe-person
!negated.md             @nobody
"""


@pytest.fixture(scope="module")
def parsed() -> codeowners.CodeOwners:
    return codeowners.parse(FILE, ".github/CODEOWNERS")


def owners(parsed, path: str) -> list[str]:
    return [entry.text for entry in parsed.owners_of(path)]


@pytest.mark.parametrize(("path", "expected"), [
    ("README.md", ["@default-owner"]),                      # "*" matches everything
    ("web/app.js", ["@js-owner"]),                          # unanchored: any depth
    ("build/logs/x/y.txt", ["@logs-owner"]),                # anchored directory, deep
    ("other/build/logs/y.txt", ["@default-owner"]),         # ... only at the root
    ("docs/guide.md", ["docs@example.com"]),                # docs/* : files in docs
    ("docs/deep/guide.md", ["@default-owner"]),             # ... not in its subdirectories
    ("apps/a.py", ["@apps-owner"]),                         # directory anywhere
    ("x/apps/b/c.py", ["@apps-owner"]),
    ("scripts/run.sh", ["@scripts-owner", "@second"]),      # several owners, in order
    ("a/b/deploy/run.py", ["@deploy-owner"]),               # **/name: at any depth, and below
    ("deploy", ["@deploy-owner"]),
    ("src/x/y/internal/q.py", ["@internal-owner"]),         # ** inside crosses directories
    ("src/internal/q.py", ["@internal-owner"]),             # ... zero of them too
    ("src/internal/deeper/q.py", ["@default-owner"]),
    ("#notes.md", ["@hash-owner"]),                          # \# escapes a leading hash
    ("empty/file.md", []),                                   # a rule without owners unowns
    ("frontend/app.ts", ["@acme/frontend-team", "@fe-person"]),  # sections are skipped
    ("negated.md", ["@default-owner"]),                      # a negation is no rule
])
def test_the_last_matching_rule_wins(parsed, path, expected):
    assert owners(parsed, path) == expected


def test_lines_it_cannot_read_are_reported_with_their_number(parsed):
    assert [problem.line for problem in parsed.problems] == [FILE.splitlines().index(
        "!negated.md             @nobody") + 1]
    assert "negated" in parsed.problems[0].reason


def test_rules_remember_their_line(parsed):
    assert parsed.rule_for("web/app.js").line == FILE.splitlines().index(
        "*.js                    @js-owner   # a comment after the owners") + 1
    assert parsed.rule_for("nothing-else.txt").pattern == "*"


def test_entry_kinds():
    kinds = {text: codeowners.Entry(text).kind for text in
             ["@alice", "@Alice-B.c", "@acme/platform", "@a/b/c", "bob@example.com",
              "alice", "@", "@@maintainer", "mail@nodot"]}
    assert kinds == {
        "@alice": EntryKind.LOGIN, "@Alice-B.c": EntryKind.LOGIN,
        "@acme/platform": EntryKind.TEAM, "@a/b/c": EntryKind.TEAM,
        "bob@example.com": EntryKind.EMAIL, "alice": EntryKind.INVALID, "@": EntryKind.INVALID,
        "@@maintainer": EntryKind.INVALID, "mail@nodot": EntryKind.INVALID,
    }
    assert codeowners.Entry("@alice").name == "alice"
    assert codeowners.Entry("Bob@Example.com").name == "bob@example.com"


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    ("/", "anything/at/all.md", True),
    ("README.md", "README.md", True),
    ("README.md", "sub/README.md", True),
    ("/README.md", "sub/README.md", False),
    ("docs", "docs/a/b.md", True),                 # a name covers a directory's contents
    ("docs/", "docs", False),                      # a directory pattern: what is under it
    ("*.md", "a/b/c.md", True),
    ("a/*.md", "a/b/c.md", False),
    ("file?.txt", "file1.txt", True),
    ("file?.txt", "file10.txt", False),
    ("[ab].md", "a.md", True),
    ("[!ab].md", "a.md", False),
    ("[!ab].md", "c.md", True),
    ("dir/**", "dir/x/y", True),
    ("dir/**", "dirx/y", False),
    ("a+b(c).md", "a+b(c).md", True),              # regex characters are literal
    (r"with\ space.md", "with space.md", True),
])
def test_patterns(pattern, path, matches):
    parsed = codeowners.parse(f"{pattern} @x")
    assert bool(parsed.owners_of(path)) is matches


def test_the_file_is_found_where_code_hosts_look_first():
    assert codeowners.find({"CODEOWNERS", ".github/CODEOWNERS"}) == ".github/CODEOWNERS"
    assert codeowners.find({"docs/CODEOWNERS", "CODEOWNERS"}) == "CODEOWNERS"
    assert codeowners.find({"docs/CODEOWNERS"}) == "docs/CODEOWNERS"
    assert codeowners.find({"src/CODEOWNERS"}) is None


def test_a_file_of_only_comments_and_sections_has_no_rules():
    parsed = codeowners.parse("# nothing\n\n[Section]\n^[Optional][1] @x\n")
    assert parsed.rules == () and parsed.problems == ()
    assert parsed.owners_of("a.md") == ()


def test_recent_authors_from_a_git_log_newest_first_per_file():
    log = ("\x1ebob@example.com\n\nsrc/a.py\nsrc/b.py\n"
           "\x1eada@example.com\n\nsrc/a.py\n"
           "\x1e\n\nsrc/c.py\n")  # a commit without an author e-mail votes for nobody
    assert parse_author_log(log) == {"src/a.py": ["bob@example.com", "ada@example.com"],
                                     "src/b.py": ["bob@example.com"]}
    assert parse_author_log(log, "src/") == {"a.py": ["bob@example.com", "ada@example.com"],
                                             "b.py": ["bob@example.com"]}
