"""split bucket layouts

A group may be split (``colocate group split g --factor k``): versions written after it bucket
their rows by ``pmod(hash, k·N)`` while the N-entry map still places them, bucket *j* of the finer
layout in bucket family *j mod N*. ``colocate_groups.layout_buckets`` is the count new versions are
written with; ``partition_versions.layout_buckets`` the count one version was written with. NULL in
both means the group's (or the partition's) own bucket count: every existing row keeps its layout
and no file is rewritten.

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.add_column(sa.Column('layout_buckets', sa.Integer(), nullable=True))
    with op.batch_alter_table('partition_versions') as batch:
        batch.add_column(sa.Column('layout_buckets', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('partition_versions') as batch:
        batch.drop_column('layout_buckets')
    with op.batch_alter_table('colocate_groups') as batch:
        batch.drop_column('layout_buckets')
