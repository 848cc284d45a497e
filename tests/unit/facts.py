"""Hand-built observations of cluster "default/demo" for the pure decision tests.

Member i has peer port 20000+i, client port 30000+i and etcd ID 1000+i.
"""

from actors.model import ClusterRef, EtcdMember, MemberHealth, MemberUrls, ProcessState, RuntimeMember
from actors.observed import Observed

C = ClusterRef("default", "demo")
RUNNING, EXITED, ABSENT, STARTING = (
    ProcessState.RUNNING,
    ProcessState.EXITED,
    ProcessState.ABSENT,
    ProcessState.STARTING,
)


def urls(i):
    return MemberUrls(f"http://127.0.0.1:{20000 + i}", f"http://127.0.0.1:{30000 + i}")


def rt(i, state=RUNNING, has_data=True, failures=0):
    return RuntimeMember(f"demo-{i}", urls(i), state, has_data, pid=100 + i, consecutive_failures=failures)


def em(i, learner=False, started=True):
    u = urls(i)
    return EtcdMember(
        id=1000 + i,
        name=f"demo-{i}" if started else "",
        peer_urls=(u.peer_url,),
        client_urls=(u.client_url,) if started else (),
        is_learner=learner,
    )


def hl(i, leader=0, index=100, applied=None, learner=False):
    return MemberHealth(1000 + i, 1000 + leader, index, index if applied is None else applied, learner, 4096)


def cluster(n, leader=0):
    """n healthy voting members, demo-<leader> leading: (runtime, members, health) lists to edit."""
    return (
        [rt(i) for i in range(n)],
        [em(i) for i in range(n)],
        {f"demo-{i}": hl(i, leader) for i in range(n)},
    )


def observed(runtime, members, health):
    return Observed(C, tuple(runtime), None if members is None else tuple(members), health)
