"""iceberg publication event id

``iceberg_publications.event_id``: the newest event the table's last Iceberg snapshot covers. A
catch-up after a lag replays the table's events after it, one snapshot per missed commit of ours,
and gc keeps the versions superseded since, which those snapshots name. NULL for a publication
made before (its next publication is by state, as it was, and records one).

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('iceberg_publications', schema=None) as batch_op:
        batch_op.add_column(sa.Column('event_id', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('iceberg_publications', schema=None) as batch_op:
        batch_op.drop_column('event_id')
