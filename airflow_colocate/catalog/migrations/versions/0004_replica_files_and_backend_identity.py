"""replica files and backend identity

``replicas.files``: the name and size of every file of a replica, as its write or clone reported
them, so reads check a replica folder against exactly what the catalog committed (a missing,
short or unknown file is never read as fewer rows). ``backends.marker_token``: the token of the
identity marker written at the backend's root, which the probe requires. ``backends.sample_cursor``:
where the probe's rotating sample of replica files resumes. ``catalog_info``: the catalog's own id,
written into every marker so a disk of another catalog is recognised.

Revision ID: 0004
Revises: 0003
"""
import uuid
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.add_column(sa.Column('files', sa.JSON(), nullable=True))
    with op.batch_alter_table('backends', schema=None) as batch_op:
        batch_op.add_column(sa.Column('marker_token', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('sample_cursor', sa.Integer(), nullable=False, server_default='0'))
    info = op.create_table('catalog_info',
                           sa.Column('id', sa.Integer(), nullable=False),
                           sa.Column('uid', sa.String(length=64), nullable=False),
                           sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
                           sa.PrimaryKeyConstraint('id'))
    op.bulk_insert(info, [{'id': 1, 'uid': uuid.uuid4().hex, 'created_at': datetime.now(timezone.utc)}])


def downgrade() -> None:
    op.drop_table('catalog_info')
    with op.batch_alter_table('backends', schema=None) as batch_op:
        batch_op.drop_column('sample_cursor')
        batch_op.drop_column('marker_token')
    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.drop_column('files')
