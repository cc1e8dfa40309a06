"""group join policy

When a group's joins may stay bucketed: ``stable`` (the seeds' rule: only while the group is
stable) or ``readable`` (while every bucket a query reads has a verified replica on an alive
backend). Every existing group keeps the seeds' rule.

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.add_column(sa.Column('join_policy', sa.String(length=16), nullable=False, server_default='stable'))


def downgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.drop_column('join_policy')
