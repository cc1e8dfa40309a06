"""What an import can be refused for without Spark: the source's partitions and its columns.

``colocate import`` runs these before any JVM starts and before the catalog or a backend is
touched, so a source that does not fit is refused in seconds, in one line, with nothing to undo.
The schema check reads one data file's footer per partition folder with pyarrow and refuses only
what is certain (a table column no folder has, a column the table does not have, a type no
lossless widening turns into the table's); a type pyarrow names ambiguously (a timestamp without a
zone, which Spark may read either way), an unreadable file or a scheme pyarrow cannot open is left
to the import job's own check.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

from airflow_colocate.model.views import TableView
from airflow_colocate.core import naming
from airflow_colocate.core.errors import ColocateError, InvalidArgument, SchemaMismatch
from airflow_colocate.core.sqltypes import comparable_type, widening_ok
from airflow_colocate.storage import fs
from airflow_colocate.storage.replica_dir import subdirs

FORMATS = ("parquet", "orc")


def check_import(table: TableView, source: str, fmt: str, partitions: list[str] | None) -> list[tuple[str, str]]:
    """(value, folder) of the partitions the import would load; refused when the table cannot take
    an import, a named partition has no folder, or the files' columns do not fit the table."""
    if fmt not in FORMATS:
        raise InvalidArgument(f"import format {fmt!r} is not supported: use {' or '.join(FORMATS)}")
    if len(table.partition_cols) != 1:
        raise InvalidArgument(f"table {table.qualified_name} has partition columns {list(table.partition_cols)}: an "
                              f"import needs a table partitioned by exactly one column (its <column>=<value> folders)")
    column = table.partition_cols[0]
    found = find_partitions(source, column, {n.lower(): ty for n, ty in table.columns}[column.lower()])
    if partitions is not None:
        have = {v for v, _ in found}
        unknown = [p for p in partitions if p not in have]
        if unknown:
            raise InvalidArgument(f"partitions {unknown[:5]} have no {column}=<value> folder in {source}")
        found = [(v, f) for v, f in found if v in set(partitions)]
    problems = schema_problems(table, [f for _, f in found], fmt)
    if problems:
        raise SchemaMismatch(f"source {source} does not match table {table.qualified_name}: " + "; ".join(problems))
    return found


def source_uri(path: str) -> str:
    """A file URI as Spark reads it: not percent-encoded (``Path.as_uri`` writes ``dt%3D…``, a
    folder Spark would not find)."""
    return path if "://" in path else f"file://{Path(path).resolve()}"


def find_partitions(root: str, column: str, col_type: str) -> list[tuple[str, str]]:
    """(partition value, folder URI) of every ``<column>=<value>`` folder under ``root``, sorted."""
    root = source_uri(root)
    try:
        if not fs.is_dir(root):
            raise InvalidArgument(f"import source {root} is not a directory: give the root of a Hive-style "
                                  f"dataset holding {column}=<value> folders")
    except ColocateError:
        raise
    except Exception:
        pass  # a scheme only Spark reads: the listing below says what is there
    names = [n for n in subdirs(root) if not n.startswith((".", "_"))]
    found = [(unquote(n.split("=", 1)[1]), fs.join(root, n)) for n in names if n.lower().startswith(column.lower() + "=")]
    if not found:
        other = sorted({n.split("=", 1)[0] for n in names if "=" in n})
        hint = (f"it has folders of column {', '.join(other)}; the table's partition column is {column}" if other
                else f"expected {root}/{column}=<value>/part-….parquet")
        raise InvalidArgument(f"import source {root} holds no {column}=<value> folders ({hint})")
    for value, folder in found:
        try:
            naming.check_partition_value(value)
            naming.check_partition_literal(value, column, col_type)
        except InvalidArgument as exc:
            raise InvalidArgument(f"import source folder {folder}: {exc}") from None
    return sorted(found)


def schema_problems(table: TableView, folders: list[str], fmt: str) -> list[str]:
    """Why the files under ``folders`` cannot be imported into ``table`` (empty: nothing certain)."""
    seen: dict[str, dict[str, str | None]] = {}  # lower name -> spark type (None: unknown) -> a folder
    names: dict[str, str] = {}
    for folder in folders:
        schema = _first_schema(folder, fmt)
        if schema is None:
            return []  # not readable here: the import job checks
        for name, spark_type in schema:
            names.setdefault(name.lower(), name)
            seen.setdefault(name.lower(), {}).setdefault(spark_type, folder)  # type: ignore[arg-type]
    wanted = {n.lower(): (n, ty) for n, ty in table.columns}
    part = {c.lower() for c in table.partition_cols}
    problems = [f"column {n!r} ({ty}) is missing from every partition folder"
                for key, (n, ty) in wanted.items() if key not in part and key not in seen]
    for key, types in seen.items():
        if key in part:
            continue
        if key not in wanted:
            known = [t for t in types if t]
            problems.append(f"source column {names[key]!r}{f' ({known[0]})' if known else ''} is not a column of "
                            f"table {table.qualified_name} ('colocate table alter {table.qualified_name} "
                            f"--add-column ...' accepts it)")
            continue
        known = {t: f for t, f in types.items() if t}
        if len(known) > 1 and not any(all(widening_ok(o, t) for o in known) for t in known):
            problems.append(f"column {names[key]!r} has types no lossless widening joins: "
                            + ", ".join(f"{t} (e.g. {f})" for t, f in known.items())
                            + "; rewrite the partitions of one type, or import them separately")
            continue
        bad = [(t, f) for t, f in known.items() if not widening_ok(t, wanted[key][1])]
        if bad:
            problems.append(f"column {wanted[key][0]!r}: source type {bad[0][0]} cannot be written to table type "
                            f"{wanted[key][1]} (e.g. {bad[0][1]}; only equal types or a lossless widening are allowed)")
    return problems


def _first_schema(folder: str, fmt: str) -> list[tuple[str, str | None]] | None:
    """(column, Spark type or None) of the first data file under ``folder``, or None."""
    try:
        data = sorted(n for n, _ in fs.list_files(folder) if not n.startswith((".", "_")))
        if not data:
            return None
        with fs.open_read(fs.join(folder, data[0])) as f:
            if fmt == "orc":
                from pyarrow import orc

                schema = orc.ORCFile(f).schema
            else:
                import pyarrow.parquet as pq

                schema = pq.read_schema(f)
    except Exception:
        return None
    return [(field.name, _spark_type(field.type)) for field in schema]


def _spark_type(t) -> str | None:
    """The Spark SQL type Spark reads an arrow type as, when that is certain."""
    import pyarrow as pa

    simple = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
              pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean", pa.string(): "string",
              pa.large_string(): "string", pa.binary(): "binary", pa.large_binary(): "binary", pa.date32(): "date",
              pa.null(): "void"}
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return comparable_type(f"decimal({t.precision},{t.scale})")
    if pa.types.is_timestamp(t) and t.tz is not None:
        return "timestamp"
    return None


__all__ = ["FORMATS", "check_import", "find_partitions", "schema_problems", "source_uri"]
