"""`lanec generate plan.bin --weights model.safetensors --prompt-ids 1,2,3 --max-new 16`: greedy
decoding through the plan's decode step, one request a token a step, on the GPU through the
runtime (lanec/runtime/generate.py), or with `--interpret` on the CPU through the interpreter
(lanec/interp/generate.py; PLAN_OR_FORM may then be a form file too). Prints the tokens (and,
with --tokenizer, the text) as they come, then the tokens a second."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from lanec.commands import reported


def prompt_ids(text: str) -> list[int]:
    """`1,2,3` as token ids (one line of error otherwise)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        ids = [int(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not p.lstrip("-").isdigit())
        raise click.ClickException(f"--prompt-ids: {bad!r} is not a token id: give comma-separated integers, "
                                   "e.g. 1,2,3") from None
    if any(i < 0 for i in ids):
        raise click.ClickException(f"--prompt-ids: token id {min(ids)} is negative")
    return ids


def load_tokenizer(path: Path):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise click.ClickException("--tokenizer needs the tokenizers package (pip install tokenizers)") from None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # the Rust side raises a bare Exception with a long message
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise click.ClickException(f"{path}: not a tokenizer.json: {first}") from None


class Printer:
    """Tokens (or, with a tokenizer, text) printed as they come; the text is decoded from all new
    tokens so far and only what is new is printed (a piece ending mid-character waits)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.tokens, self.shown = tokenizer, [], ""

    def __call__(self, token: int) -> None:
        self.tokens.append(token)
        if self.tokenizer is None:
            click.echo(f" {token}", nl=False)
            return
        text = self.tokenizer.decode(self.tokens)
        if text.endswith("\ufffd"):
            return
        if text.startswith(self.shown):
            click.echo(text[len(self.shown):], nl=False)
        self.shown = text

    def finish(self) -> None:
        if self.tokenizer is not None:
            text = self.tokenizer.decode(self.tokens)
            if text.startswith(self.shown) and len(text) > len(self.shown):
                click.echo(text[len(self.shown):], nl=False)
            click.echo()
            click.echo("tokens: " + " ".join(map(str, self.tokens)))
        else:
            click.echo()


def is_plan(path: Path) -> bool:
    from lanec.runtime.plan import MAGIC

    try:
        with path.open("rb") as file:
            return file.read(len(MAGIC)) == MAGIC
    except OSError as error:
        raise click.ClickException(f"cannot read {path}: {error.strerror or error}") from None


def read_plan(source: Path):
    """A plan and its interpreter program."""
    from lanec.interp.program import Program
    from lanec.runtime.plan import Plan, PlanError

    plan = Plan.read(source)
    if not plan.program:
        raise PlanError(f"{source} carries no interpreter program: recompile it with this lanec")
    return plan, Program.from_json(plan.program)


def interpreted_program(source: Path):
    """The step's program: a plan's own, or a form file's (parsed and verified)."""
    if is_plan(source):
        return read_plan(source)[1]
    from lanec.interp.lower import program_of
    from lanec.pipeline import parse_verify

    with reported():
        module, _ = parse_verify(source)
    return program_of(module)


@click.command()
@click.argument("source", metavar="PLAN_OR_FORM", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--weights", type=click.Path(exists=True, path_type=Path), required=True,
              help="the safetensors file, sharded checkpoint (folder or index) or GGUF file to take the weights "
                   "from (bound as `lanec run --weights`)")
@click.option("--prompt-ids", "ids", metavar="IDS", help="the prompt as comma-separated token ids: 1,2,3")
@click.option("--prompt", "text", metavar="TEXT", help="the prompt as text (needs --tokenizer)")
@click.option("--tokenizer", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a tokenizer.json (Hugging Face tokenizers) for --prompt and the printed text")
@click.option("--max-new", "new", type=click.IntRange(min=1), default=16, show_default=True,
              help="new tokens to choose")
@click.option("--interpret", is_flag=True, help="decode on the CPU with the interpreter (PLAN_OR_FORM may be a form)")
@click.option("--graph/--no-graph", default=True, show_default=True,
              help="replay the step as a CUDA graph, or launch eagerly")
@click.option("--pdl/--no-pdl", default=True, show_default=True, help="launch with programmatic dependent launch")
def generate(source: Path, weights: Path, ids: str | None, text: str | None, tokenizer: Path | None, new: int,
             interpret: bool, graph: bool, pdl: bool) -> None:
    """Greedy decoding through PLAN_OR_FORM's decode step: batch 1, one token a step (the prompt too)."""
    from lanec.runtime.runner import user_errors

    if (ids is None) == (text is None):
        raise click.ClickException("give the prompt as --prompt-ids 1,2,3 or as --prompt TEXT (with --tokenizer), "
                               "one of them")
    if text is not None and tokenizer is None:
        raise click.ClickException("--prompt TEXT needs --tokenizer tokenizer.json (or give --prompt-ids)")
    words = load_tokenizer(tokenizer) if tokenizer is not None else None
    if ids is not None:
        prompt = prompt_ids(ids)
    else:
        prompt = words.encode(text).ids
        if not prompt:
            raise click.ClickException(f"the tokenizer makes no tokens of the prompt {text!r}")

    printer = Printer(words)
    try:
        if interpret:
            decoded = run_interpreter(source, weights, prompt, new, printer)
        else:
            decoded = run_gpu(source, weights, prompt, new, printer, graph, pdl)
    except user_errors() as error:
        if printer.tokens:
            click.echo()
        raise click.ClickException(str(error)) from None
    printer.finish()
    where = "on the CPU (interpreter)" if interpret else "on the GPU"
    click.echo(f"{len(decoded.tokens)} new tokens after {len(prompt)} prompt tokens {where}: the first at "
               f"{decoded.first_s * 1e3:.1f} ms, then {decoded.rate():.1f} tokens/s")


def announce(prompt: list[int], printer: Printer) -> None:
    click.echo("prompt: " + " ".join(map(str, prompt)))
    click.echo("tokens:" if printer.tokenizer is None else "text: ", nl=False)


def run_gpu(source: Path, weights: Path, prompt: list[int], new: int, printer: Printer, graph: bool, pdl: bool):
    from lanec.interp.generate import prepare
    from lanec.runtime import generate as decode
    from lanec.runtime.plan import PlanError
    from lanec.runtime.runner import Options, plan_sources

    if not is_plan(source):
        raise PlanError(f"{source} is not a plan: compile it with `lanec compile`, or decode a form with --interpret")
    plan, program = read_plan(source)
    prepare(program, prompt, new)  # the step's shape and the prompt, before any weight is read
    sources = plan_sources(plan, program, Options(weights=weights), source)
    # the prompt shown once the GPU holds the plan: a machine without one says so in one line
    return decode.generate(plan, program, sources, prompt, new, graph=graph, pdl=pdl, on_token=printer,
                           on_ready=lambda: announce(prompt, printer))


def run_interpreter(source: Path, weights: Path, prompt: list[int], new: int, printer: Callable[[int], None]):
    import time

    from lanec.interp.generate import checkpoint_weights, generate, prepare
    from lanec.runtime.generate import Decoded

    program = interpreted_program(source)
    prepare(program, prompt, new)
    values = checkpoint_weights(program, weights)
    announce(prompt, printer)
    started = time.perf_counter()
    first: list[float] = []

    def on_token(token: int) -> None:
        if not first:
            first.append(time.perf_counter())
        printer(token)

    run = generate(program, values, prompt, new, on_token=on_token)
    return Decoded(run.tokens, first[0] - started, time.perf_counter() - started)
