"""Enum members bound once, as module globals, for the hot paths that read them.

In CPython 3.11 every ``Kind.MEMBER`` lookup goes through EnumType's ``__getattr__`` hook
(about a thousand instructions); a global costs a few. The pure core's functions (``fold``,
``project``, ``next``, the memory backend) and the simulator read these members on every
event, so each is bound here once and imported by name: an imported name is a global of the
importing module, as cheap to read as one bound there.
"""

from __future__ import annotations

from jobdispatch.records.events import CallOp, EventClass, Origin, Reply
from jobdispatch.types import (
    Action,
    Capability,
    CauseKind,
    Charge,
    CheckpointMode,
    CleanupState,
    Enforcer,
    HoldKind,
    Level,
    ObjectState,
    Provenance,
    Source,
    StallMode,
    State,
    Tristate,
    UnmatchedPolicy,
)

__all__ = [
    "ACTION_ESCALATE",
    "ACTION_HOLD",
    "ACTION_REQUEUE",
    "ACTION_RESTART",
    "ACTION_RESUBMIT",
    "CALL_HOLD",
    "CALL_RELEASE",
    "CALL_REQUEUE",
    "CALL_RESTORE",
    "CAP_HOLD",
    "CAUSE_CANCELLED",
    "CAUSE_HELD",
    "CAUSE_LAUNCH_FAILED",
    "CAUSE_NONE",
    "CAUSE_RELEASED",
    "CAUSE_REQUEUED",
    "CAUSE_STALLED",
    "CAUSE_UNKNOWN",
    "CHARGE_NO_ADVANCE",
    "CHECKPOINT_SHARED",
    "CLEANUP_BLOCKED",
    "CLEANUP_CLEAR",
    "CLEANUP_PENDING",
    "ENFORCER_BACKEND",
    "ENFORCER_NOBODY",
    "EVENTS_DECISION",
    "HOLD_OPERATOR",
    "HOLD_RECOVERY",
    "LEVEL_JOB",
    "LEVEL_OBJECT_ONLY",
    "OBJ_ENDED",
    "OBJ_GATED",
    "OBJ_HELD",
    "OBJ_PENDING",
    "OBJ_RUNNING",
    "ORIGIN_OUTPUT",
    "ORIGIN_PUBLICATION",
    "PROV_ACTOR",
    "PROV_SCHEDULER",
    "PROV_SUPERVISOR",
    "REPLY_CREATED",
    "REPLY_REFUSED",
    "REPLY_UNKNOWN",
    "SOURCE_DECLARED",
    "STALL_ENFORCE",
    "STATE_CANCELLED",
    "STATE_ENDED",
    "STATE_FAILED",
    "STATE_HELD",
    "STATE_PENDING",
    "STATE_RECOVERING",
    "STATE_RUNNING",
    "STATE_SUCCEEDED",
    "STATE_UNKNOWN",
    "TRI_NO",
    "TRI_UNKNOWN",
    "TRI_YES",
    "UNMATCHED_MANUAL",
]

ACTION_ESCALATE = Action.ESCALATE
ACTION_HOLD = Action.HOLD
ACTION_REQUEUE = Action.REQUEUE
ACTION_RESTART = Action.RESTART
ACTION_RESUBMIT = Action.RESUBMIT
CALL_HOLD = CallOp.HOLD
CALL_RELEASE = CallOp.RELEASE
CALL_REQUEUE = CallOp.REQUEUE
CALL_RESTORE = CallOp.RESTORE
CAP_HOLD = Capability.HOLD
CAUSE_CANCELLED = CauseKind.CANCELLED
CAUSE_HELD = CauseKind.HELD
CAUSE_LAUNCH_FAILED = CauseKind.LAUNCH_FAILED
CAUSE_NONE = CauseKind.NONE
CAUSE_RELEASED = CauseKind.RELEASED
CAUSE_REQUEUED = CauseKind.REQUEUED
CAUSE_STALLED = CauseKind.STALLED
CAUSE_UNKNOWN = CauseKind.UNKNOWN
CHARGE_NO_ADVANCE = Charge.NO_ADVANCE
CHECKPOINT_SHARED = CheckpointMode.SHARED
CLEANUP_BLOCKED = CleanupState.BLOCKED
CLEANUP_CLEAR = CleanupState.CLEAR
CLEANUP_PENDING = CleanupState.PENDING
ENFORCER_BACKEND = Enforcer.BACKEND
ENFORCER_NOBODY = Enforcer.NOBODY
EVENTS_DECISION = EventClass.DECISION
HOLD_OPERATOR = HoldKind.OPERATOR
HOLD_RECOVERY = HoldKind.RECOVERY
LEVEL_JOB = Level.JOB
LEVEL_OBJECT_ONLY = Level.OBJECT_ONLY
OBJ_ENDED = ObjectState.ENDED
OBJ_GATED = ObjectState.GATED
OBJ_HELD = ObjectState.HELD
OBJ_PENDING = ObjectState.PENDING
OBJ_RUNNING = ObjectState.RUNNING
ORIGIN_OUTPUT = Origin.OUTPUT
ORIGIN_PUBLICATION = Origin.PUBLICATION
PROV_ACTOR = Provenance.ACTOR
PROV_SCHEDULER = Provenance.SCHEDULER
PROV_SUPERVISOR = Provenance.SUPERVISOR
REPLY_CREATED = Reply.CREATED
REPLY_REFUSED = Reply.REFUSED
REPLY_UNKNOWN = Reply.UNKNOWN
SOURCE_DECLARED = Source.DECLARED
STALL_ENFORCE = StallMode.ENFORCE
STATE_CANCELLED = State.CANCELLED
STATE_ENDED = State.ENDED
STATE_FAILED = State.FAILED
STATE_HELD = State.HELD
STATE_PENDING = State.PENDING
STATE_RECOVERING = State.RECOVERING
STATE_RUNNING = State.RUNNING
STATE_SUCCEEDED = State.SUCCEEDED
STATE_UNKNOWN = State.UNKNOWN
TRI_NO = Tristate.NO
TRI_UNKNOWN = Tristate.UNKNOWN
TRI_YES = Tristate.YES
UNMATCHED_MANUAL = UnmatchedPolicy.MANUAL
