"""The Typer application object that every command module registers on."""

from __future__ import annotations

import typer
from typer.core import TyperOption

_display_type_rich = TyperOption.display_type_rich


def _no_bool_for_flags(self: TyperOption, ctx: object) -> str | None:
    """Help shows no ``<bool>`` type for a plain flag (``--quick``, ``--help``): it has no value."""
    if self.is_flag and not self.count and self.metavar is None:
        return None
    return _display_type_rich(self, ctx)  # type: ignore[arg-type]


# Shared help machinery: every command's --help goes through this, so the rule holds for all.
TyperOption.display_type_rich = _no_bool_for_flags  # type: ignore[method-assign]

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
