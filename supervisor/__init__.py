"""etcd-supervisor: an actor-based supervisor daemon for etcd clusters."""

__version__ = "0.1.0"
