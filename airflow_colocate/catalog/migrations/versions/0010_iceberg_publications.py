"""iceberg publications

A table may be published as an Iceberg table: ``iceberg_publications`` says where and how far its
Iceberg metadata has followed our commits (a lag, with its reason); ``iceberg_pins`` the replica
directories a retained Iceberg snapshot may name, which gc keeps. No existing row changes: every
table starts unpublished.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'iceberg_publications',
        sa.Column('table_id', sa.Integer(), sa.ForeignKey('tables.id', ondelete='CASCADE'), primary_key=True),
        sa.Column('enabled', sa.Boolean(), nullable=False),
        sa.Column('warehouse', sa.String(1024), nullable=False),
        sa.Column('namespace', sa.String(64), nullable=False),
        sa.Column('digest', sa.String(64), nullable=True),
        sa.Column('partition_digests', sa.JSON(), nullable=True),
        sa.Column('snapshot_id', sa.BigInteger(), nullable=True),
        sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('lag_since', sa.DateTime(timezone=True), nullable=True),
        sa.Column('lag_reason', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        'iceberg_pins',
        sa.Column('path', sa.String(2048), primary_key=True),
        sa.Column('table_id', sa.Integer(), sa.ForeignKey('tables.id', ondelete='CASCADE'), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table('iceberg_pins')
    op.drop_table('iceberg_publications')
