"""The ingestion tests' fixtures (a real organization and repository, trees on disk) and the
domain cast, for the secret-scanning tests."""

from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture
from tests.ingestion.conftest import ingest_target, write_tree  # noqa: F401 - re-exported
