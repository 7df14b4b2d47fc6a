"""The linear-attention decode chain as the compiler lowers it (our part, conv, kda_gate,
elementwise, delta_rule and head_norm launches) against fla's chain, under CUDA graphs, measured
in the same run with the copy bandwidth. Two steps:

    python bench/linear_attention.py build      # CPU machine: compile into build/bench-linear/
    #       pip download --no-deps fla-core==0.6.0 einops -d .whl
    # GPU machine (carry build/bench-linear and .whl):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:. python3 bench/linear_attention.py
    LANEC_LINEAR_ONLY=kimi PYTHONPATH=/tmp/site:. python3 bench/linear_attention.py   # one layer's rows

Shapes, read from examples/: Qwen3-Next-80B-A3B's Gated DeltaNet layer (16 key heads, 32 value
heads of 128, a scalar decay a head, conv width 4) and Kimi Linear's KDA layer at head size 64
(32 heads, a decay a key: the held-back chain, KdaSplit takes only 128), at batch 1, 8, 64, 256
and 1 or 3 tokens a request (3: a speculative verify step, all tokens accepted).

Ours: `build` imports one layer of each (lanec.models), runs the rules and the lowering, and keeps
the launches of the linear-attention kernels before the layer's post-attention norm, products left
out (both sides start from the products' outputs and end at the gated norm's). So the chain is the
compiler's own: for Gated DeltaNet the parts of the merged product, the q, k and v convs (the L2
norm in the q and k convs' epilogue), kda_gate (a value a head), sigmoid(b), delta_rule and the
swish-gated norm.

fla 0.6.0's chain, as vLLM runs a layer between its products: causal_conv1d_update of q, k and v
(silu; one token a call, so a speculative step calls it a token at a time), the recurrent kernel
with the L2 norm, gate and beta sigmoid in it, and rms_norm_gated. For Kimi the recurrent kernel
is fused_recurrent_kda_fwd, its state updated in place at the slot table's slots (per token with 3
tokens). For Gated DeltaNet it is fused_recurrent_gated_delta_rule_fwd, which in 0.6.0 takes no
slot table: it reads each request's state from a run of the same pool (the slots of the step's
set) and writes the final state to a new tensor (the same bytes; with 3 tokens only the last
token's state, less than the speculative contract ours keeps). fla's conv keeps a [batch,
channels, width] cache a call, one set of caches a slot table.

A graph holds `sets` steps back to back, each on its own slot table (state slots), enough that
one replay touches well over the 60 MB L2; the median replay / sets is a step's time. "% copy":
the bytes the chain must move (`chain_bytes`: the recurrent state read once and written once a
token, the conv state's taps read and written, the conv weights, the chain's inputs and output)
per microsecond, over the device-to-device copy bandwidth; the same bytes for both sides. fla runs
in a process of its own a problem (its Triton kernels autotune at each shape; a crash costs one
row)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import measure  # bench/measure.py: this script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench-linear"
QWEN = ROOT / "examples" / "qwen3-next-80b-a3b.config.json"
KIMI = ROOT / "examples" / "kimi-linear-48b-a3b.config.json"
KIMI_HEAD = 64  # the KDA head size KdaSplit does not take: the held-back chain
BATCHES = [1, 8, 64, 256]
TOKENS = [1, 3]
TOUCHED = 256 << 20  # state bytes one graph replay reads at least (the L2 holds 60 MB)
MAX_SETS = 128
CHAIN_KERNELS = ("part", "conv", "kda_gate", "elementwise", "delta_rule", "head_norm")


def gdn_shape(config: dict) -> dict:
    """The Gated DeltaNet layer of a Qwen3-Next config.json (a dict), with transformers' defaults."""
    from lanec.models.config import qwen3_next_config

    c = qwen3_next_config(config)
    return dict(kind="gdn", heads=c.value_heads, key_heads=c.key_heads, key=c.key_dim, value=c.value_dim,
                conv_width=c.conv_width)


def kda_shape(config: dict, head: int = KIMI_HEAD) -> dict:
    """The KDA layer of a Kimi Linear config.json (a dict) at KDA heads of `head` values."""
    linear = config["linear_attn_config"]
    return dict(kind="kda", heads=linear["num_heads"], key_heads=linear["num_heads"], key=head, value=head,
                conv_width=linear.get("short_conv_kernel_size", 4))


def channels(shape: dict) -> int:
    """The conv's channels: q and k (key heads x key) and v (heads x value)."""
    return 2 * shape["key_heads"] * shape["key"] + shape["heads"] * shape["value"]


def state_bytes(shape: dict, tokens: int) -> int:
    """One slot's states: the fp32 recurrent state and the bf16 conv state of `tokens` a step
    (its taps: width - 2 + tokens a channel)."""
    taps = shape["conv_width"] - 2 + tokens
    return shape["heads"] * shape["value"] * shape["key"] * 4 + channels(shape) * taps * 2


def chain_bytes(shape: dict, batch: int, tokens: int) -> dict[str, int]:
    """The bytes a step of the chain must move, by what they are: the recurrent state read once
    and written once a token (a speculative step keeps each token's state), the conv state's taps
    read and written, the conv weights, and the activations: q, k, v, the output gate, the raw
    decay (a value a key with KDA, a head with Gated DeltaNet) and b in (bf16), the output out."""
    heads, key, value, width = shape["heads"], shape["key"], shape["value"], shape["conv_width"]
    rows = batch * tokens
    decay = heads * key if shape["kind"] == "kda" else heads
    return {
        "recurrent state": batch * (1 + tokens) * heads * value * key * 4,
        "conv state": 2 * batch * channels(shape) * (width - 2 + tokens) * 2,
        "conv weights": channels(shape) * width * 2,
        "activations": rows * 2 * (channels(shape) + heads * value + decay + heads + heads * value),
    }


def sets_for(shape: dict, batch: int, tokens: int) -> int:
    """Slot tables a graph rotates through: enough that one replay reads TOUCHED bytes of state."""
    per_set = batch * tokens * state_bytes(shape, tokens)
    return max(2, min(MAX_SETS, -(-TOUCHED // per_set)))


def slot_table(batch: int, tokens: int, s: int) -> list:
    """Set `s`'s slot table: request b's token t at slot 1 + (s batch + b) tokens + t (slot 0 is
    never used); [batch] with one token, [batch, tokens] with more."""
    rows = [[1 + (s * batch + b) * tokens + t for t in range(tokens)] for b in range(batch)]
    return [row[0] for row in rows] if tokens == 1 else rows


def step_options(shape: dict, batch: int, tokens: int):
    from lanec.models.builder import StepOptions

    slots = 1 + sets_for(shape, batch, tokens) * batch * tokens
    extra = dict(kda_only=True, dense_mlp=512) if shape["kind"] == "kda" else {}
    return StepOptions(layers=1, batch=batch, tokens=tokens, slots=slots, logits=False, **extra)


def config_of(kind: str) -> dict:
    if kind == "gdn":
        return json.loads(QWEN.read_text())
    config = json.loads(KIMI.read_text())
    config["linear_attn_config"]["head_dim"] = KIMI_HEAD
    return config


def spec_stem(kernel: str, spec: dict) -> str:
    """An artifact's name: the kernel and a digest of its specialization (equal specs share one)."""
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return f"{kernel}_{digest}"


def lowered_chain(kind: str, batch: int, tokens: int) -> dict:
    """One layer of `kind` (gdn, kda) imported at `batch` x `tokens`, fused and lowered; its
    linear-attention launches (kernel, spec, stem, args as [buffer, element offset]) up to the
    layer's post-attention norm, products left out, and the buffers they bind (shape, dtype,
    role, source)."""
    from lanec.codegen.spec import spec_of
    from lanec.dialects import lane
    from lanec.models import importer
    from lanec.pipeline import fuse, lower

    config = config_of(kind)
    shape = gdn_shape(config) if kind == "gdn" else kda_shape(config)
    module = importer(config)(config, step_options(shape, batch, tokens))
    fuse(module)
    step = lower(module, f"{kind} b{batch} t{tokens}").body.block.ops.first
    buffers, launches = {}, []

    def operand(value) -> list:
        owner = value.owner
        if isinstance(owner, lane.ViewOp):
            base, offset = operand(owner.base)
            return [base, offset + owner.offset.value.data]
        name = owner.buffer_name.data
        if name not in buffers:
            source = owner.properties.get("source")
            buffers[name] = dict(shape=list(value.type.get_shape()), dtype=str(value.type.element_type),
                                 role=owner.role.data, source=source.data if source is not None else None)
        return [name, 0]

    for op in step.body.block.ops:
        if not isinstance(op, lane.LaunchOp):
            continue
        kernel, spec = op.kernel.data, spec_of(op)
        if kernel == "rmsnorm" and spec.get("residual"):
            break  # the post-attention norm: the layer's mixer is done
        if kernel in CHAIN_KERNELS:
            launches.append(dict(kernel=kernel, spec=spec, stem=spec_stem(kernel, spec),
                                 args=[operand(v) for v in op.args]))
    if not launches:
        raise SystemExit(f"{kind} b{batch} t{tokens}: the lowered layer has no linear-attention launches")
    eps = next(x["spec"]["eps"] for x in reversed(launches) if x["kernel"] == "head_norm")
    gate = next(x["spec"].get("gate") for x in reversed(launches) if x["kernel"] == "head_norm")
    return dict(shape={**shape, "eps": eps, "gate": gate}, launches=launches, buffers=buffers)


def problems() -> list[dict]:
    """Every (shape, batch, tokens) problem with its lowered chain, sets and byte count."""
    listing = []
    for kind, label in (("gdn", "qwen3-next gdn"), ("kda", f"kimi kda h{KIMI_HEAD}")):
        for batch in BATCHES:
            for tokens in TOKENS:
                chain = lowered_chain(kind, batch, tokens)
                shape = chain["shape"]
                listing.append(dict(label=label, batch=batch, tokens=tokens, sets=sets_for(shape, batch, tokens),
                                    bytes=sum(chain_bytes(shape, batch, tokens).values()), **chain))
    return listing


def artifacts(listing: list[dict]) -> dict[str, tuple[str, dict]]:
    """stem -> (kernel, spec): each distinct specialization the problems launch, once."""
    return {x["stem"]: (x["kernel"], x["spec"]) for p in listing for x in p["launches"]}


def build() -> None:
    sys.path.insert(0, str(ROOT))
    from lanec.codegen.compile import compile_kernel
    from lanec.codegen.kernels import make_kernel

    start = time.perf_counter()
    listing = problems()
    wanted = artifacts(listing)
    for n, (stem, (kernel, spec)) in enumerate(sorted(wanted.items()), 1):
        compile_kernel(make_kernel(kernel, spec)).save(OUT, stem)
        print(f"built {stem} ({n}/{len(wanted)}, {time.perf_counter() - start:.0f} s)", flush=True)
    (OUT / "manifest.json").write_text(json.dumps(listing, indent=1) + "\n")
    print(f"{len(listing)} problems, {len(wanted)} kernels in {OUT}")


# -- the GPU machine ---------------------------------------------------------------------------

TORCH_DTYPES = {"bf16": "bfloat16", "f32": "float32", "i32": "int32"}


class Tensors:
    """A problem's buffers on the device (weights, states and activations random, in ranges where
    the chain stays finite) and its `sets` slot tables, with the accepted counts (all tokens)."""

    def __init__(self, torch, problem: dict):
        batch, tokens, sets = problem["batch"], problem["tokens"], problem["sets"]
        self.buffers = {}
        for name, b in problem["buffers"].items():
            dtype = getattr(torch, TORCH_DTYPES[b["dtype"]])
            if b["role"] == "input":
                continue
            scale = 0.1 if b["role"] == "state" else 0.5
            self.buffers[name] = (torch.randn(b["shape"], device="cuda") * scale).to(dtype)
        self.inputs = {name: b["source"] for name, b in problem["buffers"].items() if b["role"] == "input"}
        self.tables = [torch.tensor(slot_table(batch, tokens, s), dtype=torch.int32, device="cuda")
                       for s in range(sets)]
        self.accepted = torch.full((batch,), tokens, dtype=torch.int32, device="cuda")

    def pointer(self, arg: list, s: int) -> int:
        name, offset = arg
        if name in self.inputs:
            source = self.inputs[name]
            if source not in ("slots", "accepted"):
                raise SystemExit(f"the chain binds input {source!r}: only slots and accepted are fed here")
            return (self.tables[s] if source == "slots" else self.accepted).data_ptr()
        tensor = self.buffers[name]
        return tensor.data_ptr() + offset * tensor.element_size()


def ours_us(torch, driver, stream, kernels, problem: dict) -> float:
    """A step of the lowered chain: the median replay of a graph of `sets` steps, / sets."""
    tensors = Tensors(torch, problem)
    torch.cuda.synchronize()
    launches = []
    for s in range(problem["sets"]):
        for x in problem["launches"]:
            art, function = kernels.load(x["stem"])
            launches.append(driver.Launch(function, art.launch, [tensors.pointer(a, s) for a in x["args"]], stream))
    us = measure.graph_us(driver, stream, launches) / problem["sets"]
    del tensors
    torch.cuda.empty_cache()
    return us


class Loaded:
    """The artifacts of build/bench-linear, each loaded once."""

    def __init__(self, driver):
        from lanec.runtime.artifact import load_artifact

        self.driver, self.load_artifact, self.loaded = driver, load_artifact, {}

    def load(self, stem: str):
        if stem not in self.loaded:
            art = self.load_artifact(OUT, stem)
            self.loaded[stem] = art, self.driver.Module(art.cubin).function(art.entry, art.launch)
        return self.loaded[stem]


def fla_chain(torch, problem: dict):
    """fla's chain for `problem` as a function of no arguments running its `sets` steps."""
    from fla.modules.causal_conv1d.ops import causal_conv1d_update
    from fla.modules.norm.fused_norm_gate import rms_norm_gated
    from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule_fwd
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

    shape, batch, tokens, sets = problem["shape"], problem["batch"], problem["tokens"], problem["sets"]
    heads, key_heads, key, value, width = (shape[k] for k in ("heads", "key_heads", "key", "value", "conv_width"))
    kda = shape["kind"] == "kda"
    bf = dict(device="cuda", dtype=torch.bfloat16)
    widths = [key_heads * key, key_heads * key, heads * value]
    x = [torch.randn(batch, tokens, w, **bf) for w in widths]
    weights = [torch.randn(w, width, **bf) * 0.5 for w in widths]
    caches = [[torch.randn(batch, w, width, **bf) * 0.1 for w in widths] for _ in range(sets)]
    raw_gate = torch.randn(batch, tokens, heads, *([key] if kda else []), **bf)
    beta = torch.randn(batch, tokens, heads, **bf)
    a_log = torch.rand(heads, device="cuda") - 0.5
    dt_bias = torch.randn(heads * key if kda else heads, device="cuda") * 0.5
    output_gate = torch.randn(batch * tokens * heads, value, **bf)
    norm_weight = torch.ones(value, **bf)
    slots = 1 + sets * batch * tokens
    state = torch.randn(slots, heads, value, key, device="cuda") * 0.1
    tables = [torch.tensor(slot_table(batch, tokens, s), dtype=torch.int32, device="cuda") for s in range(sets)]
    accepted = torch.full((batch,), tokens, dtype=torch.int32, device="cuda") if tokens > 1 else None
    step = iter(range(1 << 62))
    activation = "sigmoid" if shape["gate"] == "sigmoid" else "swish"

    def one_step() -> None:
        s = next(step) % sets
        outs = []
        for i in range(3):  # fla's conv update takes one token a sequence: a token a call
            per_token = [causal_conv1d_update(x[i][:, t], caches[s][i], weight=weights[i], activation="silu")[0]
                         for t in range(tokens)]
            outs.append(torch.stack(per_token, 1) if tokens > 1 else per_token[0].unsqueeze(1))
        q, k = (o.view(batch, tokens, key_heads, key) for o in outs[:2])
        v = outs[2].view(batch, tokens, heads, value)
        if kda:
            o, _ = fused_recurrent_kda_fwd(
                q, k, v, raw_gate, beta, A_log=a_log, dt_bias=dt_bias, initial_state=state,
                inplace_final_state=True, state_v_first=True, ssm_state_indices=tables[s],
                num_accepted_tokens=accepted, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                use_beta_sigmoid_in_kernel=True)
        else:  # 0.6.0's kernel takes no slot table: the set's run of the pool, a new final state
            first = 1 + s * batch * tokens
            o, _ = fused_recurrent_gated_delta_rule_fwd(
                q, k, v, g=raw_gate, beta=beta, A_log=a_log, dt_bias=dt_bias, scale=key ** -0.5,
                initial_state=state[first:first + batch], output_final_state=True,
                use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True, state_v_first=True)
        rms_norm_gated(o.reshape(-1, value), output_gate, norm_weight, None, activation=activation, eps=shape["eps"])

    return lambda: [one_step() for _ in range(sets)]


def fla_us(index: int) -> float:
    """fla's chain for problem `index` of the manifest, in a process of its own; NaN where it
    failed (the reason printed)."""
    command = [sys.executable, __file__, "--fla-only", str(index)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        print(f"  fla problem {index}: timed out", flush=True)
        return float("nan")
    for line in reversed(run.stdout.splitlines()):
        if line.startswith("fla "):
            return float(line.split()[1])
    reason = (run.stderr.strip().splitlines() or ["no output"])[-1]
    print(f"  fla problem {index}: failed ({reason})", flush=True)
    return float("nan")


def fla_only(index: int) -> None:
    import torch

    problem = json.loads((OUT / "manifest.json").read_text())[index]
    torch.cuda.init()
    stream = torch.cuda.Stream()
    print(f"fla {measure.torch_graph_us(torch, stream, fla_chain(torch, problem)) / problem['sets']}", flush=True)


def run() -> None:
    import torch

    sys.path.insert(0, str(ROOT))
    from lanec.runtime import driver

    device = driver.Device(0)
    torch.cuda.init()
    copy_bw, _ = measure.ceilings(torch, torch.cuda.Stream(), device.name)
    kernels, stream = Loaded(driver), driver.Stream()
    try:
        import fla  # noqa: F401
        anchors = True
    except ImportError:
        print("fla is not importable (carry .whl/: pip download --no-deps fla-core==0.6.0 einops -d .whl): "
              "its column left empty")
        anchors = False
    listing = json.loads((OUT / "manifest.json").read_text())
    only = os.environ.get("LANEC_LINEAR_ONLY", "")  # e.g. "kimi": only the problems whose label has it
    rows = []
    for index, p in enumerate(listing):
        if only not in p["label"]:
            continue
        ours = ours_us(torch, driver, stream, kernels, p)
        anchor = fla_us(index) if anchors else float("nan")
        rows.append((p, ours, anchor))
        print(f"  {p['label']} b{p['batch']} t{p['tokens']}: ours {ours:.2f} us ({len(p['launches'])} launches)  "
              f"fla {anchor:.2f} us", flush=True)
    print(f"\nGPU: {device.name}; copy {copy_bw / 1e12:.2f} TB/s (read + write)")
    print("| layer | batch | tokens | launches | MB moved | ours us | % copy | fla us | % copy | fla / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p, ours, anchor in rows:
        share = [100 * p["bytes"] / (us * 1e-6) / copy_bw for us in (ours, anchor)]
        print(f"| {p['label']} | {p['batch']} | {p['tokens']} | {len(p['launches'])} | {p['bytes'] / 1e6:.2f} "
              f"| {ours:.2f} | {share[0]:.1f}% | {anchor:.2f} | {share[1]:.1f}% | {anchor / ours:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--fla-only":
        fla_only(int(sys.argv[2]))
    else:
        measure.main(build, run, "linear_attention.py")
