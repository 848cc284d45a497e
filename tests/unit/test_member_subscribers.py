"""MemberSubscribers: what both runtimes do with their watch_members callbacks."""

import logging

import pytest

from actors.model import ClusterRef
from supervisor.member_subscribers import MemberSubscribers

DEMO = ClusterRef("default", "demo")
OTHER = ClusterRef("default", "other")


def test_a_change_reaches_the_subscribers_of_its_cluster_only():
    subscribers = MemberSubscribers()
    demo: list[str] = []
    other: list[str] = []
    subscribers.subscribe(DEMO, demo.append)
    subscribers.subscribe(OTHER, other.append)
    subscribers.dispatch(DEMO, "demo-1")
    assert demo == ["demo-1"] and other == []


def test_an_unsubscribed_callback_hears_nothing_more_and_the_others_still_do():
    subscribers = MemberSubscribers()
    first: list[str] = []
    second: list[str] = []
    unsubscribe = subscribers.subscribe(DEMO, first.append)
    subscribers.subscribe(DEMO, second.append)
    unsubscribe()
    unsubscribe()  # twice is harmless
    subscribers.dispatch(DEMO, "demo-0")
    assert first == [] and second == ["demo-0"]


def test_a_failing_callback_is_logged_and_contained(caplog: pytest.LogCaptureFixture):
    subscribers = MemberSubscribers()
    heard: list[str] = []

    def broken(name: str) -> None:
        raise RuntimeError("a buggy subscriber")

    subscribers.subscribe(DEMO, broken)
    subscribers.subscribe(DEMO, heard.append)
    with caplog.at_level(logging.ERROR, logger="supervisor.member_subscribers"):
        subscribers.dispatch(DEMO, "demo-2")  # raises nothing
    assert heard == ["demo-2"]
    assert "member-change callback" in caplog.text and "default/demo/demo-2" in caplog.text
