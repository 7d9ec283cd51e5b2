"""The base of simbodyx's enumerations (Stage, ProjectStatus, IntegratorStatus,
the time stepper's models and the rest)."""

from __future__ import annotations

import enum


class NamedIntEnum(enum.IntEnum):
    """An ``IntEnum`` that prints as its member's name: ``print(status)`` and
    ``f"{status}"`` show ``Succeeded``, not ``1``. It still compares, indexes
    and converts as its integer (``int(status)``, ``status == 1``), which is
    how it travels through compiled code."""

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)
