"""Tables, stored runs, comparisons and quality gates for ``manage.py eval``."""

from __future__ import annotations

from dataclasses import dataclass

from contexts.evaluation.harness import PIPELINES, EvalReport
from contexts.evaluation.metrics import ALL_METRICS, QUALITY_METRICS
from contexts.models import EvalRun

HEADINGS = {"ndcg@10": "nDCG@10", "recall@10": "Recall@10", "recall@100": "Recall@100",
            "mrr@10": "MRR@10", "p50_ms": "p50 ms", "p95_ms": "p95 ms"}


def _cell(metric: str, value: float) -> str:
    return f"{value:.1f}" if metric.endswith("_ms") else f"{value:.4f}"


def table(rows: dict[str, dict[str, float]], *, first: str = "pipeline",
          baseline: dict[str, dict[str, float]] | None = None,
          extra: tuple[str, ...] = ()) -> str:
    """One row per key of ``rows``; with ``baseline`` each metric also shows its change."""
    width = max([len(first), *(len(name) for name in rows)]) + 2
    columns = [*ALL_METRICS, *extra]
    cell_width = 20 if baseline else 11
    lines = [first.ljust(width) + "".join(HEADINGS.get(c, c).rjust(cell_width)
                                          for c in columns)]
    for name, values in rows.items():
        cells = []
        for column in columns:
            value = values.get(column)
            if value is None:
                cells.append("–".rjust(cell_width))
                continue
            text = _cell(column, value) if column in HEADINGS else str(value)
            before = (baseline or {}).get(name, {}).get(column)
            if baseline is not None and before is not None and column in HEADINGS:
                delta = value - before
                text += f" ({delta:+.1f})" if column.endswith("_ms") else f" ({delta:+.4f})"
            cells.append(text.rjust(cell_width))
        lines.append(name.ljust(width) + "".join(cells))
    return "\n".join(lines)


def save_run(report: EvalReport, options: dict) -> EvalRun:
    return EvalRun.objects.create(
        dataset=report.dataset[:200], split=report.split[:40], config_hash=report.config_hash,
        config={"pipeline": report.config, "options": options},
        metrics={name: result.summary() for name, result in report.pipelines.items()},
        per_scope={name: result.per_scope for name, result in report.pipelines.items()
                   if result.per_scope},
        queries=report.queries)


# --- gates --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gate:
    """``[PIPELINE.][TYPE.]METRIC=VALUE``: the metric must be at least VALUE (every pipeline
    run when no pipeline is named; over the queries whose ``metadata.type`` is TYPE when one is
    named)."""

    pipeline: str | None
    metric: str
    minimum: float
    query_type: str | None = None

    @classmethod
    def parse(cls, text: str) -> Gate:
        name, sep, value = text.partition("=")
        if not sep:
            raise ValueError(f"--fail-below {text!r}: expected "
                             f"[PIPELINE.][TYPE.]METRIC=VALUE")
        pipeline = None
        metric = name.strip().lower()
        for known in sorted(PIPELINES, key=len, reverse=True):  # "hybrid+rerank" before "hybrid"
            if metric.startswith(known + "."):
                pipeline, metric = known, metric[len(known) + 1:]
                break
        query_type, dot, bare = metric.rpartition(".")
        if dot:
            if not query_type:
                raise ValueError(f"--fail-below {text!r}: empty query type before {bare!r}")
            metric = bare
        else:
            query_type = None
        if metric not in QUALITY_METRICS:
            raise ValueError(f"--fail-below {text!r}: metric must be one of "
                             f"{', '.join(QUALITY_METRICS)} (latency is not gated here)")
        try:
            minimum = float(value)
        except ValueError as exc:
            raise ValueError(f"--fail-below {text!r}: {value!r} is not a number") from exc
        return cls(pipeline, metric, minimum, query_type)

    def failures(self, report: EvalReport) -> list[str]:
        names = [self.pipeline] if self.pipeline else list(report.pipelines)
        out = []
        for name in names:
            result = report.pipelines.get(name)
            if result is None:
                # A gate on a pipeline that did not run must not pass silently.
                why = report.skipped.get(name, "not among --pipelines")
                out.append(f"{name}.{self.metric}: pipeline not run ({why})")
                continue
            label = f"{name}.{self.metric}"
            values = result.metrics
            if self.query_type is not None:
                label = f"{name}.{self.query_type}.{self.metric}"
                values = next((v for kind, v in result.by_type.items()
                               if kind.lower() == self.query_type), None)
                if values is None:
                    # A gate on a type the set does not have must not pass silently either.
                    out.append(f"{label}: no query of type {self.query_type!r}")
                    continue
            value = values[self.metric]
            if value < self.minimum:
                out.append(f"{label} = {value:.4f} < {self.minimum}")
        return out
