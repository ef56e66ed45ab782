"""The Typer application object that every command module registers on."""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.core import TyperOption

try:  # Typer vendors Click (0.29); older versions use Click itself
    from typer._click.exceptions import MissingParameter
except ImportError:  # pragma: no cover
    from click.exceptions import MissingParameter

_display_type_rich = TyperOption.display_type_rich


def _no_bool_for_flags(self: TyperOption, ctx: object) -> str | None:
    """Help shows no ``<bool>`` type for a plain flag (``--quick``, ``--help``): it has no value."""
    if self.is_flag and not self.count and self.metavar is None:
        return None
    return _display_type_rich(self, ctx)  # type: ignore[arg-type]


# Shared help machinery: every command's --help goes through this, so the rule holds for all.
TyperOption.display_type_rich = _no_bool_for_flags  # type: ignore[method-assign]

_process_value = TyperOption.process_value


#: Canonical decimal integers and numbers (ASCII digits, no sign but "-", no leading zeros, no
#: "_", no spaces): the texts whose int / float Pydantic's lax mode gives as ``int`` / ``float``
#: do (both round a decimal correctly); any other text still goes through Typer and Pydantic.
_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})\Z")
_FLOAT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,40})?(?:[eE]-?[0-9]{1,3})?\Z")


def _without_coercion(self: TyperOption, value: Any) -> tuple[bool, Any]:
    """``(True, value)`` as Typer's coercion would return it, for the values where that needs no
    Pydantic, else ``(False, None)``: an absent value (``None``; ``()`` for a repeatable
    option), a text option given text, and a plain int or float option (no bounds) given a
    canonical decimal text (:data:`_INT_TEXT`, :data:`_FLOAT_TEXT`)."""
    desc = getattr(self, "type_descriptor", None)
    annotation = getattr(desc, "annotation", None)
    if self.multiple or self.nargs == -1:
        return (True, ()) if value is None else (False, None)
    if value is None or (annotation is str and type(value) is str):
        return True, value
    info = getattr(desc, "parameter_info", None)
    plain = type(value) is str and getattr(info, "min", 0) is None and info.max is None
    if plain and getattr(desc, "file_annotation", 0) is None:
        if annotation is int and _INT_TEXT.match(value):
            return True, int(value)
        if annotation is float and _FLOAT_TEXT.match(value):
            return True, float(value)
    return False, None


def _checked_float(self: TyperOption, text: str | None, value: Any) -> Any:
    """``value``, refused showing the option's ``text`` when a float option's nonzero finite
    text read as 0.0 or inf (``--lr 1e-400``): :func:`fgrpo_theory._spec.check_float_text`."""
    if text is None or type(value) is not float or (value != 0.0 and abs(value) != float("inf")):
        return value
    from .._spec import check_float_text

    name = max(self.opts, key=len)
    return check_float_text(text, value, name)


def _process_value_without_pydantic(self: TyperOption, ctx: Any, value: Any) -> Any:
    """Typer's value processing, minus its coercion where that needs no Pydantic
    (:func:`_without_coercion`). Typer 0.29 coerces every value through a Pydantic adapter,
    and importing Pydantic for that cost 0.1-0.35 s of every run (a third of ``miss-prob``'s
    start-up beyond NumPy and pandas; 0.11-0.16 s of CPU of a ``simulate --K 1000``); every
    other value (paths, choices, lists, other texts) still goes through Typer."""
    text = value if type(value) is str else None
    done, value_out = _without_coercion(self, value)
    if not done:
        return _checked_float(self, text, _process_value(self, ctx, value))
    value = _checked_float(self, text, value_out)
    if self.required and self.value_is_missing(value):
        raise MissingParameter(ctx=ctx, param=self)
    if self.callback is not None:
        value = self.callback(ctx, self, value)
    return value


TyperOption.process_value = _process_value_without_pydantic  # type: ignore[method-assign]

app = typer.Typer(
    name="fgrpo-theory",
    help=(
        "Closed forms, a softmax-policy simulator and figures for the theory of F-GRPO "
        "(arXiv 2602.06717): tail-miss probability, mass redistribution, focal weights, pass@k."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"fgrpo-theory {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        callback=_print_version,
        is_eager=True,
    ),
) -> None:
    """Closed forms, simulator and figures for the theory of F-GRPO (arXiv 2602.06717)."""
