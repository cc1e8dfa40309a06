"""replica etags

``replicas.etags``: each file's ETag on an S3 API, as the store gave it in the same answer that
proved the file's SHA-256 (or in the listing right after the write's proven copies). A repair then
copies with ``CopySourceIfMatch`` and takes the copy's ETag as its proof: one request a file
instead of a copy and a HEAD. NULL everywhere else (local disks, HDFS, replicas from before).

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.add_column(sa.Column('etags', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('replicas', schema=None) as batch_op:
        batch_op.drop_column('etags')
