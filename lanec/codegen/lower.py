"""Lowering: the form after the rules -> the `lane` dialect, one `lane.launch` per kernel.

Every form value becomes a window of a device buffer (`Window`: its buffer, element offset,
shape and strides), so the parts of a product in parts stay views of one buffer and a consumer
reads them in place (each part at a place of whole 16-byte vectors: `PART_ALIGN`). Weights become
buffers made once at load from the form's weights through a chain of transforms (a product in
parts reads its parts' rows back to back, zero rows filling each place; KdaSplit reads the three
conv weights as one [3, 4, dim] buffer). `Lowering.lower` dispatches on the op's type to one
method a form op, which picks its kernel (lanec/codegen/kernels/) and static specialization, the
schedule table's choices included; the kernel computes its own launch facts (`launch()`), which
the `lane.launch` carries. An op the lane has no kernel for is an error that names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import singledispatchmethod

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    DictionaryAttr,
    Float32Type,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from lanec import shim as lane_facts
from lanec.codegen.facts import (
    ARGMAX_GROUPS,
    ARGMAX_SLOT,
    EARLY_STREAM_CTAS,
    EARLY_STREAMS,
    GEMM_FROM_ROWS,
    GEMM_MAX_ROWS,
    GEMM_PER_HEAD_FROM,
    GEMM_STREAM_SLOT,
    GEMV_PRELOAD_AFTER,
    GEMV_PRELOAD_ROWS,
    GEMV_ROW_BLOCKS_FROM,
    GEMV_ROWS,
    KDA_GATE_MODE,
    LATENT_COMBINE_IN_GEMV,
    LATENT_ENGINE,
    LATENT_PARTIALS,
    MIXTURE_DOWN_EARLY_ROWS,
    MIXTURE_DOWN_EARLY_WEIGHTS_ROWS,
    MIXTURE_EARLY_SHARED_CTAS,
    MIXTURE_EARLY_SHARED_ROWS,
    MIXTURE_EARLY_SHARED_UNITS,
    MIXTURE_GROUPED_ROWS,
    MIXTURE_READY_FLAG,
    MIXTURE_SUM_IN_NORM,
    PAIR_TILE,
    PART_ALIGN,
    Q8_0_BLOCK_BYTES,
    Q8_GATED_ROWS,
    QUANTIZE_EPILOGUE_SHARED_COST,
    RELEASE_RULE,
    RELEASE_RULES,
    ROUTER_GEMM_ROWS,
    ROUTER_PREFETCH_BYTES,
    ROUTER_PREFETCH_ROWS,
    ROUTER_SEGMENTS,
    ROUTER_SHARED_ROWS,
    SM_COUNT,
    AttentionSpec,
    ExpandedLatentSpec,
    GemmSpec,
    Q8GemmSpec,
    RmsNormSpec,
    latent_engine_reason,
    mixture_group_stages,
    part_places,
    quantized_pitch,
    router_block_reason,
    router_gemm_spec,
)
from lanec.codegen.kernels import make_kernel
from lanec.codegen.schedules import kda_schedule, schedule_for
from lanec.codegen.spec import spec_attrs
from lanec.dialects import form, lane
from lanec.runtime import dtypes
from lanec.runtime.plan import routing_buffer
from lanec.shim import (
    CLUSTER_COMBINE_CTAS,
    Latent,
    attention_splits,
    gqa_chunks,
    latent_cluster_combine,
    latent_cut,
    splits_reason,
)


class LoweringError(ValueError):
    """A form the lane cannot launch (one line); `ops`: the form ops it found no launch for, so
    the pipeline can name the rule that split them out of a fused op (`held_back_cause`)."""

    def __init__(self, message: str, ops: Sequence[Operation] = ()):
        super().__init__(message)
        self.ops = tuple(ops)


def dtype_name(element: Attribute) -> str:
    """An element type's dtype name, as plans and kernel parameters write it."""
    try:
        return dtypes.canonical(str(element))
    except ValueError:
        raise LoweringError(f"no device type for {element}") from None


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


@dataclass
class Window:
    """A form value on the device: `buffer`'s elements from `offset`, `shape` at `strides`."""

    buffer: SSAValue
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def contiguous(self) -> bool:
        return self.strides == row_major(self.shape)

    def rows(self, first: int, count: int) -> Window:
        return Window(self.buffer, self.offset + first * self.strides[0], (count, *self.shape[1:]), self.strides)


ELEMENTWISE = {form.AddOp: "add", form.MulOp: "mul", form.SwigluOp: "swiglu", form.SiluOp: "silu",
               form.SigmoidOp: "sigmoid"}


def pitch_of(x: Window, name: str = "x") -> dict:
    """The `x_pitch` (`{name}_pitch`) of a kernel reading rows of `x` in place from a wider row, if they are."""
    if len(x.shape) == 2 and x.strides != row_major(x.shape):
        if x.strides[1] != 1:
            raise LoweringError(f"rows of {list(x.shape)} at strides {list(x.strides)}: values must be adjacent")
        return {f"{name}_pitch": x.strides[0]}
    return {}


@dataclass
class Lowering:
    """The walk over one form step, building its lane step: each form op's method (dispatched on
    its type by `lower`) binds its results to windows and adds its launches."""

    step: form.StepOp
    block: Block = field(default_factory=Block)
    windows: dict[SSAValue, Window] = field(default_factory=dict)
    weights: dict[tuple, SSAValue] = field(default_factory=dict)
    sources: dict[SSAValue, form.WeightOp] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    missing: dict[str, int] = field(default_factory=dict)
    unlaunched: list[Operation] = field(default_factory=list)  # the ops `missing` counts
    schedules: Callable[[str, dict], dict] = schedule_for  # the tuned table
    # (kernel, shape, the table's overrides) of every lookup, in launch order: `lanec explain`
    tunings: list[tuple[str, dict, dict]] = field(default_factory=list)
    after_collective: bool = False  # the next launch follows an all-reduce: no PDL across it
    # a mixture of more rows takes the grouped experts' path (None: none does; `lower_mixture`)
    grouped_rows: int | None = MIXTURE_GROUPED_ROWS
    # int8 values a quantize launch wrote -> their words a value (what q8_gemv reads)
    quantized_words: dict[SSAValue, int] = field(default_factory=dict)
    # a norm's result that its reader's gemv computes in its prologue (fold-norm-into-gemv) -> the
    # norm (`lower_norm` launches nothing for it; `normed_gemv` takes its windows)
    prologues: dict[SSAValue, form.NormOp] = field(default_factory=dict)
    # a norm's result that its reader's mixture router computes in its prologue (fold-norm-into-router)
    # -> the norm: the router writes the result's buffer
    router_norms: dict[SSAValue, form.NormOp] = field(default_factory=dict)
    # a norm's result that rides in an absorbed latent attention's query gemv (fold-norm-into-latent) -> the
    # norm: that gemv's rider CTAs write the result's buffer
    latent_norms: dict[SSAValue, form.NormOp] = field(default_factory=dict)
    # an argmax's result that the gemv writing its input computes in its epilogue
    # (fold-argmax-into-gemv) -> the chosen indices that gemv writes
    argmax_epilogues: dict[SSAValue, Window] = field(default_factory=dict)
    # an argmax marked for its input's gemv epilogue whose gemv took another epilogue's place -> why it is a
    # launch of its own after all
    argmax_held: dict[SSAValue, str] = field(default_factory=dict)
    # q8_0 checkpoint weights an op reads as bf16 rows, widened once at load (`unlinked`)
    widened: set[SSAValue] = field(default_factory=set)
    # gemm_tc stream-K's workspace (partial tiles, flags), made at its first launch (`stream_workspace`)
    workspace: tuple[Window, Window] | None = None
    # ropes turned by the launch of the rope before them (`rope_partner`): they launch nothing
    paired_ropes: set[Operation] = field(default_factory=set)
    # a norm that gathers the embed's rows right before it (its launch folds the embed's) -> the tokens'
    # and the table's windows and the table's rows
    embed_norms: dict[Operation, tuple[Window, Window, int]] = field(default_factory=dict)
    # a grouped mixture's result that the rmsnorm reading it sums from its slots (`sum_in_norm`) -> the
    # partial rows [rows x slots, width] fp32 and the slots a row
    slot_sums: dict[SSAValue, tuple[Window, int]] = field(default_factory=dict)

    # -- buffers ---------------------------------------------------------------------------------

    def unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.names:
            n += 1
            candidate = f"{name}.{n}"
        self.names.add(candidate)
        return candidate

    def buffer(self, name: str, role: str, shape: Sequence[int], element: Attribute, **props) -> Window:
        op = lane.BufferOp(self.unique(name), role, MemRefType(element, list(shape)), **props)
        self.block.add_op(op)
        return Window(op.result, 0, tuple(shape), row_major(shape))

    def activation(self, name: str, shape: Sequence[int], element: Attribute | None = None) -> Window:
        return self.buffer(name, "activation", shape, element or BFloat16Type())

    def weight(self, values: Sequence[SSAValue], transforms: Sequence[dict] = (), shape=None,
               element: Attribute | None = None) -> Window:
        """The buffer made from form weights `values` through `transforms` (made once, shared);
        `element`: the buffer's, where a transform changes it (q8_0 blocks are bytes)."""
        ops = [self.sources[v] for v in values]
        if any(v in self.widened for v in values) and not any(t["kind"] == "quantize_q8_0" for t in transforms):
            transforms = [{"kind": "q8_0_values"}, *transforms]  # the blocks' values, stored as bf16
        key = (tuple(op.weight_name.data for op in ops), repr(transforms))
        element = element or form.element(values[0])
        if shape is None:
            shape = form.shape(values[0])
        if key not in self.weights:
            blocks = any(t["kind"] in ("quantize_q8_0", "q8_0_values") for t in transforms)
            for op in ops:  # a consumer of q8_0 rows that reads bf16 rows widens them first (`unlinked`)
                assert (op.format.data == "q8_0") == blocks, op.weight_name.data
            first = ops[0].weight_name.data
            name = first if len(ops) == 1 else f"{first}+{len(ops) - 1}"  # its sources list them all
            attrs = [spec_attrs(t) for t in transforms]
            window = self.buffer(name, "weight", shape, element, sources=key[0], transforms=attrs)
            self.weights[key] = window.buffer
        buffer = self.weights[key]
        return Window(buffer, 0, tuple(shape), row_major(shape))

    def window(self, value: SSAValue) -> Window:
        if value in self.sources:
            return self.weight([value])
        return self.windows[value]

    def arg(self, window: Window) -> SSAValue:
        """The launch operand for a window: the buffer itself, or a view of it."""
        assert isinstance(window.buffer.type, MemRefType)
        whole = tuple(window.buffer.type.get_shape())
        if window.offset == 0 and window.shape == whole and window.contiguous:
            return window.buffer
        view = lane.ViewOp(window.buffer, window.offset, window.shape, window.strides)
        self.block.add_op(view)
        return view.result

    def launch(self, kernel_name: str, spec: dict, args: Sequence[Window]) -> None:
        """A launch of `kernel_name` at `spec` on `args`, one window a tensor param; a tensor-map
        param (last, `TensorParam.tensor_map`) binds the window of the param it maps."""
        kernel = make_kernel(kernel_name, spec)
        shape = kernel.launch()
        params = [p for p in kernel.params() if p.tensor_map is None]
        if len(params) != len(args):
            raise LoweringError(f"{kernel_name} takes {len(params)} tensors; the lowering bound {len(args)}")
        for param, window in zip(params, args, strict=True):
            if tuple(param.shape) != window.shape:
                raise LoweringError(f"{kernel_name} param {param.name}: kernel shape {list(param.shape)}, "
                                    f"bound {list(window.shape)}")
            expected = tuple(param.strides) or row_major(param.shape)
            if expected != window.strides:
                raise LoweringError(f"{kernel_name} param {param.name} reads strides {list(expected)}; the "
                                    f"value lies at strides {list(window.strides)}")
        bound = {p.name: w for p, w in zip(params, args, strict=True)}
        maps = [bound[p.tensor_map["of"]] for p in kernel.params() if p.tensor_map is not None]
        operands = [self.arg(w) for w in [*args, *maps]]
        # NCCL's kernels never trigger a dependent launch: the launch after an all-reduce waits for
        # it whole, so it is launched without PDL (its griddepcontrol.wait is then a no-op)
        pdl = shape.pdl and not self.after_collective
        self.after_collective = False
        self.block.add_op(lane.LaunchOp(kernel_name, spec_attrs(spec), operands,
                                        shape.grid, shape.block, shape.cluster, shape.shared_bytes, pdl))

    def tuned(self, kernel: str, shape: dict) -> dict:
        """The schedule table's overrides for `kernel` at `shape` ({} where it has no entry)."""
        overrides = self.schedules(kernel, shape)
        self.tunings.append((kernel, dict(shape), dict(overrides)))
        return overrides

    def no_kernel(self, op: Operation, why: str = "") -> None:
        """Note an op the lane cannot launch; its results get buffers all the same, so the walk
        goes on and the error names every such op at once."""
        key = op.name + (f" ({why})" if why else "")
        self.missing[key] = self.missing.get(key, 0) + 1
        self.unlaunched.append(op)
        for result in op.results:
            if result not in self.windows and isinstance(result.type, TensorType):
                self.windows[result] = self.activation(op.name, form.shape(result), form.element(result))

    def reads_quantized(self, x: SSAValue, weights: Sequence[SSAValue]) -> bool:
        """Whether a product or gated pair is q8_gemv's or q8_gated_gemv's: a quantize launch's
        int8 rows (`quantized_words`) by q8_0 checkpoint rows only."""
        return (x in self.quantized_words
                and all(w in self.sources and self.sources[w].format.data == "q8_0" for w in weights))

    def q8_rows(self, weights: Sequence[SSAValue], places: Sequence[int], planes: bool = False) -> Window:
        """The q8_0 buffer of `weights` (their rows back to back at `places`, zero rows filling
        each gap, then quantized once at load into llama.cpp's 34-byte blocks: uint8); `planes`:
        each row's blocks reordered into its values, then its scales (q8_gemm_tc's rows)."""
        width = form.shape(weights[0])[1]
        concatenate = [{"kind": "concatenate", "axis": 0, "align": PART_ALIGN}] if len(weights) > 1 else []
        reorder = [{"kind": "q8_0_planes"}] if planes else []
        return self.weight(list(weights), [*concatenate, {"kind": "quantize_q8_0"}, *reorder],
                           shape=(sum(places), width // form.BLOCK * Q8_0_BLOCK_BYTES),
                           element=IntegerType(8, Signedness.UNSIGNED))

    def quantize(self, x: Window, result: SSAValue, words: int, name: str, after: str, why: str) -> None:
        """A standalone quantize launch of the bf16 rows `x` (`after`: the kernel that wrote them)
        into `result`'s quantized form (`why`: why it stands alone, for `lanec explain`)."""
        rows, width = x.shape
        shape = {"rows": rows, "width": width, "words": words}
        self.tunings.append(("quantize", {**shape, "after": after}, {"launch": "standalone", "why": why}))
        out = self.quantized_out(name, rows, width, words)
        self.launch("quantize", {**shape, **pitch_of(x)}, [x, out])
        self.windows[result] = out
        self.quantized_words[result] = words

    def epilogue_words(self, op: Operation, result: SSAValue) -> int:
        """The words a value of the quantize fuse-quant put in `op`'s epilogue (its `result` the
        quantized form, i8); 0 where it put none."""
        words = op.quantize_words() if isinstance(op, form.QuantizedEpilogue) else 0
        return words if words and form.is_int(result, 8) else 0

    def quantized_out(self, name: str, rows: int, width: int, words: int) -> Window:
        """A buffer of `rows` quantized rows of `width` values (`name`.q, int8)."""
        return self.activation(f"{name}.q", (rows, quantized_pitch(width, words)), IntegerType(8))

    def bind_epilogue(self, result: SSAValue, out: Window, words: int, kernel: str) -> None:
        """`result` is `out`, the quantized rows `kernel` wrote in its own epilogue."""
        rows, width = form.shape(result)
        self.tunings.append(("quantize", {"rows": rows, "width": width, "words": words, "after": kernel},
                             {"launch": "epilogue", "why": f"fuse-quant put it in the {kernel}'s epilogue: the "
                              f"{kernel} writes the quantized rows, no bf16 rows and no quantize launch"}))
        self.windows[result] = out
        self.quantized_words[result] = words

    def bind(self, op: Operation, result: SSAValue, out: Window, kernel: str, why: str | None = None) -> None:
        """`result` is `out`, which `kernel` wrote bf16; where fuse-quant put a quantize in the
        op's epilogue (its result i8), a standalone quantize launch follows instead: `kernel` has
        no quantize epilogue (rmsnorm, elementwise, head_norm, the gated GEMVs and an attention merging
        its chunks in its cluster have one: `bind_epilogue`), or `why` its launch cannot take it."""
        words = op.quantize_words() if isinstance(op, form.QuantizedEpilogue) else 0
        if not words or not form.is_int(result, 8):
            self.windows[result] = out
            return
        self.quantize(out, result, words, out.buffer.owner.buffer_name.data, kernel,
                      f"fuse-quant put it in the {kernel}'s epilogue, "
                      + (why or f"which the {kernel} kernel does not have yet"))

    def row_products_out(self, op: form.ProductOp | form.GatedProductOp, result: SSAValue, name: str, kernel: str,
                         specs: Sequence[dict]) -> tuple:
        """The output of a product's (or gated pair's) `kernel` launches of `specs`: where fuse-quant
        put a quantize in its epilogue and every launch takes it, the quantized rows with the
        epilogue's scratch (staged fp32 values, a ticket a block: RowProducts' quantize epilogue),
        else bf16 rows. Returns (out, words (0: bf16), the scratch windows, why a quantize stays a
        launch of its own)."""
        rows, hidden = form.shape(result)
        words = self.epilogue_words(op, result)
        why = None
        if words:
            problems = []
            for spec in specs:
                try:
                    made = make_kernel(kernel, {**spec, "quantize": words})
                except ValueError as error:
                    problems.append(str(error))
                    continue
                if made.rows_per_cta % form.BLOCK:
                    problems.append(
                        f"its CTAs own {made.rows_per_cta} outputs, fewer than a {form.BLOCK}-value block: they "
                        f"would stage their sums and draw a ticket a block, measured {QUANTIZE_EPILOGUE_SHARED_COST} "
                        "slower than the launch without it, more than the quantize launch it replaces "
                        "(bench/q8.py)")
            if not problems:
                longest = max(spec["rows"] for spec in specs)
                scratch = [self.activation(f"{name}.staged", (longest, hidden), Float32Type()),
                           self.activation(f"{name}.tickets", (max(2, hidden // form.BLOCK),), IntegerType(32))]
                return self.quantized_out(name, rows, hidden, words), words, scratch, None
            why = f"which its launch cannot take: {problems[0]}"
        suffix = "swiglu" if isinstance(op, form.GatedProductOp) else "out"
        return self.activation(f"{name}.{suffix}", (rows, hidden)), 0, [], why

    def row_specs(self, kernel: str, rows: int, limit: int, tuned_shape: dict, spec: dict) -> list[dict]:
        """The specs of `kernel`'s launches over `rows` rows, `limit` a launch, each under the
        schedule table's entry for its rows and `tuned_shape`."""
        specs = []
        for first in range(0, rows, limit):
            count = min(limit, rows - first)
            specs.append({"rows": count, **spec, **self.tuned(kernel, {"rows": count, **tuned_shape})})
        return specs

    def row_products(self, op: form.ProductOp | form.GatedProductOp, kernel: str, specs: Sequence[dict], x: Window,
                     weights: Sequence[Window]) -> None:
        """A product's (of one part) or gated pair's `kernel` launches (gemv, gated_gemv and their q8
        forms), a launch a spec (each `rows` rows), then its result bound."""
        gated = isinstance(op, form.GatedProductOp)
        result = op.result if gated else op.parts[0]
        name = self.sources[op.gate if gated else op.weights[0]].weight_name.data.removesuffix(".weight")
        out, words, scratch, why = self.row_products_out(op, result, name, kernel, specs)
        first = 0
        for spec in specs:
            count = spec["rows"]
            epilogue = [scratch[0].rows(0, count), scratch[1]] if words else []
            self.launch(kernel, {**spec, **({"quantize": words} if words else {})},
                        [x.rows(first, count), *weights, out.rows(first, count), *epilogue])
            first += count
        if words:
            self.bind_epilogue(result, out, words, kernel)
        else:
            self.bind(op, result, out, kernel, why)

    def unlinked(self, op: Operation, weights: Sequence[SSAValue]) -> bool:
        """Note (and say) where an op's weights are not checkpoint rows the lane's kernels load:
        an activation (gemv, gated_gemv and rmsnorm load their weights before the PDL wait, so a
        weight never depends on a previous launch), or where it reads the quantized form. Its q8_0
        checkpoint rows, which only q8_gemv and q8_gated_gemv read as blocks (by an int8
        activation), are widened once at load to the bf16 rows its kernel reads: the blocks'
        values, rounded to bf16 (a `q8_0_values` transform), each widening in `lanec explain`."""
        if not all(w in self.sources for w in weights):
            self.no_kernel(op, "weights that are an activation: kernels load weights before the PDL wait")
            return True
        if form.is_int(op.operands[0], 8):
            self.no_kernel(op, "quantized")
            return True
        for w in weights:
            source = self.sources[w]
            if source.format.data == "q8_0" and w not in self.widened:
                self.widened.add(w)
                kind = op.name.removeprefix("form.")
                why = ("precise numerics: the product reads its activation bf16, and q8_gemv reads int8"
                       if isinstance(op, form.ProductOp | form.GatedProductOp) else
                       f"no kernel of the lane reads the {kind}'s weights as q8_0 blocks")
                self.tunings.append(("widen", {"weight": source.weight_name.data, "format": "q8_0", "by": kind},
                                     {"why": f"{why}: its rows are widened to bf16 at load (the blocks' values; "
                                             "twice the bytes)"}))
        return False

    # -- the walk --------------------------------------------------------------------------------

    def run(self) -> lane.StepOp:
        for op in self.step.body.block.ops:
            if isinstance(op, form.ReturnOp):
                break
            try:
                self.lower(op)
            except ValueError as error:  # a kernel's limit or the lowering's: say which op met it
                raise LoweringError(str(error), [op]) from None
        if self.missing:
            listed = ", ".join(f"{name} x{count}" for name, count in sorted(self.missing.items()))
            raise LoweringError(f"no lane kernel for: {listed}", self.unlaunched)
        returned = self.step.body.block.last_op
        assert isinstance(returned, form.ReturnOp)
        outputs = []
        for index, value in enumerate(returned.outputs):
            window = self.window(value)
            buffer = window.buffer.owner
            assert isinstance(buffer, lane.BufferOp) and isinstance(window.buffer.type, MemRefType)
            if window.shape != tuple(window.buffer.type.get_shape()) or buffer.role.data != "activation":
                raise LoweringError(f"output {index} is not a whole activation buffer: the step returns "
                                    "what a launch writes whole (a norm, a product, argmax)")
            buffer.role = StringAttr("output")
            buffer.source = StringAttr(str(index))
            outputs.append(window.buffer)
        self.place_releases()
        self.block.add_op(lane.ReturnOp(outputs))
        return lane.StepOp(self.step.batch.value.data, self.step.tokens.value.data, Region(self.block))

    def place_releases(self) -> None:
        """Each PDL launch's release point (`release_point`, by what follows it), recorded in its
        specialization where it is "entry" and in the tunings `lanec explain` prints."""
        order = [op for op in self.block.ops if isinstance(op, (lane.LaunchOp, lane.AllReduceOp))]
        for op, after in zip(order, [*order[1:], None], strict=True):
            if not isinstance(op, lane.LaunchOp) or not op.pdl.value.data:
                continue
            followed = isinstance(after, lane.LaunchOp) and after.pdl.value.data
            successor = after.kernel.data if followed else None
            ctas = math.prod(after.grid.get_values()) if followed else 0
            point, why = release_point(op.kernel.data, successor, ctas)
            # it reads this launch's inputs before its wait (the early shared warp the router's; mixture_down's
            # early weights the router's ids, which mixture_gated reads too)
            if followed and ("early_shared" in after.spec.data or "early_weights" in after.spec.data):
                point, why = "wait", (f"the next launch ({successor}) reads this launch's inputs before its own "
                                      "wait: they are complete once this launch's CTAs pass their wait")
            if point == "entry":
                op.properties["spec"] = DictionaryAttr({**op.spec.data, "release": StringAttr("entry")})
            # the point is part of the key: one (kernel, next kernel) pair may be started early or not (the lm head)
            self.tunings.append(("release", {"kernel": op.kernel.data, "next": successor or "none", "point": point},
                                 {"why": why}))

    @singledispatchmethod
    def lower(self, op: Operation) -> None:
        """Lower one form op (a method a kind of op, below); an op the lane has no kernel for is
        noted, and the walk goes on."""
        self.no_kernel(op)

    # -- one method a form op --------------------------------------------------------------------

    @lower.register
    def lower_input(self, op: form.InputOp) -> None:
        self.windows[op.result] = self.buffer(f"input.{op.role.data}", "input", form.shape(op.result),
                                              form.element(op.result), source=op.role.data)

    @lower.register
    def lower_weight(self, op: form.WeightOp) -> None:
        self.sources[op.result] = op  # made into a buffer by its first consumer, in the layout it needs

    @lower.register
    def lower_state(self, op: form.StateOp) -> None:
        self.windows[op.result] = self.buffer(op.state_name.data, "state", form.shape(op.result),
                                              form.element(op.result), source=op.state_name.data)

    @lower.register
    def lower_embed(self, op: form.EmbedOp) -> None:
        if op.table in self.sources and self.sources[op.table].format.data != "bf16":
            self.no_kernel(op, "a q8_0 table: embed copies bf16 rows")
            return
        vocab, hidden = form.shape(op.table)
        rows = form.shape(op.tokens)[0]
        out = self.activation("embed", (rows, hidden))
        self.windows[op.result] = out
        norm = op.next_op
        if (isinstance(norm, form.NormOp) and norm.x is op.result and norm.residual is None and norm.prologue is None
                and not RmsNormSpec(rows, hidden, gather=vocab).problems()):
            # the norm right after reads the rows first: its launch gathers them (and writes them here)
            self.embed_norms[norm] = (self.window(op.tokens), self.window(op.table), vocab)
            self.tunings.append(("embed", {"rows": rows, "vocab": vocab, "width": hidden},
                                 {"launch": "in the norm", "why": "the norm after it reads its rows first: the "
                                                                  "norm's launch gathers, writes and norms them"}))
            return
        self.launch("embed", {"rows": rows, "vocab": vocab, "width": hidden},
                    [self.window(op.tokens), self.window(op.table), out])

    @lower.register
    def lower_quantize(self, op: form.QuantizeOp) -> None:
        producer = op.x.owner.name.removeprefix("form.") if isinstance(op.x.owner, Operation) else "input"
        self.quantize(self.window(op.x), op.result, op.words.value.data, "quantize", producer,
                      f"the {producer}'s result, read quantized by q8_0 rows, is quantized apart from it "
                      "(fuse-quant's decisions say why)")

    @lower.register
    def lower_product(self, op: form.ProductOp) -> None:
        if self.reads_quantized(op.x, op.weights):
            self.q8_product(op)
            return
        if self.unlinked(op, op.weights):
            return
        rows, _ = form.shape(op.x)
        parts = [form.shape(w)[0] for w in op.weights]
        places = part_places(parts)
        total = sum(places)
        concatenate = {"kind": "concatenate", "axis": 0, "align": PART_ALIGN}  # zero rows fill each gap
        weight = self.weight(list(op.weights), [concatenate] if len(parts) > 1 else [],
                             shape=(total, form.shape(op.weights[0])[1]))
        name = self.sources[op.weights[0]].weight_name.data.removesuffix(".weight")
        spec: dict = {"width": form.shape(op.weights[0])[1], "parts": tuple(places)}
        part = op.part()
        x = self.window(op.x) if op.x not in self.prologues else None
        if (x is not None and len(parts) == 1 and part is None and self.argmax_reader(op) is None
                and self.epilogue_words(op, op.parts[0])
                and not self.tensor_cores(rows, {**spec, **pitch_of(x)})):
            # its gemv launches quantize their output in the epilogue where they can (`row_products`)
            specs = self.row_specs("gemv", rows, GEMV_ROWS, {"width": spec["width"], "outputs": total},
                                   {**spec, **pitch_of(x)})
            self.row_products(op, "gemv", specs, x, [weight])
            return
        out = self.activation(f"{name}.out", (rows, total))
        if x is None:
            argmax = self.argmax_reader(op)
            if argmax is not None:
                self.argmax_held[argmax.result] = (
                    "its product's gemv runs the norm before it in its prologue (fold-norm-into-gemv), a launch "
                    "without the argmax epilogue: the argmax is a launch of its own")
            self.normed_gemv(self.prologues[op.x], weight, out, spec)
            self.bind_parts(op, out, parts, places, "gemv")
            return
        if part is not None:
            heads, unit, offset, length = part
            spec["per_head"] = (heads, unit, offset)
        argmax = self.argmax_reader(op)
        if argmax is not None:
            self.gemv_argmax(x, weight, out, spec, argmax)
        else:
            self.gemv(x, weight, out, spec)
        self.bind_parts(op, out, parts, places, "gemv")

    def argmax_reader(self, op: form.ProductOp) -> form.ArgmaxOp | None:
        """The argmax fold-argmax-into-gemv put in this product's gemv epilogue, if any."""
        readers = [use.operation for result in op.parts for use in result.uses]
        return next((r for r in readers if isinstance(r, form.ArgmaxOp) and r.epilogue is not None), None)

    def gemv_argmax(self, x: Window, weight: Window, out: Window, spec: dict, argmax: form.ArgmaxOp) -> None:
        """One gemv launch that also writes the argmax of each output row (its epilogue): the rows'
        best keys (`.best`, reset by the CTAs that read them) and the ticket counts (`.tickets`), the
        grid's and each ticket group's, are activations a session leaves poisoned (all ones), the
        start the epilogue expects."""
        rows = out.shape[0]
        slots = (ARGMAX_GROUPS + 1, ARGMAX_SLOT)  # the grid's keys and ticket, then each group's
        best = self.activation("argmax.best", slots, IntegerType(32))
        tickets = self.activation("argmax.tickets", slots, IntegerType(32))
        chosen = self.activation("argmax", (rows,), IntegerType(32))
        self.gemv(x, weight, out, {**spec, "argmax": True}, epilogue=[best, tickets, chosen])
        self.argmax_epilogues[argmax.result] = chosen

    def normed_gemv(self, norm: form.NormOp, weight: Window, out: Window, spec: dict) -> None:
        """One gemv launch whose prologue computes `norm` (fold-norm-into-gemv): it reads the
        norm's input (and residual) and weight, and writes the norm's sum where it has one."""
        x = self.window(norm.x)
        rows, outputs = out.shape
        residual = norm.residual is not None
        tuned = self.tuned("gemv", {"rows": rows, "width": spec["width"], "outputs": outputs, "norm": 1})
        args = [x, *([self.window(norm.residual)] if residual else []), self.window(norm.weight), weight, out]
        if residual:
            args.append(self.window(norm.sum))
        self.launch("gemv", {"rows": rows, **spec, **pitch_of(x), "norm": True, "eps": norm.eps.value.data,
                             "residual": residual, **tuned}, args)

    def bind_parts(self, op: form.ProductOp, out: Window, parts: Sequence[int], places: Sequence[int],
                   kernel: str) -> None:
        """A product's parts as windows of its output row (a quantize after a product of one part
        where fuse-quant put it in the epilogue)."""
        rows, total = out.shape
        start = 0
        for n, place, result in zip(parts, places, op.parts, strict=True):
            self.bind(op, result, Window(out.buffer, start, (rows, n), (total, 1)), kernel)
            start += place

    def q8_product(self, op: form.ProductOp) -> None:
        """A product by q8_0 rows reading its activation quantized: above GEMV_ROWS rows q8_gemm_tc
        launches of at most GEMM_MAX_ROWS rows (int8 tensor cores, the weight read once), where its
        facts take the shape; else q8_gemv launches of at most GEMV_ROWS rows (dp4a on CUDA cores)."""
        if op.part() is not None:
            self.no_kernel(op, "a per-head read of the quantized form")
            return
        x = self.window(op.x)
        rows = x.shape[0]
        parts = [form.shape(w)[0] for w in op.weights]
        places = part_places(parts)
        width = form.shape(op.weights[0])[1]
        words = self.quantized_words[op.x]
        if self.q8_tensor_cores(rows, width, places, words, {}, "int8 tensor cores read the q8_0 rows once for "
                                "every row", ("q8_gemv", GEMV_ROWS)):
            name = self.sources[op.weights[0]].weight_name.data.removesuffix(".weight")
            out = self.activation(f"{name}.out", (rows, sum(places)))
            self.q8_gemm(op.weights, places, x, out, words)
            self.bind_parts(op, out, parts, places, "q8_gemm_tc")
            return
        weight = self.q8_rows(op.weights, places)
        specs = self.row_specs("q8_gemv", rows, GEMV_ROWS, {"width": width, "outputs": sum(places), "words": words},
                               {"width": width, "parts": tuple(places), "words": words})
        if len(parts) == 1:
            self.row_products(op, "q8_gemv", specs, x, [weight])
            return
        name = self.sources[op.weights[0]].weight_name.data.removesuffix(".weight")
        out = self.activation(f"{name}.out", (rows, sum(places)))
        for first, spec in zip(range(0, rows, GEMV_ROWS), specs, strict=True):
            self.launch("q8_gemv", spec, [x.rows(first, spec["rows"]), weight, out.rows(first, spec["rows"])])
        self.bind_parts(op, out, parts, places, "q8_gemv")

    def q8_tensor_cores(self, rows: int, width: int, places: Sequence[int], words: int, tag: dict, taken: str,
                        fallback: tuple[str, int]) -> bool:
        """Whether a q8_0 product (or gated pair: `tag`) of `rows` rows runs on q8_gemm_tc: above
        GEMV_ROWS rows, where its facts take the shape. Above them the kernel and why (`taken`, or
        the fact that refuses q8_gemm_tc and the `fallback` kernel's launches of at most its rows) go
        to the tunings `lanec explain` prints."""
        if rows <= GEMV_ROWS:
            return False
        refused = Q8GemmSpec(min(rows, GEMM_MAX_ROWS), width, tuple(places), words).problems()
        kernel, limit = fallback
        why = (f"q8_gemm_tc {refused[0]}: {kernel} launches of {limit} rows" if refused else
               f"{rows} rows are above q8_gemv's {GEMV_ROWS}: {taken}")
        shape = {"rows": rows, "width": width, "outputs": sum(places), "words": words, **tag}
        self.tunings.append(("q8_product", shape, {"kernel": kernel if refused else "q8_gemm_tc", "why": why}))
        return not refused

    def q8_gemm(self, weights: Sequence[SSAValue], places: Sequence[int], x: Window, out: Window, words: int) -> None:
        """out = x . the q8_0 rows of `weights` (at `places`, as planes): q8_gemm_tc launches of at
        most GEMM_MAX_ROWS rows, each under the schedule table's entry for its shape."""
        rows, width = x.shape[0], form.shape(weights[0])[1]
        weight = self.q8_rows(weights, places, planes=True)
        for first in range(0, rows, GEMM_MAX_ROWS):
            count = min(GEMM_MAX_ROWS, rows - first)
            tuned = self.tuned("q8_gemm_tc", {"rows": count, "width": width, "outputs": sum(places), "words": words})
            spec = {"rows": count, "width": width, "parts": tuple(places), "words": words, **tuned}
            self.launch("q8_gemm_tc", spec, [x.rows(first, count), weight, out.rows(first, count)])

    def tensor_cores(self, rows: int, spec: dict) -> bool:
        """Whether a product of `rows` rows (`spec`: gemv's) runs on gemm_tc, where gemm_tc's facts
        take the shape: from GEMM_FROM_ROWS rows (measured: facts.py), and below it where the
        schedule table has a gemm_tc entry for the launch's shape (bench/gemm.py --write-table
        writes one there only where gemm_tc beat the gemv launches: the limit, per shape)."""
        if GemmSpec(min(rows, GEMM_MAX_ROWS), spec["width"], tuple(spec["parts"]), spec.get("per_head"),
                    spec.get("x_pitch"), spec.get("gated", False)).problems():
            return False
        if spec.get("per_head") is not None:
            taken, why = per_head_on_tensor_cores(rows, spec)
            if GEMM_PER_HEAD_FROM is not None:  # off, the plans are those before the fact (gemv, as always)
                self.tunings.append(("per_head", self.product_shape(rows, spec),
                                     {"kernel": "gemm_tc" if taken else "gemv", "why": why}))
            return taken
        return rows >= GEMM_FROM_ROWS or bool(self.schedules("gemm_tc", self.product_shape(rows, spec)))

    @staticmethod
    def product_shape(rows: int, spec: dict) -> dict:
        """A gemm_tc launch's shape as the schedule table keys it."""
        shape = {"rows": rows, "width": spec["width"], "outputs": sum(spec["parts"])}
        if spec.get("gated"):
            shape["gated"] = 1  # a gated pair's launch is tuned apart from a product of its 2 x hidden rows
        return shape

    def stream_workspace(self, spec: dict) -> list[Window]:
        """A stream-K gemm_tc launch's `partials` and `flags`: windows of the plan's one workspace
        (a fp32 slot and a flag for each of SM_COUNT CTAs), made at the first such launch. The
        launches share it: each writes it only after its PDL wait, when the one before has ended,
        and leaves every flag it raised lowered."""
        if self.workspace is None:
            partials = self.buffer("gemm_tc.partials", "activation", (SM_COUNT, GEMM_STREAM_SLOT), Float32Type())
            self.workspace = (partials, self.buffer("gemm_tc.flags", "activation", (SM_COUNT,), IntegerType(32)))
        params = {p.name: p for p in make_kernel("gemm_tc", spec).params()}
        return [Window(whole.buffer, 0, tuple(params[name].shape), params[name].element_strides)
                for name, whole in zip(("partials", "flags"), self.workspace, strict=True)]

    def gemv(self, x: Window, weight: Window, out: Window, spec: dict, epilogue: Sequence[Window] = ()) -> None:
        """y = x @ weight^T (`spec`: width, parts, maybe per_head), under the schedule table's
        entry for each launch's shape: from GEMM_FROM_ROWS rows gemm_tc launches of at most
        GEMM_MAX_ROWS rows (one for a batch's, each reading the weight once) where its facts take
        the shape (`tensor_cores`); otherwise gemv launches of at most GEMV_ROWS rows each.
        `epilogue`: the tensors of the gemv's epilogue (its argmax), after its output; one gemv
        launch only."""
        rows, outputs = out.shape
        spec = {**spec, **pitch_of(x)}
        assert not epilogue or rows <= GEMV_ROWS, "an epilogue's tensors are one gemv launch's"
        if not epilogue and self.tensor_cores(rows, spec):
            if rows < GEMM_FROM_ROWS:
                self.tunings.append(("product", self.product_shape(rows, spec), {
                    "kernel": "gemm_tc", "why": f"below GEMM_FROM_ROWS ({GEMM_FROM_ROWS}), the schedule table's "
                    "gemm_tc entry for this shape: bench/gemm.py measured it faster than the gemv launch"}))
            for first in range(0, rows, GEMM_MAX_ROWS):
                count = min(GEMM_MAX_ROWS, rows - first)
                tuned = self.tuned("gemm_tc", self.product_shape(count, spec))
                launched = {"rows": count, **spec, **tuned}
                args = [x.rows(first, count), weight, out.rows(first, count)]
                if tuned.get("schedule", {}).get("stream"):
                    args += self.stream_workspace(launched)
                self.launch("gemm_tc", launched, args)
            return
        assert not spec.get("gated"), "a gated pair takes gemm_tc or gated_gemv, never gemv"
        blocks, why = gemv_row_blocks(rows, bool(epilogue))
        if why:
            self.tunings.append(("row_blocks", self.product_shape(rows, spec), {"blocks": blocks, "why": why}))
        if blocks > 1:
            shape = {"rows": GEMV_ROWS, "width": spec["width"], "outputs": outputs}
            self.launch("gemv", {"rows": GEMV_ROWS, **spec, **self.tuned("gemv", shape), "row_blocks": blocks},
                        [x, weight, out])
            return
        for first in range(0, rows, GEMV_ROWS):
            count = min(GEMV_ROWS, rows - first)
            shape = {"rows": count, "width": spec["width"], "outputs": outputs}
            tuned = self.preloaded(shape, spec, self.tuned("gemv", shape))
            self.launch("gemv", {"rows": count, **spec, **tuned},
                        [x.rows(first, count), weight, out.rows(first, count), *epilogue])

    def preloaded(self, shape: dict, spec: dict, tuned: dict) -> dict:
        """`tuned` with the gemv's weight rows preloaded into shared memory before its PDL wait (a
        schedule of `preload` alone: one wave of CTAs) where the launch before it, whose output it
        reads, is one of GEMV_PRELOAD_AFTER's and its rows fit a CTA; a table entry that names
        `preload` keeps its own. Each decision is in the tunings `lanec explain` prints."""
        after = self.last_kernel()
        if after not in GEMV_PRELOAD_AFTER or shape["rows"] > GEMV_PRELOAD_ROWS:
            return tuned
        if "preload" in tuned.get("schedule", {}):
            return tuned
        preload = {**{k: v for k, v in tuned.items() if k != "schedule"}, "schedule": {"preload": True}}
        where = {"kernel": "gemv", "after": after, **shape}
        try:
            ctas = make_kernel("gemv", {**spec, "rows": shape["rows"], **preload}).launch().grid[0]
        except ValueError as error:
            self.tunings.append(("preload", where, {"taken": False, "why": f"its rows do not fit a CTA: {error}"}))
            return tuned
        if ctas > SM_COUNT:
            self.tunings.append(("preload", where, {"taken": False, "why": (
                f"its rows need {ctas} CTAs, more than one wave ({SM_COUNT}): the later CTAs could not be resident "
                "before its wait")}))
            return tuned
        self.tunings.append(("preload", where, {"why": (
            f"its activation is the output of {after}, a latency-bound launch (GEMV_PRELOAD_AFTER): its "
            f"{shape['outputs']} rows go into shared memory by bulk copies before its PDL wait, one wave of CTAs, "
            f"so their bytes stream under {after}'s chain (the schedule `preload` alone, in the table's place)")}))
        return preload

    def last_kernel(self) -> str | None:
        """The kernel of the last launch lowered so far (None before the first)."""
        launches = [op for op in self.block.ops if isinstance(op, lane.LaunchOp)]
        return launches[-1].kernel.data if launches else None

    @lower.register
    def lower_gated_product(self, op: form.GatedProductOp) -> None:
        if self.reads_quantized(op.x, [op.gate, op.up]):
            self.q8_gated_product(op)
            return
        if self.unlinked(op, [op.gate, op.up]):
            return
        rows, width = form.shape(op.x)
        hidden = form.shape(op.gate)[0]
        name = self.sources[op.gate].weight_name.data.removesuffix(".weight")
        x = self.window(op.x)
        paired = {"width": width, "parts": (2 * hidden,), "gated": True}
        if self.tensor_cores(rows, {**paired, **pitch_of(x)}):
            # one gemm_tc launch: gate and up tiles side by side (the weights interleaved once at load,
            # PAIR_TILE rows each), SwiGLU in the epilogue: the [rows, 2 hidden] products never reach memory
            pair = self.weight([op.gate, op.up], [{"kind": "interleave", "rows": PAIR_TILE}], shape=(2 * hidden, width))
            out = self.activation(f"{name}.swiglu", (rows, hidden))
            self.gemv(x, pair, out, paired)
            self.bind(op, op.result, out, "gemm_tc")
            return
        gate, up = self.window(op.gate), self.window(op.up)
        # below GEMM_FROM_ROWS a pair leaves gated_gemv only by a gated entry of its own (above)
        if rows >= GEMM_FROM_ROWS and self.tensor_cores(rows, {"width": width, "parts": (hidden,), **pitch_of(x)}):
            # not whole pair tiles: each weight read once by gemm_tc (gated_gemv would re-read both
            # every 32 rows), then SwiGLU
            halves = []
            for which, weight in (("gate", gate), ("up", up)):
                halves.append(self.activation(f"{name}.{which}", (rows, hidden)))
                self.gemv(x, weight, halves[-1], {"width": width, "parts": (hidden,)})
            out = self.activation(f"{name}.swiglu", (rows, hidden))
            self.launch("elementwise", {"op": "swiglu", "rows": rows, "width": hidden}, [*halves, out])
            self.bind(op, op.result, out, "elementwise")
            return
        specs = self.row_specs("gated_gemv", rows, GEMV_ROWS, {"width": width, "outputs": hidden},
                               {"width": width, "hidden": hidden, **pitch_of(x)})
        self.row_products(op, "gated_gemv", specs, x, [gate, up])

    def q8_gated_product(self, op: form.GatedProductOp) -> None:
        """A gated pair by q8_0 rows reading its activation quantized: above GEMV_ROWS rows its gate
        and its up product on q8_gemm_tc (each weight read once), then the SwiGLU as an elementwise
        launch (its quantize epilogue where fuse-quant put one there), where q8_gemm_tc's facts take
        the shape; else q8_gated_gemv launches of at most Q8_GATED_ROWS rows (a warp reduces 32 sums:
        2 weights x 16 rows), each reading both weights again."""
        x = self.window(op.x)
        rows, width = x.shape[0], form.shape(op.gate)[1]
        hidden = form.shape(op.gate)[0]
        words = self.quantized_words[op.x]
        if self.q8_tensor_cores(rows, width, [hidden], words, {"gated": 1}, "gate and up on int8 tensor cores, each "
                                "read once, then the SwiGLU", ("q8_gated_gemv", Q8_GATED_ROWS)):
            self.q8_gated_gemm(op, x, hidden, words)
            return
        gate, up = self.q8_rows([op.gate], [hidden]), self.q8_rows([op.up], [hidden])
        specs = self.row_specs("q8_gated_gemv", rows, Q8_GATED_ROWS,
                               {"width": width, "outputs": hidden, "words": words},
                               {"width": width, "hidden": hidden, "words": words})
        self.row_products(op, "q8_gated_gemv", specs, x, [gate, up])

    def q8_gated_gemm(self, op: form.GatedProductOp, x: Window, hidden: int, words: int) -> None:
        """A gated pair's gate and up products on q8_gemm_tc, then silu(gate) * up by an elementwise
        launch, which writes the quantized form itself where fuse-quant put a quantize after the pair."""
        rows = x.shape[0]
        name = self.sources[op.gate].weight_name.data.removesuffix(".weight")
        halves = []
        for which, weight in (("gate", op.gate), ("up", op.up)):
            halves.append(self.activation(f"{name}.{which}", (rows, hidden)))
            self.q8_gemm([weight], [hidden], x, halves[-1], words)
        quantize = self.epilogue_words(op, op.result)
        out = self.quantized_out(name, rows, hidden, quantize) if quantize else \
            self.activation(f"{name}.swiglu", (rows, hidden))
        self.launch("elementwise", {"op": "swiglu", "rows": rows, "width": hidden,
                                    **({"quantize": quantize} if quantize else {})}, [*halves, out])
        if quantize:
            self.bind_epilogue(op.result, out, quantize, "elementwise")
        else:
            self.bind(op, op.result, out, "elementwise")

    @lower.register
    def lower_norm(self, op: form.NormOp) -> None:
        if self.unlinked(op, [op.weight]):
            return
        rows, width = form.shape(op.x)
        name = self.sources[op.weight].weight_name.data.removesuffix(".weight")
        if op.prologue is not None and op.prologue.data == "router":  # the router writes the result and sum
            self.router_norms[op.result] = op
            self.windows[op.result] = self.activation(name, (rows, width))
            if op.sum is not None:
                self.windows[op.sum] = self.activation(f"{name}.sum", (rows, width))
            return
        if op.prologue is not None and op.prologue.data == "latent":  # the absorption gemv's rider writes it
            self.latent_norms[op.result] = op
            self.windows[op.result] = self.activation(name, (rows, width))
            return
        if op.prologue is not None:  # its reader's gemv computes it: only the sum needs a buffer
            self.prologues[op.result] = op
            if op.sum is not None:
                self.windows[op.sum] = self.activation(f"{name}.sum", (rows, width))
            return
        words = self.epilogue_words(op, op.result)  # the rmsnorm writes the quantized form itself
        y = self.quantized_out(name, rows, width, words) if words else self.activation(name, (rows, width))
        # the mixture_sum before it folded in: its slots are the kernel's x (the norm's other input, if any,
        # its residual)
        summed = self.slot_sums.get(op.x) or self.slot_sums.get(op.residual)
        other = op.residual if summed and op.x in self.slot_sums else op.x
        args = [summed[0] if summed else self.window(op.x)]
        spec = {"rows": rows, "width": width, "eps": op.eps.value.data, "residual": op.residual is not None,
                **pitch_of(args[0]), **({"quantize": words} if words else {})}
        if summed:
            spec["slots"] = summed[1]
        gathered = self.embed_norms.get(op)
        if gathered is not None:  # the embed folded in: the table's rows at the tokens, written to the embed's buffer
            tokens, table, spec["gather"] = gathered
            args = [table, tokens]
        if op.residual is not None:
            args.append(self.window(other if summed else op.residual))
        args += [self.window(op.weight), y]
        if op.residual is not None:
            h = self.activation(f"{name}.sum", (rows, width))
            args.append(h)
            self.windows[op.sum] = h
        elif gathered is not None:
            args.append(self.window(op.x))
        self.launch("rmsnorm", spec, args)
        if words:
            self.bind_epilogue(op.result, y, words, "rmsnorm")
        else:
            self.bind(op, op.result, y, "rmsnorm")

    @lower.register
    def lower_elementwise(self, op: form.AddOp | form.MulOp | form.SwigluOp | form.SiluOp | form.SigmoidOp) -> None:
        if not all(form.is_float(v) for v in op.operands):
            self.no_kernel(op, "quantized")
            return
        kind = ELEMENTWISE[type(op)]
        rows, width = form.shape(op.result)
        words = self.epilogue_words(op, op.results[0])  # the elementwise kernel writes the quantized form itself
        out = self.quantized_out(kind, rows, width, words) if words else self.activation(kind, (rows, width))
        inputs = [self.contiguous(self.window(v), kind) for v in op.operands]  # elementwise reads whole rows
        self.launch("elementwise", {"op": kind, "rows": rows, "width": width, **({"quantize": words} if words else {})},
                    [*inputs, out])
        if words:
            self.bind_epilogue(op.results[0], out, words, "elementwise")
        else:
            self.bind(op, op.results[0], out, "elementwise")

    @lower.register
    def lower_all_reduce(self, op: form.AllReduceOp) -> None:
        """NCCL's all-reduce (sum) of the partial sums into a buffer of their own: NCCL reads and
        writes `count` adjacent values, so the partial sums must lie whole in one window."""
        x = self.window(op.x)
        if not x.contiguous:
            raise LoweringError(f"all_reduce of rows at strides {list(x.strides)}: NCCL sums adjacent values")
        rows, width = form.shape(op.result)
        out = self.activation("all_reduce", (rows, width), form.element(op.result))
        into = None
        if op.into is not None:  # fold-all-reduce-into-norm: the norm's launch comes next
            norm = op.next_op
            assert isinstance(norm, form.NormOp)
            other = norm.residual if norm.x is op.result else norm.x
            # all_reduce_norm reads the norm's other input as whole rows (a residual stream is; a part
            # of wider rows read in place would keep the two launches apart)
            into = "rmsnorm" if other is None or self.window(other).contiguous else None
        self.block.add_op(lane.AllReduceOp(self.arg(x), self.arg(out), op.ranks.value.data, into))
        self.after_collective = True
        self.windows[op.result] = out

    @lower.register
    def lower_argmax(self, op: form.ArgmaxOp) -> None:
        rows, vocab = form.shape(op.x)
        if op.epilogue is not None:  # the gemv that wrote its input computed it (fold-argmax-into-gemv)
            if op.result in self.argmax_epilogues:
                self.windows[op.result] = self.argmax_epilogues[op.result]
                return
            if op.result not in self.argmax_held:
                raise LoweringError("an argmax marked for its input's gemv epilogue, whose product took no gemv "
                                    "launch with one")
            self.tunings.append(("argmax", {"rows": rows, "vocab": vocab},
                                 {"epilogue": False, "why": self.argmax_held[op.result]}))
        out = self.activation("argmax", (rows,), IntegerType(32))
        self.launch("argmax", {"rows": rows, "vocab": vocab}, [self.window(op.x), out])
        self.windows[op.result] = out

    def rope_partner(self, op: form.RopeOp) -> form.RopeOp | None:
        """The rope right after `op` that turns the next part of the same row (the k part after the q
        part of one product in parts) at the same positions, frequencies and head size, where both results
        go only to attention launches (they read q and k at a pitch): the two take one launch."""
        partner = op.next_op
        if not isinstance(partner, form.RopeOp) or partner.positions is not op.positions:
            return None
        same = {k: v for k, v in op.properties.items() if k != "heads"}
        if same != {k: v for k, v in partner.properties.items() if k != "heads"}:
            return None
        if form.shape(op.x)[1] // op.heads.value.data != form.shape(partner.x)[1] // partner.heads.value.data:
            return None
        first, second = self.window(op.x), self.window(partner.x)
        if (first.buffer is not second.buffer or len(first.shape) != 2 or first.strides != second.strides
                or first.shape[0] != second.shape[0] or second.offset != first.offset + first.shape[1]
                or first.strides[1] != 1):
            return None
        readers = [use.operation for result in (op.result, partner.result) for use in result.uses]
        if not readers or not all(isinstance(reader, form.AttentionOp) for reader in readers):
            return None
        return partner

    @lower.register
    def lower_rope(self, op: form.RopeOp) -> None:
        if op in self.paired_ropes:  # turned by the launch of the rope before it
            return
        rows, width = form.shape(op.x)
        heads = op.heads.value.data
        x = self.window(op.x)  # maybe a part of a product in parts, read in place
        partner = self.rope_partner(op)
        if partner is not None:  # q's and k's heads in one launch, into one buffer whose parts they are
            self.paired_ropes.add(partner)
            more, extra = form.shape(partner.x)[1], partner.heads.value.data
            x = Window(x.buffer, x.offset, (rows, width + more), x.strides)
            self.tunings.append(("rope", {"rows": rows, "heads": f"{heads} + {extra}", "unit": width // heads},
                                 {"launch": "paired", "why": "two ropes of adjacent parts of one row at the same "
                                                             "positions and frequencies (q and k): one launch"}))
            width, heads = width + more, heads + extra
        out = self.activation("rope", (rows, width))
        spec = {"rows": rows, "heads": heads, "unit": width // heads, "rotary": op.rotary.value.data,
                "theta": op.theta.value.data, **pitch_of(x)}
        for layout in ("offset", "interleaved"):  # DeepSeek's rope: the rope part of each head, in pairs
            if op.properties.get(layout) is not None and op.properties[layout].value.data:
                spec[layout] = op.properties[layout].value.data if layout == "offset" else True
        if op.scaling is not None:  # the kernel takes the inverse frequencies the interpreter computes
            kind = op.scaling.data
            spec["scaling"] = {"kind": kind, **{name: op.properties[name].value.data
                                                for name in form.ROPE_SCALING[kind]}}
        self.launch("rope", spec, [x, self.window(op.positions), out])
        if partner is not None:
            first = form.shape(op.x)[1]
            self.windows[op.result] = Window(out.buffer, 0, (rows, first), out.strides)
            self.windows[partner.result] = Window(out.buffer, first, (rows, width - first), out.strides)
        else:
            self.windows[op.result] = out

    @lower.register
    def lower_kda(self, op: form.KdaOp) -> None:
        gate_b = [op.gate_b] if op.gate_b is not None else []
        if self.unlinked(op, [op.conv_q, op.conv_k, op.conv_v, *op.biases, op.a_log, op.dt_bias, op.norm_weight,
                              op.f_b, *gate_b]):
            return
        heads = op.heads.value.data
        rows, dim = form.shape(op.q)
        tokens = self.step.tokens.value.data
        batch = self.step.batch.value.data
        q, k, v = (self.window(x) for x in (op.q, op.k, op.v))
        pitch = q.strides[0]
        if not (k.buffer == q.buffer == v.buffer and k.offset == q.offset + dim and v.offset == q.offset + 2 * dim
                and k.strides == q.strides == v.strides):
            raise LoweringError("kda: q, k and v must be consecutive parts of one product (KdaSplit reads them "
                                "as one [rows, 3 * dim] row)")
        x = Window(q.buffer, q.offset, (rows, 3 * dim), (pitch, 1))
        width = form.shape(op.conv_q)[1]
        conv = self.weight([op.conv_q, op.conv_k, op.conv_v],
                           [{"kind": "stack", "axis": 0}, {"kind": "transpose", "axes": (0, 2, 1)}],
                           shape=(3, width, dim))
        slots_state = form.shape(op.state)[0]
        spec = {
            "heads": heads, "batch": batch, "gate_mode": KDA_GATE_MODE, "has_bias": bool(op.biases), "tokens": tokens,
            "gate_form": op.form.data, "slots": slots_state, "scale": op.scale.value.data,
            "eps": op.eps.value.data, "l2_eps": op.l2_eps.value.data, "x_pitch": pitch,
        }
        if op.lower_bound is not None:
            spec["lower_bound"] = op.lower_bound.value.data
        tuned = self.tuned("kda_split", {"heads": heads, "batch": batch, "tokens": tokens})
        spec["schedule"] = kda_schedule(heads, batch, tuned).as_dict()  # every knob: the plan shows them all
        f_a, beta, gate = self.window(op.f_a), self.window(op.beta), self.window(op.gate)
        for name, window in (("raw_gate", f_a), ("beta", beta), ("gate", gate)):
            if not window.contiguous:  # a part of the product in parts, read in place
                spec[f"{name}_pitch"] = window.strides[0]
        if gate_b:  # fold-gate-product: the output gate's product done in KdaSplit (its gate warps)
            spec["gate_rank"] = form.shape(op.gate)[1]
        words = self.epilogue_words(op, op.result)  # KdaSplit writes the quantized form itself
        out = self.quantized_out("kda", rows, dim, words) if words else self.activation("kda", (rows, dim))
        if words:
            spec["quantize"] = words
        args = [x, conv]
        if op.biases:
            args.append(self.weight(list(op.biases), [{"kind": "concatenate", "axis": 0}], shape=(3 * dim,)))
        args += [self.window(op.conv_state), f_a, beta, self.window(op.a_log),
                 self.window(op.dt_bias), self.window(op.slots), self.window(op.state), out, gate,
                 self.window(op.norm_weight), self.window(op.f_b)]
        if tokens > 1:
            assert op.accepted is not None
            args.append(self.window(op.accepted))
        args += [self.window(w) for w in gate_b]
        self.launch("kda_split", spec, args)
        if words:
            self.bind_epilogue(op.result, out, words, "kda_split")
        else:
            self.windows[op.result] = out

    # -- the linear-attention pieces where KdaSplit does not run (conv, gate, delta rule, norms) ---

    def slot_columns(self, slots: SSAValue) -> int:
        """A slot table's columns as the linear-attention kernels take them (0: a [batch] table)."""
        shape = form.shape(slots)
        return 0 if len(shape) == 1 else shape[1]

    def contiguous(self, x: Window, name: str) -> Window:
        """`x`, or its rows copied whole by a `part` launch where they lie inside wider rows (for a
        kernel that reads whole rows only)."""
        if x.contiguous:
            return x
        rows, width = x.shape
        out = self.activation(f"{name}.rows", (rows, width))
        self.launch("part", {"rows": rows, "heads": 1, "unit": width, "offset": 0, "length": width, **pitch_of(x)},
                    [x, out])
        return out

    @lower.register
    def lower_part(self, op: form.PartOp) -> None:
        rows, _ = form.shape(op.x)
        x = self.window(op.x)
        heads, length = op.heads.value.data, op.length.value.data
        out = self.activation("part", (rows, heads * length))
        self.launch("part", {"rows": rows, "heads": heads, "unit": op.unit.value.data,
                             "offset": op.offset.value.data, "length": length, **pitch_of(x)}, [x, out])
        self.windows[op.result] = out

    @lower.register
    def lower_conv(self, op: form.ConvOp) -> None:
        if self.unlinked(op, [op.weight] + ([op.bias] if op.bias is not None else [])):
            return
        if not isinstance(form.element(op.state), BFloat16Type):
            raise LoweringError(f"conv: the state holds {form.element(op.state)}; the conv kernel keeps a bf16 state")
        rows, channels = form.shape(op.x)
        state_slots, state_channels, _ = form.shape(op.state)
        tokens = self.step.tokens.value.data
        x = self.window(op.x)
        spec: dict = {"batch": rows // tokens, "tokens": tokens, "channels": channels,
                      "width": form.shape(op.weight)[1], "state_slots": state_slots, "state_channels": state_channels,
                      "offset": op.offset.value.data, "activation": op.activation.data, "bias": op.bias is not None,
                      "slot_columns": self.slot_columns(op.slots), **pitch_of(x)}
        if op.norm_heads is not None:
            spec.update(norm_heads=op.norm_heads.value.data, norm_eps=op.norm_eps.value.data)
        name = self.sources[op.weight].weight_name.data.removesuffix(".weight")
        out = self.activation(f"{name}.out", (rows, channels))
        args = [x, self.window(op.weight), *([self.window(op.bias)] if op.bias is not None else []),
                self.window(op.slots), *([self.window(op.accepted)] if op.accepted is not None else []),
                self.window(op.state), out]
        self.launch("conv", spec, args)
        self.windows[op.result] = out

    @lower.register
    def lower_kda_gate(self, op: form.KdaGateOp) -> None:
        if self.unlinked(op, [op.a_log, op.dt_bias]):
            return
        rows, width = form.shape(op.g)
        heads = op.heads.value.data
        g = self.window(op.g)
        spec: dict = {"rows": rows, "heads": heads, "size": width // heads, "form": op.form.data, **pitch_of(g, "g")}
        if op.lower_bound is not None:
            spec["lower_bound"] = op.lower_bound.value.data
        out = self.activation("kda_gate", (rows, width), Float32Type())
        self.launch("kda_gate", spec, [g, self.window(op.a_log), self.window(op.dt_bias), out])
        self.windows[op.result] = out

    @lower.register
    def lower_delta_rule(self, op: form.DeltaRuleOp) -> None:
        if not isinstance(form.element(op.state), Float32Type) or not isinstance(form.element(op.decay), Float32Type):
            raise LoweringError("delta_rule: the delta rule kernel keeps an fp32 state and reads an fp32 decay")
        rows = form.shape(op.q)[0]
        heads, key_heads = op.heads.value.data, op.key_heads.value.data
        tokens = self.step.tokens.value.data
        state_slots, _, value, key = form.shape(op.state)
        q, k, v, beta = (self.window(x) for x in (op.q, op.k, op.v, op.beta))
        spec = {"batch": rows // tokens, "tokens": tokens, "heads": heads, "key_heads": key_heads, "key": key,
                "value": value, "state_slots": state_slots, "scale": op.scale.value.data,
                "per_key": form.shape(op.decay)[1] == heads * key, "slot_columns": self.slot_columns(op.slots),
                **pitch_of(q, "q"), **pitch_of(k, "k"), **pitch_of(v, "v"), **pitch_of(beta, "beta")}
        out = self.activation("delta_rule", (rows, heads * value))
        args = [q, k, v, self.contiguous(self.window(op.decay), "delta_rule.decay"), beta, self.window(op.slots),
                *([self.window(op.accepted)] if op.accepted is not None else []), self.window(op.state), out]
        self.launch("delta_rule", spec, args)
        self.bind(op, op.result, out, "delta_rule")

    def head_norm(self, op: Operation, heads: int, eps: float, weight: SSAValue | None = None,
                  gate: SSAValue | None = None, activation: str | None = None, mean: bool = True) -> None:
        """A per-head norm (l2norm, head_norm, norm_gated) as one head_norm launch."""
        if self.unlinked(op, [weight] if weight is not None else []):
            return
        x = self.window(op.operands[0])
        rows, width = x.shape
        spec: dict = {"rows": rows, "heads": heads, "size": width // heads, "eps": eps, "mean": mean,
                      "weight": weight is not None, **pitch_of(x)}
        args = [x]
        if gate is not None:
            args.append(self.window(gate))
            spec.update(gate=activation, **pitch_of(args[-1], "gate"))
        if weight is not None:
            args.append(self.window(weight))
        kind = op.name.removeprefix("form.")
        words = self.epilogue_words(op, op.results[0])  # a norm_gated writes the quantized form itself
        out = self.quantized_out(kind, rows, width, words) if words else self.activation(kind, (rows, width))
        self.launch("head_norm", {**spec, **({"quantize": words} if words else {})}, [*args, out])
        if words:
            self.bind_epilogue(op.results[0], out, words, "head_norm")
        else:
            self.bind(op, op.results[0], out, "head_norm")

    @lower.register
    def lower_l2norm(self, op: form.L2NormOp) -> None:
        self.head_norm(op, op.heads.value.data, op.eps.value.data, mean=False)

    @lower.register
    def lower_head_norm(self, op: form.HeadNormOp) -> None:
        self.head_norm(op, op.heads.value.data, op.eps.value.data, weight=op.weight)

    @lower.register
    def lower_norm_gated(self, op: form.NormGatedOp) -> None:
        self.head_norm(op, op.heads.value.data, op.eps.value.data, weight=op.weight, gate=op.gate,
                       activation=op.activation.data)

    @lower.register
    def lower_mixture(self, op: form.MixtureOp) -> None:
        """Three launches: the router (the chosen ids and routing weights, plan buffers that stay on
        the device), the kept experts' gated pairs (the folded shared expert as one more warp of
        the block) and their down products, weighted and summed into the result."""
        if op.rows is not None:  # hold-mixture-shared refuses it first; the kernels never scatter
            self.no_kernel(op, "a scatter to rows a parameter names")
            return
        if self.unlinked(op, [op.router, op.gate, op.up, op.down, *op.shared]):
            return
        rows, width = form.shape(op.x)
        experts, hidden = form.shape(op.gate)[:2]
        top_k = op.top_k.value.data
        shared_hidden = form.shape(op.shared[0])[0] if op.shared else 0
        x = self.window(op.x)
        name = self.sources[op.router].weight_name.data.removesuffix(".weight").removesuffix(".gate")
        ids = self.activation(routing_buffer(self.sources[op.router].weight_name.data), (rows, top_k),
                              IntegerType(32))
        routing = self.activation(f"{name}.routing", (rows, top_k), Float32Type())
        grouped = {} if op.groups is None or op.topk_groups is None else \
            {"groups": op.groups.value.data, "topk_groups": op.topk_groups.value.data}
        router = {"rows": rows, "width": width, "experts": experts, "top_k": top_k, "scoring": op.scoring.data,
                  "renormalize": bool(op.renormalize.value.data), "routed_scaling": op.routed_scaling.value.data,
                  "correction": op.correction is not None, **grouped, **pitch_of(x)}
        correction = [self.window(op.correction)] if op.correction is not None else []
        shape = {"rows": rows, "width": width, "hidden": hidden, "experts": experts, "top_k": top_k,
                 "shared_hidden": shared_hidden}
        if self.grouped_rows is not None and rows > self.grouped_rows:
            segments = self.route(op, router, name, x, correction, ids, routing, grouped=True)
            gated = make_kernel("mixture_grouped_gated", {**shape, **pitch_of(x)})  # its block, stages and grid
            block, stage_k, spread, compact = gated.padded_rows, gated.stage_k, gated.spread, gated.compact
            stages = mixture_group_stages(block, stage_k, gated.swizzle)  # None: what the budget holds
            self.tunings.append(("mixture", shape, {
                "path": "grouped", "group_rows": block, "stage_k": stage_k, "compact": compact,
                "swizzle": gated.swizzle, **({"spread": True} if spread else {}),
                "why": f"{rows} rows are above {self.grouped_rows}: rows grouped by expert, tensor cores in blocks "
                       f"of {block} rows (a segment's mean is {rows * top_k / experts:.1f} rows), "
                       + (f"{stages} stages of " if stages else "")
                       + f"{stage_k} K values, their rows " + ("swizzled (MIXTURE_GROUP_SWIZZLE), "
                                                              if gated.swizzle else "padded, ")
                       + ("each block of a segment a CTA of its own, side by side (MIXTURE_GROUP_SPREAD_ROWS)"
                          if spread else "the chosen experts' CTAs first (MIXTURE_GROUP_COMPACT_ROWS)" if compact
                          else "the grid in expert order")}))
            self.grouped_mixture(op, x, ids, routing, name, shape, segments[:2])
            return
        between = self.activation(f"{name}.hidden", (rows, top_k * hidden + shared_hidden))
        shared = [self.window(w) for w in op.shared]
        in_router, why_shared = self.shared_in_router(router, shape)
        before_wait, norm_in, why_early = ({}, [], None) if in_router else self.shared_before_wait(op, router, shape)
        if why_shared is not None:  # where the shared expert runs, for `explain`
            self.tunings.append(("shared_expert", shape, {
                "launch": "mixture_router" if in_router else "mixture_gated",
                **({"before_wait": True} if why_early else {}), "why": why_early or why_shared}))
        ready = None  # the router's flags a row, which mixture_gated acquires in place of its PDL wait
        fused = router_gemm_spec(rows, width, experts, router.get("x_pitch")) is None
        if MIXTURE_READY_FLAG and not in_router and fused:
            ready = self.activation(f"{name}.ready", (rows,), IntegerType(32))
            self.tunings.append(("mixture_gated", shape, {
                "ready": True, "why": "MIXTURE_READY_FLAG: mixture_gated acquires the router's flag a row, raised once "
                "the row's ids are stored, in place of waiting for the router's grid to end"}))
        self.route(op, router, name, x, correction, ids, routing,
                   shared=(shared[:2], between, hidden, shared_hidden) if in_router else None, ready=ready)
        why = ("the grouped path is off (MIXTURE_GROUPED_ROWS None; --grouped-experts takes it)"
               if self.grouped_rows is None else f"{rows} rows are at most {self.grouped_rows}: the per-row "
               "kernels read each chosen expert once a row, faster than grouping so few")
        self.tunings.append(("mixture", shape, {"path": "per-row", "why": why}))
        early = MIXTURE_DOWN_EARLY_ROWS is not None and rows <= MIXTURE_DOWN_EARLY_ROWS
        experts_spec = {"rows": rows, "width": width, "hidden": hidden, "experts": experts, "top_k": top_k,
                        "shared_hidden": shared_hidden, **pitch_of(x), **({"early": True} if early else {})}
        self.launch("mixture_gated", {**experts_spec, **({"shared_in_router": True} if in_router else {}),
                                      **before_wait, **({"ready": True} if ready is not None else {}),
                                      **self.tuned("mixture_gated", shape)},
                    [x, ids, self.window(op.gate), self.window(op.up), *([] if in_router else shared[:2]), *norm_in,
                     between, *([ready] if ready is not None else [])])
        out = self.activation(f"{name}.out", (rows, width))
        gated = len(shared) == 4  # the shared expert's sigmoid gate row reads x
        early_weights, why = down_early_weights(rows, hidden, shared_hidden, early, ready is not None)
        if why:
            self.tunings.append(("down_early", shape, {"early_weights": early_weights, "why": why}))
        self.launch("mixture_down", {**experts_spec, "shared_gate": gated, **self.tuned("mixture_down", shape),
                                     **({"early_weights": True} if early_weights else {})},
                    [*([x] if gated else []), between, ids, routing, self.window(op.down), *shared[2:3],
                     *shared[3:], out])
        self.windows[op.result] = out

    def shared_in_router(self, router: dict, shape: dict) -> tuple[bool, str | None]:
        """Whether the per-row path's router launch also runs the shared expert's gated pair
        (ROUTER_SHARED_ROWS: a fused router of a row a cluster, at most that many rows), and why (None:
        the mixture has no shared expert)."""
        rows = router["rows"]
        if not shape["shared_hidden"]:
            return False, None
        if ROUTER_SHARED_ROWS is None:
            why = "ROUTER_SHARED_ROWS is None (the router's launch running it measured slower): a warp of the block"
        elif rows > ROUTER_SHARED_ROWS:
            why = f"{rows} rows are above ROUTER_SHARED_ROWS ({ROUTER_SHARED_ROWS}): a warp of the block"
        elif router_gemm_spec(rows, router["width"], router["experts"], router.get("x_pitch")) is not None:
            why = "the router's logits are a gemm_tc launch's: a warp of the block"
        elif make_kernel("mixture_router", router).rows_a_cta != 1:
            why = "the router scores several rows a cluster: a warp of the block"
        else:
            return True, (f"{rows} rows are at most ROUTER_SHARED_ROWS ({ROUTER_SHARED_ROWS}): the shared expert's "
                          "gated pair runs in the router's launch, in clusters beside the router's (its SMs idle "
                          "while the router chooses), and mixture_gated reads the routed experts only")
        return False, why

    def shared_before_wait(self, op: form.MixtureOp, router: dict, shape: dict) -> tuple[dict, list, str | None]:
        """Whether mixture_gated's shared warp dots its units before the PDL wait (MIXTURE_EARLY_SHARED_ROWS):
        where the fused router norms the mixture's input, the warp norms the router's own input itself (those
        rows were complete when the router passed its wait; `place_releases` then has the router release this
        launch only after it). Returns the launch's spec entries, its extra inputs (the norm's x, residual and
        weight) and why ({}, [] and None where it is not taken)."""
        norm = self.router_norms.get(op.x)
        rows = router["rows"]
        if not shape["shared_hidden"] or norm is None or MIXTURE_EARLY_SHARED_ROWS is None \
                or rows > MIXTURE_EARLY_SHARED_ROWS or router_gemm_spec(rows, router["width"], router["experts"],
                                                                         router.get("x_pitch")) is not None:
            return {}, [], None
        norm_in = [self.window(norm.x), *([self.window(norm.residual)] if norm.residual is not None else [])]
        if not all(w.contiguous for w in norm_in):
            return {}, [], None  # the warp reads whole rows in place
        first = "" if MIXTURE_EARLY_SHARED_CTAS is None else \
            f" in the first {MIXTURE_EARLY_SHARED_CTAS} CTAs of a row (MIXTURE_EARLY_SHARED_CTAS: the first wave)"
        why = (f"{rows} rows are at most MIXTURE_EARLY_SHARED_ROWS ({MIXTURE_EARLY_SHARED_ROWS}): the shared warp "
               f"norms the router's input and dots its {MIXTURE_EARLY_SHARED_UNITS} units a warp before the PDL "
               f"wait{first}, while the router chooses; the router releases it after its own wait")
        spec = {"early_shared": True, "residual": norm.residual is not None, "eps": norm.eps.value.data,
                "shared_units": MIXTURE_EARLY_SHARED_UNITS,
                **({"early_ctas": MIXTURE_EARLY_SHARED_CTAS} if MIXTURE_EARLY_SHARED_CTAS is not None else {})}
        return spec, [*norm_in, self.window(norm.weight)], why

    def route(self, op: form.MixtureOp, router: dict, name: str, x: Window, correction: list[Window], ids: Window,
              routing: Window, grouped: bool = False, shared: tuple | None = None,
              ready: Window | None = None) -> list[Window]:
        """The router's launches: from ROUTER_GEMM_ROWS rows the logits as one gemm_tc launch (fp32,
        the router rows read once for every row) and mixture_router choosing from them, a warp a
        row; else the fused router (its clusters dot and choose; on the `grouped` path it writes the
        segments too where `router_segments` has it; with `shared`, (the shared gate and up windows,
        the hidden values, the routed and the shared units), it runs the shared expert's gated pair
        too: `shared_in_router`; with `ready`, the mixture's flags a row, its last tensor: MIXTURE_READY_FLAG).
        Returns the segments it wrote (none: the grouped path's mixture_groups launch writes them)."""
        shape = {"rows": router["rows"], "width": router["width"], "experts": router["experts"]}
        gemm = router_gemm_spec(router["rows"], router["width"], router["experts"], router.get("x_pitch"))
        norm = self.router_norms.get(op.x)
        if gemm is None:
            pairs = router["rows"] * router["top_k"]
            segments = self.router_segments(router, name, pairs, router["experts"]) if grouped else []
            fused = {**router, "rows_a_cta": make_kernel("mixture_router", router).rows_a_cta}
            self.tunings.append(("mixture_router", shape, {
                "rows_a_cta": fused["rows_a_cta"], "why": router_block_reason(router["rows"], fused["rows_a_cta"])}))
            rows_in, rows_out = [x], []
            if norm is not None:  # fold-norm-into-router: the norm's input in, its result and sum out
                rows_in = [self.window(norm.x), *([self.window(norm.residual)] if norm.residual is not None else []),
                           self.window(norm.weight)]
                rows_out = [x, *([self.window(norm.sum)] if norm.sum is not None else [])]
                fused = {**{k: v for k, v in fused.items() if k != "x_pitch"}, **pitch_of(rows_in[0]), "norm": True,
                         "eps": norm.eps.value.data, "residual": norm.residual is not None}
            extra, pair = {}, []
            if shared is not None:
                windows, between, hidden, shared_hidden = shared
                extra, pair = {"shared_hidden": shared_hidden, "expert_hidden": hidden}, [*windows, between]
            elif not grouped:
                extra, pair = self.prefetch_chosen(op, fused, shape)
            if ready is not None:
                extra, pair = {**extra, "ready": True}, [*pair, ready]
            self.launch("mixture_router", {**fused, **({"segments": True} if segments else {}), **extra},
                        [*rows_in, self.window(op.router), *correction, ids, routing, *rows_out, *segments, *pair])
            return segments
        if norm is not None:
            raise ValueError(f"{norm.name}: fold-norm-into-router marked it, but the router's logits are a gemm_tc "
                             "launch's (the rule and the lowering disagree)")
        logits = self.activation(f"{name}.logits", (router["rows"], router["experts"]), Float32Type())
        tuned = self.tuned("gemm_tc", self.product_shape(router["rows"], gemm))
        self.launch("gemm_tc", {**gemm, **tuned}, [x, self.window(op.router), logits])
        choose = {k: v for k, v in router.items() if k != "x_pitch"}
        self.tunings.append(("mixture_router", shape, {
            "logits": "gemm_tc", "why": f"{router['rows']} rows are at least ROUTER_GEMM_ROWS ({ROUTER_GEMM_ROWS}): "
            "the logits one gemm_tc launch (the router rows read once), mixture_router only chooses"}))
        self.launch("mixture_router", {**choose, "logits": True}, [logits, *correction, ids, routing])
        return []

    def prefetch_chosen(self, op: form.MixtureOp, router: dict, shape: dict) -> tuple[dict, list]:
        """Whether the per-row path's fused router brings its chosen experts' first gate and up rows into L2
        (ROUTER_PREFETCH_ROWS, over a cluster: every CTA chooses and prefetches its share of the (row, expert,
        matrix) triples, ROUTER_PREFETCH_BYTES at most): the router's spec entries and its extra inputs
        (mixture_gated's gate and up), with a note for `explain` where it is taken ({} and [] where not)."""
        rows, width, top_k = router["rows"], router["width"], router["top_k"]
        if ROUTER_PREFETCH_ROWS is None or rows > ROUTER_PREFETCH_ROWS:
            return {}, []
        kernel = make_kernel("mixture_router", router)
        hidden = form.shape(op.gate)[1]
        triples = -(-kernel.rows_a_cta * top_k * 2 // kernel.split)  # a CTA's
        units = min(hidden, ROUTER_PREFETCH_BYTES // (triples * width * 2))
        if not kernel.pushes() or units < 1:
            return {}, []
        self.tunings.append(("mixture_router", shape, {
            "prefetch_units": units, "why": f"{rows} rows are at most ROUTER_PREFETCH_ROWS ({ROUTER_PREFETCH_ROWS}): "
            f"each CTA of the router's cluster chooses too and brings the first {units} rows of its share of the "
            f"chosen experts' gate and up into L2 ({triples} a CTA, at most ROUTER_PREFETCH_BYTES), while "
            "mixture_gated waits for the router's end"}))
        spec = {"prefetch_units": units, "expert_hidden": hidden, "prefetch_spread": True}
        return spec, [self.window(op.gate), self.window(op.up)]

    @staticmethod
    def sum_in_norm(op: form.MixtureOp) -> bool:
        """Whether the grouped mixture's slots are summed by the norm after it (MIXTURE_SUM_IN_NORM): its
        result's only reader is a norm, as its x, or as its residual where the norm's x is another norm's sum
        (h = x + residual is the same sum either way round; the kernel reads its residual as whole rows), and
        that norm is an rmsnorm launch of its own (not in a reader's prologue) writing bf16 (the slots with a
        quantize epilogue are not measured)."""
        readers = list(op.result.uses)
        if not MIXTURE_SUM_IN_NORM or len(readers) != 1 or not isinstance(readers[0].operation, form.NormOp):
            return False
        norm = readers[0].operation
        if norm.prologue is not None or norm.quantize_words():
            return False
        # as the residual, the norm's x becomes the kernel's residual, read whole rows: a norm's sum
        return norm.x is op.result or (norm.residual is op.result and isinstance(norm.x.owner, form.NormOp))

    def router_segments(self, router: dict, name: str, pairs: int, experts: int) -> list[Window]:
        """Where the router writes the grouped path's segments (ROUTER_SEGMENTS, and mixture_groups'
        warps fit its CTA): [starts, order, tickets], plan buffers; else none (mixture_groups
        writes them, `grouped_mixture`)."""
        if not ROUTER_SEGMENTS:
            return []
        try:
            make_kernel("mixture_router", {**router, "segments": True})
        except ValueError as refused:
            self.tunings.append(("mixture_groups", {"pairs": pairs, "experts": experts}, {
                "launch": "own", "why": f"the router cannot write the segments: {refused}"}))
            return []
        self.tunings.append(("mixture_groups", {"pairs": pairs, "experts": experts}, {
            "launch": "router",
            "why": "ROUTER_SEGMENTS: the router's last cluster writes the segments, one launch fewer"}))
        return [self.activation(f"{name}.starts", (experts + 1,), IntegerType(32)),
                self.activation(f"{name}.order", (pairs,), IntegerType(32)),
                self.activation(f"{name}.segments_ticket", (1,), IntegerType(32))]

    def grouped_mixture(self, op: form.MixtureOp, x: Window, ids: Window, routing: Window, name: str,
                        shape: dict, segments: Sequence[Window] = ()) -> None:
        """The grouped path after the router (mixture_grouped.py): the pairs grouped by expert
        (`segments`, starts and order, where the router wrote them; else a mixture_groups launch
        writes them, plan buffers), the gated pairs and the down products on tensor cores, one
        expert's rows at a time (the folded shared expert's blocks more grid rows), and the sum of a
        row's slots."""
        rows, width, hidden, experts, top_k, shared_hidden = (shape[k] for k in ("rows", "width", "hidden", "experts",
                                                                                  "top_k", "shared_hidden"))
        pairs, slots = rows * top_k, top_k + (1 if shared_hidden else 0)
        if segments:
            starts, order = segments
        else:
            starts = self.activation(f"{name}.starts", (experts + 1,), IntegerType(32))
            order = self.activation(f"{name}.order", (pairs,), IntegerType(32))
            self.launch("mixture_groups", {"rows": rows, "experts": experts, "top_k": top_k}, [ids, starts, order])
        shared = [self.window(w) for w in op.shared]
        between = self.activation(f"{name}.hidden", (pairs, hidden))
        shared_between = [self.activation(f"{name}.shared_hidden", (rows, shared_hidden))] if shared_hidden else []
        self.launch("mixture_grouped_gated", {**shape, **pitch_of(x)},
                    [x, starts, order, self.window(op.gate), self.window(op.up), *shared[:2], between,
                     *shared_between])
        partial = self.activation(f"{name}.partial", (rows * slots, width), Float32Type())
        self.launch("mixture_grouped_down", shape,
                    [between, starts, order, routing, self.window(op.down), *shared_between, *shared[2:3], partial])
        gated = len(shared) == 4  # the shared expert's sigmoid gate row reads x
        if not gated and self.sum_in_norm(op):
            self.slot_sums[op.result] = (partial, slots)
            self.tunings.append(("mixture_sum", {"rows": rows, "width": width, "slots": slots}, {
                "launch": "rmsnorm", "why": "MIXTURE_SUM_IN_NORM: the norm after the mixture sums its slots where it "
                "reads x, no mixture_sum launch"}))
            return
        out = self.activation(f"{name}.out", (rows, width))
        self.launch("mixture_sum", {"rows": rows, "width": width, "top_k": top_k, "shared": bool(shared_hidden),
                                    "shared_gate": gated, **(pitch_of(x) if gated else {})},
                    [*([x] if gated else []), partial, *shared[3:], out])
        self.windows[op.result] = out

    @lower.register
    def lower_attention(self, op: form.AttentionOp) -> None:
        heads, kv_heads = op.heads.value.data, op.kv_heads.value.data
        rows, width = form.shape(op.q)
        head, value_head = width // heads, form.shape(op.v)[1] // kv_heads
        if value_head != head:
            raise LoweringError(f"attention: values of {value_head} a head beside keys of {head}: the attention "
                                "kernel reads one head size for both")
        for name, cache in (("key", op.k_cache), ("value", op.v_cache)):
            if not isinstance(form.element(cache), BFloat16Type):
                raise LoweringError(f"attention: the {name} cache holds {form.element(cache)}; the attention kernel "
                                    "keeps a bf16 cache")
        cache_pages, page_size = form.shape(op.k_cache)[:2]
        batch, max_pages = form.shape(op.pages)
        tokens = self.step.tokens.value.data
        q, k, v = (self.window(x) for x in (op.q, op.k, op.v))
        spec: dict = {"batch": batch, "tokens": tokens, "heads": heads, "kv_heads": kv_heads, "head": head,
                      "page_size": page_size, "max_pages": max_pages, "cache_pages": cache_pages}
        for name, window in (("q", q), ("k", k), ("v", v)):
            spec.update(pitch_of(window, name))
        # the split count is the lane's decision from the cache capacity a request may reach; the
        # shape, the count and why go to the tunings `lanec explain` prints
        context = max_pages * page_size
        splits, clustered = gqa_chunks(batch, heads, kv_heads, context, head)
        why = splits_reason(splits, batch=batch, heads=heads, kv_heads=kv_heads, context=context, head=head)
        if clustered:  # no attention_combine launch
            why += (f"; the chunks meet in the launch's cluster: at most {CLUSTER_COMBINE_CTAS} CTAs "
                    "(CLUSTER_COMBINE_CTAS, measured)")
        self.tunings.append(("attention", {"batch": batch, "tokens": tokens, "heads": heads, "kv_heads": kv_heads,
                                           "head": head, "context": context}, {"splits": splits, "why": why}))
        AttentionSpec(**spec, splits=splits).check()  # the kernel's facts, named before any kernel is built
        args = [q, k, v, self.window(op.positions), self.window(op.pages), self.window(op.k_cache),
                self.window(op.v_cache)]
        spec.update(splits=splits, scale=op.scale.value.data)
        if clustered:
            spec["schedule"] = {"combine": "cluster"}
        words = op.quantize_words()
        if words and clustered:  # fuse-quant's epilogue: the cluster's merge writes the quantized rows
            out = self.quantized_out("attention", rows, heads * head, words)
            self.attend("attention", {**spec, "quantize": words}, args, out, "attention", heads, head, splits)
            self.bind_epilogue(op.result, out, words, "attention")
            return
        out = self.activation("attention", (rows, heads * head))
        self.attend("attention", spec, args, out, "attention", heads, head, splits)
        self.bind(op, op.result, out, "attention",
                  "which it has only where its chunks meet in its cluster: "
                  + ("one chunk stores from the MMA's fragments" if splits == 1 else
                     f"its {splits} chunks merge in an attention_combine launch"))

    def attend(self, kernel: str, spec: dict, args: list, out: Window, name: str, heads: int, width: int,
               splits: int) -> None:
        """An attention launch into `out` [rows, heads x width]; split, each chunk's partial softmax
        result and log-sum-exp (`name`.partial / .lse), merged by attention_combine, or by the
        attention's own cluster where its schedule says combine 'cluster'."""
        rows = out.shape[0]
        schedule = spec.get("schedule") or {}
        if splits == 1 or schedule.get("combine") == "cluster":
            self.launch(kernel, spec, [*args, out])
            return
        partials = schedule.get("partials", "float32")  # the chunks' rows: fp32, or bf16 (LATENT_PARTIALS)
        partial = self.activation(f"{name}.partial", (splits, rows, heads, width),
                                  BFloat16Type() if partials == "bfloat16" else Float32Type())
        lse = self.activation(f"{name}.lse", (splits, rows, heads), Float32Type())
        self.launch(kernel, spec, [*args, partial, lse])
        combine = {"rows": rows, "heads": heads, "head": width, "splits": splits}
        if partials != "float32":
            combine["partials"] = partials
        self.launch("attention_combine", combine, [partial, lse, out])

    @lower.register
    def lower_latent_attention(self, op: form.LatentAttentionOp) -> None:
        """Absorbed: each head's nope part of the query absorbed into the latent space (a per-head
        gemv by kv_b's key half, transposed once at load), the attention over the latent cache row
        (`latent_attention`, read once for all heads; split-KV as `attention`), and its latent
        values expanded by kv_b's value half (a per-head gemv)."""
        if self.unlinked(op, [op.kv_b]):
            return
        latent = Latent.of(op)
        heads, nope, rope, lora, v = latent.heads, latent.nope, latent.rope, latent.lora, latent.v
        if not isinstance(form.element(op.cache), BFloat16Type):
            raise LoweringError(f"latent_attention: the cache holds {form.element(op.cache)}; the latent attention "
                                "kernel keeps a bf16 cache")
        if op.path is not None and op.path.data == "expanded":
            self.lower_expanded_latent(op, latent)
            return
        rows = form.shape(op.qr)[0]
        cache_pages, page_size, _ = form.shape(op.cache)
        batch, max_pages = form.shape(op.pages)
        tokens = self.step.tokens.value.data
        halves = [{"kind": "reshape", "shape": (heads, nope + v, lora)}]
        key = self.weight([op.kv_b], halves + [
            {"kind": "slice", "axis": 1, "start": 0, "stop": nope},
            {"kind": "transpose", "axes": (0, 2, 1)},
            {"kind": "reshape", "shape": (heads * lora, nope)}], shape=(heads * lora, nope))
        value = self.weight([op.kv_b], halves + [
            {"kind": "slice", "axis": 1, "start": nope, "stop": nope + v},
            {"kind": "reshape", "shape": (heads * v, lora)}], shape=(heads * v, lora))
        qr = self.window(op.qr)
        absorbed = self.activation("latent_attention.query", (rows, heads * lora))
        rider, riding = {}, []
        norm = self.latent_norms.get(op.latent)
        if norm is not None:  # fold-norm-into-latent: the latent row's norm in a CTA more a row of this gemv
            norm_x = self.window(norm.x)
            rider = {"rider_width": form.shape(norm.x)[1], "rider_eps": norm.eps.value.data,
                     **pitch_of(norm_x, "rider_x")}
            riding = [norm_x, self.window(norm.weight), self.window(op.latent)]
        self.gemv(qr, key, absorbed, {"width": nope, "parts": (heads * lora,), "per_head": (heads, nope + rope, 0),
                                      **rider}, epilogue=riding)
        context = max_pages * page_size
        shape = {"batch": batch, "tokens": tokens, "heads": heads, "lora": lora, "rope": rope, "context": context}
        # the cut (chunks, rows a block) `latent_cut` fits, or a measured table entry's splits and knobs
        splits, block_rows, why = latent_cut(batch, heads, tokens, context, lora)
        knobs = {"block_rows": block_rows} if block_rows else {}
        tuned = self.schedules("latent_attention", shape)
        if tuned:
            knobs = dict(tuned.get("schedule", {}))
            splits = tuned.get("splits", splits)
            why = f"{splits} chunks, {knobs or 'no knobs'}: the schedule table's entry for the shape"
        why = f"{why}; {latent_engine_reason(heads * tokens, context, splits, knobs.get('block_rows'))}"
        clustered = latent_cluster_combine(splits, batch=batch, heads=heads, tokens=tokens,
                                           block_rows=knobs.get("block_rows"))
        if clustered:  # no attention_combine launch
            why += (f"; the chunks meet in the launch's cluster: at most {lane_facts.LATENT_CLUSTER_COMBINE_CTAS} "
                    "CTAs (LATENT_CLUSTER_COMBINE_CTAS)")
        # the chunks' rows for attention_combine: fp32, or bf16 on the wgmma engine (LATENT_PARTIALS)
        partials = LATENT_PARTIALS if splits > 1 and not clustered and LATENT_ENGINE == "wgmma" else "float32"
        if partials != "float32":
            why += f"; its chunks' rows {partials} (LATENT_PARTIALS)"
        self.tunings.append(("latent_attention", shape, {"splits": splits, "why": why, **tuned}))
        spec: dict = {"batch": batch, "tokens": tokens, "heads": heads, "lora": lora, "rope": rope,
                      "page_size": page_size, "max_pages": max_pages, "cache_pages": cache_pages, "splits": splits,
                      "nope": nope, "scale": op.scale.value.data}
        if clustered:
            knobs.update(engine="wgmma", combine="cluster")
        elif partials != "float32":
            knobs["partials"] = partials
        if knobs:
            spec["schedule"] = knobs
        latent_in, k_rope = self.window(op.latent), self.window(op.k_rope)
        spec.update(pitch_of(latent_in, "latent"))
        args = [absorbed]
        if rope:
            spec.update(pitch_of(qr, "qr"), **pitch_of(k_rope, "k_rope"))
            args += [qr, latent_in, k_rope]
        else:
            args.append(latent_in)
        args += [self.window(op.positions), self.window(op.pages), self.window(op.cache)]
        out = self.activation("latent_attention", (rows, heads * v))
        expand = {"width": lora, "parts": (heads * v,), "per_head": (heads, lora, 0)}
        merged = self.combine_in_gemv(rows, splits, partials, clustered, expand)
        if merged:  # the chunks merged in the value gemv's prologue: no attention_combine launch
            partial = self.activation("latent_attention.partial", (splits, rows, heads, lora),
                                      BFloat16Type() if partials == "bfloat16" else Float32Type())
            lse = self.activation("latent_attention.lse", (splits, rows, heads), Float32Type())
            self.launch("latent_attention", spec, [*args, partial, lse])
            shape = {"rows": rows, "width": lora, "outputs": heads * v}
            self.launch("gemv", self.preloaded(shape, merged, merged), [partial, lse, value, out])
        else:
            values = self.activation("latent_attention.values", (rows, heads * lora))
            self.attend("latent_attention", spec, args, values, "latent_attention", heads, lora, splits)
            self.gemv(values, value, out, expand)
        self.windows[op.result] = out

    def combine_in_gemv(self, rows: int, splits: int, partials: str, clustered: bool, expand: dict) -> dict | None:
        """The value gemv's spec with the split latent attention's chunks merged in its prologue
        (LATENT_COMBINE_IN_GEMV), where one CUDA-core gemv launch expands the values; else None (the
        combine a launch of its own, or none: one chunk, or merged in the attention's cluster). Noted for
        `explain` where the attention is split."""
        if splits == 1 or clustered:
            return None
        shape = {"rows": rows, "splits": splits}
        if not LATENT_COMBINE_IN_GEMV:
            why = "LATENT_COMBINE_IN_GEMV is off: attention_combine's launch merges the chunks"
        elif rows > GEMV_ROWS or self.tensor_cores(rows, expand):
            why = f"{rows} rows: the values are expanded by gemm_tc, attention_combine's launch merges the chunks"
        else:
            tuned = self.tuned("gemv", {"rows": rows, "width": expand["width"], "outputs": sum(expand["parts"])})
            spec = {"rows": rows, **expand, "combine_splits": splits, "combine_partials": partials, **tuned}
            try:
                make_kernel("gemv", spec)
            except ValueError as refused:  # the tensor-core path (from GEMV_TENSOR_CORE_ROWS rows): a launch
                why = f"attention_combine's launch merges the chunks: {refused}"
            else:
                self.tunings.append(("latent_combine", shape, {
                    "launch": "gemv", "why": f"{splits} chunks merged in the value gemv's prologue, each thread its "
                                             "head's slices (LATENT_COMBINE_IN_GEMV): no attention_combine launch"}))
                return spec
        self.tunings.append(("latent_combine", shape, {"launch": "attention_combine", "why": why}))
        return None


    def lower_expanded_latent(self, op: form.LatentAttentionOp, latent: Latent) -> None:
        """Expanded: `latent_expand` writes the step's latent rows into the cache and expands every
        cached latent into per-head keys and values (scratch caches paged as the latent cache, by
        kv_b transposed per head once at load), then `expanded_attention` attends a head a CTA
        (split-KV and the combine as `attention`)."""
        heads, nope, rope, lora, v = latent.heads, latent.nope, latent.rope, latent.lora, latent.v
        rows = form.shape(op.qr)[0]
        cache_pages, page_size, _ = form.shape(op.cache)
        batch, max_pages = form.shape(op.pages)
        tokens = self.step.tokens.value.data
        shape = {"batch": batch, "tokens": tokens, "heads": heads, "nope": nope, "rope": rope, "v": v,
                 "page_size": page_size, "max_pages": max_pages, "cache_pages": cache_pages}
        spec = ExpandedLatentSpec(**shape, lora=lora)
        spec.check()  # the kernels' facts, named before any kernel is built
        w = self.weight([op.kv_b], [{"kind": "reshape", "shape": (heads, nope + v, lora)},
                                    {"kind": "transpose", "axes": (0, 2, 1)},
                                    {"kind": "reshape", "shape": (heads * lora, nope + v)}],
                        shape=(heads * lora, nope + v))
        keys = self.activation("latent_attention.keys", (cache_pages, page_size, heads, spec.key_width))
        values = self.activation("latent_attention.expanded_values", (cache_pages, page_size, heads, v))
        latent_in, k_rope, qr = self.window(op.latent), self.window(op.k_rope), self.window(op.qr)
        positions, pages = self.window(op.positions), self.window(op.pages)
        expand = {**shape, "lora": lora, **pitch_of(latent_in, "latent")}
        args = [latent_in]
        if rope:
            expand.update(pitch_of(k_rope, "k_rope"))
            args.append(k_rope)
        self.launch("latent_expand", expand, [*args, positions, pages, w, self.window(op.cache), keys, values])
        context = max_pages * page_size
        splits = attention_splits(batch, heads, heads, context, expanded=True)
        why = splits_reason(splits, batch=batch, heads=heads, kv_heads=heads, context=context, expanded=True)
        self.tunings.append(("expanded_attention", {"batch": batch, "tokens": tokens, "heads": heads,
                                                    "head": spec.key_width, "context": context},
                             {"splits": splits, "why": why}))
        attend = {**shape, "splits": splits, "scale": op.scale.value.data, **pitch_of(qr, "qr")}
        args = [qr, positions, pages, keys, values]
        out = self.activation("latent_attention", (rows, heads * v))
        self.attend("expanded_attention", attend, args, out, "latent_attention", heads, v, splits)
        self.windows[op.result] = out


def per_head_on_tensor_cores(rows: int, spec: dict) -> tuple[bool, str]:
    """Whether a per-head product of `rows` rows (`spec`: gemv's, whose shape gemm_tc's facts take) runs
    on gemm_tc's wgmma engine (GEMM_PER_HEAD_FROM), and why."""
    if spec.get("rider_width"):
        return False, "a norm rides in its gemv launch (fold-norm-into-latent): gemv"
    if GEMM_PER_HEAD_FROM is None or rows < GEMM_PER_HEAD_FROM:
        return False, (f"{rows} rows, below GEMM_PER_HEAD_FROM ({GEMM_PER_HEAD_FROM}): gemv"
                       if GEMM_PER_HEAD_FROM is not None else "GEMM_PER_HEAD_FROM is off: gemv")
    return True, (f"{rows} rows from GEMM_PER_HEAD_FROM ({GEMM_PER_HEAD_FROM}): gemm_tc, each weight tile inside one "
                  "head, the weight read once for every row")


def gemv_row_blocks(rows: int, epilogue: bool) -> tuple[int, str | None]:
    """The blocks of GEMV_ROWS rows one gemv launch takes for a product of `rows` rows that runs on gemv
    (GEMV_ROW_BLOCKS_FROM; 1: a launch a block), and why (None where nothing is to say)."""
    if rows <= GEMV_ROWS or GEMV_ROW_BLOCKS_FROM is None:
        return 1, None
    if rows < GEMV_ROW_BLOCKS_FROM:
        return 1, (f"{rows} rows are below GEMV_ROW_BLOCKS_FROM ({GEMV_ROW_BLOCKS_FROM}): a launch a block of "
                   f"{GEMV_ROWS}")
    if rows % GEMV_ROWS or epilogue:
        return 1, (f"{rows} rows are not whole blocks of {GEMV_ROWS}" if rows % GEMV_ROWS else
                   "its epilogue's tensors are one launch's") + ": a launch a block"
    return rows // GEMV_ROWS, (f"{rows} rows from GEMV_ROW_BLOCKS_FROM ({GEMV_ROW_BLOCKS_FROM}): one launch of "
                               f"{rows // GEMV_ROWS} blocks of {GEMV_ROWS} rows, side by side")


def down_early_weights(rows: int, hidden: int, shared_hidden: int, early: bool,
                       ready: bool = False) -> tuple[bool, str | None]:
    """Whether a per-row mixture's down launch issues its first chunk of rows before its PDL wait
    (MIXTURE_DOWN_EARLY_WEIGHTS_ROWS), and why (None where the fact is off: nothing to say). `ready`:
    mixture_gated acquires the router's flags in place of its PDL wait, so its release would not follow
    the router's end."""
    most = MIXTURE_DOWN_EARLY_WEIGHTS_ROWS
    if most is None:
        return False, None
    if rows > most:
        return False, f"{rows} rows are above MIXTURE_DOWN_EARLY_WEIGHTS_ROWS ({most}): its rows after the wait"
    if ready:
        return False, ("mixture_gated takes the router's flags in place of its PDL wait (MIXTURE_READY_FLAG): its "
                       "release would not follow the router's end, which the ids read before the wait need")
    if early:
        return False, "the early down rows (MIXTURE_DOWN_EARLY_ROWS) prefetch them into L2 instead"
    if shared_hidden not in (0, hidden):
        return False, (f"its shared expert's {shared_hidden} units are not a routed expert's {hidden}: one chunk "
                       "shape a warp")
    return True, (f"{rows} row{'s' * (rows > 1)} at most MIXTURE_DOWN_EARLY_WEIGHTS_ROWS ({most}): each warp's first "
                  "chunk of down rows is loaded before the PDL wait, and mixture_gated releases it after its own")


def release_point(kernel: str, successor: str | None, successor_ctas: int = 0,
                  rule: str | None = None) -> tuple[str, str]:
    """Where a launch of `kernel` releases its PDL dependents, "entry" or "wait", and why, under
    RELEASE_RULE (facts.py; `rule` in its place); `successor`: the next launch's kernel (None where
    none follows under PDL), `successor_ctas` its grid's CTAs."""
    rule = rule or RELEASE_RULE
    if rule not in RELEASE_RULES:
        raise LoweringError(f"release rule {rule!r}: one of {', '.join(RELEASE_RULES)}")
    if rule in ("wait", "entry"):
        return rule, f"every launch at its {rule} (RELEASE_RULE {rule!r})"
    if successor is None:
        return "wait", "no launch follows under PDL"
    if successor not in EARLY_STREAMS:
        return "wait", f"the next launch ({successor}) streams nothing before its wait"
    if successor_ctas > EARLY_STREAM_CTAS:
        return "wait", (f"the next launch ({successor}) is {successor_ctas} CTAs, above {EARLY_STREAM_CTAS}: "
                        "its first CTAs' early stream is a sliver of its bytes (EARLY_STREAM_CTAS)")
    if rule == "pass-through" and kernel in EARLY_STREAMS:
        return "wait", f"it streams before its own wait: {successor}'s stream would share the memory with it"
    return "entry", f"the next launch ({successor}) streams before its wait: it starts under this one"


def lower_module(module: ModuleOp, tunings: list | None = None, grouped_experts: bool = False) -> ModuleOp:
    """A new module holding the lane step of `module`'s form step, each kernel shape under the
    tuned schedule table (the one lowering `lanec compile` and `-p lower-to-lane` share);
    `tunings`, where given, gets each table lookup (kernel, shape, overrides) in launch order.
    `grouped_experts`: every mixture takes the grouped path (else those above MIXTURE_GROUPED_ROWS)."""
    steps = [op for op in module.ops if isinstance(op, form.StepOp)]
    if len(steps) != 1:
        raise LoweringError(f"a module to lower holds one form.step; this one holds {len(steps)}")
    lowering = Lowering(steps[0], grouped_rows=0 if grouped_experts else MIXTURE_GROUPED_ROWS)
    lowered = ModuleOp([lowering.run()])
    if tunings is not None:
        tunings.extend(lowering.tunings)
    return lowered


@dataclass(frozen=True)
class LowerToLane(ModulePass):
    """`-p lower-to-lane`: replace the module's form step by its lane step."""

    name = "lower-to-lane"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            lowered = lower_module(op)
        except (LoweringError, ValueError) as error:
            raise DiagnosticException(str(error)) from None
        for child in list(op.ops):
            child.detach()
            child.erase()
        step = next(iter(lowered.ops))
        step.detach()
        op.body.block.add_op(step)
