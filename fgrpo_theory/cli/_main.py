"""The CLI proper: the Typer app with every command registered, and :func:`main`, which turns
user errors, Ctrl-C and a closed stdout into one line and an exit code (see the package
docstring). Loaded on first use of ``fgrpo_theory.cli.app`` or ``.main``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ._app import app

# Each command module registers its commands on ``app`` when imported; it keeps heavy imports
# (numba, matplotlib, the simulator) inside the command functions.
from . import tail, focal, passk, mass, simulate  # noqa: E402,F401  isort: skip
from . import diagnose, compare_passk, population  # noqa: E402,F401  isort: skip
from . import figures, validate, scheme, lr, sequence, plan  # noqa: E402,F401  isort: skip

__all__ = ["app", "main"]


#: Library arguments set by an option of another name: argument -> (option, words that name it).
_SET_BY = {
    "r_correct": ("--rewards", "--rewards R_c"),
    "r_incorrect": ("--rewards", "--rewards R_w"),
    "subsets": ("--subset", "--subset"),
}


def _in_option_words(message: str, args: Sequence[str]) -> str:
    """Name the option, not the library argument, that starts a library message.

    Library functions raise ``"<argument> must be ...; got <value>"``; when the invoked command
    has the option ``--<argument>`` (underscores as hyphens: ``by_step`` is ``--by-step``; a few
    arguments are set by an option of another name, :data:`_SET_BY`, and a named entry such as
    ``subsets.rare`` reads ``--subset rare``) and the user typed it, the message names the option,
    so a user reads the words they typed; another argument the requirement names in snake_case
    (``unless dynamic_sampling = 'openrlhf'``) then reads as its option too, where the command
    has it (``--dynamic-sampling``). Other messages pass as they are (they name an option, a file,
    a column, or the key of a config file or preset the value came from).
    """
    import re

    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(?:\.(\S+))? must ", message)
    name = next((a for a in args if not a.startswith("-")), None)
    if m is None or name is None:
        return message
    try:
        import typer

        cmd = typer.main.get_command(app).commands.get(name)  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover - a message must never fail to print
        return message
    if cmd is None:
        return message
    opts = {o for p in cmd.params for o in getattr(p, "opts", ()) if o.startswith("--")}
    argument, entry = m.group(1), m.group(2)
    option = "--" + argument.replace("_", "-")
    option, words = _SET_BY.get(argument, (option, option))
    if entry is not None:
        words = f"{words} {entry}"
    typed = any(a == option or a.startswith(option + "=") for a in args)
    # only an option the user typed: a value from a config file or preset keeps its key's name
    if option not in opts or not typed:
        return message
    requirement, got, value = message[m.end() - len(" must ") :].partition("; got ")

    def as_option(word: re.Match[str]) -> str:
        other = "--" + word.group().replace("_", "-")
        return other if other in opts else word.group()

    requirement = re.sub(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", as_option, requirement)
    return words + requirement + got + value


#: What an option's value must be, by the kind of number Typer failed to convert it to (Click's
#: type name, or the head of Pydantic's error type, which newer Typer versions convert with).
_NUMBER_KINDS = {"integer": "an integer", "int": "an integer", "float": "a number"}


def _unconverted_number(e: Exception, args: Sequence[str]) -> str | None:
    """``"--steps must be an integer; got '1.5'"`` for an option value Typer could not convert to
    the option's int or float type, else None.

    Typer's own message names the option but not the value ("Input should be a valid integer");
    this one reads like every other user error (:func:`fgrpo_theory._validate.fail`), for every
    int and float option of every command. The value is the last one the user typed for it.
    """
    from .._validate import fail

    param = getattr(e, "param", None)
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    kind = getattr(getattr(param, "type", None), "name", None)
    errors = getattr(e.__cause__, "errors", None)
    if callable(errors):
        first = (errors() or [{}])[0]
        kind = str(first.get("type", "")).partition("_")[0]
    requirement = _NUMBER_KINDS.get(str(kind))
    typed = None  # (option, value) as last typed: "--steps 1.5" or "--steps=1.5"
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if a in opts and i + 1 < len(args):
            typed = (a, args[i + 1])
        elif eq and name in opts:
            typed = (name, value)
    if requirement is None or typed is None:
        return None
    option, value = typed
    digits = value.strip().lstrip("+-").replace("_", "")
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if digits.isdigit() and digits.isascii() and 0 < limit < len(digits):
        # an integer all the same, only too long for Python to convert (and far out of range)
        requirement = f"an integer of at most {limit} digits"
    try:  # the library's own wording, a value over 200 characters cut saying how long it was
        fail(option, value, requirement)
    except ValueError as e:
        return str(e)
    return None  # pragma: no cover - fail always raises


#: Most Numba threads a run may ask for through ``NUMBA_NUM_THREADS`` (or the CPU count, if
#: larger): Numba starts that many threads at the first parallel kernel and checks nothing, so
#: 100000 ended ``simulate`` in a segmentation fault; 1024 was measured to start and run here,
#: and threads beyond the CPUs never make a kernel faster.
MAX_NUMBA_THREADS = 1024


def _max_numba_threads() -> int:
    import os

    return max(MAX_NUMBA_THREADS, os.cpu_count() or 1)


def _check_environment() -> None:
    """Environment variables read by libraries with messages that name nothing (or that crash):
    checked here so that the error names the variable (``NUMBA_NUM_THREADS=0``), in one line
    with exit code 2. ``NUMBA_NUM_THREADS`` must be an integer in [1, :func:`_max_numba_threads`];
    an empty value is refused too (Numba printed a 9-line warning for it and used its default).
    """
    import os

    from .._validate import fail

    value = os.environ.get("NUMBA_NUM_THREADS")
    if value is None:
        return
    top = _max_numba_threads()
    text = value.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 9 and 1 <= int(text) <= top):
        fail(
            "NUMBA_NUM_THREADS",
            value,
            f"an integer in [1, {top}] (environment variable; unset it for one per CPU)",
        )


def _stdout_closed() -> bool:
    """Flush stdout (``--version``, help, a result still in the buffer); True if its reader has
    gone (``| head -c1``), stdout then pointed at /dev/null so that the flush at exit is quiet."""
    import os

    out = sys.stdout
    try:
        if out is not None and not getattr(out, "closed", False):
            out.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        return True
    except (OSError, ValueError):
        return False
    return False


def _error(message: str) -> int:
    print("Error: " + " ".join(str(message).split()), file=sys.stderr)
    return 2


def _command_name(info: object) -> str:
    callback = getattr(info, "callback", None)
    return getattr(info, "name", None) or getattr(callback, "__name__", "").replace("_", "-")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["--help"]
    # Typer converts every registered command's parameters when it builds the click group: a
    # run that names its command gets a group of that command only (a tenth of the cost; the
    # root's --help and a misspelt command still see them all).
    commands = app.registered_commands
    chosen = [c for c in commands if _command_name(c) == args[0]]
    if len(chosen) == 1:
        app.registered_commands = chosen
    try:
        code = _run(args)
    finally:
        app.registered_commands = commands
    if argv is None:
        sys.exit(code)
    return code


def _run(args: list[str]) -> int:
    import typer

    from ._common import INTERRUPTED_AFTER, StdoutClosed

    INTERRUPTED_AFTER.clear()
    try:
        _check_environment()
        rv = app(args=args, prog_name="fgrpo-theory", standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        code = _error("aborted")
    except KeyboardInterrupt:
        code = 130
    except StdoutClosed:
        code = 141
    except SystemExit as e:  # rich's help printer turns a closed pipe into SystemExit(1)
        if not isinstance(e.__context__, BrokenPipeError):
            raise
        code = 141
    except MemoryError:
        code = _error("out of memory: the request is too large for this machine; ask for less")
    except ValueError as e:
        code = _error(_in_option_words(str(e), args))
    except OSError as e:  # a path the user gave cannot be read or written
        where = f" '{e.filename}'" if e.filename else ""
        code = _error(f"cannot use the path{where}: {e.strerror or e}")
    except Exception as e:  # Typer's usage errors (bad option, missing value, ...)
        if hasattr(e, "format_message") and hasattr(e, "exit_code"):
            _error(_unconverted_number(e, args) or e.format_message())
            code = e.exit_code or 2
        else:
            raise
    else:
        code = rv if isinstance(rv, int) else 0
    if code != 130 and _stdout_closed():
        code = 141
    if code == 130:
        # every Ctrl-C ends here, whether typer turned it into Exit(130) (returned as rv with
        # standalone_mode=False: silently, before) or a command stopped its run on it
        detail = f" after {INTERRUPTED_AFTER[-1]}" if INTERRUPTED_AFTER else ""
        print(f"fgrpo-theory: interrupted{detail}", file=sys.stderr)
        from ._entry import reported

        reported()  # the console script's Ctrl-C watchdog prints no second line
    return code
