"""clone targets

``clone_targets``: the directory of every new replica a balance job is about to clone into,
recorded before the copy. gc removes the files of a clone killed before its registration once
its job has ended and no replica row names the directory (before, such files stayed on the
backend for good when a later plan no longer needed the move).

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'clone_targets',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('job_id', sa.Integer(), nullable=False),
        sa.Column('partition_id', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('bucket_seq', sa.Integer(), nullable=False),
        sa.Column('backend_id', sa.Integer(), nullable=False),
        sa.Column('path', sa.String(length=2048), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('claimed_by', sa.String(length=32), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_clone_targets_job', 'clone_targets', ['job_id'])
    op.create_index('ix_clone_targets_path', 'clone_targets', ['path'])
    op.create_index('ix_clone_targets_removing', 'clone_targets', ['state'],
                    postgresql_where=sa.text("state = 'removing'"), sqlite_where=sa.text("state = 'removing'"))


def downgrade() -> None:
    op.drop_index('ix_clone_targets_removing', table_name='clone_targets')
    op.drop_index('ix_clone_targets_path', table_name='clone_targets')
    op.drop_index('ix_clone_targets_job', table_name='clone_targets')
    op.drop_table('clone_targets')
