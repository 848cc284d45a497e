"""The record of a password the supervisor set (actors/auth_passwords.py): it tells the password
it was made of from any other, holds no trace of it a reader could use without guessing, and
the auth child's memory tells the same cheaply."""

import os

from actors.auth_passwords import RECORD_PREFIX, PasswordBook, matches, new_record, record_key


def test_a_record_matches_its_password_only_and_never_holds_it():
    record = new_record("s3cret-pass", os.urandom(16))
    assert matches(record, "s3cret-pass")
    assert not matches(record, "s3cret-pas") and not matches(record, "")
    assert "s3cret-pass" not in record and record.startswith("scrypt$")
    # Salted: the same password never gives the same record twice.
    assert new_record("s3cret-pass", os.urandom(16)) != record


def test_a_record_not_of_this_form_matches_nothing():
    for broken in ("", "sha256$abc", "scrypt$1$1$1$!!$!!", "scrypt$99999999999$8$1$AA==$AA=="):
        assert not matches(broken, "anything")


def test_records_live_under_one_prefix_by_user():
    assert record_key("app") == (RECORD_PREFIX + "app").encode()


def test_the_book_knows_only_what_it_learnt():
    book = PasswordBook()
    assert not book.known("app", "one")
    book.learn("app", "one")
    assert book.known("app", "one") and not book.known("app", "two") and not book.known("ops", "one")
    book.forget("app")
    assert not book.known("app", "one")
