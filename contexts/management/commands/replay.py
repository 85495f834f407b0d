"""``manage.py replay --since DATE [--pipeline CONFIG] [--threshold 0.5] [--overlap tokens|ids]
[--baseline rerun|recorded] [--org SLUG] [--limit N]``.

Re-runs recorded retrievals against a candidate configuration and lists the queries whose top-3
changed (overlap below the threshold). See ``contexts/evaluation/replay.py`` and
``docs/evaluation.md``.
"""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from accounts.lookups import find_org
from contexts.evaluation.replay import TOP, parse_config, replay
from contexts.models import RetrievalTrace


def parse_since(text: str) -> dt.datetime:
    moment = parse_datetime(text)
    if moment is None:
        day = parse_date(text)
        if day is None:
            raise CommandError(f"--since {text!r}: expected YYYY-MM-DD or an ISO date-time")
        moment = dt.datetime.combine(day, dt.time.min)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


class Command(BaseCommand):
    help = "Replay recorded retrieval traces against a candidate configuration."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--since", required=True, help="replay traces recorded from then")
        parser.add_argument("--pipeline", help='candidate overrides, JSON or a JSON file, e.g. '
                                               '{"rrf_k": 20, "legs": ["dense"]}')
        parser.add_argument("--threshold", type=float, default=0.5,
                            help="a top-3 whose overlap is below this changed (default 0.5)")
        parser.add_argument("--overlap", choices=("tokens", "ids"), default="tokens",
                            help="Jaccard of the top-3's token sets (default) or id sets")
        parser.add_argument("--baseline", choices=("rerun", "recorded"), default="rerun",
                            help="compare with the recorded configuration re-run now "
                                 "(default) or with what the trace returned back then")
        parser.add_argument("--org", help="only this organization's traces")
        parser.add_argument("--limit", type=int, help="at most N traces (newest first)")

    def handle(self, *args, since: str, pipeline: str | None, threshold: float, overlap: str,
               baseline: str, org: str | None, limit: int | None, **options) -> None:
        try:
            overrides = parse_config(pipeline)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        start = parse_since(since)
        traces = RetrievalTrace.objects.filter(created_at__gte=start).order_by("-created_at")
        if org:
            organization = find_org(org)
            if organization is None:
                raise CommandError(f"no organization {org!r}")
            traces = traces.filter(org=organization)
        if limit is not None:
            traces = traces[:limit]

        changed, overlaps, errors, total = 0, [], 0, 0
        for trace in traces.iterator():
            total += 1
            try:
                result = replay(trace, overrides, baseline=baseline, mode=overlap)
            except Exception as exc:  # noqa: BLE001 - one bad trace never stops a replay
                errors += 1
                self.stderr.write(f"{trace.public_id}: could not replay: "
                                  f"{type(exc).__name__}: {exc}")
                continue
            overlaps.append(result.overlap)
            if result.changed(threshold):
                changed += 1
                self.stdout.write(f"{trace.public_id}  overlap {result.overlap:.2f}  "
                                  f"{trace.query[:100]!r}")
                self.stdout.write(f"    before: {', '.join(result.before) or '(nothing)'}")
                self.stdout.write(f"    after:  {', '.join(result.after) or '(nothing)'}")
        mean = sum(overlaps) / len(overlaps) if overlaps else 1.0
        self.stdout.write(
            f"replayed {len(overlaps)} of {total} traces since {start:%Y-%m-%d %H:%M}: "
            f"{changed} changed top-{TOP} ({overlap} Jaccard < {threshold}), mean overlap "
            f"{mean:.2f}, {errors} errors; candidate {overrides or '(recorded configuration)'}")
