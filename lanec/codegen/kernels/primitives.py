"""Small device helpers the lane's CuTe DSL kernels share: shared-memory tensors, vector
loads and stores, DSMEM sends, warp reductions and tree sums, the bf16 MMA and the activations.
Each takes CuTe pointers or DSL scalars; the ones the DSL has no op for are one PTX instruction
(or a short predicated sequence) of inline assembly."""

from __future__ import annotations

import math
import operator

import cutlass
import cutlass.cute as cute
from cutlass import BFloat16, Boolean, Float32, Int32, Uint32
from cutlass._mlir.dialects import arith, llvm
from cutlass.cutlass_dsl import T, dsl_user_op

from lanec.codegen.facts import VECTOR
from lanec.runtime.launch import row_major

LOG2E = 1.4426950408889634


def _asm(result, operands, text, constraints, loc=None, ip=None):
    return llvm.inline_asm(
        result,
        operands,
        text,
        constraints,
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )


def _fields(result, count, kind, loc=None, ip=None):
    wrap = Float32 if kind == "f" else Uint32
    ir_type = T.f32() if kind == "f" else T.i32()
    return tuple(
        wrap(llvm.extractvalue(ir_type, result, [i], loc=loc, ip=ip)) for i in range(count)
    )


def _struct(count, kind):
    return llvm.StructType.get_literal([T.f32() if kind == "f" else T.i32()] * count)


def _address(pointer, loc=None, ip=None):
    """The pointer as an integer: 64-bit for global memory, 32-bit for shared."""
    return pointer.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip)


def _space(pointer):
    return "shared" if pointer.memspace == cute.AddressSpace.smem else "global"


def _ptr_constraint(pointer):
    return "r" if pointer.memspace == cute.AddressSpace.smem else "l"


def _f(value, loc=None, ip=None):
    return Float32(value).ir_value(loc=loc, ip=ip)


def _u(value, loc=None, ip=None):
    return Uint32(value).ir_value(loc=loc, ip=ip)


# --- tensors -------------------------------------------------------------------------------


def alloc(smem, dtype, shape, align=16):
    """A row-major shared-memory tensor of ``shape`` (an int or a tuple)."""
    layout = cute.make_layout(shape if isinstance(shape, int) else tuple(shape),
                              stride=1 if isinstance(shape, int) else row_major(shape))
    return smem.allocate_tensor(dtype, layout, align)


@dsl_user_op
def match_any(value, *, loc=None, ip=None) -> Uint32:
    """`match.any.sync.b32` over the whole warp: the mask of the lanes whose `value` equals this lane's."""
    return Uint32(_asm(T.i32(), [Int32(value).ir_value(loc=loc, ip=ip)], "match.any.sync.b32 $0, $1, -1;", "=r,r",
                       loc, ip))


def shared_bytes(sizes):
    """Bytes the allocations ``[(bytes, alignment), ...]`` take in allocation order, as
    the DSL's allocator lays them out (each aligned up to its alignment)."""
    offset = 0
    for size, align in sizes:
        offset = -(-offset // align) * align + size
    return offset


@dsl_user_op
def at(tensor, *coords, loc=None, ip=None):
    """Pointer to ``tensor[coords]`` (an element, or the start of a vector)."""
    return tensor.iterator + cute.crd2idx(tuple(coords), tensor.layout, loc=loc, ip=ip)


def advance(base, count):
    """``base`` moved on by ``count`` (an index, or a pointer by elements)."""
    return base + count


def zeros(shape, dtype):
    """A register tensor of ``shape`` filled with zeros."""
    tensor = cute.make_rmem_tensor(shape, dtype)
    tensor.fill(dtype(0))
    return tensor


# --- loads and stores ------------------------------------------------------------------


@dsl_user_op
def load_f32x4(pointer, shared=False, l2_only=False, *, loc=None, ip=None):
    """Four floats from a 16-byte aligned address (global or shared); `l2_only` (global): through
    L2 only (`ld.global.cg`), so what another SM wrote is never read from this SM's stale L1."""
    space = "shared" if shared else _space(pointer)
    kind = "r" if space == "shared" else "l"
    cache = ".cg" if l2_only and space == "global" else ""
    result = _asm(_struct(4, "f"), [_address(pointer, loc, ip)],
                  f"ld.{space}{cache}.v4.f32 {{$0, $1, $2, $3}}, [$4];", f"=f,=f,=f,=f,{kind}", loc, ip)
    return _fields(result, 4, "f", loc, ip)


@dsl_user_op
def load_staged(pointer, *, loc=None, ip=None):
    """Four floats of a state row staged in shared memory."""
    return load_f32x4(pointer, shared=True, loc=loc, ip=ip)


@dsl_user_op
def store_f32x4(pointer, values, when=None, *, loc=None, ip=None):
    """Four floats to a 16-byte aligned global address (``when``: predicated, no branch)."""
    operands = [_address(pointer, loc, ip)] + [_f(v, loc, ip) for v in values]
    if when is None:
        _asm(None, operands, "st.global.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f", loc, ip)
        return
    operands.append(Int32(when).ir_value(loc=loc, ip=ip))
    _asm(None, operands,
         "{ .reg .pred p; setp.ne.b32 p, $5, 0; @p st.global.v4.f32 [$0], {$1, $2, $3, $4}; }",
         "l,f,f,f,f,r", loc, ip)


@dsl_user_op
def store_evict_f32x4(pointer, values, *, loc=None, ip=None):
    """Four floats to global memory, streamed (L2 evict-first: read once per step)."""
    operands = [_address(pointer, loc, ip)] + [_f(v, loc, ip) for v in values]
    _asm(None, operands, "st.global.cs.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f", loc, ip)


@dsl_user_op
def load_weight_bf16x8(pointer, policy=None, *, loc=None, ip=None):
    """Eight bf16 weights (four words) through the read-only path, no L1 allocation; with an L2
    `policy` (`evict_first_policy`) under that policy's eviction priority."""
    if policy is None:
        result = _asm(_struct(4, "r"), [_address(pointer, loc, ip)],
                      "ld.global.nc.L1::no_allocate.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l",
                      loc, ip)
    else:
        result = _asm(_struct(4, "r"), [_address(pointer, loc, ip), cutlass.Uint64(policy).ir_value(loc=loc, ip=ip)],
                      "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.b32 {$0, $1, $2, $3}, [$4], $5;",
                      "=r,=r,=r,=r,l,l", loc, ip)
    return _fields(result, 4, "r", loc, ip)


@dsl_user_op
def evict_first_policy(*, loc=None, ip=None):
    """An L2 cache policy that evicts the lines it loads first (a stream read once, which should
    not push out lines another launch prefetched)."""
    return cutlass.Uint64(_asm(T.i64(), [], "createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l", loc, ip))


@dsl_user_op
def load_bf16x4(pointer, *, loc=None, ip=None):
    """Four bf16 weights (two words) through the read-only path."""
    result = _asm(_struct(2, "r"), [_address(pointer, loc, ip)],
                  "ld.global.nc.v2.b32 {$0, $1}, [$2];", "=r,=r,l", loc, ip)
    return _fields(result, 2, "r", loc, ip)


@dsl_user_op
def load_activation_bf16x4(pointer, *, loc=None, ip=None):
    """Four bf16 activations (two words) a predecessor wrote: a coherent load."""
    result = _asm(_struct(2, "r"), [_address(pointer, loc, ip)],
                  "ld.global.v2.b32 {$0, $1}, [$2];", "=r,=r,l", loc, ip)
    return _fields(result, 2, "r", loc, ip)


@dsl_user_op
def load_activation_bf16x8(pointer, l2_only=False, *, loc=None, ip=None):
    """Eight bf16 activations (four words), a coherent load from global or shared memory; `l2_only`
    (global): through L2 only (`ld.global.cg`), never from this SM's L1 (a read before the PDL wait)."""
    space = _space(pointer)
    cache = ".cg" if l2_only and space == "global" else ""
    result = _asm(_struct(4, "r"), [_address(pointer, loc, ip)],
                  f"ld.{space}{cache}.v4.b32 {{$0, $1, $2, $3}}, [$4];",
                  f"=r,=r,=r,=r,{_ptr_constraint(pointer)}", loc, ip)
    return _fields(result, 4, "r", loc, ip)


@dsl_user_op
def smem_words(pointer, *, loc=None, ip=None):
    """Four 32-bit words from shared memory."""
    result = _asm(_struct(4, "r"), [_address(pointer, loc, ip)],
                  "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r", loc, ip)
    return _fields(result, 4, "r", loc, ip)


@dsl_user_op
def copy_g2s(destination, source, size=16, barrier=None, evict_first=False, *, loc=None, ip=None):
    """Global to shared: 16 bytes by ``cp.async`` (commit groups), or ``size`` bytes by
    the bulk copy engine completing on ``barrier`` (optionally L2 evict-first)."""
    dst, src = _address(destination, loc, ip), _address(source, loc, ip)
    if barrier is None:
        _asm(None, [dst, src], "cp.async.cg.shared.global [$0], [$1], 16;", "r,l", loc, ip)
        return
    operands = [dst, src, Int32(size).ir_value(loc=loc, ip=ip), _address(barrier, loc, ip)]
    if evict_first:
        text = ("{ .reg .b64 policy; createpolicy.fractional.L2::evict_first.b64 policy, 1.0;\n"
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                " [$0], [$1], $2, [$3], policy; }")
    else:
        text = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];"
    _asm(None, operands, text, "r,l,r,r", loc, ip)


@dsl_user_op
def load_tensor_box(destination, tensor_map, inner, outer, barrier, *, loc=None, ip=None):
    """One TMA copy (`cp.async.bulk.tensor.2d`): the box of the 2-D tensor map at `tensor_map` (a
    global address: `TensorParam.tensor_map`) whose first element is (`inner`, `outer`) into shared
    memory at `destination`, in the map's swizzle, completing on `barrier`'s transaction count.
    Elements outside the tensor land as zeros and count as bytes all the same."""
    operands = [_address(destination, loc, ip), _address(tensor_map, loc, ip), Int32(inner).ir_value(loc=loc, ip=ip),
                Int32(outer).ir_value(loc=loc, ip=ip), _address(barrier, loc, ip)]
    _asm(None, operands, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
         " [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r", loc, ip)


@dsl_user_op
def multicast_tensor_box(destination, tensor_map, inner, outer, barrier, mask, *, loc=None, ip=None):
    """`load_tensor_box`, written to every CTA of the cluster in `mask` (bit r: rank r) at the
    same shared offsets as `destination` and `barrier`, each completing on its own copy of the
    barrier (`cp.async.bulk.tensor ... .multicast::cluster`)."""
    operands = [_address(destination, loc, ip), _address(tensor_map, loc, ip), Int32(inner).ir_value(loc=loc, ip=ip),
                Int32(outer).ir_value(loc=loc, ip=ip), _address(barrier, loc, ip), _u(mask, loc, ip)]
    _asm(None, operands, "{ .reg .b16 mask; cvt.u16.u32 mask, $5;\n\t"
         "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
         " [$0], [$1, {$2, $3}], [$4], mask; }", "r,l,r,r,r,r", loc, ip)


@dsl_user_op
def acquire_tensor_map(tensor_map, *, loc=None, ip=None):
    """Make the 128-byte tensor map at `tensor_map` (global memory, written before the launch)
    visible to the tensor-map proxy and start fetching it: before this thread's first TMA copy."""
    _asm(None, [_address(tensor_map, loc, ip)],
         "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;\n\tprefetch.tensormap [$0];", "l", loc, ip)


# --- DSMEM sends ---------------------------------------------------------------------------


@dsl_user_op
def store_async_dsmem(destination, words, barrier, rank, *, loc=None, ip=None):
    """``st.async`` of one, two or four words (aligned to their size) to the same
    offsets in CTA ``rank`` of the cluster, completing their bytes on its copy of
    ``barrier``."""
    words = words if isinstance(words, tuple) else (words,)
    count = len(words)
    values = ", ".join(f"${i + 4}" for i in range(count))
    vector = {1: "", 2: ".v2", 4: ".v4"}[count]
    operands = [
        _address(destination, loc, ip),
        _address(barrier, loc, ip),
        Int32(rank).ir_value(loc=loc, ip=ip),
        Int32(0).ir_value(loc=loc, ip=ip),
    ] + [Int32(w).ir_value(loc=loc, ip=ip) for w in words]
    _asm(None, operands,
         "{ .reg .b32 ra, rb;\n"
         "mapa.shared::cluster.u32 ra, $0, $2; mapa.shared::cluster.u32 rb, $1, $2;\n"
         f"st.async.shared::cluster.mbarrier::complete_tx::bytes{vector}.b32 [ra], "
         f"{{{values}}}, [rb]; }}" if count > 1 else
         "{ .reg .b32 ra, rb;\n"
         "mapa.shared::cluster.u32 ra, $0, $2; mapa.shared::cluster.u32 rb, $1, $2;\n"
         "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [ra], $4, [rb]; }",
         ",".join(["r"] * (4 + count)), loc, ip)


@dsl_user_op
def push_float(destination, value, barrier, rank, when, *, loc=None, ip=None):
    """``st.async`` of one float to CTA ``rank``, predicated on ``when`` (no branch)."""
    operands = [
        _address(destination, loc, ip),
        Int32(float_bits(value, loc=loc, ip=ip)).ir_value(loc=loc, ip=ip),
        _address(barrier, loc, ip),
        Int32(rank).ir_value(loc=loc, ip=ip),
        Int32(when).ir_value(loc=loc, ip=ip),
    ]
    _asm(None, operands,
         "{ .reg .pred p; .reg .b32 ra, rb; setp.ne.b32 p, $4, 0;\n"
         "mapa.shared::cluster.u32 ra, $0, $3; mapa.shared::cluster.u32 rb, $2, $3;\n"
         "@p st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [ra], $1, [rb]; }",
         "r,r,r,r,r", loc, ip)


@dsl_user_op
def load_dsmem_f32(source, rank, *, loc=None, ip=None):
    """The float at ``source`` (an address of this CTA's shared memory) in CTA ``rank`` of the
    cluster (order it after the peer's writes with a cluster barrier)."""
    return Float32(llvm.inline_asm(
        T.f32(), [_address(source, loc, ip), Int32(rank).ir_value(loc=loc, ip=ip)],
        "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, $1, $2; ld.shared::cluster.f32 $0, [ra]; }",
        "=f,r,r", has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def load_dsmem_f32x4(source, rank, *, loc=None, ip=None):
    """Four floats at ``source`` (16-byte aligned, this CTA's shared memory) in CTA ``rank`` of
    the cluster (order it after the peer's writes with a cluster barrier)."""
    result = _asm(_struct(4, "f"), [_address(source, loc, ip), Int32(rank).ir_value(loc=loc, ip=ip)],
                  "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, $4, $5;\n"
                  "ld.shared::cluster.v4.f32 {$0, $1, $2, $3}, [ra]; }", "=f,=f,=f,=f,r,r", loc, ip)
    return _fields(result, 4, "f", loc, ip)


@dsl_user_op
def store_shared(destination, words, when=None, barrier=None, *, loc=None, ip=None):
    """A CTA's own stand-in for ``st.async`` (a launch without clusters has no DSMEM): one
    or four words to shared memory, then (``barrier`` given) one arrival with release on
    it; ``when``: predicated on it, without branches."""
    words = words if isinstance(words, tuple) else (words,)
    count = len(words)
    values = ", ".join(f"${i + 3}" for i in range(count))
    store = f"st.shared.v{count}.b32 [$0], {{{values}}};" if count > 1 else "st.shared.b32 [$0], $3;"
    signal = "@p mbarrier.arrive.release.cta.shared::cta.b64 state, [$1];" if barrier is not None else ""
    operands = [
        _address(destination, loc, ip),
        _address(barrier if barrier is not None else destination, loc, ip),
        Int32(1 if when is None else when).ir_value(loc=loc, ip=ip),
    ] + [Int32(w).ir_value(loc=loc, ip=ip) for w in words]
    _asm(None, operands,
         f"{{ .reg .pred p; .reg .b64 state; setp.ne.b32 p, $2, 0;\n@p {store}\n{signal} }}",
         ",".join(["r"] * (3 + count)), loc, ip)


@dsl_user_op
def arrive(barrier, *, loc=None, ip=None):
    """One arrival (release) on ``barrier`` in this CTA's shared memory."""
    _asm(None, [_address(barrier, loc, ip)],
         "{ .reg .b64 state; mbarrier.arrive.release.cta.shared::cta.b64 state, [$0]; }", "r", loc, ip)


@dsl_user_op
def wait(barrier, phase=0, scope="cluster", *, loc=None, ip=None):
    """Wait for ``barrier``'s phase ``phase`` to complete (its bytes and arrivals all in),
    acquiring at ``scope``: "cluster" where the bytes are peers' ``st.async`` (released at
    cluster scope by their complete_tx), "cta" where only this CTA signals it."""
    _asm(None, [_address(barrier, loc, ip), Int32(phase).ir_value(loc=loc, ip=ip)],
         "{ .reg .pred p; WAIT:\n"
         f"mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64 p, [$0], $1;\n"
         "@!p bra WAIT; }", "r,r,~{memory}", loc, ip)


# --- scalars -------------------------------------------------------------------------------


@dsl_user_op
def float_bits(value, *, loc=None, ip=None):
    """The float's 32 bits as an integer."""
    return Int32(llvm.bitcast(T.i32(), _f(value, loc, ip), loc=loc, ip=ip))


@dsl_user_op
def ordered_key(value, *, loc=None, ip=None):
    """An Int32 whose signed order is the float's order (finite values and infinities; -0 and +0 one
    key): the float's bits, the magnitude bits flipped where negative, so a warp's `redux.sync`
    integer max finds the largest float in one instruction."""
    bits = float_bits(Float32(value) + Float32(0.0), loc=loc, ip=ip)  # -0 + 0 = +0
    return cutlass.select_(bits < Int32(0), bits ^ Int32(0x7FFFFFFF), bits)


@dsl_user_op
def bits_float(word, *, loc=None, ip=None):
    """The float whose bits are `word`."""
    return Float32(llvm.bitcast(T.f32(), Uint32(word).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def unpack_bf16(word, *, loc=None, ip=None):
    """The two bf16 of a word (low half first) as floats (exact)."""
    bits = Uint32(word)
    low = llvm.bitcast(T.f32(), (bits << 16).ir_value(loc=loc, ip=ip), loc=loc, ip=ip)
    high = llvm.bitcast(T.f32(), (bits & Uint32(0xFFFF0000)).ir_value(loc=loc, ip=ip),
                        loc=loc, ip=ip)
    return Float32(low), Float32(high)


@dsl_user_op
def fma(a, b, c, ftz=False, *, loc=None, ip=None):
    """``a * b + c``, rounded once (flushing denormals when ``ftz``)."""
    text = "fma.rn.ftz.f32 $0, $1, $2, $3;" if ftz else "fma.rn.f32 $0, $1, $2, $3;"
    return Float32(llvm.inline_asm(T.f32(), [_f(a, loc, ip), _f(b, loc, ip), _f(c, loc, ip)],
                                   text, "=f,f,f,f", has_side_effects=False,
                                   asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def rounded(op, a, b, *, loc=None, ip=None):
    """``a op b`` (op "mul" or "add") in fp32, rounded to nearest even once: an explicit rounding is
    never fused into an FMA, so the value is the one numpy computes."""
    return Float32(llvm.inline_asm(T.f32(), [_f(a, loc, ip), _f(b, loc, ip)], f"{op}.rn.f32 $0, $1, $2;",
                                   "=f,f,f", has_side_effects=False, asm_dialect=llvm.AsmDialect.AD_ATT,
                                   loc=loc, ip=ip))


def dot(row, vector, ftz=False):
    """Sum of the products of two 4-vectors: one multiply, then a chain of FMAs."""
    pairs = list(zip(row, vector))
    acc = pairs[0][0] * pairs[0][1]
    for a, b in pairs[1:]:
        acc = fma(a, b, acc, ftz=ftz)
    return acc


# --- reductions ----------------------------------------------------------------------------


def _offsets(width):
    """The butterfly's lane offsets over aligned groups of ``width`` lanes: width / 2 down to 1."""
    if width < 1 or width > 32 or width & (width - 1):
        raise ValueError(f"a warp reduction spans a power of two of lanes up to 32; got {width}")
    return [1 << shift for shift in range(int(math.log2(width)) - 1, -1, -1)]


def _shuffled(value, offset):
    if isinstance(value, tuple):
        return tuple(cute.arch.shuffle_sync_bfly(v, offset=offset) for v in value)
    return cute.arch.shuffle_sync_bfly(value, offset=offset)


@cute.jit
def norm_input(x, residual, h_out, row, vector, writes_sum):
    """A norm's input, vector `vector` of row `row` as fp32: h = x (+ `residual`, None for none),
    and with a residual its bf16 sum stored to `h_out` where `writes_sum` (the new residual
    stream). x, residual and h_out are [rows, width] bf16, read and written 16 bytes at a time."""
    loaded = cute.make_rmem_tensor(VECTOR, BFloat16)
    cute.autovec_copy(cute.zipped_divide(x, (1, VECTOR))[None, (row, vector)], loaded)
    return add_residual(loaded.load().to(Float32), residual, h_out, row, vector, writes_sum)


@cute.jit
def add_residual(h, residual, h_out, row, vector, writes_sum):
    """`h` (a vector of fp32 values, vector `vector` of row `row`) + `residual`'s (None for none),
    its bf16 sum stored to `h_out` where `writes_sum`; norm_input's second half."""
    if cutlass.const_expr(residual is not None):
        loaded = cute.make_rmem_tensor(VECTOR, BFloat16)
        cute.autovec_copy(cute.zipped_divide(residual, (1, VECTOR))[None, (row, vector)], loaded)
        h = h + loaded.load().to(Float32)
        if writes_sum:
            loaded.store(h.to(BFloat16))
            cute.autovec_copy(loaded, cute.zipped_divide(h_out, (1, VECTOR))[None, (row, vector)])
    return h


def warp_reduce(value, op, width=32):
    """``value`` combined over aligned groups of ``width`` lanes by a butterfly, every lane
    getting the result: at each offset (width / 2 down to 1) ``value = op(value, partner's)``.
    ``value`` may be a tuple (each part shuffled, in order; ``op`` takes and returns tuples)."""
    for offset in _offsets(width):
        value = op(value, _shuffled(value, offset))
    return value


def warp_inclusive_sum(value, lane):
    """The sum of ``value`` over lanes 0..``lane`` of the warp (an inclusive scan: five shuffles up)."""
    for offset in (1, 2, 4, 8, 16):
        below = cute.arch.shuffle_sync_up(value, offset)
        value = value + cutlass.select_(lane >= offset, below, Int32(0))
    return value


def warp_reduce_interleaved(values, indices, op, width=32):
    """`warp_reduce` of each ``values[i]`` (a register tensor, in place) for ``i`` in
    ``indices``, level by level across them: one level's shuffles of every value are in flight
    together."""
    for offset in _offsets(width):
        for i in indices:
            values[i] = op(values[i], cute.arch.shuffle_sync_bfly(values[i], offset=offset))


def warp_reduce_scatter(values, count, lane):
    """Warp-sum ``count`` (a power of two <= 32) accumulators of the register tensor ``values``
    in count - 1 + log2(32 / count) shuffles: each halving step trades the half a lane gives away
    for its partner's copy of the half it keeps; the levels left sum whole. Afterwards values[0]
    of lane l is the warp's sum of index l // (32 / count)."""
    width, stride = count, 16
    while width > 1:
        half = width // 2
        upper = (lane & stride) != 0
        for i in range(half):
            low, high = values[i], values[i + half]
            send = cutlass.select_(upper, low, high)
            keep = cutlass.select_(upper, high, low)
            values[i] = keep + cute.arch.shuffle_sync_bfly(send, stride)
        width, stride = half, stride // 2
    values[0] = warp_reduce(values[0], operator.add, 32 // count)


def tree_sum(values):
    """The sum of a power-of-two count of values as a tree: the first half plus the second,
    pairwise, until one is left ((a + c) + (b + d) for four)."""
    values = list(values)
    if not values or len(values) & (len(values) - 1):
        raise ValueError(f"a tree sum takes a power of two of values; got {len(values)}")
    while len(values) > 1:
        half = len(values) // 2
        values = [values[i] + values[i + half] for i in range(half)]
    return values[0]


@dsl_user_op
def _rcp_approx(value, *, loc=None, ip=None):
    return Float32(llvm.inline_asm(T.f32(), [_f(value, loc, ip)], "rcp.approx.ftz.f32 $0, $1;",
                                   "=f,f", has_side_effects=False,
                                   asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


def sigmoid(value, fast=False):
    """``1 / (1 + exp(-x))``: IEEE exp and division, or ``ex2.approx`` and
    ``rcp.approx`` when ``fast``."""
    value = Float32(value)
    if fast:
        return _rcp_approx(Float32(1.0) + cute.math.exp2(value * Float32(-LOG2E), fastmath=True))
    return Float32(1.0) / (Float32(1.0) + cute.math.exp(-value))


def sigmoids(values):
    """Sigmoids of many values, each exp issued before the first division so that
    the long-latency operations overlap."""
    exps = [cute.math.exp(-Float32(v)) for v in values]
    return [Float32(1.0) / (Float32(1.0) + e) for e in exps]


def softplus(value):
    """``log(1 + exp(x))``, and ``x`` itself above 20 (torch's threshold)."""
    value = Float32(value)
    smooth = cute.math.log1p(cute.math.exp(cute.math.min(value, Float32(20.0))))
    return _select(value > Float32(20.0), value, smooth)


@dsl_user_op
def _select(condition, a, b, *, loc=None, ip=None):
    return Float32(arith.select(Boolean(condition).ir_value(loc=loc, ip=ip), _f(a, loc, ip),
                                _f(b, loc, ip), loc=loc, ip=ip))


@dsl_user_op
def mma_into(acc, a, b, bf16=True, *, loc=None, ip=None):
    """``acc += A @ B`` for one m16n8k16 tile: ``a`` the four A words, ``b`` the two B
    words, ``acc`` a register tensor of the four D floats (updated in place)."""
    kind = "bf16" if bf16 else "f16"
    operands = ([_u(w, loc, ip) for w in a] + [_u(w, loc, ip) for w in b]
                + [_f(acc[i], loc, ip) for i in range(4)])
    result = llvm.inline_asm(
        _struct(4, "f"), operands,
        f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{$0, $1, $2, $3}}, "
        "{$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
        "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", has_side_effects=False,
        asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    for i, value in enumerate(_fields(result, 4, "f", loc, ip)):
        acc[i] = value


@dsl_user_op
def mma_s8(a, b, *, loc=None, ip=None):
    """The int32 products of one m16n8k32 tile of signed bytes, from zero: ``a`` the four A words
    (16 rows x 32 values), ``b`` the two B words (32 values x 8 columns); four Int32 in the
    accumulator layout of `mma_into` (rows lane / 4 and + 8, columns 2 (lane % 4) and the next)."""
    zero = Int32(0).ir_value(loc=loc, ip=ip)
    operands = [_u(w, loc, ip) for w in a] + [_u(w, loc, ip) for w in b] + [zero] * 4
    result = llvm.inline_asm(
        _struct(4, "i"), operands,
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {$0, $1, $2, $3}, "
        "{$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
        "=r,=r,=r,=r,r,r,r,r,r,r,r,r,r,r", has_side_effects=False,
        asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    return tuple(Int32(word) for word in _fields(result, 4, "i", loc, ip))


# --- a cp.async pipeline --------------------------------------------------------------------


@cute.jit
def wait_stage(stage: Int32, stages: cutlass.Constexpr):
    """Wait until stage `stage`'s cp.async copies have landed, in a pipeline of `stages` buffers
    that committed one group for the first `stages - 1` stages' late copies (after the PDL wait)
    and then one group a stage, each `stages - 1` ahead of the stage in use: the stages before
    `stages - 2` wait for the first group, the others leave `stages - 2` groups in flight."""
    if stage < stages - 2:
        for j in cutlass.range_constexpr(stages - 2):
            if stage == j:
                cute.arch.cp_async_wait_group(j)
    else:
        cute.arch.cp_async_wait_group(stages - 2)


# --- tensor-core fragments -----------------------------------------------------------------


@dsl_user_op
def ldmatrix_x4(pointer, trans=False, *, loc=None, ip=None):
    """Four 8x8 bf16 matrices from shared memory (lanes 8j..8j+7 give matrix j's row
    addresses, 16 bytes each): a thread receives word j of matrix j's fragment (row lane / 4,
    columns 2 (lane % 4) and the next; ``trans``: the transposed matrix's)."""
    text = f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 {{$0, $1, $2, $3}}, [$4];"
    result = _asm(_struct(4, "r"), [_address(pointer, loc, ip)], text, "=r,=r,=r,=r,r", loc, ip)
    return _fields(result, 4, "r", loc, ip)


@dsl_user_op
def pack_bf16(low, high, *, loc=None, ip=None):
    """Two floats rounded to bf16 (to nearest even) in one word, ``low`` in the low half."""
    return Uint32(llvm.inline_asm(T.i32(), [_f(high, loc, ip), _f(low, loc, ip)], "cvt.rn.bf16x2.f32 $0, $1, $2;",
                                  "=r,f,f", has_side_effects=False, asm_dialect=llvm.AsmDialect.AD_ATT,
                                  loc=loc, ip=ip))


@dsl_user_op
def store_shared_word(pointer, word, *, loc=None, ip=None):
    """One 32-bit word to shared memory."""
    _asm(None, [_address(pointer, loc, ip), _u(word, loc, ip)], "st.shared.b32 [$0], $1;", "r,r", loc, ip)


@dsl_user_op
def store_global_byte(pointer, value, *, loc=None, ip=None):
    """The low byte of the 32-bit `value` to global memory."""
    _asm(None, [_address(pointer, loc, ip), _u(value, loc, ip)], "st.global.b8 [$0], $1;", "l,r", loc, ip)


@dsl_user_op
def store_global_words(pointer, words, *, loc=None, ip=None):
    """One, two or four 32-bit words to global memory (aligned to their size)."""
    words = words if isinstance(words, tuple) else (words,)
    if len(words) == 1:
        _asm(None, [_address(pointer, loc, ip), _u(words[0], loc, ip)], "st.global.b32 [$0], $1;", "l,r", loc, ip)
        return
    values = ", ".join(f"${i + 1}" for i in range(len(words)))
    _asm(None, [_address(pointer, loc, ip)] + [_u(w, loc, ip) for w in words],
         f"st.global.v{len(words)}.b32 [$0], {{{values}}};", ",".join(["l"] + ["r"] * len(words)), loc, ip)


@dsl_user_op
def stmatrix_trans(pointer, words, *, loc=None, ip=None):
    """Two or four 8x8 bf16 matrices to shared memory, transposed: a thread gives word j of
    matrix j's fragment (row lane / 4, columns 2 (lane % 4) and the next), and lanes 8j..8j+7
    give the addresses of the transposed matrix j's rows (16 bytes each: the fragment's columns)."""
    count = len(words)
    values = ", ".join(f"${i + 1}" for i in range(count))
    _asm(None, [_address(pointer, loc, ip)] + [_u(w, loc, ip) for w in words],
         f"stmatrix.sync.aligned.m8n8.x{count}.trans.shared.b16 [$0], {{{values}}};",
         ",".join(["r"] * (count + 1)), loc, ip)


@dsl_user_op
def copy_g2s_zfill(destination, source, keep, size=16, *, loc=None, ip=None):
    """``size`` bytes (16, or 8 or 4 through L1) global to shared by ``cp.async`` where ``keep``,
    else as many zero bytes written by the same copy (source size 0: nothing is read)."""
    read = cutlass.select_(keep, Int32(size), Int32(0))
    level = "cg" if size == 16 else "ca"  # .cg copies 16 bytes only
    _asm(None, [_address(destination, loc, ip), _address(source, loc, ip), read.ir_value(loc=loc, ip=ip)],
         f"cp.async.{level}.shared.global [$0], [$1], {size}, $2;", "r,l,r", loc, ip)


# --- int8: the quantized form (q8_0 weight blocks, int8 activations) -------------------------


def _int_asm(text, constraints, operands, loc=None, ip=None):
    return Uint32(llvm.inline_asm(T.i32(), operands, text, constraints, has_side_effects=False,
                                  asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def round_to_int(value, *, loc=None, ip=None):
    """``value`` rounded to the nearest integer, ties to even (numpy's rint), as an Int32."""
    return Int32(_int_asm("cvt.rni.s32.f32 $0, $1;", "=r,f", [_f(value, loc, ip)], loc, ip))


@dsl_user_op
def dp4a(a, b, c, *, loc=None, ip=None):
    """``c`` plus the dot product of the four signed bytes of word ``a`` with those of ``b`` (int32)."""
    return Int32(_int_asm("dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r",
                          [_u(a, loc, ip), _u(b, loc, ip), Int32(c).ir_value(loc=loc, ip=ip)], loc, ip))


@dsl_user_op
def funnel_right(low, high, shift, *, loc=None, ip=None):
    """The 32 bits of the 64-bit ``high:low`` from bit ``shift`` (0-32) up."""
    return _int_asm("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r",
                    [_u(low, loc, ip), _u(high, loc, ip), _u(shift, loc, ip)], loc, ip)


@dsl_user_op
def half_to_float(word, *, loc=None, ip=None):
    """The fp16 in the low half of ``word`` as a float (exact)."""
    return Float32(llvm.inline_asm(T.f32(), [_u(word, loc, ip)],
                                   "{ .reg .b16 h; cvt.u16.u32 h, $1; cvt.f32.f16 $0, h; }", "=f,r",
                                   has_side_effects=False, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def load_weight_word(pointer, *, loc=None, ip=None):
    """One 4-byte aligned word of weights through the read-only path (L1 keeps its sector for the
    neighbouring lanes' loads)."""
    return _int_asm("ld.global.nc.b32 $0, [$1];", "=r,l", [_address(pointer, loc, ip)], loc, ip)


@dsl_user_op
def load_weight_half(pointer, when=True, *, loc=None, ip=None):
    """Two bytes of weights (2-byte aligned) zero-extended to a word; 0 without a load where
    ``when`` is false (a read that would run past the buffer)."""
    return Uint32(llvm.inline_asm(
        T.i32(), [_address(pointer, loc, ip), Int32(when).ir_value(loc=loc, ip=ip)],
        "{ .reg .pred p; .reg .b16 h; setp.ne.b32 p, $2, 0; mov.b32 $0, 0;\n"
        "@p ld.global.nc.b16 h, [$1]; @p cvt.u32.u16 $0, h; }", "=r,l,r",
        has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def load_activation_words(pointer, *, loc=None, ip=None):
    """Two words (8 int8 activations, 8-byte aligned) a predecessor wrote: a coherent load."""
    result = _asm(_struct(2, "r"), [_address(pointer, loc, ip)], "ld.global.v2.b32 {$0, $1}, [$2];", "=r,=r,l",
                  loc, ip)
    return _fields(result, 2, "r", loc, ip)


@dsl_user_op
def load_activation_f32(pointer, *, loc=None, ip=None):
    """One float a predecessor wrote (4-byte aligned): a coherent load."""
    return Float32(llvm.inline_asm(T.f32(), [_address(pointer, loc, ip)], "ld.global.f32 $0, [$1];", "=f,l",
                                   has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


# --- peers: 64-bit addresses of this GPU's or another's memory (the one-shot all-reduce) -------


def join_u64(low, high):
    """Two 32-bit words as one 64-bit value, `low` the low half."""
    return cutlass.Uint64(Uint32(low)) | (cutlass.Uint64(Uint32(high)) << 32)


def _a64(address, loc=None, ip=None):
    return cutlass.Uint64(address).ir_value(loc=loc, ip=ip)


@dsl_user_op
def load_words_l2(address, *, loc=None, ip=None):
    """16 bytes at a 64-bit global address, through L2 only (`ld.global.cg`): a line another GPU
    or an earlier step wrote is never read from this SM's stale L1."""
    result = _asm(_struct(4, "i"), [_a64(address, loc, ip)], "ld.global.cg.v4.u32 {$0, $1, $2, $3}, [$4];",
                  "=r,=r,=r,=r,l", loc, ip)
    return _fields(result, 4, "i", loc, ip)


@dsl_user_op
def load_word_l2(address, *, loc=None, ip=None):
    """One 32-bit word at a 64-bit global address, through L2 only (a memory read: kept in its place)."""
    return Uint32(_asm(T.i32(), [_a64(address, loc, ip)], "ld.global.cg.u32 $0, [$1];", "=r,l", loc, ip))


@dsl_user_op
def store_words_at(address, words, *, loc=None, ip=None):
    """16 bytes (four words) to a 64-bit global address."""
    _asm(None, [_a64(address, loc, ip)] + [_u(w, loc, ip) for w in words], "st.global.v4.u32 [$0], {$1, $2, $3, $4};",
         "l,r,r,r,r", loc, ip)


@dsl_user_op
def store_word_at(address, word, *, loc=None, ip=None):
    """One 32-bit word to a 64-bit global address."""
    _asm(None, [_a64(address, loc, ip), _u(word, loc, ip)], "st.global.u32 [$0], $1;", "l,r", loc, ip)


def _release_text(scope: str) -> str:
    """A flag raised as a release at `scope` (gpu, sys), after a fence: operands address, value."""
    return f"fence.acq_rel.{scope};\n\tst.release.{scope}.global.u32 [$0], $1;"


def _spin_text(scope: str, order: str = "acquire") -> str:
    """Spin until the flag is at least the value (signed), each read `order` (acquire, or relaxed) at `scope`."""
    return ("{\n\t.reg .pred p;\n\t.reg .s32 v;\n\tLANEC_SPIN_${:uid}:\n\t"
            f"ld.{order}.{scope}.global.s32 v, [$0];\n\t"
            "setp.lt.s32 p, v, $1;\n\t@p bra LANEC_SPIN_${:uid};\n\t}")


@dsl_user_op
def release_flag_sys(address, value, *, loc=None, ip=None):
    """`value` to the flag at `address` (any GPU's) as a release at system scope: every write this
    thread's CTA made before its last barrier is visible to whoever acquires the flag."""
    _asm(None, [_a64(address, loc, ip), _u(value, loc, ip)], _release_text("sys"), "l,r", loc, ip)


@dsl_user_op
def acquire_flag_sys(address, value, *, loc=None, ip=None):
    """Spin until the flag at `address` is at least `value` (signed), each read an acquire at
    system scope: what its writer wrote before raising it is visible after."""
    _asm(None, [_a64(address, loc, ip), _u(value, loc, ip)], _spin_text("sys"), "l,r", loc, ip)


@dsl_user_op
def release_flag(pointer, value, *, loc=None, ip=None):
    """`value` to the 32-bit flag at `pointer` (global) as a release at GPU scope, after a fence:
    what the CTA's threads wrote before their last barrier is seen by whoever acquires it."""
    _asm(None, [_address(pointer, loc, ip), _u(value, loc, ip)], _release_text("gpu"), "l,r", loc, ip)


@dsl_user_op
def acquire_flag(pointer, value, *, loc=None, ip=None):
    """Spin until the flag at `pointer` (global) is at least `value` (signed), each read an acquire
    at GPU scope: what its writer's CTA wrote before raising it is visible after."""
    _asm(None, [_address(pointer, loc, ip), _u(value, loc, ip)], _spin_text("gpu"), "l,r", loc, ip)


@dsl_user_op
def wait_flag(pointer, value, *, loc=None, ip=None):
    """Spin until the flag at `pointer` (global) is at least `value` (signed), on relaxed reads at GPU
    scope (from L2, leaving the SM's L1 alone while it spins), then one fence.acq_rel.gpu: an
    acquire of what its writer released (`release_flag`), as `acquire_flag` is."""
    _asm(None, [_address(pointer, loc, ip), _u(value, loc, ip)],
         _spin_text("gpu", "relaxed") + "\n\tfence.acq_rel.gpu;", "l,r", loc, ip)


# --- the argmax epilogue: 64-bit keys of (value, index), their minimum across a grid ------------


@dsl_user_op
def argmax_key(value, index, *, loc=None, ip=None):
    """The 64-bit key whose minimum is the largest `value` and, among equals, the smallest `index`:
    high word the complement of the value's order-preserving bits (-0 taken as +0), low word the
    index."""
    bits = Uint32(float_bits(Float32(value) + Float32(0.0)))
    negative = (bits >> 31) == Uint32(1)
    ordered = cutlass.select_(negative, ~bits, bits | Uint32(0x80000000))
    return (cutlass.Uint64(~ordered) << 32) | cutlass.Uint64(Uint32(index))


@dsl_user_op
def min_u64(pointer, value, *, loc=None, ip=None):
    """atomicMin of a 64-bit unsigned `value` at `pointer` (shared or global memory)."""
    _asm(None, [_address(pointer, loc, ip), cutlass.Uint64(value).ir_value(loc=loc, ip=ip)],
         f"red.{_space(pointer)}.min.u64 [$0], $1;", f"{_ptr_constraint(pointer)},l", loc, ip)


@dsl_user_op
def ticket(pointer, limit, *, loc=None, ip=None):
    """`atom.inc` on the 32-bit counter at `pointer` (global), wrapping to 0 past `limit`, between
    fences: the CTA's writes before its barrier are visible to whoever draws a later count, and
    what the CTAs that drew earlier counts wrote is visible here. Returns the old count."""
    return Uint32(_asm(T.i32(), [_address(pointer, loc, ip), _u(limit, loc, ip)],
                       "fence.acq_rel.gpu;\n\tatom.global.inc.u32 $0, [$1], $2;\n\tfence.acq_rel.gpu;", "=r,l,r",
                       loc, ip))


@dsl_user_op
def load_u64_acquire(pointer, *, loc=None, ip=None):
    """The 64-bit word at `pointer` (global), after a fence: every write the grid made before its
    tickets is seen."""
    low, high = _fields(_asm(_struct(2, "i"), [_address(pointer, loc, ip)],
                             "fence.acq_rel.gpu;\n\tld.global.cg.v2.u32 {$0, $1}, [$2];", "=r,=r,l", loc, ip),
                        2, "i", loc, ip)
    return join_u64(low, high)


@dsl_user_op
def prefetch_l2(pointer, nbytes, *, loc=None, ip=None):
    """Bring `nbytes` (a multiple of 16) from global memory at `pointer` (16-byte aligned) into L2,
    one bulk prefetch: weights a kernel reads after its PDL wait, requested before it."""
    _asm(None, [_address(pointer, loc, ip), Uint32(nbytes).ir_value(loc=loc, ip=ip)],
         "cp.async.bulk.prefetch.L2.global [$0], $1;", "l,r", loc, ip)
