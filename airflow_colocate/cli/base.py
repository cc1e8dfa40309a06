"""The Click classes every ``colocate`` command is built from.

Two promises live here so that no command has to keep them itself:

* a command line the parser refuses (bad value, unknown command or option, missing argument) is
  one line naming the command, what was wrong and where its help is, exit 2, like every catalog
  error; Click's own multi-line usage blocks are for people at a terminal, not for the scripts and
  DAGs that call ``colocate``;
* what a command returns is printed by :mod:`airflow_colocate.cli.output`, so ``--json`` and the
  tables behave the same in every command.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
from sqlalchemy.engine import make_url

from airflow_colocate.catalog import Catalog
from airflow_colocate.catalog.engine import default_url
from airflow_colocate.core.errors import NotFound
from airflow_colocate.cli import output
from airflow_colocate.core import validate
from airflow_colocate.core.errors import InvalidArgument

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}  # the root's; subcommands inherit it


class Refusal(click.UsageError):
    """A refused command line, already phrased as its one line."""

    def __init__(self, ctx: click.Context, message: str):
        path = ctx.command_path
        super().__init__(f"{path}: {message}; see '{path} --help'", ctx)


def _hint(param: click.Parameter) -> str:
    return "/".join(param.opts) if isinstance(param, click.Option) else (param.name or "?")


def _given(value) -> bool:
    return isinstance(value, str) or (isinstance(value, (tuple, list)) and len(value) > 0)


def refusal(ctx: click.Context, exc: click.UsageError) -> Refusal:
    """Rephrase Click's refusal in the words every ``colocate`` refusal uses."""
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, click.NoSuchOption):
        message = f"unrecognized arguments: {exc.option_name}"
        if exc.possibilities:
            message += f" (did you mean {' or '.join(exc.possibilities)}?)"
        elif ctx.parent is not None and exc.option_name in _root_options(ctx):
            root, _, rest = ctx.command_path.partition(" ")
            message += f" ({exc.option_name} goes before the command: {root} {exc.option_name} VALUE {rest})"
        return Refusal(ctx, message)
    if isinstance(exc, click.BadOptionUsage):
        wrong = "takes no value" if "does not take" in exc.message else "expected one argument"
        return Refusal(ctx, f"argument {exc.option_name}: {wrong}")
    if isinstance(exc, click.BadParameter) and exc.param is not None:
        return Refusal(ctx, f"argument {_hint(exc.param)}: {exc.message}")
    message = exc.message.rstrip(".")
    return Refusal(ctx, message[:1].lower() + message[1:])


def _root_options(ctx: click.Context) -> set[str]:
    root = ctx.find_root()
    return {opt for p in root.command.get_params(root) if isinstance(p, click.Option) for opt in p.opts}


def _check_text(ctx: click.Context, parameters: list[click.Parameter]) -> None:
    """Every text value given (names, column lists, filters): no control character or undecodable
    bytes, not beyond :data:`validate.MAX_ARGUMENT` (typed options checked themselves already)."""
    for p in parameters:
        values = ctx.params.get(p.name or "")
        for value in values if isinstance(values, (tuple, list)) else (values,):
            if isinstance(value, str):
                try:
                    validate.argument(value, "value")
                except InvalidArgument as exc:
                    raise Refusal(ctx, f"argument {_hint(p)}: {str(exc).replace('invalid value ', '', 1)}") from None


class _Refusing:
    """Parse like Click, refuse like ``colocate``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # Click's parser consumes the list it is given
        try:
            rest = super().parse_args(ctx, args)  # type: ignore[misc]
            _check_text(ctx, self.get_params(ctx))  # type: ignore[attr-defined]
            return rest
        except click.MissingParameter:
            # Click names the first missing parameter; name them all, so one retry is enough.
            opts, _, _ = self.make_parser(ctx).parse_args(args=given)  # type: ignore[attr-defined]
            missing = [_hint(p) for p in self.get_params(ctx)  # type: ignore[attr-defined]
                       if p.required and not _given(opts.get(p.name))]
            raise Refusal(ctx, f"the following arguments are required: {', '.join(missing)}") from None
        except click.UsageError as exc:
            raise refusal(ctx, exc) from None


class Command(_Refusing, click.Command):
    """A ``colocate`` command: its callback returns what it found, :func:`output.render` prints it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.allow_extra_args = True  # left-over words are refused below, in colocate's words
        rest = super().parse_args(ctx, args)
        if rest:
            raise Refusal(ctx, f"unrecognized arguments: {' '.join(rest)}")
        return rest

    def invoke(self, ctx: click.Context):
        as_json = bool(ctx.params.pop("as_json", False))
        ctx.meta[output.JSON_KEY] = as_json
        outer, output.OUT = output.OUT, output.OUT or sys.stdout
        try:
            with contextlib.redirect_stdout(sys.stderr):  # library log lines are not the command's output
                result = super().invoke(ctx)
            output.render(result, as_json=as_json)
        finally:
            output.OUT = outer
        return result


class Group(_Refusing, click.Group):
    """A family of commands, listed in the order they were added (the order of the README)."""

    command_class = Command
    group_class = type  # subgroups are Groups too

    def __init__(self, *args, **kwargs):
        # Without a command, refuse in one line (below) instead of printing the whole help.
        kwargs.setdefault("subcommand_metavar", "COMMAND [ARGS]...")
        super().__init__(*args, invoke_without_command=True, no_args_is_help=False, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0]
        if self.get_command(ctx, name) is None and not name.startswith("-"):  # Click re-parses an option-like word
            choices = ", ".join(repr(c) for c in self.list_commands(ctx))
            raise Refusal(ctx, f"argument command: invalid choice: {name!r} (choose from {choices})")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context):
        result = super().invoke(ctx)
        if ctx.invoked_subcommand is None:
            raise Refusal(ctx, "the following arguments are required: command")
        return result


def _refuse_missing_sqlite(url: str) -> None:
    """A command other than ``init`` on a SQLite catalog that does not exist says so instead of
    creating an empty file (``~/.colocate/catalog.db`` when nothing names a catalog)."""
    try:
        parsed = make_url(url)
    except Exception:
        return  # make_engine's own message follows
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    path = Path(parsed.database).expanduser()
    if not path.exists():
        raise NotFound(f"no catalog at {path}: run 'colocate init' first to create one there, or name an existing one "
                       f"with --catalog URL, COLOCATE_CATALOG_URL or COLOCATE_HOME")


@dataclass
class Env:
    """What the root options chose, shared by every command. The catalog is opened on first use,
    so ``--help`` and refused command lines never touch a database."""

    catalog_url: str | None
    db: str
    actor: str | None = None  # --actor; else the catalog's default ($COLOCATE_ACTOR, then the OS user)
    verbose: bool = False  # --verbose: a refusal's whole message after its one line
    _catalog: Catalog | None = field(default=None, repr=False)

    def catalog(self, *, check_schema: bool = True) -> Catalog:
        """The catalog; refused unless it is at the code's schema (``colocate init`` skips the check)."""
        if self._catalog is None:
            if check_schema:
                _refuse_missing_sqlite(self.catalog_url or default_url())
            # disposed by close(), also when the check refuses it
            self._catalog = Catalog(self.catalog_url, actor=self.actor)
            if check_schema:
                self._catalog.check_schema()
        return self._catalog

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.dispose()


pass_env = click.make_pass_decorator(Env)
