"""Robots from files: ``load_urdf`` (URDF through the standard library's
XML parser) and ``example_robot_data`` (the robots of that package)."""

from simbodyx.io.urdf import (
    Geometry as Geometry,
    Joint as Joint,
    Robot as Robot,
    example_robot_data as example_robot_data,
    load_urdf as load_urdf,
)
