"""Config importers: a Hugging Face config.json -> the model's decode step (see README.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from lanec.models.builder import StepOptions
from lanec.models.config import ConfigError

Importer = Callable[[Mapping[str, Any], StepOptions], ModuleOp]


def kimi_linear(data: Mapping[str, Any], options: StepOptions) -> ModuleOp:
    from lanec.models.config import kimi_linear_config
    from lanec.models.kimi_linear import kimi_linear_step

    return kimi_linear_step(kimi_linear_config(data), options)


def llama(data: Mapping[str, Any], options: StepOptions) -> ModuleOp:
    from lanec.models.config import llama_config
    from lanec.models.llama import llama_step

    return llama_step(llama_config(data), options)


def deepseek_v3(data: Mapping[str, Any], options: StepOptions) -> ModuleOp:
    from lanec.models.config import deepseek_v3_config
    from lanec.models.deepseek_v3 import deepseek_v3_step

    return deepseek_v3_step(deepseek_v3_config(data), options)



def qwen3_next(data: Mapping[str, Any], options: StepOptions) -> ModuleOp:
    from lanec.models.config import qwen3_next_config
    from lanec.models.qwen3_next import qwen3_next_step

    return qwen3_next_step(qwen3_next_config(data), options)


# by config.json's model_type
IMPORTERS: dict[str, Importer] = {"kimi_linear": kimi_linear, "llama": llama, "deepseek_v3": deepseek_v3,
                                  "qwen3_next": qwen3_next}


def importer(data: Any) -> Importer:
    """The importer of a config's `model_type`; an unknown one is a one-line error naming it."""
    model_type = data.get("model_type") if isinstance(data, Mapping) else None
    if model_type not in IMPORTERS:
        raise ConfigError(f"model_type: {model_type!r} is not one lanec imports ({', '.join(IMPORTERS)})")
    return IMPORTERS[model_type]
