"""The temp view a registration leaves for each table on a classic session (spark.register): built
over the backing table's partitions listed once, with its analysed plan stored, and known as ours
by the catalog object this module made rather than by its text.

Why: a text view (``CREATE TEMP VIEW … AS SELECT … FROM <backing table>``) is parsed and analysed
again by every query that reads it, and Spark then looks its backing table's partitions up and
lists their directories again (``PruneFileSourcePartitions`` builds a new file index each query):
about 60 % of a colocated query's planning at 240 replica directories (a flight-recorder profile of SQL1 at 1/10).
A view made from a DataFrame keeps its analysed plan (Spark stores a DataFrame view's plan whatever
``spark.sql.legacy.storeAnalyzedPlanForView`` says, so no session setting changes); made over the
relation Spark's own pruning rule returns for an always-true partition filter, that plan carries an
in-memory file index of every registered partition, so a query neither re-analyses the view nor
lists again: it prunes the listed partitions in memory.

Why the listing may be kept: spark.register keeps such a view only while it keeps the backing table
(the same statements: the same replica directories, each checked exact against the catalog's files
before every query, and a committed replica directory never changes) and the same local-read roots
(the hosts the listing's block locations name); any other registration makes the table and the
view again. A query that reads a file gone since fails as it would have, and the failover takes
the bucket's next replica.

Such a view has no text, so "ours" is the very object this module put in the session's catalog
(kept per session, weakly); a view a caller made in its place is another object and is not ours.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence

from airflow_colocate.spark.connect import is_connect

# session -> view name (lower case: Spark's names are case-insensitive) -> (statement, roots, the catalog's object)
_made: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_catalogs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # session -> its JVM SessionCatalog


def _catalog(spark):
    if spark not in _catalogs:  # a session's catalog object never changes: three py4j calls less a look-up
        _catalogs[spark] = spark._jsparkSession.sessionState().catalog()
    return _catalogs[spark]


def raw_view(spark, name: str):
    """The session catalog's entry for temp view ``name`` (a JVM ``TemporaryViewRelation``), or None."""
    found = _catalog(spark).getRawTempView(name)
    return found.get() if found.isDefined() else None


def exists(spark, database: str, table: str | None = None) -> bool:
    """Whether ``database`` (and its ``table``, unquoted names) exists: asked of the session catalog
    on a classic session (~0.1 and 1 ms, where ``spark.catalog``'s calls resolve the name through
    the analyzer: 1.3 and 2.3 ms, paid for every table of every query)."""
    if is_connect(spark):
        return spark.catalog.tableExists(table, database) if table else spark.catalog.databaseExists(database)
    if table is None:
        return bool(_catalog(spark).databaseExists(database))
    ident = spark._jvm.org.apache.spark.sql.catalyst.TableIdentifier(table, spark._jvm.scala.Some(database))
    return bool(_catalog(spark).tableExists(ident))


def view_text(raw) -> str:
    """A view's SQL text ("" for a view made from a DataFrame, which keeps its plan instead)."""
    text = raw.tableMeta().viewText()
    return text.get() if text.isDefined() else ""


def made_here(spark, name: str, raw=None) -> str | None:
    """The statement :func:`create` made view ``name`` for, when the session's view of that name is
    still the object it made (``raw``: that entry, when the caller has just read it); else None."""
    entry = _made.get(spark, {}).get(name.lower())
    if entry is None:
        return None
    raw = raw if raw is not None else raw_view(spark, name)
    return entry[0] if raw is not None and entry[2].equals(raw) else None


def same_roots(spark, name: str, roots: str) -> bool:
    """False when view ``name`` was listed under other local-read roots (its files' block locations
    name the hosts of those): it must be listed again. True for a view not made here."""
    entry = _made.get(spark, {}).get(name.lower())
    return entry is None or entry[1] == roots


def _listed_relation(spark, backing: str, bucket_col: str):
    """The backing table's relation with its partitions listed into an in-memory file index: what
    Spark's ``PruneFileSourcePartitions`` makes of it under a filter every partition passes. None
    when the optimizer did not give exactly that (the caller makes a text view instead)."""
    plan = spark.table(backing).where(f"{bucket_col} >= 0")  # a partition column: every bucket seq passes
    leaves = plan._jdf.queryExecution().optimizedPlan().collectLeaves()
    if leaves.size() != 1:
        return None
    relation = leaves.apply(0)
    if relation.getClass().getSimpleName() != "LogicalRelation":
        return None
    try:
        index = relation.relation().location().getClass().getSimpleName()
    except Exception:  # noqa: BLE001 - not a file relation
        return None
    return relation if index == "InMemoryFileIndex" else None


def create(spark, name: str, statement: str, roots: str, *, backing: str, bucket_col: str, columns: Sequence[str],
           where: str | None, hint: str | None, check: Callable[[list[str]], None] | None = None) -> bool:
    """Make temp view ``name`` as ``SELECT [hint] columns FROM backing [WHERE where]`` over the
    backing table's listed partitions (quoted names and SQL expressions, as spark.register writes
    them), and remember it as made for ``statement`` (the text view it stands for) under the
    local-read ``roots``. False when the listed relation cannot be had: the session's
    view is left as it is, and the caller makes the text view. ``check`` is given the files listed,
    before the view is made (spark.listing.check_listed: a replica that listed short raises)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    relation = _listed_relation(spark, backing, bucket_col)
    if relation is None:
        forget(spark, name)
        return False
    if check is not None:
        check([str(f) for f in relation.relation().location().inputFiles()])
    # Spark 4 moved the JVM Dataset of a classic session to sql.classic; 3.5 has it in sql
    package = spark._jvm.org.apache.spark.sql.classic if not spark.version.startswith("3.") else spark._jvm.org.apache.spark.sql
    jdf = package.Dataset.ofRows(spark._jsparkSession, relation)
    df = DataFrame(jdf, spark)
    if where:
        df = df.where(F.expr(where))
    df = df.select(*[F.col(c) for c in columns])
    if hint:
        df = df.hint(hint)
    df.createOrReplaceTempView(name)
    _made.setdefault(spark, {})[name.lower()] = (statement, roots, raw_view(spark, name))
    return True


def forget(spark, name: str) -> None:
    """After view ``name`` was dropped or replaced by a text view: it is no longer one made here."""
    _made.get(spark, {}).pop(name.lower(), None)


__all__ = ["create", "exists", "forget", "made_here", "raw_view", "same_roots", "view_text"]
