"""The numba core's state: one mutable struct of plain arrays, and the codes its arrays hold.

Every jitted function of the core takes that struct, ``s``: a numba StructRef whose fields are
the arrays built by :func:`labkit.engine.core.core_fields` (the Problem and Compiled arrays, the
clock's arrays and the session's scratch arrays). A StructRef is passed as one pointer, so calls
between jitted functions stay cheap however many arrays the run needs.

The integer codes are Volcano's (TaskStatus, PodGroupPhase, actions, plugins, extension
points) as plain ints, which numba folds into constants.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.experimental import structref
from numba.experimental.jitclass.base import imp_dtor
from numba.extending import intrinsic

from .problem import CPU, MEMORY, MIN_RESOURCE, PODS, Action, Arg, Plugin, PodGroupPhase, TaskStatus

__all__ = ["CPU", "MEMORY", "MIN_RESOURCE", "PODS"]

# TaskStatus
PENDING, ALLOCATED, PIPELINED, BINDING, BOUND, RUNNING, RELEASING, SUCCEEDED, FAILED = (
    int(s) for s in (TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BINDING,
                     TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING, TaskStatus.SUCCEEDED,
                     TaskStatus.FAILED))
N_STATUS = len(TaskStatus)

# PodGroupPhase
PH_UNSET, PH_PENDING, PH_INQUEUE, PH_RUNNING, PH_UNKNOWN, PH_COMPLETED = (int(p) for p in PodGroupPhase)

# Actions and plugins
ENQUEUE, ALLOCATE, BACKFILL, PREEMPT, RECLAIM = (int(a) for a in Action)
(PRIORITY, GANG, DRF, PROPORTION, CAPACITY, BINPACK, NODEORDER, PREDICATES, CONFORMANCE, OVERCOMMIT,
 SLA) = (int(p) for p in Plugin)
N_PLUGINS = len(Plugin)

# Hooks: the session's plugin callbacks, each a row of ``s.hooks`` listing the plugin entries
# that registered it and have its extension point on, in tier order (-1 pads).
(H_TASK_ORDER, H_JOB_ORDER, H_QUEUE_ORDER, H_PREEMPTABLE, H_RECLAIMABLE, H_OVERUSED, H_PREEMPTIVE,
 H_ALLOCATABLE, H_JOB_READY, H_JOB_VALID, H_JOB_PIPELINED, H_JOB_ENQUEUEABLE, H_JOB_ENQUEUED,
 H_JOB_STARVING, H_PREDICATE, H_NODE_ORDER, H_BATCH_NODE_ORDER) = range(17)
N_HOOKS = 17

# Plugin arguments, resolved to Volcano's defaults by the driver (``s.p_arg`` columns)
A_BINPACK_WEIGHT = int(Arg.BINPACK_WEIGHT)
A_LEAST = int(Arg.LEASTREQUESTED_WEIGHT)
A_MOST = int(Arg.MOSTREQUESTED_WEIGHT)
A_BALANCED = int(Arg.BALANCEDRESOURCE_WEIGHT)
A_OVERCOMMIT_FACTOR = int(Arg.OVERCOMMIT_FACTOR)
A_SLA_WAITING = int(Arg.SLA_WAITING_TIME)

# Plugin votes
PERMIT, ABSTAIN, REJECT = 1, 0, -1

# Queue-attribute slots (``s.a_*`` first index): proportion and capacity keep their own.
SLOT_PROPORTION, SLOT_CAPACITY = 0, 1

# Predicate failures: 0 passes; unresolvable ones drop a node for preempt and reclaim too.
F_OK, F_RESOURCES, F_UNSCHEDULABLE_NODE, F_NODE_MISMATCH, F_POD_LIMIT = range(5)

# Node-scan modes: the predicate a scan applies
SCAN_ALLOCATE, SCAN_PREDICATE, SCAN_PREEMPT = range(3)

# Statement operations
OP_EVICT, OP_PIPELINE, OP_ALLOCATE = range(3)

# Clock events (simulate.py: ARRIVAL, RELEASED, FINISH, applied in that order on one instant)
ARRIVAL, RELEASED, FINISH = range(3)

# Run events (the ``kind`` column) and what the message of each says
(EV_SUBMITTED, EV_ENQUEUED, EV_BOUND, EV_PIPELINED, EV_STARTED, EV_EVICTED, EV_RESTARTING, EV_DELETED,
 EV_COMPLETED) = range(9)
EVENT_KINDS = ("Submitted", "Enqueued", "Bound", "Pipelined", "Started", "Evicted", "Restarting", "Deleted",
               "Completed")
(MSG_NONE, MSG_PHASE, MSG_FITS_IDLE, MSG_BACKFILL, MSG_SNAPSHOT, MSG_FITS_FUTURE, MSG_PREEMPTED_ROOM,
 MSG_RECLAIMED_ROOM, MSG_PODS_RUNNING, MSG_PREEMPTED_BY, MSG_RECLAIMED_BY, MSG_RESTART) = range(12)

# Columns of ``s.ev_int``: kind, job, task, node, message code and its two arguments
EI_KIND, EI_JOB, EI_TASK, EI_NODE, EI_MSG, EI_A, EI_B = range(7)

# Scalar slots of ``s.ints``
(I_SESSIONS, I_EVENTS, I_RUNS, I_HEAP, I_LIVE, I_OVERFLOW, I_NEXT_NODE, I_TOP, I_BINDS, I_EVICTS,
 I_STAMP, I_VICTIM_QUEUE, I_QUEUE_HEAP, I_ATTRS, I_UNRESOLVABLE, I_SCAN, I_FIT_POOL, I_ACTION) = range(18)
N_INTS = 18


@structref.register
class CoreState(types.StructRef):
    """The numba type of the core's state struct."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@intrinsic
def struct_of(typingctx, fields):
    """A :class:`CoreState` holding the members of the named tuple ``fields`` (jit code only)."""
    inst_type = CoreState(list(zip(fields.fields, fields.types)))

    def codegen(context, builder, sig, args):
        [tup] = args
        alloc_type = context.data_model_manager[inst_type.get_data_type()].get_value_type()
        meminfo = context.nrt.meminfo_alloc_dtor(
            builder, context.get_constant(types.uintp, context.get_abi_sizeof(alloc_type)),
            imp_dtor(context, builder.module, inst_type))
        pointer = builder.bitcast(context.nrt.meminfo_data(builder, meminfo), alloc_type.as_pointer())
        builder.store(cgutils.get_null_value(alloc_type), pointer)
        data = cgutils.create_struct_proxy(inst_type.get_data_type())(context, builder, ref=pointer)
        for i, (name, typ) in enumerate(zip(fields.fields, fields.types)):
            value = builder.extract_value(tup, i)
            context.nrt.incref(builder, typ, value)
            setattr(data, name, value)
        inst = context.make_helper(builder, inst_type)
        inst.meminfo = meminfo
        return inst._getvalue()

    return inst_type(fields), codegen
