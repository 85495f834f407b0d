"""A web process's preparation (contexts/web/serving.py): the collector's tuning."""

from __future__ import annotations

import gc

import pytest

from contexts.web import serving


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_tune_gc_freezes_the_loaded_objects_and_raises_the_young_threshold(restored_gc):
    gc.unfreeze()
    older = gc.get_threshold()[1:]
    serving.tune_gc(20_000)
    assert gc.get_threshold() == (20_000, *older)
    assert gc.get_freeze_count() > 10_000  # Django and the libraries, loaded for the tests


def test_zero_leaves_the_collector_as_it_was(restored_gc):
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    serving.tune_gc(0)
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
