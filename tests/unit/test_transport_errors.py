"""Which failures of grpclib and the socket count as a lost connection (pure mapping)."""

from supervisor.etcd.errors import EtcdConnectionError, EtcdUnavailable
from supervisor.etcd.transport import ChannelPool, Endpoint, translate

ENDPOINT = Endpoint.parse("http://127.0.0.1:2379")


def test_a_stream_opened_on_a_connection_grpclib_just_lost_is_a_connection_error():
    race = AttributeError("'Connection' object has no attribute '_transport'")
    typed = translate(race, ENDPOINT, ChannelPool(None))
    assert isinstance(typed, EtcdConnectionError) and isinstance(typed, EtcdUnavailable)


def test_other_attribute_errors_are_bugs_and_stay_untranslated():
    assert (
        translate(AttributeError("'NoneType' object has no attribute 'x'"), ENDPOINT, ChannelPool(None))
        is None
    )
