"""The tests' hub: plmclaims.fakehub (the rehearsal serves its stand-ins with the same server)."""
from plmclaims.fakehub import COMMIT, FakeHub  # noqa: F401
