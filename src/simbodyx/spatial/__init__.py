"""Spatial algebra: rotations, transforms, spatial vectors and inertias.

The value types (``Rotation``, ``Transform``, ``Inertia``, ``UnitInertia``,
``MassProperties``) hold JAX arrays. Given concrete values (numbers, NumPy
arrays, JAX arrays outside a trace) they and the helpers they use compute
with NumPy, so that building a model compiles no XLA program; ``rot_x``,
``rot_y``, ``rot_z``, ``skew`` and ``point_inertia`` called that way return
NumPy arrays. Under ``jit``, ``vmap`` and ``grad`` everything is traced
with ``jax.numpy``."""

from simbodyx.spatial.inertia import (
    Inertia as Inertia,
    MassProperties as MassProperties,
    SpatialInertia as SpatialInertia,
    UnitInertia as UnitInertia,
    inertia_problem as inertia_problem,
    point_inertia as point_inertia,
    spatial_inertia_matrix as spatial_inertia_matrix,
)
from simbodyx.spatial.rotation import (
    Rotation as Rotation,
    axis_angle_to_matrix as axis_angle_to_matrix,
    body_fixed_xyz_to_matrix as body_fixed_xyz_to_matrix,
    body_fixed_xyz_to_quaternion as body_fixed_xyz_to_quaternion,
    matrix_to_body_fixed_xyz as matrix_to_body_fixed_xyz,
    matrix_to_quaternion as matrix_to_quaternion,
    matrix_to_rotation_vector as matrix_to_rotation_vector,
    quaternion_to_matrix as quaternion_to_matrix,
    rot_x as rot_x,
    rot_y as rot_y,
    rot_z as rot_z,
    skew as skew,
    vee as vee,
)
from simbodyx.spatial.transform import Transform as Transform
from simbodyx.spatial.vectors import (
    cross as cross,
    rotate_spatial as rotate_spatial,
    safe_norm as safe_norm,
    shift_force as shift_force,
    shift_velocity as shift_velocity,
    spatial_vec as spatial_vec,
)
