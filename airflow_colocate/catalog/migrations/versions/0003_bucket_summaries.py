"""bucket summaries, incremental checks, gc indexes

Per-bucket summaries (``bucket_replicas``, ``bucket_sizes``) filled from the replicas already
recorded, the group generation and the last check's inputs (``group_checks``), the write job of
each partition version and the jobs whose staging directory gc still has to remove (both filled
from the jobs' plans), and the indexes that keep every control-plane query off a scan of the
replicas.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

UNSETTLED = "state IN ('staging', 'aborted', 'superseded')"
LEAVING = "state IN ('dropping', 'deleting')"


def upgrade() -> None:
    op.create_table('bucket_replicas',
    sa.Column('table_id', sa.Integer(), nullable=False),
    sa.Column('bucket_seq', sa.Integer(), nullable=False),
    sa.Column('backend_id', sa.Integer(), nullable=False),
    sa.Column('verified', sa.Integer(), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.Column('bad', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['backend_id'], ['backends.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['table_id'], ['tables.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('table_id', 'bucket_seq', 'backend_id')
    )
    op.create_table('bucket_sizes',
    sa.Column('table_id', sa.Integer(), nullable=False),
    sa.Column('bucket_seq', sa.Integer(), nullable=False),
    sa.Column('bytes', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['table_id'], ['tables.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('table_id', 'bucket_seq')
    )
    op.create_table('group_checks',
    sa.Column('group_id', sa.Integer(), nullable=False),
    sa.Column('inputs', sa.String(length=64), nullable=False),
    sa.Column('problems', sa.Integer(), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['colocate_groups.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id')
    )
    # Defaults as plain strings: SQLite then adds the columns in place instead of copying the tables
    # (a copy of a referenced table fails on a catalog with data, its foreign keys being enforced).
    with op.batch_alter_table('colocate_groups', schema=None) as batch_op:
        batch_op.add_column(sa.Column('generation', sa.Integer(), server_default='0', nullable=False))

    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('gc_pending', sa.Boolean(), server_default='0', nullable=False))
        batch_op.create_index('ix_jobs_gc_pending', ['gc_pending'], unique=False,
                              postgresql_where=sa.text('gc_pending'), sqlite_where=sa.text('gc_pending = 1'))

    with op.batch_alter_table('partition_versions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('job_id', sa.Integer(), nullable=True))
        batch_op.create_index('ix_version_unsettled', ['state'], unique=False,
                              postgresql_where=sa.text(UNSETTLED), sqlite_where=sa.text(UNSETTLED))

    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.create_index('ix_replica_table', ['table_id', 'bucket_seq', 'backend_id'], unique=False)
        batch_op.create_index('ix_replica_leaving', ['state'], unique=False,
                              postgresql_where=sa.text(LEAVING), sqlite_where=sa.text(LEAVING))

    _fill()


def _fill() -> None:
    """Summaries from the replicas of the visible versions; links from the write jobs' plans."""
    op.execute("""
        INSERT INTO bucket_replicas (table_id, bucket_seq, backend_id, verified, bytes, bad)
        SELECT r.table_id, r.bucket_seq, r.backend_id,
               SUM(CASE WHEN r.state = 'verified' THEN 1 ELSE 0 END),
               SUM(CASE WHEN r.state = 'verified' THEN r.bytes ELSE 0 END),
               SUM(CASE WHEN r.state = 'bad' THEN 1 ELSE 0 END)
        FROM replicas r JOIN partitions p ON p.id = r.partition_id AND p.visible_version = r.version
        WHERE r.state IN ('verified', 'bad')
        GROUP BY r.table_id, r.bucket_seq, r.backend_id""")
    op.execute("""
        INSERT INTO bucket_sizes (table_id, bucket_seq, bytes)
        SELECT one.table_id, one.bucket_seq, SUM(one.bytes) FROM (
            SELECT r.table_id AS table_id, r.bucket_seq AS bucket_seq, MAX(r.bytes) AS bytes
            FROM replicas r JOIN partitions p ON p.id = r.partition_id AND p.visible_version = r.version
            WHERE r.state = 'verified'
            GROUP BY r.table_id, r.partition_id, r.bucket_seq) one
        GROUP BY one.table_id, one.bucket_seq""")
    conn = op.get_bind()
    jobs = sa.table('jobs', sa.column('id', sa.Integer), sa.column('kind', sa.String), sa.column('plan', sa.JSON),
                    sa.column('gc_pending', sa.Boolean))
    versions = sa.table('partition_versions', sa.column('partition_id', sa.Integer), sa.column('version', sa.Integer),
                        sa.column('job_id', sa.Integer))
    links, pending = [], []
    for job_id, plan in conn.execute(sa.select(jobs.c.id, jobs.c.plan).where(jobs.c.kind == 'write')):
        plan = plan or {}
        if plan.get('partition_id') is not None and plan.get('version') is not None:
            links.append({'j': job_id, 'p': plan['partition_id'], 'v': plan['version']})
        if 'staging_uri' in plan:
            pending.append({'j': job_id})
    if links:
        conn.execute(versions.update().where(versions.c.partition_id == sa.bindparam('p'),
                                             versions.c.version == sa.bindparam('v'))
                     .values(job_id=sa.bindparam('j')), links)
    if pending:
        conn.execute(jobs.update().where(jobs.c.id == sa.bindparam('j')).values(gc_pending=True), pending)


def downgrade() -> None:
    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.drop_index('ix_replica_leaving')
        batch_op.drop_index('ix_replica_table')

    with op.batch_alter_table('partition_versions', schema=None) as batch_op:
        batch_op.drop_index('ix_version_unsettled')
        batch_op.drop_column('job_id')

    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_gc_pending')
        batch_op.drop_column('gc_pending')

    with op.batch_alter_table('colocate_groups', schema=None) as batch_op:
        batch_op.drop_column('generation')

    op.drop_table('group_checks')
    op.drop_table('bucket_sizes')
    op.drop_table('bucket_replicas')
