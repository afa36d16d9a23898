"""The DeFINE unit's one training path, written as flash-attention's Triton layer norm is: a
short functional reference of the unit (:func:`unit_reference`, the paper's equations read off
the unit's parameters, both styles, every transform, dropout with given masks), then the fast
path that computes the same function and gradients in a fraction of the kernels (a unit turned
into a program of :class:`Step` s by :func:`program_of`; :func:`run_forward`,
:func:`run_backward`), then the autograd Function that joins them to autograd, and
:func:`unit_forward`, which takes a call of the unit to it or to the modules.

Every call that wants a gradient (every training step) of every unit with layers, in either
style, takes the Function; calls without gradients, inference among them, run the modules
(unit.py, unit_authors.py, group_linear.py: the inference path and the readable spec, which
import nothing of this file). The projective map (one Linear n -> m) runs its module always.

What the modules' autograd graph spends kernels on, and what the fast path does instead
(docs/define_unit.md, "Kernels"):

- a group linear layer computes [g, T, out/g] and copies it to [T, out] (and its input
  gradient back): here the grouped matmul writes the [T, out] layout where the device lets it,
  in a layout decided once a call (:func:`grouped_layout`) and handed to :func:`grouped_mm`;
- the split-and-mix of section 3.3 is one ``cat`` of [T, g, n/g] and [T, g, w/g] views, but
  its gradient is never copied back: the input's share is added in place into the input's
  gradient, the previous output's share is read where it lies;
- the stability settings (docs/stability.md) live in the backward and nowhere else:
  ``--define-unit-centring batch_mean`` centres the output gradient in the weight's gradient,
  sum_t x_t (g_t - c_t s / P)^T = sum_t (x_t - mean x) g_t^T (one op a layer, with the bias
  gradient s it needs anyway), and ``--define-unit-grad-scale`` is one ``_foreach_mul_`` over
  every parameter gradient of the unit (the maths of stability/gradients.py);
- dropout after a layer's activation is two aten operators a direction (the activation, the
  draw; the mask's multiply, the activation's backward): on CUDA with Triton one operator a
  direction (act_dropout.py: a Triton kernel each, the aten pair elsewhere), and one draw of
  seeds a call for all layers;
- a layer saves what its backward cannot get otherwise: its input, its pre-norm output and
  the norm's statistics, and the one of its normalised or activated outputs its activation's
  backward reads; its output (the next layer's input) is saved only where no later input holds
  it, and dropout keeps its mask.
"""

from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn

from ..stability.gradients import centre
from ..stability.gradients import scale as scale_gradients
from .act_dropout import act_dropout, act_dropout_backward, draw_seeds, fuses_dropout
from .activations import ACTIVATIONS
from .unit_authors import AuthorsDefineUnit

aten = torch.ops.aten


def unit_layers(unit: nn.Module):
    """The weight layers of a unit in the order they run (paper style: Expand's layers, then
    Reduce; authors style: their input layer, the N layers, their output layer)."""
    if isinstance(unit, AuthorsDefineUnit):
        return [unit.input_layer, *unit.layers, unit.output_layer]
    return [*unit.layers, *([unit.reduce] if unit.reduce is not None else [])]


def dropout_of(layer: nn.Module) -> float:
    """The dropout after a layer's activation (``--define-dropout``; Reduce has none)."""
    dropout = getattr(layer, "dropout", None)
    return dropout.p if dropout is not None else 0.0


# -- the reference --------------------------------------------------------------------------


def group_linear_ref(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], shuffle: bool = False):
    """F_G of appendix A.1: chunk j of x [*, in] times its own W_j [in/g, out/g], the groups'
    outputs side by side, or (``shuffle``, Table 6a's GLT + shuffle) interleaved: feature j of
    group i at j*g + i; then the bias."""
    outs = [chunk @ w[j] for j, chunk in enumerate(x.chunk(w.shape[0], dim=-1))]  # g x [*, out/g]
    y = torch.stack(outs, dim=-1).flatten(-2) if shuffle else torch.cat(outs, dim=-1)  # [*, out]
    return y if b is None else y + b


def split_mix_ref(a: torch.Tensor, h: torch.Tensor, groups: int) -> torch.Tensor:
    """Section 3.3's split layer and mixer: [a_1, h_1, a_2, h_2, ...], chunk j of each beside
    the other (one group: [a; h])."""
    return torch.cat([c for pair in zip(a.chunk(groups, -1), h.chunk(groups, -1)) for c in pair], dim=-1)


def layer_norm_ref(z: torch.Tensor, norm: Optional[nn.Module]) -> torch.Tensor:
    """LayerNorm over each chunk of ``norm.normalized_shape`` features (the layer, or each
    group with one affine shared by the groups); none without a norm."""
    if norm is None:
        return z
    zz = z.unflatten(-1, (-1, norm.normalized_shape[0]))  # [*, chunks, d]
    mean = zz.mean(-1, keepdim=True)
    var = ((zz - mean) ** 2).mean(-1, keepdim=True)
    return ((zz - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias).flatten(-2)


def layer_ref(layer: nn.Module, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """One weight layer (eq. 1 of section 3.1 with its norm): y = act(LN(F_G(x))), then
    dropout through ``mask`` (kept entries scaled by 1 / (1 - p)); Reduce is F_G alone."""
    t = getattr(layer, "transform", layer)
    y = group_linear_ref(x, t.weight, t.bias, t.shuffle)
    if t is layer:
        return y
    y = ACTIVATIONS[layer.activation].forward(layer_norm_ref(y, layer.norm))
    return y if mask is None else y * mask / (1 - dropout_of(layer))


def unit_reference(unit: nn.Module, e: torch.Tensor, masks=None) -> torch.Tensor:
    """The unit's output [*, m] for its input e [*, n], from the paper's equations in plain
    torch operators (autograd gives the gradients); ``masks``: one a layer of
    :func:`unit_layers` (None where no dropout acts; None: none at all).

    - paper style (sections 3.1-3.3): h_1 = L_1(e); h_l = L_l(mix(e, h_(l-1))) for ``define``
      ([e; h_(l-1)] for ``define_nomix``, h_(l-1) + L_l(h_(l-1)) for ``define_residual``,
      L_l(h_(l-1)) for ``hgt``, ``glt``, ``glt_shuffle``, ``linear``); out = F_R([h_N; e]),
      Reduce with no norm or activation (without Reduce: h_N; projective: F_R(e));
    - authors style (their DeFINE mode): x = L_0(e), a Linear n -> m/2; h_1 = L_1(x);
      h_l = L_l(mix(x, h_(l-1))); out = L_out([x; h_N]), per-group LayerNorms throughout.
    """
    layers = unit_layers(unit)
    masks = [None] * len(layers) if masks is None else list(masks)

    def run(i, x):
        return layer_ref(layers[i], x, masks[i])

    if isinstance(unit, AuthorsDefineUnit):
        x = run(0, e)  # [*, m/2]
        h = run(1, x)
        for i in range(2, len(layers)):
            h = run(i, split_mix_ref(x, h, getattr(layers[i], "transform", layers[i]).groups))
        return h  # [*, m]
    if not unit.layers:  # the projective map
        return run(0, e)
    h = run(0, e)  # [*, w_1]
    for i in range(1, len(unit.layers)):
        groups = unit.layers[i].transform.groups
        if unit.skip == "mix":
            h = run(i, split_mix_ref(e, h, groups))
        elif unit.skip == "concat":
            h = run(i, torch.cat([e, h], dim=-1))
        elif unit.skip == "residual":
            h = h + run(i, h)
        else:
            h = run(i, h)
    if unit.reduce is None:
        return h  # [*, k]
    return run(len(unit.layers), torch.cat([h, e], dim=-1))  # [*, m]


# -- a unit as the fast path's program ---------------------------------------------------------


class Step(NamedTuple):
    """One weight layer of a unit: output ``name`` = [source +] dropout(act(norm(F_G(input)))),
    where the input is source ``sources[0]`` (``mode`` one), the concatenation of two sources
    (cat), or their split-and-mix into ``groups`` chunks each (mix; section 3.3)."""

    name: str
    mode: str  # one | cat | mix
    sources: Tuple[str, ...]
    widths: Tuple[int, ...]  # of each source
    groups: int
    out: int
    norm_dim: int  # features each LayerNorm normalises (0: no norm)
    eps: float
    activation: str  # a name in activations.py's ACTIVATIONS
    shuffle: bool = False  # the groups' output features interleaved (glt_shuffle, Table 6a)
    residual: bool = False  # the source added to the output (define_residual)
    dropout: float = 0.0  # after the activation, while the unit trains (--define-dropout)


def _step(layer: nn.Module, name: str, mode: str, sources, widths, residual: bool = False) -> Step:
    transform = getattr(layer, "transform", layer)
    norm = getattr(layer, "norm", None)
    if norm is not None and (len(norm.normalized_shape) != 1 or not norm.elementwise_affine):
        raise ValueError(f"the DeFINE unit's fast path takes an affine LayerNorm over each group or layer, not {norm}")
    return Step(name, mode, tuple(sources), tuple(widths), transform.groups, transform.out_features,
                norm.normalized_shape[0] if norm is not None else 0, norm.eps if norm is not None else 0.0,
                getattr(layer, "activation", "linear"), transform.shuffle, residual, dropout_of(layer))


def program_of(unit: nn.Module) -> Optional[Tuple[Step, ...]]:
    """A unit's layers (:func:`unit_layers`) as the fast path's program; None for the
    projective map, which has none."""
    if isinstance(unit, AuthorsDefineUnit):
        half = unit.schedule.proj_dim
        steps = [_step(unit.input_layer, "x", "one", ("e",), (unit.input_dim,))]
        for l, layer in enumerate([*unit.layers, unit.output_layer]):
            name, groups = (f"h{l + 1}" if l < len(unit.layers) else "out"), layer.transform.groups
            if l == 0:
                steps.append(_step(layer, name, "one", ("x",), (half,)))
            else:  # a one-group mix is a concat
                mode = "mix" if groups > 1 else "cat"
                steps.append(_step(layer, name, mode, ("x", f"h{l}"), (half, layer.transform.in_features - half)))
        return tuple(steps)
    if not unit.layers:
        return None
    n, steps = unit.input_dim, []
    for l, layer in enumerate(unit.layers):
        t = layer.transform
        if l == 0:
            steps.append(_step(layer, "h1", "one", ("e",), (t.in_features,)))
        elif unit.skip in ("none", "residual"):
            steps.append(_step(layer, f"h{l + 1}", "one", (f"h{l}",), (t.in_features,), unit.skip == "residual"))
        else:  # mix or concat; a one-group mix is a concat
            mode = "mix" if unit.skip == "mix" and t.groups > 1 else "cat"
            steps.append(_step(layer, f"h{l + 1}", mode, ("e", f"h{l}"), (n, t.in_features - n)))
    if unit.reduce is not None:
        w = unit.reduce.in_features - n
        steps.append(_step(unit.reduce, "out", "cat", (f"h{len(unit.layers)}", "e"), (w, n)))
    return tuple(steps)


def params_of(layer: nn.Module):
    """[W, b, norm weight, norm bias] of a layer (None where it has none)."""
    transform = getattr(layer, "transform", layer)
    norm = getattr(layer, "norm", None)
    return [transform.weight, transform.bias,
            norm.weight if norm is not None else None, norm.bias if norm is not None else None]


# -- the fast path -------------------------------------------------------------------------


def _activate(step: Step, n: torch.Tensor) -> torch.Tensor:
    return ACTIVATIONS[step.activation].forward(n)


def _activation_saves(step: Step, n: torch.Tensor, y: torch.Tensor) -> Optional[torch.Tensor]:
    """What the activation's backward reads: its input n or its output y (none: the identity)."""
    reads = ACTIVATIONS[step.activation].reads
    return n if reads == "input" else y if reads == "output" else None


def _activation_backward(step: Step, grad: torch.Tensor, saved: Optional[torch.Tensor], in_place: bool) -> torch.Tensor:
    """The gradient at the activation's input n from the gradient at its output y (both
    shaped as ``grad``, which may be a strided view of a mixing layer's input gradient);
    ``saved``: :func:`_activation_saves`; ``in_place``: written over ``grad`` (a buffer of
    this backward: one [T, w] allocation fewer a layer)."""
    act = ACTIVATIONS[step.activation]
    if act.backward is None:
        return grad
    saved = saved.view(grad.shape)
    if in_place:
        return act.backward.grad_input(grad, saved, *act.backward_args, grad_input=grad)
    return act.backward(grad, saved, *act.backward_args)


def _group_view(t: torch.Tensor, groups: int) -> torch.Tensor:
    """[T, w] as the groups' batch [g, T, w/g] (a view)."""
    return t.view(t.shape[0], groups, -1).transpose(0, 1)


def _layer_input(step: Step, values) -> torch.Tensor:
    """The [T, in] input of a step (the split-and-mix: [e_1, h_1, e_2, h_2, ...], section 3.3)."""
    if step.mode == "one":
        return values[step.sources[0]]
    a, b = (values[s] for s in step.sources)
    if step.mode == "cat":
        return torch.cat([a, b], dim=-1)  # [T, in]
    T, g = a.shape[0], step.groups
    return torch.cat([a.view(T, g, -1), b.view(T, g, -1)], dim=-1).view(T, -1)  # [T, in]


def strided_device(device: torch.device) -> bool:
    """Whether a batched matmul on ``device`` writes a strided view of the [T, w] layout
    directly: CUDA's (cuBLAS takes any row stride); the CPU's loops over the groups with one
    small gemm each, many times slower than its batched kernel into contiguous memory and
    one copy."""
    return device.type != "cpu"


def writes_strided(device: torch.device) -> bool:
    """Whether this step's matmuls write strided views (:func:`strided_device`): not under
    torch.compile, where an ``out=`` into a view breaks dynamo's graph at every layer, and
    the compiler fuses the copy into the kernel that reads it."""
    return strided_device(device) and not torch.compiler.is_compiling()


# rows from which the CPU runs a grouped layer's product as one gemm a group, written into the
# group's columns of the [T, w] layout (BLAS takes the row stride): there the batched kernel's
# copy into that layout costs more than the calls a group (docs/benchmarks.md, 1a)
PER_GROUP_ROWS = 2048


def per_group(t: torch.Tensor) -> bool:
    """Whether a grouped layer on the [T, w] tensor ``t`` runs one gemm a group
    (``PER_GROUP_ROWS``): on the CPU, eager (compiled, the compiler takes the batched form;
    the row count is not read there, or dynamo would guard on it and recompile across it)."""
    return t.device.type == "cpu" and not torch.compiler.is_compiling() and t.shape[0] >= PER_GROUP_ROWS


# the layouts of a grouped matmul's [T, w] operands (grouped_layout)
PER_GROUP = "per_group"  # one gemm a group into its columns (the CPU from PER_GROUP_ROWS rows)
STRIDED = "strided"  # one batched matmul writing strided views (CUDA)
COPY = "copy"  # one batched matmul into contiguous memory, then a copy (the CPU; compiled: fused)


def grouped_layout(t: torch.Tensor) -> str:
    """The layout of every grouped matmul of a call on [T, w] tensors like ``t``, decided once
    (:func:`per_group`, :func:`writes_strided`). Where it is :data:`PER_GROUP`, each grouped
    layer's output and input gradient also gets a buffer of its own rather than a slice of one
    for all: that one buffer would be large, and glibc maps large blocks afresh at every
    allocation (docs/benchmarks.md, 1a)."""
    if per_group(t):
        return PER_GROUP
    return STRIDED if writes_strided(t.device) else COPY


def _columns(t: torch.Tensor, groups: int, j: int) -> torch.Tensor:
    """Group j's columns of [T, w]: [T, w/g] (a view, rows strided by w)."""
    width = t.shape[1] // groups
    return t[:, j * width: (j + 1) * width]


def grouped_mm(layout: str, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, bias: Optional[torch.Tensor] = None,
               alpha: float = 1.0, beta: float = 0.0) -> torch.Tensor:
    """out = beta out + alpha F_G(x) + bias, written into ``out`` [T, o] in ``layout``: x [T, i]
    read as g groups, w [g, i/g, o/g]; beta is 0 (out's contents are not read) where there
    is a bias."""
    g = w.shape[0]
    if layout == PER_GROUP:
        for j in range(g):
            xj, oj = _columns(x, g, j), _columns(out, g, j)  # [T, i/g], [T, o/g]
            if beta:
                oj.addmm_(xj, w[j], beta=beta, alpha=alpha)
            elif bias is None:
                torch.addmm(oj, xj, w[j], beta=0, alpha=alpha, out=oj)
            else:
                torch.addmm(bias.view(g, -1)[j], xj, w[j], alpha=alpha, out=oj)
        return out
    xg = _group_view(x, g)  # [g, T, i/g]
    if layout == STRIDED:
        og = _group_view(out, g)  # [g, T, o/g]
        if beta:
            og.baddbmm_(xg, w, beta=beta, alpha=alpha)
        elif bias is not None:
            torch.baddbmm(bias.view(g, 1, -1), xg, w, alpha=alpha, out=og)
        elif alpha != 1.0:
            torch.baddbmm(og, xg, w, beta=0, alpha=alpha, out=og)
        else:
            torch.bmm(xg, w, out=og)
        return out
    y = torch.bmm(xg, w) if bias is None else torch.baddbmm(bias.view(g, 1, -1), xg, w, alpha=alpha)  # [g, T, o/g]
    if beta:
        (out.mul_(beta) if beta != 1.0 else out).view(out.shape[0], g, -1).add_(y.transpose(0, 1), alpha=alpha)
        return out
    _group_view(out, g).copy_(y)
    if bias is None and alpha != 1.0:
        out.mul_(alpha)
    return out


def splits(program, i: int) -> bool:
    """Whether step i, reading two sources, runs as one gemm a group and source on the
    per-group path, without their concatenation (the mixer's ``cat`` and its gradient's
    split: memory traffic, docs/benchmarks.md, 1a): a mix, or a
    one-group cat; and the unit's input is step 0's input, where the backward finds it."""
    step = program[i]
    return ((step.mode == "mix" or step.mode == "cat" and step.groups == 1)
            and program[0].mode == "one" and program[0].sources == ("e",))


def _parts(step: Step, sources):
    """[(source [T, w_s], the rows of each group's weight [in/g, out/g] that it meets)] of a
    split step, in the order of the concatenation (a mix: [a_j, b_j] in group j)."""
    parts, start = [], 0
    for t, width in zip(sources, step.widths):
        rows = width // step.groups
        parts.append((t, slice(start, start + rows)))
        start += rows
    return parts


def _group_gemms(groups: int, parts, w: torch.Tensor, b: Optional[torch.Tensor], z: torch.Tensor,
                 alpha: float) -> torch.Tensor:
    """alpha F_G(x) + b written into z [T, out] with one gemm a group and part, where x is
    read in ``parts`` (:func:`_parts`; one part: [(x, every row)]): group j's columns take
    sum over parts s of s_j W_j[rows of s]."""
    for j in range(groups):
        zj = _columns(z, groups, j)  # [T, out/g]
        for p, (t, rows) in enumerate(parts):
            tj, wj = _columns(t, groups, j), w[j][rows]  # [T, w_s/g], [w_s/g, out/g]
            if p > 0:
                zj.addmm_(tj, wj, alpha=alpha)
            elif b is None:
                torch.addmm(zj, tj, wj, beta=0, alpha=alpha, out=zj)  # beta=0: z is not read
            else:
                torch.addmm(b.view(groups, -1)[j], tj, wj, alpha=alpha, out=zj)
    return z


def _linear(step: Step, layout: str, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor],
            z: Optional[torch.Tensor], alpha: float = 1.0):
    """alpha F_G(x) + b [T, out]; a grouped layer writes into ``z`` (a [T, out] buffer, or a
    slice of one) in ``layout``, so no copy reorders [g, T, out/g] into [T, out] where the
    layout avoids it."""
    if step.groups == 1:
        if b is None:
            return torch.mm(x, w[0])  # [T, out] (alpha is 1 here: folds_input_scale)
        return torch.addmm(b, x, w[0], alpha=alpha)  # [T, out]
    return grouped_mm(layout, x, w, z, b, alpha)


def folds_input_scale(program, params) -> bool:
    """Whether the map's scale can ride in the first layer's matmul (``alpha``), forward and
    backward: only that layer reads e, and it has a bias or groups (an addmm or baddbmm)."""
    first = program[0]
    return (all("e" not in step.sources for step in program[1:])
            and (first.groups > 1 or params[1] is not None))


def _keeps_output(program, i: int, layout: str) -> bool:
    """Whether step i's output must be saved as it is: a later step splits (:func:`splits`)
    and reads it where it lies, not from an input of its own that holds it."""
    return layout == PER_GROUP and any(program[i].name in later.sources and splits(program, j)
                                       for j, later in enumerate(program) if j > i)


def _dropout(step: Step, y: torch.Tensor, mask: Optional[torch.Tensor]):
    """(dropout of y, its mask): a mask drawn by torch's native dropout (graph-safe on CUDA),
    or the given one applied as native dropout's backward applies it."""
    if mask is None:
        return aten.native_dropout(y, step.dropout, True)
    return aten.native_dropout_backward(y, mask, 1.0 / (1.0 - step.dropout)), mask


def run_forward(program, e2: torch.Tensor, params, e_scale: float, keep: bool, training: bool = True,
                masks=None, layout: Optional[str] = None):
    """The unit on e_scale * e2 (e2 [T, n]); with ``keep`` also what the backward reads
    (seven tensors a step, None where absent); ``training``: dropout acts, through
    ``masks`` (one a step, None where drawn here; None: all drawn); ``layout``: of the
    grouped matmuls (default :func:`grouped_layout`)."""
    T = e2.shape[0]
    layout = grouped_layout(e2) if layout is None else layout
    fold = e_scale != 1.0 and folds_input_scale(program, params)
    values = {"e": e2 if fold or e_scale == 1.0 else e2 * e_scale}
    saved = []
    grouped = [s.out for s in program if s.groups > 1]
    buffer = e2.new_empty(T * sum(grouped)) if grouped and layout != PER_GROUP else None  # every grouped layer's output
    offset = 0
    # a layer's activation and dropout as one operator where the device has its kernel
    # (act_dropout.py): one draw of seeds for all of them
    fused = [training and masks is None and step.dropout > 0 and fuses_dropout(e2.device, step.activation)
             for step in program]
    seeds = draw_seeds(program, e2.device) if any(fused) else None  # [steps]
    for i, step in enumerate(program):
        w, b, nw, nb = params[4 * i: 4 * i + 4]
        z = None
        if step.groups > 1 and buffer is None:
            z = e2.new_empty(T, step.out)
        elif step.groups > 1:
            z = buffer[offset: offset + T * step.out].view(T, step.out)
            offset += T * step.out
        alpha = e_scale if (fold and i == 0) else 1.0
        if layout == PER_GROUP and splits(program, i):
            x = None  # the backward reads the sources
            z = e2.new_empty(T, step.out) if z is None else z
            z = _group_gemms(step.groups, _parts(step, [values[s] for s in step.sources]), w, b, z, alpha)  # [T, out]
        else:
            x = _layer_input(step, values)
            z = _linear(step, layout, x, w, None if step.shuffle else b, z, alpha)  # [T, out]
        if step.shuffle:  # feature j of group i to j*g + i, and the bias in that layout
            zs = z.view(T, step.groups, -1).transpose(1, 2)  # [T, out/g, g]
            shuffled = z.new_empty(T, step.out // step.groups, step.groups)  # [T, out/g, g]
            if b is None:
                shuffled.copy_(zs)
            else:
                torch.add(zs, b.view(-1, step.groups), out=shuffled)
            z = shuffled.view(T, step.out)
        mean = rstd = None
        n = z
        if step.norm_dim:
            n, mean, rstd = aten.native_layer_norm(z.view(T, -1, step.norm_dim), [step.norm_dim], nw, nb, step.eps)
            n = n.view(T, step.out)
        mask = None
        if fused[i]:
            out, mask = act_dropout(n, seeds[i: i + 1], step.activation, step.dropout)  # [T, out]
            y = None  # the activation's backward reads n (fuses_dropout)
        else:
            y = _activate(step, n)
            out = y
            if training and step.dropout > 0:
                out, mask = _dropout(step, y, masks[i] if masks is not None else None)
        if step.residual:
            out = values[step.sources[0]] + out  # [T, w]
        values[step.name] = out
        if keep:
            saved.append((x, z, mean, rstd, _activation_saves(step, n, y), mask,
                          out if _keeps_output(program, i, layout) else None))
    return values[program[-1].name], saved


def _contribute(grads, name: str, t: torch.Tensor) -> None:
    """Add ``t`` (shaped [T, w] or [T, g, w/g]; a buffer of this backward) to the gradient
    of value ``name``, in place where the layouts allow."""
    acc = grads.get(name)
    if acc is None:
        grads[name] = t
    elif acc.dim() == 2 and acc.stride(1) == 1:
        acc.view(t.shape).add_(t)  # the rows of a [T, w] gradient are contiguous: any grouping is a view
    elif t.dim() == 2 and t.stride(1) == 1:
        grads[name] = t.view(acc.shape).add_(acc).view(t.shape)
    else:
        grads[name] = acc.reshape(acc.shape[0], -1) + t.reshape(t.shape[0], -1)


def _accumulates(program, i: int) -> bool:
    """Whether step i (reading one source) adds its input gradient into the source's
    gradient in place: a later step read the source too, or the step adds it to its output
    (the backward visited it first)."""
    step = program[i]
    return step.mode == "one" and (step.residual or any(step.sources[0] in later.sources for later in program[i + 1:]))


def run_backward(program, saved, params, grad_out: torch.Tensor, centring: bool, counts: Optional[torch.Tensor],
                 positions: int, grad_scale: float, e_scale: float, layout: Optional[str] = None):
    """The gradients of e2 and of every parameter (``params``' order) from ``grad_out`` [T, m];
    ``layout``: the forward's (default :func:`grouped_layout`)."""
    T = grad_out.shape[0]
    layout = grouped_layout(grad_out) if layout is None else layout
    fold = e_scale != 1.0 and folds_input_scale(program, params)
    grads = {program[-1].name: grad_out}
    param_grads = [None] * len(params)
    scaled = []
    # the input gradients that grouped layers write in the [T, in] layout: one buffer
    widths = [sum(step.widths) if step.groups > 1 and not _accumulates(program, i) and saved[i][0] is not None else 0
              for i, step in enumerate(program)]
    buffer = grad_out.new_empty(T * sum(widths)) if sum(widths) and layout != PER_GROUP else None
    offsets = [sum(widths[:i]) * T for i in range(len(program))]
    for i in reversed(range(len(program))):
        step = program[i]
        w, b, nw, nb = params[4 * i: 4 * i + 4]
        x, z, mean, rstd, act_saved, mask, _ = saved[i]
        gy = grads.pop(step.name)
        if step.residual:  # the source's share passes as it is (a copy: gy is written over below)
            _contribute(grads, step.sources[0], gy.clone())
        # a later step's input gradient is this backward's own buffer; grad_out is autograd's.
        # Not into a mixer's strided chunks (the norm's backward would copy them), nor compiled
        # (an out= there breaks the graph, and the compiler fuses anyway)
        own_gy = i < len(program) - 1 and not torch.compiler.is_compiling()
        if mask is not None and fuses_dropout(gy.device, step.activation):
            gn = act_dropout_backward(gy, act_saved, mask, step.activation, step.dropout)  # [T, out] of its own
            own_gy = not torch.compiler.is_compiling()
        else:
            if mask is not None:
                gy = aten.native_dropout_backward(gy, mask.view(gy.shape), 1.0 / (1.0 - step.dropout))
                own_gy = not torch.compiler.is_compiling()
            gn = _activation_backward(step, gy, act_saved, in_place=own_gy and gy.is_contiguous())
        if step.norm_dim:
            k = step.out // step.norm_dim
            gz, gnw, gnb = aten.native_layer_norm_backward(
                gn.reshape(T, k, step.norm_dim), z.view(T, k, step.norm_dim), [step.norm_dim], mean, rstd, nw, nb,
                [True, nw is not None, nb is not None])
            param_grads[4 * i + 2], param_grads[4 * i + 3] = gnw, gnb
            scaled += [t for t in (gnw, gnb) if t is not None]
        else:
            gz = gn
        gz = gz.reshape(T, step.out)  # [T, out]
        s = gz.sum(0) if (b is not None or centring) else None  # [out]: the bias gradient
        g = step.groups
        s_centre = s
        if step.shuffle:  # back to the groups' layout, which the weight reads
            gz = gz.view(T, -1, g).transpose(1, 2).reshape(T, step.out)  # [T, out]
            s_centre = s.view(-1, g).t().reshape(-1) if s is not None else None  # [out]
        sources = [_saved_value(program, saved, name) for name in step.sources] if x is None else None
        gx = None
        if widths[i]:
            gx = (
                grad_out.new_empty(T, widths[i])
                if buffer is None
                else buffer[offsets[i] : offsets[i] + T * widths[i]].view(T, -1)
            )
        # the input's gradient reads gz uncentred, so it comes first. The map's scale: e's
        # gradient is e_scale times what reaches it, and step 0 (which reads e alone) adds the
        # last share, so its matmul applies the factor to the sum
        if sources is not None:
            _split_input_backward(step, w, gz, grads, sources)
        else:
            _input_backward(program, i, layout, w, gz, x, grads, gx, e_scale if i == 0 else 1.0)
        gc = gz
        if centring:  # sum_t x_t (g_t - c_t sum g / positions)^T = sum_t (x_t - mean x) g_t^T
            # in place where gz is this backward's own: a norm's or an activation's gradient, or gy
            own_gz = own_gy or bool(step.norm_dim) or step.activation != "linear" or step.shuffle
            gc = centre(gz, counts, s_centre, positions, in_place=own_gz)
        alpha = e_scale if (fold and i == 0) else 1.0  # the layer read alpha * x
        if sources is not None:  # a split step: each group's rows of W from each source
            gw = torch.empty_like(w)  # [g, in/g, out/g]
            for j in range(g):
                for t, rows in _parts(step, sources):
                    gwj = gw[j][rows]  # [w_s/g, out/g]
                    torch.addmm(gwj, _columns(t, g, j).t(), _columns(gc, g, j), beta=0, alpha=alpha, out=gwj)
        elif g == 1:
            gw = (torch.mm(x.t(), gc) if alpha == 1.0 else torch.addmm(w[0], x.t(), gc, beta=0, alpha=alpha)).unsqueeze(
                0
            )
        else:
            xt, gg = _group_view(x, g).transpose(1, 2), _group_view(gc, g)  # [g, in/g, T], [g, T, out/g]
            gw = (
                torch.bmm(xt, gg) if alpha == 1.0 else torch.baddbmm(w, xt, gg, beta=0, alpha=alpha)
            )  # [g, in/g, out/g]
        param_grads[4 * i] = gw
        scaled.append(gw)
        if b is not None:
            param_grads[4 * i + 1] = s
            scaled.append(s)
    if grad_scale != 1.0 and scaled:
        scale_gradients(scaled, grad_scale, in_place=True)
    return grads["e"], param_grads


def _saved_value(program, saved, name: str) -> torch.Tensor:
    """A value the forward computed: the unit's input e (step 0's input, :func:`splits`) or
    a step's output."""
    if name == "e":
        return saved[0][0]
    return next(s[6] for step, s in zip(program, saved) if step.name == name)


def _split_input_backward(step: Step, w: torch.Tensor, gz: torch.Tensor, grads, sources) -> None:
    """The gradient of each source of a split step (:func:`splits`): group j's columns of
    source s take gz_j W_j[rows of s]^T, added in place into a gradient it already has."""
    g = step.groups
    for name, (t, rows) in zip(step.sources, _parts(step, sources)):
        acc = grads.get(name)
        into = acc if acc is not None and acc.dim() == 2 and acc.stride(1) == 1 else gz.new_empty(t.shape)  # [T, w_s]
        for j in range(g):
            gj, wt, out = _columns(gz, g, j), w[j][rows].t(), _columns(into, g, j)  # [T, out/g], [out/g, w_s/g]
            if into is acc:
                out.addmm_(gj, wt)
            else:
                torch.addmm(out, gj, wt, beta=0, out=out)  # beta=0: the new buffer is not read
        grads[name] = into if acc is None or into is acc else into.add_(acc.reshape(into.shape))


def _input_backward(program, i: int, layout: str, w: torch.Tensor, gz: torch.Tensor, x: torch.Tensor, grads,
                    gx: Optional[torch.Tensor], alpha: float) -> None:
    """The gradient of step i's input (times ``alpha``, and the source's gradient so far too),
    shared out to its sources: a single source's existing gradient takes it in place, a
    mix's chunks are added into the input's gradient where they lie and the previous output's
    chunks are its gradient; ``gx``: the [T, in] buffer a grouped layer's product goes to
    (in that layout, the activation's backward reads it as it reads contiguous memory)."""
    step = program[i]
    T, g = gz.shape[0], step.groups
    after = 1.0  # a factor left for the accumulated gradient
    if _accumulates(program, i):
        acc = grads[step.sources[0]]
        if acc.dim() == 2 and acc.stride(1) == 1:
            if g == 1:
                acc.addmm_(gz, w[0].t(), beta=alpha, alpha=alpha)
            else:
                grouped_mm(layout, gz, w.transpose(1, 2), acc, alpha=alpha, beta=alpha)  # [T, in]
            return
        after, alpha = alpha, 1.0
        gx = None if g == 1 else gz.new_empty(T, sum(step.widths))
    if g == 1:
        # [T, in]; beta=0: x only lends its shape
        gx = torch.mm(gz, w[0].t()) if alpha == 1.0 else torch.addmm(x, gz, w[0].t(), beta=0, alpha=alpha)
    else:
        grouped_mm(layout, gz, w.transpose(1, 2), gx, alpha=alpha)  # [T, in]
    if step.mode == "one":
        _contribute(grads, step.sources[0], gx)
        if after != 1.0:
            grads[step.sources[0]] = grads[step.sources[0]] * after
    elif step.mode == "cat":
        wa = step.widths[0]
        _contribute(grads, step.sources[0], gx[:, :wa])
        _contribute(grads, step.sources[1], gx[:, wa:])
    else:
        wa = step.widths[0] // g
        gx3 = gx.view(T, g, -1)  # [T, g, in/g]: [a_i, b_i] per group
        _contribute(grads, step.sources[0], gx3[..., :wa])
        _contribute(grads, step.sources[1], gx3[..., wa:])


class FusedUnitFunction(torch.autograd.Function):
    """e [*, n] -> the unit's output [*, m], for a program of :class:`Step`s and their
    parameters (four a step: W, b, norm weight, norm bias; None where absent)."""

    @staticmethod
    def forward(ctx, program, centring, counts, positions, scale, e_scale, training, masks, e, *params):
        e2 = e.reshape(-1, e.shape[-1])  # [T, n]
        out, saved = run_forward(program, e2, params, e_scale, keep=True, training=training, masks=masks)
        ctx.program, ctx.centring, ctx.positions, ctx.scale, ctx.e_scale = program, centring, positions, scale, e_scale
        ctx.e_shape = e.shape
        counts = counts.to(e.dtype) if (centring and counts is not None) else None  # [U]
        ctx.save_for_backward(counts, *[t for step in saved for t in step], *params)
        return out.view(*e.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        tensors = ctx.saved_tensors
        counts, k = tensors[0], SAVED * len(ctx.program)
        saved = [tensors[1 + SAVED * i: 1 + SAVED * (i + 1)] for i in range(len(ctx.program))]
        params = tensors[1 + k:]
        ge, pg = run_backward(ctx.program, saved, params, grad.reshape(-1, grad.shape[-1]), ctx.centring, counts,
                              ctx.positions, ctx.scale, ctx.e_scale)
        return (None,) * 8 + (ge.reshape(ctx.e_shape), *pg)


SAVED = 7  # tensors a step saves (run_forward)


def in_dtype(params, dtype: torch.dtype):
    """``params`` (None where absent) in ``dtype`` through one ``cat`` and one cast of them all:
    a few kernels a step with the gradients' way back, where a cast each takes two a parameter
    (docs/benchmarks.md); each gradient is a view of one buffer."""
    present = [p for p in params if p is not None]
    if all(p.dtype == dtype for p in present):
        return params
    flat = torch.cat([p.reshape(-1) for p in present]).to(dtype)  # [sum of numels]
    parts = iter(flat.split([p.numel() for p in present]))
    return [None if p is None else next(parts).view(p.shape) for p in params]


def fused_unit(program, layers, e: torch.Tensor, centring: bool, scale: float, counts: Optional[torch.Tensor] = None,
               positions: Optional[int] = None, e_scale: float = 1.0, training: bool = True,
               masks=None) -> torch.Tensor:
    """A unit's output for e_scale * e (e [*, n]) through :class:`FusedUnitFunction`;
    ``layers``: the modules of the program's steps (:func:`unit_layers`), ``counts`` [U]: how
    many positions each row of e stands for (the unique-token path; None: one each),
    ``positions``: their sum; ``training``: dropout acts (``masks``: as :func:`run_forward`)."""
    params = [p for layer in layers for p in params_of(layer)]
    positions = positions if positions is not None else e.numel() // e.shape[-1]
    device = e.device.type
    if torch.is_autocast_enabled(device):  # all of it in autocast's dtype (its out= buffers take one dtype)
        dtype = torch.get_autocast_dtype(device)
        e, params = e.to(dtype), in_dtype(params, dtype)
    with torch.autocast(device_type=device, enabled=False):
        return FusedUnitFunction.apply(program, centring, counts, positions, scale, float(e_scale), training,
                                       masks, e, *params)


# -- which path a call of the unit takes ----------------------------------------------------------


def wants_gradient(layers, e: torch.Tensor) -> bool:
    """Whether a call of the unit on e wants a gradient (every training step does)."""
    return torch.is_grad_enabled() and (e.requires_grad or any(p.requires_grad for layer in layers
                                                                for p in layer.parameters()))


def unit_forward(unit: nn.Module, program, e: torch.Tensor, stability=None, counts: Optional[torch.Tensor] = None,
                 positions: Optional[int] = None, e_scale: float = 1.0, graphs=None) -> torch.Tensor:
    """The unit on e_scale * e (e [*, n]) -> [*, m]: through :class:`FusedUnitFunction` where
    the unit has layers (``program``, :func:`program_of`) and a gradient is wanted, with the
    stability settings ``stability`` = (centring, grad scale) in its backward (None: neither),
    or through the same fast path captured as graphs (``graphs``, a graphed_unit.GraphedUnit);
    else through the modules. ``counts`` [U], ``positions``: as :func:`fused_unit`."""
    if program is not None:
        layers = unit_layers(unit)
        if wants_gradient(layers, e):
            centring, scale = stability if stability is not None else (False, 1.0)
            if graphs is not None:
                params = [p for layer in layers for p in params_of(layer)]
                return graphs(program, params, e, centring, scale, counts, positions, e_scale, unit.training)
            return fused_unit(program, layers, e, centring, scale, counts, positions, e_scale, unit.training)
    return unit(e * e_scale if e_scale != 1.0 else e)


def describe_path(program) -> str:
    """Which path a unit of ``program`` (:func:`program_of`) runs (logged once a unit)."""
    if program is None:
        return "a projective map (one Linear n -> m): its module runs every step"
    return ("training steps (every call that wants a gradient) run the fast path (fused_unit.py); "
            "calls without gradients, inference among them, run the modules")


def describe_graphs(backend: Optional[str]) -> str:
    """How the fast path's launches run (set_unit_run's ``graphs``; logged when set)."""
    if backend is None:
        return "the fast path's operators launched one by one"
    return f"the fast path captured as graphs and replayed (graphed_unit.py, backend {backend})"
