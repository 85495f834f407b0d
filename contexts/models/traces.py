"""Every retrieval leaves a trace that explains every score."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import ApiToken, Organization, PublicIdModel, tenant_public_id


class RetrievalTrace(PublicIdModel):
    """Who asked what, in which scopes, with which parameters — and for every candidate its
    rank and score at each stage (bm25, dense, rrf, rerank, freshness, authority, pin, final).
    """

    PUBLIC_ID_PREFIX = "tr"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="traces")
    token = models.ForeignKey(ApiToken, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="traces", db_constraint=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             blank=True, related_name="+")
    query = models.TextField()
    scope_ids = models.JSONField(default=list, help_text="the effective scope set")
    requested_scope = models.JSONField(default=dict)
    parameters = models.JSONField(default=dict)
    reranker = models.CharField(max_length=200, default="none")
    # Every candidate's stage scores, stored column-wise ({"columns": [...], "rows": [[...]]}):
    # the keys once instead of ~200 times halves the row, and the insert — written after every
    # retrieval — costs the next request less CPU. Read and written through ``candidates``.
    stage_table = models.JSONField(default=dict, db_column="candidates")
    returned = models.JSONField(default=list, help_text="[{id, version, score, tokens}]")
    versions = models.JSONField(default=dict, help_text="chunker and embedding models")
    timings_ms = models.JSONField(default=dict)
    degraded = models.JSONField(
        default=dict, blank=True,
        help_text="leg → why it did not run (e.g. the lexical index is missing); empty when "
                  "every requested leg ran")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["org", "-created_at"])]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"], name="retrievaltrace_public_id"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.query[:60]!r}"

    @property
    def candidates(self) -> list[dict]:
        """One dict per candidate (the retrieval writes the keys of
        ``contexts.retrieval.types.TRACE_COLUMNS``)."""
        return expand_table(self.stage_table)

    @candidates.setter
    def candidates(self, rows: list[dict]) -> None:
        self.stage_table = table_of(rows)


def stage_table(columns: Sequence[str], rows: list[list]) -> dict:
    """The stored form of a candidate table: ``{"columns": [...], "rows": [[...], ...]}``."""
    return {"columns": list(columns), "rows": rows}


def table_of(rows: list[dict]) -> dict:
    """Dicts → :func:`stage_table`; a key some dicts lack is None in theirs."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return stage_table(columns, [[row.get(column) for column in columns] for row in rows])


def expand_table(table: dict | list) -> list[dict]:
    """The inverse of :func:`table_of`."""
    if isinstance(table, list):  # written before migration 0015, which rewrites no rows
        return table
    columns = table.get("columns", [])
    return [dict(zip(columns, row, strict=True)) for row in table.get("rows", [])]
