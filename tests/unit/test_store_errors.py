"""How an object store's failure reads (supervisor/stores/cloud.py): a refusal the store
answered with is not an endpoint that did not answer, whatever words obstore's text carries."""

from actors.errors import StoreAccessDenied, StoreError, StoreNotFound, StoreUnavailable
from supervisor.stores.cloud import _translate

# obstore's error text names its retry settings (retry_timeout) even for a prompt refusal.
REFUSED = "Generic S3 error: ... status code: 400 Bad Request ... RetryConfig { retry_timeout: 60s }"


def test_a_4xx_answer_is_a_store_error_not_unavailable():
    error = _translate("s3 bucket 'b'", "put", "k", RuntimeError(REFUSED))
    assert type(error) is StoreError and "did not answer" not in str(error)


def test_the_other_kinds_still_read_as_before():
    assert isinstance(_translate("s", "get", "k", RuntimeError("status code: 404")), StoreNotFound)
    assert isinstance(_translate("s", "get", "k", RuntimeError("status code: 403")), StoreAccessDenied)
    assert isinstance(_translate("s", "get", "k", RuntimeError("status code: 503")), StoreUnavailable)
    assert isinstance(_translate("s", "get", "k", RuntimeError("error sending request")), StoreUnavailable)
