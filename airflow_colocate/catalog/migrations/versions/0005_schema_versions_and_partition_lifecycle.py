"""schema versions and partition lifecycle

``table_schemas``: one row per schema version of a table (its columns and the change that made
it); every existing table gets its version 1 from its columns. ``tables.schema_version`` and
``tables.retention_days`` (the age in days after which the maintenance DAG drops a partition).
``partitions.dropped_version`` / ``dropped_at``: a dropped partition sits in the recycle bin with
its visible version moved aside, until it is recovered or purged.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tables', schema=None) as batch_op:
        batch_op.add_column(sa.Column('schema_version', sa.Integer(), nullable=False, server_default='1'))
        batch_op.add_column(sa.Column('retention_days', sa.Integer(), nullable=True))
    with op.batch_alter_table('partitions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dropped_version', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('dropped_at', sa.DateTime(timezone=True), nullable=True))
    op.create_index('ix_partition_dropped', 'partitions', ['dropped_at'], unique=False,
                    postgresql_where=sa.text('dropped_at IS NOT NULL'), sqlite_where=sa.text('dropped_at IS NOT NULL'))
    op.create_table('table_schemas',
                    sa.Column('table_id', sa.Integer(), nullable=False),
                    sa.Column('version', sa.Integer(), nullable=False),
                    sa.Column('columns', sa.JSON(), nullable=False),
                    sa.Column('change', sa.JSON(), nullable=True),
                    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
                    sa.ForeignKeyConstraint(['table_id'], ['tables.id'], ondelete='CASCADE'),
                    sa.PrimaryKeyConstraint('table_id', 'version'))
    op.execute("INSERT INTO table_schemas (table_id, version, columns, change, created_at) "
               "SELECT id, 1, columns, NULL, created_at FROM tables")


def downgrade() -> None:
    op.drop_table('table_schemas')
    op.drop_index('ix_partition_dropped', table_name='partitions')
    with op.batch_alter_table('partitions', schema=None) as batch_op:
        batch_op.drop_column('dropped_at')
        batch_op.drop_column('dropped_version')
    with op.batch_alter_table('tables', schema=None) as batch_op:
        batch_op.drop_column('retention_days')
        batch_op.drop_column('schema_version')
