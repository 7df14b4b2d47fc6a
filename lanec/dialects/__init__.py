"""lanec's dialects: `form` (the model's decode step) and `lane` (its launches)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect


def get_builtin() -> Dialect:
    from xdsl.dialects.builtin import Builtin

    return Builtin


def get_form() -> Dialect:
    from lanec.dialects.form import Form

    return Form


def get_lane() -> Dialect:
    from lanec.dialects.lane import Lane

    return Lane


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Every dialect lanec reads, name -> lazy getter (as xDSL's own registry keeps them)."""
    return {"builtin": get_builtin, "form": get_form, "lane": get_lane}
