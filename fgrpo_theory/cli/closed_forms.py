"""CLI commands (placeholder until implemented)."""

from ._app import app  # noqa: F401


@app.command("version")
def version() -> None:
    """Print the package version."""
    from .. import __version__

    print(__version__)
