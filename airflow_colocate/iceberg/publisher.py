"""Writing a colocated table's Iceberg metadata through pyiceberg.

Our data files are registered as they are (no rewrite): Spark wrote them without Iceberg field ids,
so the table carries a name mapping (pyiceberg's schema update adds each new column to it and keeps
a dropped one's, so an old file's dropped column still resolves, to a field no schema reads), and the
partition column (kept in the folder name, not in the files) is the identity partition's value,
which Iceberg readers project into the rows. One publication is ONE Iceberg transaction: the schema
steps, the table properties and one snapshot that removes the files no longer named and adds the
new ones (a schema change alone: a snapshot of the same files under the new schema), so no reader
ever sees half of one of our commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from airflow_colocate.iceberg.files import WantedFile
from airflow_colocate.iceberg.schema import NotPublishable, apply, first_schema, partition_value, steps

TABLE_ID = "colocate.table-id"
SCHEMA_VERSION = "colocate.schema-version"
AT = "colocate.at"  # our catalog clock when the snapshot was published: what expiry counts from
DIGEST = "colocate.digest"


def open_catalog(uri: str | None, properties: dict | None = None, environ: dict | None = None):
    """The Iceberg catalog: a SQL catalog on ``uri`` (the colocation catalog's own database by
    default), or whatever ``properties`` configure (``{"type": "rest", "uri": ...}``); its FileIO
    reaches S3 where our backends' reads do (:func:`s3_properties` of ``environ``)."""
    from pyiceberg.catalog import load_catalog

    props = dict(properties or {})
    if "type" not in props and "uri" not in props:
        props.update(type="sql", uri=uri)
    props = s3_properties(environ or {}) | props
    return load_catalog(props.pop("name", "colocate"), **props)


def s3_properties(environ: dict) -> dict[str, str]:
    """The S3 address and region our backends are read with (the AWS SDKs' variables, which the
    ``colocate_s3`` connection sets) as pyiceberg FileIO properties: pyiceberg reads neither
    variable, and without a region it asks AWS where the bucket is, which a private store is not."""
    out = {}
    if endpoint := environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL"):
        out["s3.endpoint"] = endpoint
    if region := environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"):
        out["s3.region"] = region
    return out


@dataclass(frozen=True)
class Published:
    snapshot_id: int | None
    added: int
    removed: int
    schema_steps: int


def table_for(icat, ident: tuple[str, str], location: str, table_id: int, first_columns: Sequence[tuple[str, str]],
              partition_col: tuple[str, str] | None):
    """Load the table, or create it from our first schema version; refuse one that belongs to
    another colocated table (a name reused after a purge)."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    icat.create_namespace_if_not_exists(ident[0])
    try:
        tbl = icat.load_table(ident)
    except NoSuchTableError:
        schema = first_schema(first_columns)
        spec = PartitionSpec()
        if partition_col is not None:
            source = schema.find_field(partition_col[0])
            spec = PartitionSpec(PartitionField(source_id=source.field_id, field_id=1000, transform=IdentityTransform(),
                                                name=partition_col[0]))
        props = {TABLE_ID: str(table_id), SCHEMA_VERSION: "1",
                 "schema.name-mapping.default": schema.name_mapping.model_dump_json()}
        tbl = icat.create_table(ident, schema=schema, partition_spec=spec, location=location, properties=props)
    owner = tbl.properties.get(TABLE_ID)
    if owner != str(table_id):
        raise NotPublishable(f"Iceberg table {'.'.join(ident)} belongs to colocated table id {owner}, not {table_id}: "
                             f"drop it from the Iceberg catalog or publish this table under another namespace")
    return tbl


def drop_table(icat, ident: tuple[str, str], table_id: int) -> bool:
    """Drop the Iceberg table of colocated table ``table_id`` from the Iceberg catalog (its data
    files are ours: never purged through Iceberg). False when there is none to drop, or the one of
    that name belongs to another colocated table (a name reused after a purge is left alone)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        tbl = icat.load_table(ident)
    except (NoSuchTableError, NoSuchNamespaceError):
        return False
    if tbl.properties.get(TABLE_ID) != str(table_id):
        return False
    try:
        icat.drop_table(ident)
    except NoSuchTableError:  # dropped by a concurrent withdrawal since it was loaded
        return False
    return True


def publish(tbl, *, schema_version: int, changes_after: Callable[[int], Sequence[Sequence[dict]]],
            partition_col: tuple[str, str] | None, files: Sequence[WantedFile], digest: str,
            snapshot_properties: dict[str, str], only: set[str] | None = None) -> Published:
    """Bring ``tbl`` to our schema version and exactly ``files``, in one Iceberg transaction; a
    table already there is left alone (a retried or repeated publish commits nothing). ``only``:
    the partitions that may differ (the others are as the last recorded publication left them), so
    the manifests of the rest are not read: a daily write reads one partition's, not years'."""
    have_version = int(tbl.properties.get(SCHEMA_VERSION, "1"))
    todo = steps(changes_after(have_version)) if schema_version > have_version else []
    if only is not None and partition_col is not None:
        keys = {partition_value(partition_col[1], p) for p in only}
        current = current_files(tbl, keys)
        files = [f for f in files if f.partition in only]
    else:
        current = current_files(tbl)
    wanted = {f.path: f for f in files}
    add = [f for p, f in wanted.items() if p not in current]
    remove = [df for p, df in current.items() if p not in wanted]
    if not todo and not add and not remove and schema_version == have_version:
        snap = tbl.current_snapshot()
        return Published(snap.snapshot_id if snap else None, 0, 0, 0)
    with tbl.transaction() as tx:
        if todo:
            with tx.update_schema() as update:
                for step in todo:
                    apply(update, step)
        if schema_version != have_version:
            tx.set_properties(**{SCHEMA_VERSION: str(schema_version)})
        if add or remove or schema_version != have_version:
            # a schema change of ours is a commit of ours: its snapshot (no file added when nothing
            # else changed) is read with the new schema, in our order, as any other commit's
            new = [_data_file(tx, f, partition_col) for f in add]
            props = dict(snapshot_properties, **{DIGEST: digest})
            update = tx.update_snapshot(snapshot_properties=props)
            # a new partition (the daily write) only appends: its manifests are left as they are
            with (update.overwrite() if remove else update.fast_append()) as snapshot:
                for df in remove:
                    snapshot.delete_data_file(df)
                for df in new:
                    snapshot.append_data_file(df)
    snap = tbl.current_snapshot()
    return Published(snap.snapshot_id if snap else None, len(add), len(remove), len(todo))


def current_files(tbl, partitions: set | None = None) -> dict:
    """path -> DataFile of the table's current snapshot; with ``partitions`` (identity partition
    values), only theirs, reading only the manifests whose partition bounds may hold one."""
    snap = tbl.current_snapshot()
    if snap is None:
        return {}
    out = {}
    for m in snap.manifests(tbl.io):
        if partitions is not None and not _may_hold(tbl, m, partitions):
            continue
        for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True):
            if partitions is None or e.data_file.partition[0] in partitions:
                out[e.data_file.file_path] = e.data_file
    return out


def _may_hold(tbl, manifest, partitions: set) -> bool:
    from pyiceberg.conversions import from_bytes

    summary = (manifest.partitions or [None])[0]
    if summary is None or summary.lower_bound is None or summary.upper_bound is None:
        return True
    kind = tbl.metadata.spec().partition_type(tbl.schema()).fields[0].field_type
    low, high = from_bytes(kind, summary.lower_bound), from_bytes(kind, summary.upper_bound)
    return any(low <= p <= high for p in partitions)


def _data_file(tx, f: WantedFile, partition_col: tuple[str, str] | None):
    """One of our files as an Iceberg data file: its partition from our partition value, its
    counts and bounds from its parquet footer (bounds only where every column of the file is a
    column of the current schema: a dropped column's or a not yet widened column's statistics
    would be read with the wrong type)."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    meta = tx.table_metadata
    schema = meta.schema()
    with tx._table.io.new_input(f.path).open() as stream:
        footer = pq.read_metadata(stream)
    mapping = parquet_path_to_id_mapping(schema)
    stats = None
    if all(footer.schema.column(i).path in mapping and _same_physical(schema, mapping, footer, i)
           for i in range(footer.num_columns)):
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=footer, stats_columns=compute_statistics_plan(schema, meta.properties),
            parquet_column_mapping=mapping).to_serialized_dict()
    else:
        stats = {"record_count": footer.num_rows}
    partition = Record() if partition_col is None else Record(partition_value(partition_col[1], f.partition))
    return DataFile.from_args(content=DataFileContent.DATA, file_path=f.path, file_format=FileFormat.PARQUET,
                              partition=partition, file_size_in_bytes=f.size, sort_order_id=None,
                              spec_id=meta.default_spec_id, equality_ids=None, key_metadata=None, **stats)


def _same_physical(schema, mapping: dict, footer, i: int) -> bool:
    from pyiceberg.types import IntegerType, LongType

    field = schema.find_field(mapping[footer.schema.column(i).path])
    physical = footer.schema.column(i).physical_type
    if isinstance(field.field_type, LongType):
        return physical == "INT64"
    if isinstance(field.field_type, IntegerType):
        return physical == "INT32"
    return True


def expire(tbl, older_than: str) -> list[int]:
    """Expire every snapshot but the current one published before ``older_than`` (our clock, ISO
    text as in :data:`AT`): the ids expired. Iceberg's own clock is not used, so a catalog with a
    clock of its own (tests, a replayed history) expires by the same time as it deletes files."""
    current = tbl.current_snapshot()
    old = [s.snapshot_id for s in tbl.metadata.snapshots
           if (current is None or s.snapshot_id != current.snapshot_id)
           and (s.summary.additional_properties.get(AT) or "") < older_than]
    if old:
        tbl.maintenance.expire_snapshots().by_ids(old).commit()
    return old


def retained_dirs(tbl) -> set[str]:
    """Every replica directory a data file of a retained snapshot lies in: what gc must keep."""
    dirs = set()
    seen = set()
    for snap in tbl.metadata.snapshots:
        for m in snap.manifests(tbl.io):
            if m.manifest_path in seen:
                continue
            seen.add(m.manifest_path)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True):
                dirs.add(e.data_file.file_path.rpartition("/")[0])
    return dirs


__all__ = ["Published", "current_files", "drop_table", "expire", "open_catalog", "publish", "retained_dirs", "s3_properties",
           "table_for"]
