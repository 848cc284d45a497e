"""The cluster actor's probe bookkeeping, alone: which answers count, and when they change the picture."""

import attrs

from actors.probe_book import RECENT_STEPS, ProbeBook
from tests.unit.facts import hl

TTL = 3.0


def never_restarted(name: str) -> float | None:
    return None


def fold(book, name, health, asked_at, *, now=None, answers_from=None, window=None):
    now = asked_at if now is None else now
    return book.fold(name, health, asked_at, now=now, answers_from=answers_from, window=window)


def test_the_first_answer_changes_the_picture_and_a_steady_one_does_not():
    book, changed = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    assert changed
    book, changed = fold(book, "demo-0", attrs.evolve(hl(0), raft_index=500), 2.0)
    assert not changed  # a voter's index moves with every write: not what the plan reads
    book, changed = fold(book, "demo-0", hl(0, leader=1), 3.0)
    assert changed  # a new leader
    book, changed = fold(book, "demo-0", None, 4.0)
    assert changed  # silent now
    book, changed = fold(book, "demo-1", attrs.evolve(hl(1, learner=True), raft_applied_index=7), 4.0)
    book, changed = fold(book, "demo-1", attrs.evolve(hl(1, learner=True), raft_applied_index=9), 5.0)
    assert changed  # a learner catching up: its progress matters


def test_an_answer_asked_before_the_one_kept_is_superseded():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 5.0)
    assert book.superseded("demo-0", 4.0)
    assert not book.superseded("demo-0", 5.0) and not book.superseded("demo-1", 1.0)


def test_the_first_answer_since_a_step_and_one_after_a_refused_answer_change_the_picture():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    book = book.step_ran(2.0, 3.0)
    book, changed = fold(book, "demo-0", hl(0), 4.0)
    assert changed  # the rollout waits on it
    book, changed = fold(book, "demo-0", hl(0), 5.0, answers_from=4.5)
    assert changed  # the answer before came from a process since restarted


def test_fresh_answers_are_young_and_from_the_current_process():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    book, _ = fold(book, "demo-1", None, 2.0)
    assert book.fresh(4.0, TTL, never_restarted) == {"demo-0": hl(0), "demo-1": None}
    assert book.fresh(4.5, TTL, never_restarted) == {"demo-1": None}  # demo-0's is 3.5 s old
    assert book.fresh(4.0, TTL, lambda name: 1.5 if name == "demo-0" else None) == {"demo-1": None}


def test_the_time_steps_ran_does_not_age_the_answers_asked_before_them():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    book = book.step_ran(2.0, 12.0)  # a long defrag: nobody was asked meanwhile
    assert book.answer_age(1.0, 13.0) == 2.0
    assert book.fresh(13.0, TTL, never_restarted) == {"demo-0": hl(0)}
    assert book.answered_before_step(["demo-0"]) == {"demo-0"}
    book, _ = fold(book, "demo-0", hl(0), 12.5)
    assert book.answered_before_step(["demo-0"]) == frozenset()


def test_only_the_recent_steps_are_kept():
    book = ProbeBook()
    for i in range(RECENT_STEPS + 4):
        book = book.step_ran(float(i), i + 0.5)
    assert len(book.recent_steps) == RECENT_STEPS
    assert book.recent_steps[-1] == (RECENT_STEPS + 3, RECENT_STEPS + 3.5)
    assert book.step_done_at == RECENT_STEPS + 3.5


def test_members_gone_from_the_runtime_are_forgotten():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    book, _ = fold(book, "demo-1", hl(1), 1.0)
    assert set(book.only(["demo-1", "demo-2"]).answers) == {"demo-1"}
    assert book.only(["demo-0", "demo-1"]) is book


def test_the_highest_revision_seen_and_its_samples_until_a_recovery():
    answer = attrs.evolve(hl(0), revision=40)
    book, _ = fold(ProbeBook(), "demo-0", answer, 0.0, window=60.0)
    book, _ = fold(book, "demo-1", attrs.evolve(hl(1), revision=30), 10.0, window=60.0)
    assert book.revision_seen == 40
    assert book.revisions.ages(10.0) == ((10.0, 40), (0.0, 40))  # a lagging member lowers nothing
    recovered = book.recovered(25)
    assert recovered.revision_seen == 25 and recovered.revisions.samples == ()


def test_members_no_probe_reached_yet_are_unprobed_even_a_silent_one_is_not():
    book, _ = fold(ProbeBook(), "demo-0", hl(0), 1.0)
    book, _ = fold(book, "demo-1", None, 1.0)
    assert book.unprobed(["demo-0", "demo-1", "demo-2"]) == {"demo-2"}
