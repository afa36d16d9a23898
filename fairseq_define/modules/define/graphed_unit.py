"""The DeFINE unit's fast path (fused_unit.py) captured as CUDA graphs and replayed (issue 61,
part 4): on a GPU the unit's training step is host-bound, about 42 small operators a call at
~55 us of host time each (docs/benchmarks.md), where one graph replay costs one launch. First
the two calls into the fast path this file makes (:func:`_forward`, :func:`_backward`: the one
place to keep in step with fused_unit.py), then the row buckets, the two replay backends, a
slot's captured graphs and the pool of slots, and last the autograd Function and the runner,
:class:`GraphedUnit`, which an embedding holds and calls as it calls ``fused_unit``.

- Rows are padded to a bucket (:func:`bucket`); a padded row has input 0, output gradient 0
  and centring weight 0, so it changes no output and no gradient. The centring's per-row
  weights are counts / positions in a static tensor (positions 1 for the fast path): the
  total cannot be a Python number inside a graph.
- A graph reads its static buffers and the parameters where they lie: it is captured afresh
  when a parameter is replaced (its address, shape or dtype change) or the settings change,
  and for each new (slot, bucket, compute dtype). In-place updates (the optimiser,
  ``load_state_dict``) need none.
- Calls whose backward has not run yet (an NMT model's source and target) each hold a slot
  of their own: its static buffers keep the call's saved tensors and output. A slot is freed
  when its backward runs, or when the call's autograd graph is freed without one (the output
  dropped; a call without gradients frees it at once and returns a copy of its output).
- Backends: ``cuda`` (torch.cuda.graph, warmed up on a side stream as
  torch.cuda.make_graphed_callables does) and ``eager``, which runs the closure again on the
  same static buffers, so that all of this runs in the tests on a CPU. Dropout in the unit
  draws afresh at each replay on both (CUDA's generator is graph-safe: philox offsets).
"""

import logging
import weakref
from contextlib import nullcontext
from typing import NamedTuple, Optional, Tuple

import torch
from torch.amp.autocast_mode import is_autocast_available

from . import fused_unit as fast

logger = logging.getLogger(__name__)


class Spec(NamedTuple):
    """What a capture bakes in besides the tensors it reads."""

    program: Tuple  # of fused_unit.Step
    centring: bool
    grad_scale: float
    e_scale: float
    training: bool  # dropout acts (drawn afresh at each replay)


def _forward(spec: Spec, e2: torch.Tensor, params):
    """(out [R, m], saved) of the fast path on e2 [R, n]; ``saved`` is opaque here, but nested
    lists and tuples of tensors and None, the same each call (the eager backend copies a
    replay's tensors into the first run's, in order)."""
    return fast.run_forward(spec.program, e2, params, spec.e_scale, keep=True, training=spec.training)


def _backward(spec: Spec, saved, params, grad: torch.Tensor, weights: Optional[torch.Tensor]):
    """(grad of e2 [R, n], the parameters' gradients) from ``grad`` [R, m]; ``weights`` [R]:
    each row's share of the centring's mean (counts / positions; the total is then 1)."""
    return fast.run_backward(spec.program, saved, params, grad, spec.centring, weights, 1, spec.grad_scale,
                             spec.e_scale)


def _autocast_off(device: torch.device):
    """Autocast off on ``device`` (the meta device, where the tests look for host syncs, has none)."""
    return torch.autocast(device.type, enabled=False) if is_autocast_available(device.type) else nullcontext()


# -- row buckets ------------------------------------------------------------------------------

SMALLEST_BUCKET = 256  # rows; buckets are the powers of two from here: at most 2x the rows


def bucket(rows: int, smallest: int = SMALLEST_BUCKET) -> int:
    """The rows a call with ``rows`` rows runs with: the next power of two, at least ``smallest``."""
    return max(smallest, 1 << max(rows - 1, 0).bit_length())


# -- backends ---------------------------------------------------------------------------------

WARM_UP = 3  # runs on a side stream before a capture (make_graphed_callables' default)


class _CudaGraph:
    """``fn()`` captured (not run); :meth:`replay` recomputes ``outputs`` in place."""

    def __init__(self, fn, pool=None):
        self.graph = torch.cuda.CUDAGraph()
        # thread_local: a data loader's pin-memory thread may call CUDA during the capture
        with torch.cuda.graph(self.graph, pool=None if pool is None else pool.graph.pool(),
                              capture_error_mode="thread_local"):
            self.outputs = fn()

    def replay(self):
        self.graph.replay()

    @staticmethod
    def warm_up(fn):
        """cuBLAS handles, workspaces and lazy inits made outside the capture."""
        torch.cuda.synchronize()
        with torch.cuda.stream(torch.cuda.Stream()):
            for _ in range(WARM_UP):
                fn()
        torch.cuda.synchronize()


def _tensors(tree):
    """The tensors of nested lists and tuples, in order."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    return [t for x in tree for t in _tensors(x)] if isinstance(tree, (list, tuple)) else []


class _EagerGraph:
    """The CPU's stand-in: ``fn()`` run at capture, and at every replay again, its results
    copied into the first run's tensors (a replay rewrites its outputs where they lie)."""

    def __init__(self, fn, pool=None):
        self.fn, self.outputs = fn, fn()

    def replay(self):
        for old, new in zip(_tensors(self.outputs), _tensors(self.fn())):
            if old is not new:  # an input passed through (the parameters, the static input)
                old.copy_(new)

    @staticmethod
    def warm_up(fn):
        pass


BACKENDS = {"cuda": _CudaGraph, "eager": _EagerGraph}


# -- a slot's graphs --------------------------------------------------------------------------


class _Entry:
    """One slot's static buffers and captured forward and backward for one bucket and dtype.
    The backward's output is one flat tensor in the parameters' dtype: [grad e | every present
    parameter's gradient] (one copy out of the pool a call; under autocast the cast back of
    ``in_dtype`` rides in the graph)."""

    def __init__(self, graph, slot, spec: Spec, params, rows: int, n: int, dtype, device):
        self.slot, self.params = slot, params  # the closures' params stay alive with the graph
        self.e = torch.zeros(rows, n, dtype=dtype, device=device)  # [R, n]
        self.weights = torch.zeros(rows, dtype=dtype, device=device) if spec.centring else None  # [R]
        self.written = {}  # buffer name -> rows the last call wrote (beyond them: zeros)
        present = [p for p in params if p is not None]
        self.sizes = [self.e.numel()] + [p.numel() for p in present]
        flat_dtype = present[0].dtype

        def forward():  # the contexts: an eager replay may run under the caller's autocast or grad mode
            with torch.no_grad(), _autocast_off(device):
                cast = fast.in_dtype(params, dtype)
                out, saved = _forward(spec, self.e, cast)
                return out, saved, cast

        def backward(fwd, grad):
            with torch.no_grad(), _autocast_off(device):
                _, saved, cast = fwd
                ge, grads = _backward(spec, saved, cast, grad, self.weights)
                parts = [ge] + [g for p, g in zip(params, grads) if p is not None]
                return torch.cat([t.reshape(-1) for t in parts]).to(flat_dtype)  # [R n + sum of numels]

        def both():
            fwd = forward()
            return backward(fwd, torch.zeros_like(fwd[0]))

        graph.warm_up(both)
        self.fwd = graph(forward)
        self.grad = torch.zeros_like(self.fwd.outputs[0])  # [R, m]
        self.bwd = graph(lambda: backward(self.fwd.outputs, self.grad), pool=self.fwd)

    def put(self, name: str, rows: int, value):
        """Write ``value`` (a tensor, or a number) into the first ``rows`` rows of buffer
        ``name`` and zero the rows the last call wrote beyond them."""
        buf = getattr(self, name)
        if isinstance(value, torch.Tensor):
            buf[:rows].view(value.shape).copy_(value)
        else:
            buf[:rows].fill_(value)
        if self.written.get(name, 0) > rows:
            buf[rows:self.written[name]].zero_()
        self.written[name] = rows


class _Lease:
    """Held by a call's autograd context: when the context goes, so does the slot's claim."""

    __slots__ = ("__weakref__",)


class _Slot:
    """A call's claim on a set of static buffers, until its backward runs or its graph goes."""

    def __init__(self):
        self.entries, self.generation, self._lease = {}, 0, None

    def free(self) -> bool:
        return self._lease is None or self._lease() is None

    def take(self) -> _Lease:
        lease = _Lease()
        self._lease, self.generation = weakref.ref(lease), self.generation + 1
        return lease

    def release(self):
        self._lease = None


# -- the Function and the runner --------------------------------------------------------------


class GraphedUnitFunction(torch.autograd.Function):
    """e [*, n] -> the unit's output [*, m] by a replay of ``entry``'s forward; its backward
    replays the captured backward. ``params`` are inputs only for autograd: the graphs
    read them where they lie."""

    @staticmethod
    def forward(ctx, entry: _Entry, counts, positions, e, *params):
        rows = e.numel() // e.shape[-1]
        entry.put("e", rows, e)  # [R, n]
        if entry.weights is not None:
            entry.put("weights", rows, 1.0 / positions if counts is None else counts)
            if counts is not None:
                entry.weights[:rows].div_(positions)
        entry.fwd.replay()
        ctx.entry, ctx.lease = entry, entry.slot.take()
        ctx.generation, ctx.e_shape, ctx.present = entry.slot.generation, e.shape, [p is not None for p in params]
        out = entry.fwd.outputs[0][:rows].view(*e.shape[:-1], -1).detach()  # [*, m]
        ctx.save_for_backward(out)  # autograd's version check: an in-place change of it raises
        return out

    @staticmethod
    def backward(ctx, grad):
        entry = ctx.entry
        if entry.slot.generation != ctx.generation:
            raise RuntimeError("a second backward through a graphed DeFINE unit call after a later call took its "
                               "buffers: run that backward (retain_graph) before the next forward")
        _ = ctx.saved_tensors  # the version check
        rows = grad.numel() // grad.shape[-1]
        entry.put("grad", rows, grad)  # [R, m]
        entry.bwd.replay()
        flat = entry.bwd.outputs.clone()  # the graph's pool is rewritten by the next replay
        entry.slot.release()
        parts = iter(flat.split(entry.sizes))
        ge = next(parts)[:rows * ctx.e_shape[-1]].view(ctx.e_shape)  # [*, n]
        grads = [next(parts).view(p.shape) if has else None for has, p in zip(ctx.present, entry.params)]
        return (None, None, None, ge, *grads)


SLOTS_WARNING = 4  # slots in use at once beyond which a call is likely to hold one it will not free


class GraphedUnit:
    """Runs a unit's fast path through captured graphs (module docstring); one per embedding,
    called as ``fused_unit`` calls its Function. Not a module: it holds no state of the model,
    and a copy of it (deepcopy, pickle) starts empty."""

    def __init__(self, backend: str = "cuda", smallest: int = SMALLEST_BUCKET):
        if backend not in BACKENDS:
            raise ValueError(f"the graphed unit's backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.backend, self.smallest = backend, smallest
        self.slots, self.signature, self.captures = [], None, 0

    def __reduce__(self):
        return GraphedUnit, (self.backend, self.smallest)

    def __deepcopy__(self, memo):
        return GraphedUnit(self.backend, self.smallest)

    def __call__(self, program, params, e: torch.Tensor, centring: bool, grad_scale: float,
                 counts: Optional[torch.Tensor] = None, positions: Optional[int] = None,
                 e_scale: float = 1.0, training: bool = True) -> torch.Tensor:
        """The unit's output [*, m] for e_scale * e (e [*, n]), as ``fused_unit``: ``params``
        four a step (fused_unit.params_of), ``counts`` [rows] the positions each row stands for
        (None: one each) and ``positions`` their sum (None: the rows); ``training``: dropout
        acts."""
        device = e.device
        if self.backend == "cuda" and device.type != "cuda":
            raise ValueError(f"the graphed unit's cuda backend runs on a CUDA device, not {device.type}")
        rows = e.numel() // e.shape[-1]
        autocast = is_autocast_available(device.type) and torch.is_autocast_enabled(device.type)
        dtype = torch.get_autocast_dtype(device.type) if autocast else e.dtype
        spec = Spec(program, bool(centring), float(grad_scale), float(e_scale), bool(training))
        signature = (spec, device, *[None if p is None else (p.data_ptr(), p.shape, p.dtype) for p in params])
        if signature != self.signature:  # parameters replaced, or new settings: every graph is stale
            self.slots, self.signature = [], signature
        entry = self._entry(spec, params, bucket(rows, self.smallest), e.shape[-1], dtype, device)
        positions = rows if positions is None else positions
        wants_grad = torch.is_grad_enabled() and (e.requires_grad or any(p is not None and p.requires_grad
                                                                         for p in params))
        with _autocast_off(device):
            out = GraphedUnitFunction.apply(entry, counts, positions, e, *params)
        return out if wants_grad else out.clone()  # no backward will come: the slot is free at once

    def _entry(self, spec: Spec, params, rows: int, n: int, dtype, device) -> _Entry:
        """A free slot's graphs for (rows, dtype): one that has them, else captured afresh
        (on a free slot, else a new one)."""
        key = (rows, dtype)
        free = [slot for slot in self.slots if slot.free()]
        slot = next((s for s in free if key in s.entries), free[0] if free else None)
        if slot is None:
            slot = _Slot()
            self.slots.append(slot)
            if len(self.slots) > SLOTS_WARNING:
                logger.warning("the graphed DeFINE unit holds %d calls without a backward: keeping outputs "
                               "with their autograd graphs keeps their buffers", len(self.slots))
        if key not in slot.entries:
            slot.entries[key] = _Entry(BACKENDS[self.backend], slot, spec, params, rows, n, dtype, device)
            self.captures += 1
        return slot.entries[key]
