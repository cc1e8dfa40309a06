"""Pure placement algorithms: initial map, relocate (repair), balance, replica choice.

Everything here is a function of its arguments: no I/O, no clock, no randomness. The catalog reads
the state, calls these, and writes the result in one transaction; tests call them directly.
"""

from __future__ import annotations

from airflow_colocate.placement.balance import Move, balance, balance_all
from airflow_colocate.placement.initial import initial_map
from airflow_colocate.placement.model import BackendSlot, BucketMap
from airflow_colocate.placement.relocate import relocate
from airflow_colocate.placement.replica_choice import choose_replicas
from airflow_colocate.placement.strategies import DISTANCES, SQUARES, STRATEGIES, BalanceStrategy, Bucket

__all__ = [
    "DISTANCES",
    "SQUARES",
    "STRATEGIES",
    "BackendSlot",
    "BalanceStrategy",
    "Bucket",
    "BucketMap",
    "Move",
    "balance",
    "balance_all",
    "choose_replicas",
    "initial_map",
    "relocate",
]
