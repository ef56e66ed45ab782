"""Command-line interface ``fgrpo-theory``.

Commands are thin layers over the library: they parse options, call library functions and print
DataFrames. User errors (``ValueError`` from the library or the parsers, and Typer's own usage
errors), unusable paths, a closed stdout and a ``MemoryError`` are printed as one line on stderr
with exit code 2 and no traceback. A reader that goes away (``| head``) ends the run quietly with
exit code 141, as a process killed by SIGPIPE would.
"""

__all__ = ["app", "main"]


def __getattr__(name: str) -> object:
    """``app``, ``main`` and the rest of :mod:`fgrpo_theory.cli._main`, loaded on first use, so
    that importing this package (the console script's shim, :mod:`fgrpo_theory.cli._entry`)
    costs nothing and a Ctrl-C while Typer and the commands load is still one line (this module
    imports nothing at all, not even :mod:`typing`)."""
    if name.startswith("__") or name == "_main":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    _main = importlib.import_module(__name__ + "._main")
    try:
        return getattr(_main, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
