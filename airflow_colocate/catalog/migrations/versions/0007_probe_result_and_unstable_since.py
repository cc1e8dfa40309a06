"""probe result and unstable since

What an operator asks first of a down backend and an unstable group: what did the last probe find
(``backends.last_probe_at``, ``last_probe_ok``, ``last_probe_detail``: kept apart from the state,
which an admin's mark holds against the probe), and since when is the group unstable
(``colocate_groups.unstable_since``: set when ``stable`` turns false, cleared when it turns true).
Both are nullable: a catalog upgraded from 0006 has not probed or checked yet.

Revision ID: 0007
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('backends') as batch:
        batch.add_column(sa.Column('last_probe_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('last_probe_ok', sa.Boolean(), nullable=True))
        batch.add_column(sa.Column('last_probe_detail', sa.String(length=1024), nullable=True))
    with op.batch_alter_table('colocate_groups') as batch:
        batch.add_column(sa.Column('unstable_since', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.drop_column('unstable_since')
    with op.batch_alter_table('backends') as batch:
        batch.drop_column('last_probe_detail')
        batch.drop_column('last_probe_ok')
        batch.drop_column('last_probe_at')
