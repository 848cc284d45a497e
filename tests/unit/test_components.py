"""The missing-component rule the harnesses share: skip locally, fail under CI, look once."""

import pytest

from tests.harness import components
from tests.harness.components import MissingComponent, require


def test_a_missing_component_skips_locally_and_fails_under_ci(monkeypatch):
    def absent():
        raise MissingComponent("frobnicator not built")

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="frobnicator not built"):
        require("test-absent", absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and frobnicator not built"):
        require("test-absent", absent)


def test_a_component_is_looked_up_once(monkeypatch):
    calls = []

    def found():
        calls.append(1)
        return "/bin/frobnicator"

    monkeypatch.setattr(components, "_looked_up", {})
    assert require("test-present", found) == require("test-present", found) == "/bin/frobnicator"
    assert calls == [1]
