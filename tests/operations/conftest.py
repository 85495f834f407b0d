from tests.api.conftest import api, world  # noqa: F401 - re-exported fixtures
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture
