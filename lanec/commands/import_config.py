"""`lanec import`: a Hugging Face config.json -> the model's decode step as `form` text."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("import")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), required=True,
              help="the form file to write ('-' for stdout)")
@click.option("--layers", type=int, help="import the first N layers (default: all)")
@click.option("--batch", type=int, default=1, show_default=True, help="requests a step")
@click.option("--spec-tokens", "tokens", type=int, default=1, show_default=True,
              help="tokens a request (> 1: a speculative verify step with accepted counts)")
@click.option("--slots", type=int, help="state slots (default: batch x spec tokens + 1; slot 0 is never used)")
@click.option("--page-size", type=int, default=64, show_default=True, help="cache rows a page")
@click.option("--context-pages", type=int, default=64, show_default=True,
              help="cache pages a request may hold (the longest context is page size x this)")
@click.option("--kda-only", is_flag=True, help="skip the MLA layers (KDA layers only)")
@click.option("--dense-mlp", type=int, metavar="WIDTH",
              help="give every layer a dense MLP of this width in place of its mixture")
@click.option("--no-logits", is_flag=True, help="return the next tokens only, not the logits too")
def import_config(config: str, output: str, layers: int | None, batch: int, tokens: int, slots: int | None,
                  page_size: int, context_pages: int, kda_only: bool, dense_mlp: int | None,
                  no_logits: bool) -> None:
    """Write the decode step of the model CONFIG describes (a Hugging Face config.json).

    Supported: Kimi Linear (model_type kimi_linear), Llama 3 / 3.1 (llama), Qwen3-Next (qwen3_next)."""
    from xdsl.utils.exceptions import VerifyException

    from lanec.models import importer
    from lanec.models.builder import StepOptions, module_text
    from lanec.models.config import ConfigError

    try:
        with open(config) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise click.ClickException(f"{config}: cannot read it: {e}") from None
    except json.JSONDecodeError as e:
        raise click.ClickException(f"{config}: not JSON: {e}") from None
    options = StepOptions(layers=layers, batch=batch, tokens=tokens, slots=slots, page_size=page_size,
                          context_pages=context_pages, kda_only=kda_only, dense_mlp=dense_mlp,
                          logits=not no_logits)
    try:
        text = module_text(importer(data)(data, options))
    except ConfigError as e:
        raise click.ClickException(f"{config}: {e}") from None
    except VerifyException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise click.ClickException(f"{config}: the imported step does not verify: {first}") from None
    try:
        if output != "-":  # a new file's folders are made, as a build directory's would be
            Path(output).parent.mkdir(parents=True, exist_ok=True)
        with click.open_file(output, "w") as out:
            out.write(text)
    except OSError as e:
        raise click.ClickException(f"{output}: cannot write it: {e.strerror or e}") from None
