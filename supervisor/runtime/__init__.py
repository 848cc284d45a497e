"""A generic actor runtime on trio: bounded coalescing mailboxes, actors, handles, and
OTP-style supervisors. Knows nothing of etcd."""

from supervisor.backoff import Backoff
from supervisor.runtime.actor import Actor, run_actor
from supervisor.runtime.errors import (
    ActorStopped,
    CallSuperseded,
    CallTimeout,
    SupervisorEscalation,
    leaf_exceptions,
)
from supervisor.runtime.handle import Handle
from supervisor.runtime.mailbox import Mailbox
from supervisor.runtime.policy import Intensity, Restart, Strategy
from supervisor.runtime.reply import Reply
from supervisor.runtime.shutdown import open_cleanup_scope
from supervisor.runtime.spec import ChildSpec, actor_child
from supervisor.runtime.stats import ChildStatistics, MailboxStatistics, SupervisorStatistics
from supervisor.runtime.supervisor import Supervisor

__all__ = [
    "Actor",
    "ActorStopped",
    "Backoff",
    "CallSuperseded",
    "CallTimeout",
    "ChildSpec",
    "ChildStatistics",
    "Handle",
    "Intensity",
    "Mailbox",
    "MailboxStatistics",
    "Reply",
    "Restart",
    "Strategy",
    "Supervisor",
    "SupervisorEscalation",
    "SupervisorStatistics",
    "actor_child",
    "leaf_exceptions",
    "open_cleanup_scope",
    "run_actor",
]
