"""``manage.py reembed --namespace prose --model PATH_OR_ID [--wait | --inline]``.

Creates a ``building`` embedding generation and queues the Celery task that fills it and
switches retrieval to it when complete. ``--wait`` follows the task's progress; ``--inline``
does the work in this process (no worker needed). ``--rollback`` switches back to the previous
generation while it is still in its shadow window.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from contexts.models import EmbeddingGeneration
from contexts.models.embeddings import GenerationState
from contexts.services.errors import InvalidOperation
from contexts.usecases import embeddings
from contexts.usecases.embeddings import Reembed


class Command(BaseCommand):
    help = "Re-embed a namespace with a new model into a new generation, then switch to it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--namespace", required=True, choices=["prose", "code"])
        parser.add_argument("--model", help="packaged model id, local path or cached hub id")
        parser.add_argument("--wait", action="store_true",
                            help="wait for the worker to finish (prints progress)")
        parser.add_argument("--inline", action="store_true",
                            help="embed in this process instead of a Celery worker")
        parser.add_argument("--timeout", type=float, default=0,
                            help="with --wait: give up after this many seconds (0: never)")
        parser.add_argument("--rollback", action="store_true",
                            help="switch back to the shadow generation instead")

    def handle(self, *args, namespace: str, model: str | None, wait: bool, inline: bool,
               timeout: float, rollback: bool, **options) -> None:
        try:
            if rollback:
                generation = embeddings.rollback(namespace)
                self.stdout.write(f"{namespace}: generation {generation.pk} "
                                  f"({generation.model_name}) is active again")
                return
            if not model:
                raise CommandError("--model is required")
            generation = embeddings.start_reembed(Reembed(namespace, model), queue=not inline)
        except InvalidOperation as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{namespace}: generation {generation.pk} ({generation.model_name} "
                          f"{generation.model_version}) is building")
        if inline:
            result = embeddings.build(generation.pk, on_batch=lambda n: self.stdout.write(
                f"  embedded {n}"))
            self._report(result.generation, result.total, result.missing)
            return
        if not wait:
            self.stdout.write("queued; retrieval switches when it is complete "
                              "(manage.py reembed … --wait to follow)")
            return
        started, last = time.monotonic(), None
        while True:
            generation.refresh_from_db()
            state = embeddings.progress(generation)
            if generation.state != GenerationState.BUILDING:
                self._report(generation, state.total, state.missing)
                return
            if (state.done, state.total) != last:
                last = (state.done, state.total)
                self.stdout.write(f"  {state.done}/{state.total} embedded")
            if timeout and time.monotonic() - started > timeout:
                raise CommandError(f"still building after {timeout:g} s (the task continues)")
            time.sleep(1)

    def _report(self, generation: EmbeddingGeneration, total: int, missing: int) -> None:
        generation.refresh_from_db()
        if generation.state == GenerationState.ACTIVE:
            self.stdout.write(self.style.SUCCESS(
                f"generation {generation.pk} is active ({total} fragments); the previous one "
                f"stays queryable as a shadow"))
        else:
            raise CommandError(f"generation {generation.pk} is {generation.state} with "
                               f"{missing} of {total} fragments missing")
