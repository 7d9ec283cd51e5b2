"""Robots from files: ``load_urdf`` (URDF through the standard library's
XML parser), ``load_mjcf`` (MJCF through MuJoCo's compiler), and
``example_robot_data`` (the robots of that package)."""

from simbodyx.io.robot import Geometry as Geometry, Robot as Robot
from simbodyx.io.urdf import (
    Joint as Joint,
    UrdfContact as UrdfContact,
    example_robot_data as example_robot_data,
    load_urdf as load_urdf,
)
from simbodyx.io.mjcf import MjcfJoint as MjcfJoint, MjcfOptions as MjcfOptions, load_mjcf as load_mjcf
