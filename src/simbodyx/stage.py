"""Simbody's realization stages, in order."""

from __future__ import annotations

from simbodyx.enums import NamedIntEnum


class Stage(NamedIntEnum):
    """Topology < Model < Instance < Time < Position < Velocity < Dynamics <
    Acceleration < Report. A quantity is available once its stage is realized."""

    Topology = 0
    Model = 1
    Instance = 2
    Time = 3
    Position = 4
    Velocity = 5
    Dynamics = 6
    Acceleration = 7
    Report = 8
