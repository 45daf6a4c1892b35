"""The clock's event kinds, one definition for the reference clock (`clock.py`) and the numba
cores (`core_state.py`, `core_clock.py` and the families' cores): plain ints, which numba folds
into constants, in a module that imports nothing, so that the reference clock does not import
numba to name them."""

ARRIVAL, RELEASED, FINISH, WAKE, TIMEOUT, TIMER, RESYNC = 0, 1, 2, 3, 4, 5, 6
"""Event kinds, in the order they are applied when they fall on the same instant. WAKE and TIMER
only make the next session run: a WAKE re-evaluates (a Permit wait, priorities that age), a TIMER
is a transition the session has scheduled (a PodsReady timeout, a backoff's end), so a run with a
TIMER due has not settled. TIMEOUT is a job reaching its time limit. RESYNC is the vcjob
controller syncing a job again after a failed sync (pods the ResourceQuota refused)."""

NODE = 7
"""A node event of the scenario (``cluster.events``), applied after the other events of its instant;
its index is the event's row in ``Compiled.event_time``."""

CHANGE = 8
"""A change of the scenario (``changes``: a Queue, a PriorityClass, the conf), applied after the
other events of its instant; its index is the change's row in ``Compiled.change_time``."""

CH_QUEUE, CH_PRIORITY_CLASS, CH_CONF = 0, 1, 2
"""What a change sets: a Queue's fields, a PriorityClass's value, the scheduler conf."""
CHANGE_LOGGED = ("QueueUpdated", "PriorityClassUpdated", "SchedulerConfReloaded")
"""The event each kind of change logs (reason Applied)."""

FAIL, RECOVER, CORDON, UNCORDON, DRAIN = 0, 1, 2, 3, 4
"""Node event kinds (``NodeEvent.kind``), in ``NODE_KINDS`` order."""
NODE_KINDS = ("fail", "recover", "cordon", "uncordon", "drain")
NODE_LOGGED = ("NodeNotReady", "NodeReady", "NodeNotSchedulable", "NodeSchedulable", "NodeNotSchedulable")
"""The event each kind logs, as Kubernetes names it (the node lifecycle controller's NodeNotReady
and NodeReady, the kubelet's NodeNotSchedulable and NodeSchedulable for spec.unschedulable)."""
