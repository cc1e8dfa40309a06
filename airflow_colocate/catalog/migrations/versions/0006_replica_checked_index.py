"""replica checked index

``ix_replica_checked``: the verified replicas by when their bytes were last checked (re-hashed by
verify, else never: ``verified_at`` NULL, then by ``created_at``). The metrics endpoint's oldest
unverified replica is two index probes instead of a scan of every replica row (1.2 s at 2.1
million rows), and verify's least-recently-checked-first order reads the index.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

VERIFIED = "state = 'verified'"


def upgrade() -> None:
    op.create_index('ix_replica_checked', 'replicas', ['verified_at', 'created_at'], unique=False,
                    postgresql_where=sa.text(VERIFIED), sqlite_where=sa.text(VERIFIED))


def downgrade() -> None:
    op.drop_index('ix_replica_checked', table_name='replicas')
