"""The numba core's state: one mutable struct of plain arrays, and the codes its arrays hold.

Every jitted function of the core takes that struct, ``s``: a :class:`CoreState` whose fields
are the arrays the driver builds (the Problem and Compiled arrays, the clock's arrays and the
session's scratch arrays), read as ``s.j_queue[j]``. The driver lays the struct out
(:class:`State`) and the entry point takes it as one pointer, so calls from Python and between
jitted functions stay cheap however many arrays the run needs.

The integer codes are Volcano's (TaskStatus, PodGroupPhase, actions, plugins, extension
points) as plain ints, which numba folds into constants.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import struct
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, typeof, types
from numba._dispatcher import compute_fingerprint
from numba.core import caching, cgutils, imputils
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_lock import require_global_compiler_lock
from numba.core.compiler_machinery import register_pass
from numba.core.registry import CPUDispatcher
from numba.core.typed_passes import NativeLowering
from numba.core.typing.templates import AttributeTemplate
from numba.core.typing.typeof import Purpose, typeof_impl
from numba.extending import (
    NativeValue,
    infer_getattr,
    intrinsic,
    lower_getattr_generic,
    models,
    register_model,
    unbox,
)

from .events import CHANGE_LOGGED, NODE_LOGGED
from .problem import (
    BALANCED_CHANGE_SINCE,
    CPU,
    MEMORY,
    MIN_RESOURCE,
    PODS,
    Action,
    Arg,
    Plugin,
    PodGroupPhase,
    TaskStatus,
)

__all__ = ["BALANCED_CHANGE_SINCE", "CPU", "MEMORY", "MIN_RESOURCE", "PODS"]

# -------------------------------------------------------------------------------- numba's cache

ENGINE = Path(__file__).parent
CORE_FILES = sorted(path.resolve() for path in [*ENGINE.glob("core_*.py"), *ENGINE.glob("*/core*.py")])
"""The modules of jitted functions: the shared ones here, each family's in its folder."""


def core_digest() -> bytes:
    """One stamp for the jitted core: numba checks only a cached function's own file, but an
    entry point's cached code holds every function it calls, from every core module (a family's
    calls the shared ones, the Volcano actions are called from ``core_clock``)."""
    return _digest(tuple((path, path.stat().st_mtime_ns, path.stat().st_size) for path in CORE_FILES))


@functools.lru_cache(maxsize=4)
def _digest(files: tuple) -> bytes:
    digest = hashlib.sha256()
    for path, _, _ in files:
        digest.update(path.read_bytes())
    return digest.digest()


class _CoreSources:
    """Cache locators for the core modules: stale when any core module changed."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve() not in CORE_FILES:
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return core_digest()


_LOCATORS = [type(f"Core{base.__name__}", (_CoreSources, base), {}) for base in (
    caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)]
caching.CacheImpl._locator_classes[:0] = [c for c in _LOCATORS if c not in caching.CacheImpl._locator_classes]


class _LockedFiles(caching.IndexDataCacheFile):
    """A core function's cache index and data files, written and read under a lock on their folder.
    numba names a new entry's data file after the index it read, so two processes compiling one
    function for two signatures at once (test workers on a cold cache) could take the same name and
    leave an index entry that loads the other signature's code (numba issue 10128)."""

    def save(self, key, data):
        with self._locked(fcntl.LOCK_EX):
            super().save(key, data)

    def load(self, key):
        if not Path(self._cache_path).is_dir():
            return None
        with self._locked(fcntl.LOCK_SH):
            return super().load(key)

    @contextmanager
    def _locked(self, how: int):
        # read-only: a lock file another user created is still usable where its folder is shared
        lock = os.open(Path(self._cache_path) / "labkit-core.lock", os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(lock, how)
            yield
        finally:
            os.close(lock)


class _CoreCache(caching.FunctionCache):
    """numba's cache of one core function, its files read and written under the folder's lock."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = _LockedFiles(self._cache_path, self._impl.filename_base, self._impl.locator.get_source_stamp())


def _cached(**options):
    """``njit(cache=True, **options)`` with the core's locked cache in place of numba's."""

    def decorate(py_func):
        dispatcher = njit(**options)(py_func)
        dispatcher._cache = _CoreCache(py_func)
        return dispatcher

    return decorate


class _CalleeCodegen:
    """A callee library's view of numba's codegen: its function is never run on its own, so its
    environment has no address to set (numba would write through a null one)."""

    def __init__(self, codegen):
        self._codegen = codegen

    def set_env(self, env_name, env):
        pass

    def __getattr__(self, name):
        return getattr(self._codegen, name)


class _CalleeLibrary(JITCodeLibrary):
    """The code of a core function called only from jitted code: LLVM IR that its callers link in.
    numba would optimise each function's module with everything it calls linked in and turn it into
    machine code, at every level of the call tree (most of a cold compile, all of it thrown away:
    only the entry point runs); here that is done once, in the entry point's module."""

    @property
    def codegen(self):
        return _CalleeCodegen(self._codegen)

    def finalize(self):
        require_global_compiler_lock()
        self._raise_if_finalized()
        for library in dict.fromkeys(self._linking_libraries):
            self._reload_init.update(library._reload_init)
            self._final_module.link_in(library._get_module_for_linking(), preserve=True)
        self._finalized = True

    def get_pointer_to_function(self, name):
        return 0


@register_pass(mutates_CFG=True, analysis_only=False)
class _CalleeLowering(NativeLowering):
    """numba's lowering into a :class:`_CalleeLibrary`."""

    _name = "labkit_callee_lowering"

    def run_pass(self, state):
        state.library = _CalleeLibrary(state.targetctx.codegen(), state.func_id.func_qualname)
        return super().run_pass(state)


class _EntryLibrary(JITCodeLibrary):
    """An entry point's code: its module, every core function it calls linked in as IR
    (:class:`_CalleeLibrary`), optimised twice: after one O3 pass over that raw IR the warm run of
    the week took 13% more CPU than with numba's passes over callees optimised one by one; the
    second pass sees the simplified callees (benchmarks/README.md, "Machine code once")."""

    def _optimize_final_module(self):
        super()._optimize_final_module()
        super()._optimize_final_module()


class _UnitLibrary(_EntryLibrary):
    """A unit's code (:data:`unit`): an entry point's, its state argument marked ``noalias``."""

    def add_ir_module(self, ir_module):
        for function in ir_module.functions:
            if not function.is_declaration:
                for arg in function.args[2:]:  # after numba's return and exception pointers
                    if isinstance(arg.type, ir.PointerType):
                        arg.add_attribute("noalias")
        super().add_ir_module(ir_module)


@register_pass(mutates_CFG=True, analysis_only=False)
class _EntryLowering(NativeLowering):
    """numba's lowering into an :class:`_EntryLibrary`, cached as numba caches its own."""

    _name = "labkit_entry_lowering"
    library = _EntryLibrary

    def run_pass(self, state):
        state.library = self.library(state.targetctx.codegen(), state.func_id.func_qualname)
        state.library.enable_object_caching()
        return super().run_pass(state)


@register_pass(mutates_CFG=True, analysis_only=False)
class _UnitLowering(_EntryLowering):
    _name = "labkit_unit_lowering"
    library = _UnitLibrary


class _CalleeCompiler(CompilerBase):
    """numba's nopython pipeline, lowering with ``lowering`` in place of numba's own."""

    lowering = _CalleeLowering

    def define_pipelines(self):
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.passes[:] = [(self.lowering if cls is NativeLowering else cls, why) for cls, why in pipeline.passes]
        pipeline.finalize()
        return [pipeline]


class _EntryCompiler(_CalleeCompiler):
    lowering = _EntryLowering


class _UnitCompiler(_CalleeCompiler):
    lowering = _UnitLowering


class _OnceDispatcher(CPUDispatcher):
    """A core function compiled once per argument types. Numba types a constant argument as a
    literal (``move_task(s, t, RUNNING, n)`` passes ``Literal[int](5)``) and compiles the callee
    again for each constant; a call from jitted code here passes the plain types instead, so a
    function such as ``log`` is typed and lowered once rather than once per event kind."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


_CALLEE = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def jit(py_func) -> _OnceDispatcher:
    """The core's functions, called only from jitted code (no wrappers): compiled once per argument
    types (:class:`_OnceDispatcher`) with the entry point that calls them, into its module
    (:class:`_CalleeLibrary`), and cached with it."""
    return _OnceDispatcher(py_func, targetoptions={"nopython": True, **_CALLEE}, pipeline_class=_CalleeCompiler)


per_constant = njit(**_CALLEE, pipeline_class=_CalleeCompiler)
"""For a core function whose constant arguments choose what it does in a hot loop (which heap,
which node scan, which action): compiled again for each constant, numba's way, so that the choice
is folded away. Typing every function once saves a fifth of a cold compile, but the week's warm
run took a fifth longer until these few kept their copies (benchmarks/README.md, "Constants")."""

inlined = njit(inline="always", **_CALLEE, pipeline_class=_CalleeCompiler)
"""For the few large functions between the entry point and the actions: inlined into their one
caller, so LLVM does not optimise everything they call once more for each of them."""

entry = _cached(pipeline_class=_EntryCompiler, no_cfunc_wrapper=True)
"""A family's entry point, called from Python with the run's :class:`State` (one pointer)."""

unit = _cached(pipeline_class=_UnitCompiler, **_CALLEE)
"""A part of a family's core compiled and cached on its own, like an entry point, and called from
the entry point's code through its address (:func:`call_unit`, ``s.units``): Volcano's actions
that place pods and those that evict them are compiled only for a conf that has them, each in a
process of its own beside the entry point's on a fresh install."""

N_UNITS = 2
"""Slots of ``s.units``: the addresses of a family's units (0 for one its run does not use)."""


@intrinsic
def call_unit(typingctx, address, state, now, code):
    """Call the :data:`unit` compiled for ``(state, float64, int64)`` at ``address`` with ``now`` and
    ``code``, as numba calls a jitted function: an error in it returns from the caller."""
    sig = types.none(types.intp, state, types.float64, types.int64)

    def codegen(context, builder, sig, args):
        argtypes = sig.args[1:]
        function_type = context.call_conv.get_function_type(types.none, argtypes)
        function = builder.inttoptr(args[0], function_type.as_pointer())
        status, _ = context.call_conv.call_function(builder, function, types.none, argtypes, args[1:])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return sig, codegen

# -------------------------------------------------------------------------------- codes

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
 SLA, NETWORK_TOPOLOGY_AWARE) = (int(p) for p in Plugin)
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
A_BALANCED_KUBERNETES = int(Arg.BALANCEDRESOURCE_KUBERNETES)
A_OVERCOMMIT_FACTOR = int(Arg.OVERCOMMIT_FACTOR)
A_SLA_WAITING = int(Arg.SLA_WAITING_TIME)
A_TOPOLOGY_WEIGHT = int(Arg.TOPOLOGY_WEIGHT)
A_TOPOLOGY_NORMAL_POD = int(Arg.TOPOLOGY_NORMAL_POD_ENABLE)
A_TOPOLOGY_FADING = int(Arg.TOPOLOGY_NORMAL_POD_FADING)

# Rows of ``s.hn_room`` (network-topology-aware's HyperNode sums)
HN_ALLOCATABLE, HN_USED, HN_IDLE, HN_FUTURE_IDLE = range(4)

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

# Run events (the ``kind`` column) and what the message of each says
(EV_SUBMITTED, EV_ENQUEUED, EV_BOUND, EV_PIPELINED, EV_STARTED, EV_EVICTED, EV_RESTARTING, EV_DELETED,
 EV_COMPLETED, EV_NODE) = range(10)
EV_CHANGE = EV_NODE + len(NODE_LOGGED)
EVENT_KINDS = ("Submitted", "Enqueued", "Bound", "Pipelined", "Started", "Evicted", "Restarting", "Deleted",
               "Completed") + NODE_LOGGED + CHANGE_LOGGED
"""EV_NODE + a node event's kind (``events.NODE_KINDS``) is the kind of the event it logs, EV_CHANGE +
a change's kind (``events.CH_QUEUE`` ...) the kind of a change's."""
(MSG_NONE, MSG_PHASE, MSG_FITS_IDLE, MSG_BACKFILL, MSG_SNAPSHOT, MSG_FITS_FUTURE, MSG_PREEMPTED_ROOM,
 MSG_RECLAIMED_ROOM, MSG_PODS_RUNNING, MSG_PREEMPTED_BY, MSG_RECLAIMED_BY, MSG_NODE_LOST, MSG_DRAINED,
 MSG_RESTART) = range(14)

# Columns of ``s.ev_int``: kind, job, task, node, message code and its two arguments
EI_KIND, EI_JOB, EI_TASK, EI_NODE, EI_MSG, EI_A, EI_B = range(7)

# Scalar slots of ``s.ints``
(I_SESSIONS, I_EVENTS, I_RUNS, I_HEAP, I_LIVE, I_OVERFLOW, I_NEXT_NODE, I_TOP, I_BINDS, I_EVICTS,
 I_STAMP, I_QUEUE_HEAP, I_ATTRS, I_UNRESOLVABLE, I_FIT_POOL, I_FIT_TASKS, I_ACTION, I_TO_CLOSE, I_TO_START,
 I_CLOSED, I_CANDIDATES, I_WAITING, I_WATER_FILLED, I_IN_SESSION, I_VICTIMS, I_IMPURE, I_ACTIVE,
 I_BOOKS, I_CREATED, I_GROW, I_PENDING_GROUPS, I_OTHERS, I_NODES, I_FREED, I_FULL_NODES, I_KINDS,
 I_BOUNDS_DIRTY, I_BOUNDS_BUILT, I_ARRIVED, I_CONF) = range(40)
N_INTS = 40
FREED_LOG = 64
"""The nodes of the last this many books changes that could free room (``s.freed``, ``ints[I_FREED]``)."""

# Attempts whose failures a session remembers (``s.m_*`` first index): preempt within a queue,
# preempt within a job, reclaim
M_PREEMPT_QUEUE, M_PREEMPT_JOB, M_RECLAIM = range(3)
N_MEMO = 3


class CoreState(types.Type):
    """The numba type of the state: a borrowed pointer to a struct of the run's arrays.

    Nothing is reference counted through it: the struct (:class:`State`) and its arrays, views
    without a meminfo, belong to the driver, which keeps them alive for the duration of the call.
    Calls between jitted functions then cost no atomic reference-count traffic, which would
    otherwise dominate a session.
    """

    def __init__(self, fields):
        self.fields = tuple((name, types.unliteral(typ)) for name, typ in fields)
        self.field_index = {name: i for i, (name, _) in enumerate(self.fields)}
        spec = ", ".join(f"{n}: {t}" for n, t in self.fields)
        super().__init__(name=f"CoreState_{hashlib.sha1(spec.encode()).hexdigest()[:16]}")


@register_model(CoreState)
class CoreStateModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        members = [dmm.lookup(typ).get_data_type() for _, typ in fe_type.fields]
        super().__init__(dmm, fe_type, ir.PointerType(ir.LiteralStructType(members)))


@infer_getattr
class CoreStateAttribute(AttributeTemplate):
    key = CoreState

    def generic_resolve(self, typ, attr):
        if attr in typ.field_index:
            return typ.fields[typ.field_index[attr]][1]
        return None


@lower_getattr_generic(CoreState)
def _core_state_getattr(context, builder, typ, value, attr):
    i = typ.field_index[attr]
    field_type = typ.fields[i][1]
    pointer = cgutils.gep_inbounds(builder, value, 0, i)
    field = context.data_model_manager[field_type].load_from_data_pointer(builder, pointer)
    return imputils.impl_ret_borrowed(context, builder, field_type, field)


class State:
    """A run's fields (a named tuple of arrays and scalars) laid out as the jitted core reads them:
    the :class:`CoreState` struct of their values (each array a borrowed view), built here and
    passed to a family's entry point as one pointer. The entry point's wrapper then unboxes one
    object instead of every array (that wrapper for ~290 arrays, and the code taking the tuple
    apart, were a third of the Volcano entry point's cold compile). The fields must stay alive while the core runs on the struct: it holds them."""

    __slots__ = ("address", "buffer", "fields", "numba_type")

    def __init__(self, fields):
        self.fields = fields
        self.numba_type, layout = _layout(fields)
        words, address = [], data_address
        for value in fields:
            if type(value) is np.ndarray:
                # numba's array model: meminfo, parent (none: borrowed), size, itemsize, data, shape, strides
                words += (0, 0, value.size, value.itemsize, address(value), *value.shape, *value.strides)
            else:
                words.append(value)
        self.buffer = np.empty(layout.size, np.uint8)
        layout.pack_into(self.buffer, 0, *words)
        self.address = self.buffer.ctypes.data


def _data_address_read(array: np.ndarray) -> int:
    """Where the array's data starts, read from the array object: ``char *data`` follows the object
    header in numpy's ``PyArrayObject`` (CPython's ``id`` is the object's address). ``array.ctypes.data``
    gives the same in 1 us rather than 0.2, which for the ~300 arrays of a run was a hundredth of a
    warm re-simulation of the week."""
    return ctypes.c_void_p.from_address(id(array) + _HEADER).value or 0


_HEADER = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
_PROBE = np.arange(3)
data_address = _data_address_read if _data_address_read(_PROBE) == _PROBE.ctypes.data else (lambda array: array.ctypes.data)
"""The address of an array's data (numpy's own ``ctypes.data`` where the read above would not give it)."""


def _format(name: str, value) -> str:
    """The member's struct code: an array's words, or its scalar."""
    if type(value) is np.ndarray:
        return "q" * (5 + 2 * value.ndim)
    if isinstance(value, (bool, np.bool_)):
        return "?"
    if isinstance(value, (int, np.integer)):
        return "q"
    if isinstance(value, (float, np.floating)):
        return "d"
    raise TypeError(f"core field {name}: expected a numpy array, an int, a float or a bool, got {type(value).__name__}")


_LAYOUTS: dict = {}
"""The CoreState and struct layout of each kind of fields, by numba's fingerprint of their types
(0.1 ms; typing the fields takes 5 ms)."""


def _layout(fields) -> tuple[CoreState, struct.Struct]:
    """The :class:`CoreState` of a run's fields, and its struct (native alignment: C's, LLVM's)."""
    key = (fields._fields, compute_fingerprint(fields))
    if key not in _LAYOUTS:
        _LAYOUTS[key] = (CoreState([(name, typeof(value, Purpose.argument)) for name, value in zip(fields._fields, fields)]),
                         struct.Struct("@" + "".join(_format(name, value) for name, value in zip(fields._fields, fields))))
    return _LAYOUTS[key]


@typeof_impl.register(State)
def _typeof_state(state, c):
    return state.numba_type


@unbox(CoreState)
def _unbox_state(typ, obj, c):
    address = c.pyapi.object_getattr_string(obj, "address")
    pointer = c.pyapi.long_as_voidptr(address)
    c.pyapi.decref(address)
    return NativeValue(c.builder.bitcast(pointer, c.context.get_value_type(typ)))
