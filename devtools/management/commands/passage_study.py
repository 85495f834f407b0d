"""``manage.py passage_study DATASET --splits train,test``: how a text longer than the model's
window is best represented — documents by their head or their best passage, long queries by
their head, the mean of their passages or their best passage — with the model alone
(devtools/passage_study.py). Needs no database."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from contexts.embedding.embedder import load_embedder
from contexts.evaluation import dataset as datasets
from devtools import passage_study as study


class Command(BaseCommand):
    help = "Measure head vs best-passage representations of long documents and long queries."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="a BEIR-layout directory with a corpus.jsonl")
        parser.add_argument("--splits", default="test", help="comma-separated qrels splits")
        parser.add_argument("--namespace", default="prose", choices=("prose", "code"),
                            help="whose model to use (settings.EMBEDDING_MODELS)")

    def handle(self, *args, dataset: str, splits: str, namespace: str, **options) -> None:
        embedder = load_embedder(settings.EMBEDDING_MODELS[namespace])
        names = [s for s in splits.split(",") if s]
        try:
            loaded = [datasets.load(dataset, split) for split in names]
        except datasets.DatasetError as exc:
            raise CommandError(str(exc)) from exc
        if loaded[0].corpus_file is None:
            raise CommandError(f"{dataset}: needs a corpus.jsonl")
        corpus = study.embed_corpus(loaded[0], embedder)
        self.stdout.write(f"{loaded[0].name}: {len(corpus.ids)} documents, "
                          f"{len(corpus.windows)} passages after their heads "
                          f"(window {embedder.max_tokens - 2} word pieces)")
        for split, data in zip(names, loaded, strict=True):
            self.stdout.write(f"\n{split}: documents ({len(data.qrels)} queries), nDCG@10")
            for name, value in study.document_side(corpus, data, embedder).items():
                self.stdout.write(f"  {name:<28} {value:.4f}")
            count, scores = study.query_side(corpus, data, embedder)
            self.stdout.write(f"{split}: long queries ({count} documents over the window as "
                              "queries), nDCG@10")
            for name, value in scores.items():
                self.stdout.write(f"  {name:<28} {value:.4f}")
