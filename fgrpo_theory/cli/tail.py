"""CLI commands (placeholder until implemented)."""

from ._app import app  # noqa: F401
