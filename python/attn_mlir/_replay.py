"""Per-signature replay of GPU op calls: the host path of a serving loop.

An op call on CUDA tensors builds its specialization (argument checks,
operand views, MLIR text) and launches its kernels. Everything but the
pointers is decided by the arguments' metadata (dtypes, shapes, strides,
devices) and their Python values (scales, flags, window sizes): without
ATTN_MLIR_VALIDATE the checks read no tensor contents. So the first call
with a signature runs in full and records how each kernel parameter is made
from the arguments; a later call with the same signature takes the
arguments' pointers, checks what depends on them (alignment, outputs not
sharing memory with other operands) and launches. Anything unusual (a host
array, an operand the call derived itself, a pointer check that fails, a
dry run, recording, validation, fake tensors) takes the full path, which
raises the errors.
"""

import contextvars
import functools
import inspect
import operator
import os

from . import _abi, _launch
from ._abi import View

# signature (everything but the tensors' metadata) -> [(match, plan)]:
# match(tensors) says whether the call's tensors have the metadata the plan
# was made for (_tensor_match); plan is a _Plan, or None where the call
# cannot be replayed.
_PLANS = {}
_MAX_PLANS = 4096   # signatures (then the table starts over)
_MAX_MATCHES = 16   # tensor layouts per signature
_CAPTURE = contextvars.ContextVar("attn_mlir_replay_capture", default=None)
_ops = None   # attn_mlir.ops (imported on the first torch call)
_compiling = None   # torch.compiler.is_compiling, likewise
_SCALARS = frozenset((bool, int, float, str, type(None)))


def _arg_key(a, nested=False):
    """The key of an argument that is not a tensor or scalar (a View, a
    tuple or list: _signature's composites); _NO where the call is not
    replayable. Tensors and Views inside a tuple or list are not: a plan
    takes pointers from top-level arguments only, and would keep the first
    call's."""
    if a is None:
        return None
    t = type(a)
    if t is tuple and len(a) == 2 and type(a[0]) is int and \
            type(a[1]) is int:   # window sizes: the common composite
        return (tuple, a, _TWO_INTS)
    if t is _TENSOR:   # (top-level tensors are _signature's own)
        return _NO
    if t in _SCALARS:
        return (t, a)
    if t is View:
        if nested or type(a.owner) is not _TENSOR or not _on_gpu(a.owner):
            return _NO
        return ("view", a.shape, a.strides, a.dtype, a.owner.get_device())
    if t is tuple or t is list:
        kinds = tuple(map(type, a))
        if _SCALARS.issuperset(kinds):   # window sizes and the like
            return (t, tuple(a), kinds)
        keys = tuple(_arg_key(x, True) for x in a)
        return _NO if _NO in keys else (t, keys)
    return _NO


_NO = object()
_TWO_INTS = (int, int)


def _on_gpu(tensor):
    """Device memory: its contents are not checked per call (host arrays'
    are, so their calls always take the full path)."""
    return tensor.is_cuda or _CPU_AS_GPU


# test_replay.py: CPU tensors stand in for CUDA ones.
_CPU_AS_GPU = False


_TENSOR = None   # torch.Tensor, once a call has brought torch in
_DATA_PTR = None   # torch.Tensor.data_ptr, likewise


def _signature(op, args, kwargs, buckets=None):
    """(key, tensors, given): the call's signature but for its tensor
    arguments' metadata (a dict key), those tensors (which _tensor_match
    compares, devices included), and every argument value in order
    (positional, then keyword); None where the call cannot be replayed (a
    host array, an argument of another kind). This runs on every call of a
    serving loop, so the arguments' types pick a _Layout that says, at C
    speed (operator.itemgetter), which values go into the key as they are
    (scalars), which by _arg_key (tuples, lists, Views), which through
    `buckets` (replayable's), and which are tensors."""
    given = args + tuple(kwargs.values()) if kwargs else args
    types = (op, tuple(kwargs), len(args), *map(type, given))
    # A serving loop repeats one layout: comparing with the last one's
    # types (identical objects) skips hashing them.
    last = _LAST_LAYOUT.get(op)
    if last is not None and last[0] == types:
        layout = last[1]
    else:
        layout = _LAYOUTS.get(types, _NO)
        if layout is _NO:
            layout = _layout(types, buckets)
        _LAST_LAYOUT[op] = (types, layout)
    if layout is None:
        return None
    key = (layout, layout.scalars(given))
    for p in layout.composites:   # (loops: a generator costs more here)
        k = _arg_key(given[p])
        if k is _NO:
            return None
        key += (k,)
    for p, fn in layout.buckets:
        key += (fn(given[p]),)
    return key, layout.tensors(given), given


# (op, keywords, positional count, argument types...) -> _Layout, or None
# where an argument's type is never replayable.
_LAYOUTS = {}
_LAST_LAYOUT = {}   # op -> (types, layout) of its last call


class _Layout:
    """Where a call signature's arguments go (see _signature): getters of
    the scalar values and of the tensors, the positions keyed by _arg_key,
    and (position, function) of the bucketed ints, for entry point `op`.
    None values are keyed by their type alone."""

    __slots__ = ("op", "scalars", "tensors", "composites", "buckets")


def _getter(positions):
    """positions -> a function of `given` returning those values, a tuple."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        p = positions[0]
        return lambda given: (given[p],)
    return lambda given: ()


def _layout(types, buckets):
    op, names, positional, *kinds = types
    at = {}
    for where, fn in (buckets or {}).items():
        if type(where) is int and where < positional:
            at[where] = fn
        elif where in names:
            at[positional + names.index(where)] = fn
    scalars, tensors, composites, bucketed = [], [], [], []
    for p, t in enumerate(kinds):
        if t is int and p in at:
            bucketed.append((p, at[p]))
        elif t is _TENSOR:
            tensors.append(p)
        elif t in _SCALARS:
            if t is not type(None):
                scalars.append(p)
        elif t in (tuple, list, View):
            composites.append(p)
        else:
            layout = None
            break
    else:
        layout = _Layout()
        layout.op = op
        layout.scalars, layout.tensors = _getter(scalars), _getter(tensors)
        layout.composites, layout.buckets = composites, bucketed
    if len(_LAYOUTS) >= _MAX_PLANS:
        _LAYOUTS.clear()
    _LAYOUTS[types] = layout
    return layout


def _tensor_match(tensors):
    """A function of a later call's tensors (as many, in the same places)
    that says whether each has the dtype, device, shape and strides that
    `tensors` have, and whether the same tensor fills the places one
    tensor filled here (a plan takes each pointer from the first place its
    tensor was in: k_descale and v_descale given as one tensor, then as two,
    must not replay). torch's C++ tensor guards (what torch.compile checks a
    graph's inputs with; about 60 ns a tensor) compare the metadata where
    this torch has them and they pass _guards_work's test, else Python
    does."""
    first, unique, same = {}, [], []
    for j, t in enumerate(tensors):
        i = first.setdefault(id(t), j)
        if i == j:
            unique.append(j)
        else:
            same.append((j, i))
    check = None
    if _guards_work():
        try:
            ts = [tensors[j] for j in unique]
            check = _GUARDS(
                *ts, dynamic_dims_sizes=[list(t.shape) for t in ts],
                dynamic_dims_strides=[list(t.stride()) for t in ts]).check
        except Exception:   # anything unforeseen: the Python comparison
            check = None
    if check is None:
        want = [_meta(tensors[j]) for j in unique]

        def check(*given):
            return [_meta(t) for t in given] == want
    if not same:
        return lambda given: check(*given)
    pick = _getter(unique)
    if len(same) == 1:
        (j, i), = same
        return lambda given: given[j] is given[i] and check(*pick(given))
    return lambda given: all(given[j] is given[i] for j, i in same) and \
        check(*pick(given))


def _meta(t):
    return (t.dtype, t.shape, t.stride(), t.get_device(), t.requires_grad)


_GUARDS = None   # torch._C._dynamo.guards.TensorGuards, once tested


def _guards_work():
    """Whether torch's TensorGuards (a private API) exist here and tell
    apart what a signature must: tested once on CPU tensors against each
    kind of difference (dtype, shape, strides, rank, requires_grad)."""
    global _GUARDS
    if _GUARDS is None:
        _GUARDS = False
        try:
            import torch
            from torch._C._dynamo.guards import TensorGuards
            a = torch.zeros(4, 6)
            b = torch.zeros(3, dtype=torch.int32)
            check = TensorGuards(a, b, dynamic_dims_sizes=[[4, 6], [3]],
                                 dynamic_dims_strides=[[6, 1], [1]]).check
            same = check(torch.ones(4, 6), torch.ones(3, dtype=torch.int32))
            others = [(a.to(torch.float16), b), (a[:, :5], b),
                      (torch.zeros(6, 4).t(), b), (a.view(24), b),
                      (a, b.view(3, 1)), (a, b[:2]),
                      (torch.zeros(4, 6, requires_grad=True), b)]
            if same and not any(check(*o) for o in others):
                _GUARDS = TensorGuards
        except Exception:
            _GUARDS = False
    return _GUARDS is not False


# os.environ's own store (bytes keys on POSIX): read without encoding each
# key per call; os.environ.get elsewhere.
_ENV = getattr(os.environ, "_data", None) if os.name == "posix" else None
_FLAGS = (b"ATTN_MLIR_RECORD", b"ATTN_MLIR_DRY_RUN")
_VALIDATE = b"ATTN_MLIR_VALIDATE"


def _full_path_only():
    """Environments in which every call takes the full path: recording, a
    dry run, validation (ops read these per call too), fake tensors, and
    ops.collect_specializations (precompile), whose calls launch nothing."""
    if _abi._STATE.metadata_only or _ops._COLLECTING.get() is not None:
        return True
    env = _ENV
    if env is None:
        return bool(os.environ.get("ATTN_MLIR_RECORD")
                    or os.environ.get("ATTN_MLIR_DRY_RUN")
                    or _abi.validating())
    if env.get(_FLAGS[0]) or env.get(_FLAGS[1]):
        return True
    return env.get(_VALIDATE, b"") not in (b"", b"0")


def _span(x):
    """(pointer, bytes spanned) of a replayable argument in device memory,
    else None."""
    if type(x) is View:
        return x.ptr, _abi.extent(x.shape, x.strides) * \
            _abi.NUMPY_DTYPES[x.dtype].itemsize
    if type(x) is _TENSOR:
        return x.data_ptr(), _abi.extent(tuple(x.shape), x.stride()) * \
            x.element_size()
    return None


class _Plan:
    """How one signature's kernels are launched from a call's arguments:
    the launches of every op call the entry point made, in order, and where
    each operand's pointer comes from: an argument (itself, or memory
    inside it at a fixed offset: a view the call derived from it), or a
    buffer of attn_mlir's own (a cached workspace), kept alive here. An
    operand from neither is never derived from argument values (the checks
    read none), so its pointer is that buffer's.

    Per call, only what the pointers can change is checked again: the
    alignment of pointers taken from arguments, and overlaps between an
    output and an operand from another argument. Operands from one argument
    lie at fixed offsets of each other (the signature fixes the spans), and
    attn_mlir's own buffers are no caller's memory, so the full path's
    first check of those stands."""

    def __init__(self, captured, args, kwargs, positional_names=()):
        from . import _gpu
        sources = list(args) + list(kwargs.values())
        spans = [_span(x) for x in sources]
        # Each argument's parameter name (None where unknown): an operand
        # named like one of the arguments holding its memory comes from
        # that one (one tensor given for both k_descale and v_descale).
        self.names = (list(positional_names[:len(args)]) +
                      [None] * max(0, len(args) - len(positional_names)) +
                      list(kwargs))
        self.pointers = []   # ("arg", position, offset) | ("const", ptr)
        self.keep = []       # owners of constant pointers
        self.steps = []      # per op call: (device, name, launches, side)
        aligned, pairs = {}, set()
        for call, kernels in captured:
            if call.device is None:
                raise _NotReplayable("a host call")
            index = {}
            for _, _, kind, value in call.params:
                if kind != "mem" or id(value) in index:
                    continue
                index[id(value)] = len(self.pointers)
                self.pointers.append(self._source(value, sources, spans))
                chunk = _abi.chunk_alignment(value)
                if chunk and self.pointers[-1][0] == "arg":
                    aligned[index[id(value)]] = chunk
            everything = call.inputs + call.outputs
            if any(id(v) not in index for v, _ in everything):
                raise _NotReplayable("operands")
            for out, out_span in call.outputs:
                o = index[id(out)]
                for v, span in everything:
                    i = index[id(v)]
                    if self._may_move(o, i):
                        pairs.add((o, out_span, i, span))
            values = [p[3] for p in call.params]
            at = [index.get(id(v)) for v in values]
            launches = []
            for kernel in kernels:
                args_of = [p["arg"] for p in kernel.record["params"]]
                launches.append(_gpu.PreparedLaunch(
                    kernel, [values[i] for i in args_of],
                    [at[i] for i in args_of]))
            self.steps.append((call.device, call.name, launches,
                               _launch._side_lane(call, kernels)))
        self.aligned = sorted(aligned.items())
        self.pairs = sorted(pairs)
        # The arguments that pointers come from, each once, and the runtime's
        # recipe for every pointer (ReplayEngine).
        positions = sorted({src[1] for src in self.pointers
                            if src[0] == "arg"})
        at = {j: n for n, j in enumerate(positions)}
        spec = [(at[src[1]], src[2]) if src[0] == "arg" else (-1, src[1])
                for src in self.pointers]
        self.positions = positions
        self.bases_of = _getter(positions)
        self.tensors_only = all(type(sources[j]) is _TENSOR
                                for j in positions)
        self.device = self.steps[0][0] if self.steps else None
        one_device = all(step[0] == self.device for step in self.steps)
        # The runtime's one round trip launches on one stream: calls with a
        # side stream launch from Python.
        one_stream = all(step[3] is None for step in self.steps)
        # The current stream's getter and the runtime's backend, looked up
        # once per plan, not per call.
        self.stream, self.backend = _launch._stream_getter(self.device)
        self.engine = _gpu.ReplayEngine(
            spec, len(positions), self.aligned, self.pairs,
            [launch for step in self.steps for launch in step[2]]
            if one_device and one_stream else [])

    def _may_move(self, o, i):
        """Whether pointers o and i can lie otherwise on another call: only
        when they come from two different arguments."""
        a, b = self.pointers[o], self.pointers[i]
        return a[0] == b[0] == "arg" and a[1] != b[1]

    def _one(self, value, candidates):
        """The argument among `candidates` (positions) an operand comes
        from: the only one, or the only one of its name (one tensor given
        for two parameters: a later call may give two)."""
        if len(candidates) > 1:
            named = [j for j in candidates if self.names[j] == value.name]
            if len(named) == 1:
                return named
        return candidates

    def _source(self, value, sources, spans):
        same = self._one(value, [j for j, x in enumerate(sources)
                                 if x is value or x is value.owner])
        if len(same) > 1:
            raise _NotReplayable(value.name)
        if same:
            return ("arg", same[0], 0)
        inside = self._one(value, [
            j for j, span in enumerate(spans) if span and
            span[0] <= value.ptr < span[0] + max(span[1], 1)])
        if len(inside) > 1:
            # Arguments that share memory (k and v views of one cache): the
            # signature does not say how they will lie next time.
            raise _NotReplayable(value.name)
        if inside:
            return ("arg", inside[0], value.ptr - spans[inside[0]][0])
        self.keep.append(value.owner)
        return ("const", value.ptr)

    def launch(self, given):
        """Launches on a call's arguments (`given`: positional, then keyword
        values); False where the full path must run (a pointer check
        failed: it raises the error)."""
        engine = self.engine
        if self.positions:
            args = self.bases_of(given)
            engine.bases[:] = list(map(_DATA_PTR, args)) \
                if self.tensors_only else \
                [x.ptr if type(x) is View else x.data_ptr() for x in args]
        if engine.launches_here and not _launch._nvtx_enabled():
            return engine.launch(self.stream(), self.backend)
        ptrs = engine.pointers()
        if ptrs is None:
            return False
        for device, name, launches, side in self.steps:
            _launch._launch_prepared(launches, ptrs, device, name, side)
        return True


def _routed(first):
    """ops._torch_route(first), without its call layers once torch_ops is
    imported (the common case: a plain tensor, no mode, runs directly)."""
    t = _ops._TORCH_OPS
    if t is None or type(first) is not _TENSOR:
        return _ops._torch_route(first)
    return t and not t.runs_directly(first)


class _NotReplayable(Exception):
    pass


def captured(call, kernels):
    """_Call.run's report of an op call it launched on a GPU (during an
    entry point's first call with a signature)."""
    seen = _CAPTURE.get()
    if seen is not None:
        seen.append((call, kernels))


def replayable(op, buckets=None):
    """Decorator for an op's entry point (ops.unified, ...): calls that go
    through torch.ops.attn_mlir (torch.compile, modes: ops._torch_route)
    and host arrays always take the full path. `buckets` maps a parameter
    (position and keyword name both) to a function of its value whose
    result alone decides what the call launches (vllm.unified_attention's
    max_seqlen_k, which only feeds the split-KV planner): the signature
    keeps the result, so a serving loop's growing value still replays."""
    def wrap(fn):
        positional = tuple(
            p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))

        @functools.wraps(fn)
        def call(*args, **kwargs):
            global _TENSOR, _DATA_PTR, _ops, _compiling
            # vLLM passes everything by keyword.
            first = args[0] if args else next(iter(kwargs.values()), None)
            if _TENSOR is None:
                if not _abi.is_torch(first):
                    return fn(*args, **kwargs)
                import torch
                from . import ops
                _TENSOR, _DATA_PTR, _ops = torch.Tensor, torch.Tensor.data_ptr, ops
                _compiling = torch.compiler.is_compiling
            # First, before anything dynamo cannot trace (a ContextVar):
            # under torch.compile the entry point routes to torch.ops.
            if _compiling():
                return fn(*args, **kwargs)
            # Inside another entry point's first call, that one records the
            # whole call. (_routed's common case inline: this runs per call.)
            t = _ops._TORCH_OPS
            if first is None or _CAPTURE.get() is not None or \
                    _full_path_only() or (
                        not t.runs_directly(first)
                        if t and type(first) is _TENSOR else _routed(first)):
                return fn(*args, **kwargs)
            signature = _signature(op, args, kwargs, buckets)
            if signature is None:
                return fn(*args, **kwargs)
            key, tensors, given = signature
            matches = _PLANS.get(key)
            if matches is not None:
                for match, plan in matches:
                    if match(tensors):
                        if plan is not None and plan.launch(given):
                            return None
                        return fn(*args, **kwargs)
            token = _CAPTURE.set([])
            try:
                result = fn(*args, **kwargs)
                seen = _CAPTURE.get()
            finally:
                _CAPTURE.reset(token)
            plan = None
            # Host tensors' contents are read per call: never replayed (the
            # match compares devices, so a later call's host tensor finds no
            # device plan either).
            on_gpu = _CPU_AS_GPU or all(t.is_cuda for t in tensors)
            if seen and result is None and on_gpu:
                try:
                    plan = _Plan(seen, args, kwargs, positional)
                except Exception:   # anything unforeseen: the full path
                    plan = None
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            matches = _PLANS.setdefault(key, [])
            if len(matches) >= _MAX_MATCHES:
                del matches[0]
            matches.append((_tensor_match(tensors), plan))
            return result
        return call
    return wrap
