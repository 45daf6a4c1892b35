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
