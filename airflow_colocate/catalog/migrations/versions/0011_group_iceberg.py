"""group iceberg

A group may publish every table of its own as an Iceberg table (``colocate group alter G --iceberg
on``): ``colocate_groups.iceberg_warehouse`` is where a table created in the group later gets its
Iceberg metadata (NULL: off, as for every existing group).

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.add_column(sa.Column('iceberg_warehouse', sa.String(length=1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('colocate_groups') as batch:
        batch.drop_column('iceberg_warehouse')
