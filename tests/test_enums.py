"""Every enumeration a user can print prints its member's name."""

import enum

import numpy as np

import simbodyx as sx
from simbodyx import state as state_module
from simbodyx.rigid_contact import time_stepper


def test_every_enumeration_prints_names_and_still_counts_as_its_integer():
    """The Assembler's README block printed 1 for Succeeded (Python 3.11's
    IntEnum prints its number). Every IntEnum of the package now prints its
    name, in print, str and f-strings, and compares and converts as before."""
    enums = [sx.ProjectStatus, sx.IntegratorStatus, sx.Stage, state_module.Level, state_module.Method,
             time_stepper.RestitutionModel, time_stepper.InducedImpactModel, time_stepper.PositionProjectionMethod,
             time_stepper.ImpulseSolverType]
    found = {cls for module in (sx, sx.projection, sx.simulation, state_module, time_stepper)
             for cls in vars(module).values() if isinstance(cls, type) and issubclass(cls, enum.IntEnum)
             and cls.__module__.startswith("simbodyx") and cls is not sx.enums.NamedIntEnum}
    assert found <= set(enums), found - set(enums)
    for cls in enums:
        for member in cls:
            assert str(member) == f"{member}" == f"{member:>0}" == member.name
            assert member == int(member) and cls(int(member)) is member
    status = sx.ProjectStatus(int(np.int32(1)))  # as read from an AssembleResults
    assert str(status) == "Succeeded" and f"{status:12}|" == "Succeeded   |"
    assert sx.Stage.Position + 1 == sx.Stage.Velocity and repr(sx.Stage.Position) == "<Stage.Position: 4>"
