"""The call that raises each error of docs/errors.md.

``CALLS`` holds, per error, ``(where, fragment, call)``: ``where`` is the
catalogue's "where" column without the package name (the module and the
function that raises), ``fragment`` a piece of that message's template
that tells it from the function's other messages, and ``call`` a function
of no arguments that meets the error as a user would. docs/hooks.py shows
each call's code beside its message; tests/test_errors.py runs each one and
checks the error's type and its message against the template.
``UNCALLED`` names the few errors no call here reaches, each with why.
"""

import importlib.metadata
import os
import sys
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import simbodyx as sx
import simbodyx.interop.mujoco
import simbodyx.interop.pinocchio  # noqa: F401  (sx.interop.mujoco, sx.interop.pinocchio)

#: A 1 kg body whose mass center is 0.5 m below its origin.
BODY = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.0, -0.5, 0.0], sx.Inertia(0.1)))
#: A body without mass or inertia.
MASSLESS = sx.Body.Rigid(sx.MassProperties(0.0, [0.0, 0.0, 0.0], sx.Inertia(0.0)))
#: Simbody's rubber-like ContactMaterial: 1 MPa, 0.5 s/m, friction 0.8 static, 0.5 dynamic.
RUBBER = sx.ContactMaterial(1e6, 0.5, 0.8, 0.5)


def _view_of(mjcf):
    """``sx.envs.MuJoCoView`` of a robot loaded from MJCF text."""
    system, _, _, robot = sx.io.load_mjcf(mjcf)
    model, state = system.realize_topology()
    return sx.envs.MuJoCoView(robot, model, state)


def pendulum(kind="Pin", *options):
    """A system being built: ``system``, ``matter``, ``forces``, ``ground`` and
    ``body``, one ``kind`` mobilizer (with ``options``) from Ground under gravity."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0.0, -9.81, 0.0])
    body = getattr(sx.MobilizedBody, kind)(matter.Ground(), BODY, *options)
    return SimpleNamespace(system=system, matter=matter, forces=forces, ground=matter.Ground(), body=body)


def realized(built):
    """The system being ``built`` (:func:`pendulum`) frozen: ``model``, ``state`` and its ``body`` handle."""
    model, state = built.system.realize_topology()
    return SimpleNamespace(model=model, state=state, body=built.body)


def model_and_state(kind="Pin"):
    """(model, state) of :func:`model`."""
    built = model(kind)
    return built.model, built.state


def _view(built, *args, **options):
    """``sx.viz.view`` of a frozen system (:func:`model`)."""
    return sx.viz.view(built.model, built.state, *args, **options)


def model(kind="Pin"):
    """:func:`pendulum` frozen (:func:`realized`)."""
    return realized(pendulum(kind))


def pendulum_on(built, kind):
    """One more ``kind`` mobilizer from Ground in the system being ``built``."""
    return getattr(sx.MobilizedBody, kind)(built.ground, BODY)


def contact_scene(material=None):
    """:func:`pendulum` of a Free ball with ``contacts``, a contact set ``surfaces``
    holding a 0.1 m sphere on the ball (surface 0) and a half-space on Ground
    (1), both of ``material``."""
    scene = pendulum("Free")
    scene.contacts = sx.GeneralContactSubsystem(scene.system)
    scene.surfaces = scene.contacts.create_contact_set()
    scene.contacts.add_body(scene.surfaces, scene.body, sx.ContactGeometry.Sphere(0.1), material=material)
    scene.contacts.add_body(scene.surfaces, scene.ground, sx.ContactGeometry.HalfSpace(), material=material)
    return scene


def hunt_crossley_model():
    """The Model of :func:`contact_scene` with a HuntCrossleyForce (element 1)."""
    scene = contact_scene(RUBBER)
    sx.HuntCrossleyForce(scene.forces, scene.contacts, scene.surfaces)
    return scene.system.realize_topology()[0]


def smooth_sphere_model():
    """A Free ball's Model with a SmoothSphereHalfSpaceForce (element 1) against Ground."""
    built = pendulum("Free")
    force = sx.SmoothSphereHalfSpaceForce(built.forces)
    force.set_contact_sphere_body(built.body)
    force.set_contact_half_space_body(built.ground)
    force.set_contact_sphere_radius(0.1)
    return built.system.realize_topology()[0]


def actuated_model():
    """:func:`model` with a MobilityActuator (element 1) on the Pin: ``actuator`` its handle."""
    built = pendulum()
    actuator = sx.Force.MobilityActuator(built.forces, built.body, 0)
    frozen = realized(built)
    frozen.actuator = actuator
    return frozen


def constrained_model():
    """:func:`model` with its Pin's acceleration held at 1 rad/s^2 (Constraint.ConstantAcceleration)."""
    built = pendulum()
    sx.Constraint.ConstantAcceleration(built.body, 0, 1.0)
    return realized(built)


def _soft_and_simbody_constraints():
    """An MJCF hinge's soft constraints set on a tree that also has a Simbody constraint, frozen."""
    system, matter, _, _ = sx.io.load_mjcf('<mujoco><worldbody><body><joint/><geom size="0.1"/></body>'
                                           '</worldbody></mujoco>', physics="mujoco")
    sx.Constraint.ConstantAcceleration(matter.get_mobilized_body(1), 0, 1.0)
    return system.realize_topology()


def massless_model():
    """A Pin under gravity carrying a massless Pin: a singular mass matrix."""
    built = pendulum()
    sx.MobilizedBody.Pin(built.body, MASSLESS)
    return realized(built)


def unreachable_model():
    """A Pin about z whose station 0.5 m down must meet a point 1 m off its plane (Constraint.Ball)."""
    built = pendulum()
    sx.Constraint.Ball(built.ground, [0.0, 0.0, 1.0], built.body, [0.0, -0.5, 0.0])
    return realized(built)


def custom_force_model(torque):
    """:func:`model` with a Force.Custom applying ``torque(u)`` to the Pin."""
    built = pendulum()
    sx.Force.Custom(built.forces, lambda model, state: (torque(state.u), jnp.zeros((2, 6))))
    return realized(built)


def without_module(name, call, *args):
    """``call(*args)`` as on a machine where ``import name`` fails."""
    saved = sys.modules.get(name)
    sys.modules[name] = None
    try:
        return call(*args)
    finally:
        if saved is None:
            del sys.modules[name]
        else:
            sys.modules[name] = saved


def with_environment(variable, value, call, *args):
    """``call(*args)`` with the environment variable set to ``value``."""
    saved = os.environ.get(variable)
    os.environ[variable] = value
    try:
        return call(*args)
    finally:
        if saved is None:
            del os.environ[variable]
        else:
            os.environ[variable] = saved


def without_distribution(name, call, *args):
    """``call(*args)`` as on a machine without the installed distribution ``name``."""
    real = importlib.metadata.distribution

    def missing(requested):
        if requested == name:
            raise importlib.metadata.PackageNotFoundError(requested)
        return real(requested)

    importlib.metadata.distribution = missing
    try:
        return call(*args)
    finally:
        importlib.metadata.distribution = real


def urdf(*elements, name="arm"):
    """A URDF document of ``elements`` (XML text)."""
    return f'<robot name="{name}">' + "".join(elements) + "</robot>"


#: URDF links and joints: a massive link and a revolute joint between two links.
LINK = ('<link name="{0}"><inertial><mass value="1"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>')
JOINT = '<joint name="{0}" type="revolute"><parent link="{1}"/><child link="{2}"/><axis xyz="0 0 1"/></joint>'
#: The revolute joint of :func:`arm_urdf`.
SHOULDER = JOINT.format("shoulder", "base", "arm")


def arm_urdf(shoulder=SHOULDER, *more):
    """A URDF document of links base and arm joined by ``shoulder``, then ``more`` elements."""
    return urdf(LINK.format("base"), LINK.format("arm"), shoulder, *more)


CALLS = [
    # -- assembly ---------------------------------------------------------------------------
    ("assembly._body_index", "expected a MobilizedBody handle", lambda: sx.QValue("pin", 0, 0.0)),
    ("assembly.Markers.__init__", "needs at least one", lambda: sx.Markers([])),
    ("assembly.Markers.__init__", "each marker is", lambda: sx.Markers([("tip", 1)])),
    ("assembly.Markers.__init__", "station must be", lambda: sx.Markers([("tip", 1, [0.0, 1.0])])),
    ("assembly.Markers.__init__", "weight must be", lambda: sx.Markers([("tip", 1, [0.0, 1.0, 0.0], -1.0)])),
    ("assembly.Markers.__init__", "must be unique",
     lambda: sx.Markers([("tip", 1, [0.0, 1.0, 0.0]), ("tip", 1, [0.0, 0.0, 0.0])])),
    ("assembly.Markers._checked", "observations must",
     lambda: sx.Markers([("tip", 1, [0.0, 1.0, 0.0])]).move_all_observations(np.zeros((2, 3)))),
    ("assembly.Assembler.set_accuracy", "accuracy must", lambda: sx.Assembler(model().model).set_accuracy(1.5)),
    ("assembly.Assembler.set_error_tolerance", "tolerance must",
     lambda: sx.Assembler(model().model).set_error_tolerance(-1.0)),
    ("assembly.Assembler.adopt_assembly_goal", "expected Markers or QValue",
     lambda: sx.Assembler(model().model).adopt_assembly_goal("tip")),
    ("assembly.Assembler.restrict_q", "need lower <= upper",
     lambda: sx.Assembler(model().model).restrict_q(1, 0, 1.0, 0.0)),
    ("assembly.Assembler._body", "no mobilized body", lambda: sx.Assembler(model().model).lock_mobilizer(0)),
    ("assembly.Assembler._q_index", "uses a quaternion", lambda: sx.Assembler(model("Ball").model).lock_q(1, 0)),
    ("assembly.Assembler._q_index", "q; no q", lambda: sx.Assembler(model().model).lock_q(1, 3)),
    ("assembly.Assembler._check_bodies", "condition refers to body",
     lambda: sx.Assembler(model().model).adopt_assembly_goal(sx.QValue(5, 0, 0.0))),
    ("assembly.Assembler._check_bodies", "QValue",
     lambda: sx.Assembler(model().model).adopt_assembly_goal(sx.QValue(1, 2, 0.0))),
    ("assembly._weight", "weights must be",
     lambda: sx.Assembler(model().model).adopt_assembly_goal(sx.QValue(1, 0, 0.0), -1.0)),
    # -- builder: bodies, mobilizers, subsystems --------------------------------------------
    ("builder.body.Body.__init__", "needs a MassProperties", lambda: sx.Body.Rigid(1.0)),
    ("builder.mobilized_body._concrete", "must have shape",
     lambda: sx.MobilizedBody.Ellipsoid(pendulum().ground, BODY, [0.1, 0.2])),
    ("builder.mobilized_body._concrete", "NaN or infinity",
     lambda: sx.MobilizedBody.Screw(pendulum().ground, BODY, float("nan"))),
    ("builder.mobilized_body._check_frame", "must be a Transform",
     lambda: sx.MobilizedBody.Pin(pendulum().ground, np.eye(4), BODY, sx.Transform())),
    ("builder.mobilized_body._check_frame", ".R",
     lambda: sx.MobilizedBody.Pin(pendulum().ground, sx.Transform(2 * np.eye(3), np.zeros(3)), BODY,
                                  sx.Transform())),
    ("builder.mobilized_body.MobilizedBody.__init__", "the parent must be",
     lambda: sx.MobilizedBody.Pin("ground", BODY)),
    ("builder.mobilized_body.MobilizedBody.__init__", "takes (parent",
     lambda: sx.MobilizedBody.Pin(pendulum().ground)),
    ("builder.mobilized_body.MobilizedBody.__init__", "body must be",
     lambda: sx.MobilizedBody.Pin(pendulum().ground, sx.Transform(), 1.0, sx.Transform())),
    ("builder.mobilized_body.MobilizedBody.__init__", "direction given twice",
     lambda: sx.MobilizedBody.Pin(pendulum().ground, BODY, sx.MobilizedBody.Direction.Reverse,
                                  direction=sx.MobilizedBody.Direction.Reverse)),
    ("builder.mobilized_body.MobilizedBody.__init__", "a Weld has no direction",
     lambda: sx.MobilizedBody.Weld(pendulum().ground, BODY, sx.MobilizedBody.Direction.Reverse)),
    ("builder.mobilized_body.MobilizedBody._parse_kind", "unexpected extra arguments",
     lambda: sx.MobilizedBody.Pin(pendulum().ground, BODY, 0.3)),
    ("builder.mobilized_body.MobilizedBody._checked_mass_properties", "mass properties must be",
     lambda: pendulum().body.set_default_mass_properties(1.0)),
    ("builder.mobilized_body.MobilizedBody.parent", "Ground has no parent", lambda: pendulum().ground.parent),
    ("builder.mobilized_body.MobilizedBody.set_default_q", "the default quaternion is zero",
     lambda: pendulum("Ball").body.set_default_q(np.zeros(4))),
    ("builder.mobilized_body.MobilizedBody.set_armature", "armature must be",
     lambda: pendulum().body.set_armature([-1.0])),
    ("builder.mobilized_body.MobilizedBody.get_body", "Ground carries no Body", lambda: pendulum().ground.get_body()),
    ("builder.mobilized_body.MobilizedBody.set_body", "body must be", lambda: pendulum().body.set_body(1.0)),
    ("builder.mobilized_body.MobilizedBody.clone_for_new_parent", "Ground cannot be cloned",
     lambda: pendulum().ground.clone_for_new_parent(pendulum().ground)),
    ("builder.mobilized_body.MobilizedBody.set_mass_properties", "Ground has no mass properties",
     lambda: pendulum().ground.set_mass_properties(model().model, BODY.mass_properties)),
    ("builder.mobilized_body.MobilizedBody.set_mass_properties", "mass properties must be",
     lambda: (m := model()).body.set_mass_properties(m.model, 1.0)),
    ("builder.mobilized_body.MobilizedBody._check_model", "belongs to a different MultibodySystem",
     lambda: pendulum().body.set_mass_properties(model("Slider").model, BODY.mass_properties)),
    ("builder.mobilized_body.MobilizedBody._with_frame", "Ground has no",
     lambda: pendulum().ground.set_inboard_frame(model().model, sx.Transform())),
    ("builder.mobilized_body.MobilizedBody._with_frame", "must be a Transform",
     lambda: (m := model()).body.set_inboard_frame(m.model, np.eye(4))),
    ("builder.mobilized_body.MobilizedBody.lock_by_default", "has no mobilities to lock",
     lambda: pendulum("Weld").body.lock_by_default()),
    ("builder.mobilized_body.MobilizedBody.get_motion", "has no Motion", lambda: pendulum().body.get_motion()),
    ("builder.mobilized_body.Ground.__init__", "exactly one Ground", lambda: sx.MobilizedBody.Ground()),
    ("builder.mobilized_body.Screw._parse_kind", "exactly one pitch",
     lambda: sx.MobilizedBody.Screw(pendulum().ground, BODY)),
    ("builder.mobilized_body.Free.set_default_quaternion", "the default quaternion is zero",
     lambda: pendulum("Free").body.set_default_quaternion(np.zeros(4))),
    ("builder.mobilized_body.Ellipsoid._checked_radii", "radii must be non-negative",
     lambda: sx.MobilizedBody.Ellipsoid(pendulum().ground, BODY, [0.1, -0.2, 0.3])),
    ("builder.mobilized_body.Ellipsoid._parse_kind", "at most one radii",
     lambda: sx.MobilizedBody.Ellipsoid(pendulum().ground, BODY, [0.1, 0.2, 0.3], [0.1, 0.2, 0.3])),
    ("builder.mobilized_body.SphericalCoords._parse_kind", "takes no options or all six",
     lambda: sx.MobilizedBody.SphericalCoords(pendulum().ground, BODY, 0.0)),
    ("builder.mobilized_body.SphericalCoords._parse_kind", "radial_axis must be",
     lambda: sx.MobilizedBody.SphericalCoords(pendulum().ground, BODY, 0.0, False, 0.0, False, "y", False)),
    ("builder.mobilized_body.Custom._parse_kind", "Custom needs one",
     lambda: sx.MobilizedBody.Custom(pendulum().ground, BODY)),
    ("builder.mobilized_body.Custom._check_kind", "failed",
     lambda: sx.MobilizedBody.Custom(pendulum().ground, BODY, sx.MobilizedBody.Custom.Implementation(
         1, 1, lambda q: 1 / 0))),
    ("builder.mobilized_body.Custom._check_kind", "has shape",
     lambda: sx.MobilizedBody.Custom(pendulum().ground, BODY, sx.MobilizedBody.Custom.Implementation(
         1, 1, lambda q: (jnp.eye(3), jnp.zeros(2))))),
    ("builder.mobilized_body.Custom._check_kind", "is not finite",
     lambda: sx.MobilizedBody.Custom(pendulum().ground, BODY, sx.MobilizedBody.Custom.Implementation(
         1, 1, lambda q: (jnp.eye(3), jnp.full(3, jnp.nan))))),
    ("builder.mobilized_body.Custom._check_kind", "rotation at the default q",
     lambda: sx.MobilizedBody.Custom(pendulum().ground, BODY, sx.MobilizedBody.Custom.Implementation(
         1, 1, lambda q: (2 * jnp.eye(3), jnp.zeros(3))))),
    ("builder.mobilized_body.FunctionBased._parse_kind", "FunctionBased takes",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1)),
    ("builder.mobilized_body.FunctionBased._parse_kind", ": {e}",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 7, [None] * 6, [()] * 6)),
    ("builder.system._positive_scale", "must be a positive finite number",
     lambda: sx.MultibodySystem().set_default_length_scale(0.0)),
    ("builder.system.MultibodySystem.get_matter_subsystem", "no SimbodyMatterSubsystem yet",
     lambda: sx.MultibodySystem().get_matter_subsystem()),
    ("builder.system.MultibodySystem.check_not_frozen", "was frozen by realize_topology",
     lambda: ((p := pendulum()).system.realize_topology(), sx.MobilizedBody.Pin(p.ground, BODY))),
    ("builder.system.SimbodyMatterSubsystem.__init__", "needs a MultibodySystem",
     lambda: sx.SimbodyMatterSubsystem(None)),
    ("builder.system.SimbodyMatterSubsystem.__init__", "already has a SimbodyMatterSubsystem",
     lambda: sx.SimbodyMatterSubsystem(pendulum().system)),
    ("builder.system.SimbodyMatterSubsystem.get_mobilized_body", "no mobilized body",
     lambda: pendulum().matter.get_mobilized_body(5)),
    ("builder.system.SimbodyMatterSubsystem._check_handles", "expected MobilizedBody handles",
     lambda: sx.Constraint.Rod(pendulum().body, [0, 0, 0], "ground", [0, 0, 0], 1.0)),
    ("builder.system.SimbodyMatterSubsystem.get_constraint", "no constraint",
     lambda: pendulum().matter.get_constraint(0)),
    ("builder.system.SimbodyMatterSubsystem.get_unilateral_contact", "no unilateral contact",
     lambda: pendulum().matter.get_unilateral_contact(0)),
    ("builder.system.SimbodyMatterSubsystem.get_state_limited_friction", "no state-limited friction",
     lambda: pendulum().matter.get_state_limited_friction(0)),
    ("builder.system.SimbodyMatterSubsystem._add_motion", "already has a Motion",
     lambda: (sx.Motion.Steady((p := pendulum()).body, 1.0), sx.Motion.Steady(p.body, 2.0))),
    # -- body queries -------------------------------------------------------------------
    ("body_queries.BodyQueries._topology_of", "belongs to a different MultibodySystem",
     lambda: pendulum().body.lock_at(model("Slider").state, 0.1)),
    ("body_queries.BodyQueries._which", "out of range", lambda: (m := model()).body.get_one_q(m.state, 1)),
    ("body_queries.BodyQueries.set_q_from_vector", "q has shape",
     lambda: (m := model()).body.set_q_from_vector(m.state, [0.1, 0.2])),
    ("body_queries.BodyQueries.set_u_from_vector", "u has shape",
     lambda: (m := model()).body.set_u_from_vector(m.state, [0.1, 0.2])),
    ("body_queries.BodyQueries.get_one_from_q_partition", "q-like vector",
     lambda: (m := model()).body.get_one_from_q_partition(m.state, 0, np.zeros(3))),
    ("body_queries.BodyQueries.get_one_from_u_partition", "u-like vector",
     lambda: (m := model()).body.get_one_from_u_partition(m.state, 0, np.zeros(3))),
    ("body_queries.BodyQueries._target", "has shape",
     lambda: (m := model()).body.set_q_to_fit_translation(m.state, [0.0, 1.0])),
    ("body_queries.BodyQueries.lock_at", "has no mobilities to lock",
     lambda: (m := model("Weld")).body.lock_at(m.state, 0.0)),
    ("body_queries.BodyQueries.lock_at", "lock value needs", lambda: (m := model()).body.lock_at(m.state, [0.1, 0.2])),
    ("body_queries.BodyQueries.convert_q_force_to_u_force", "fq has shape",
     lambda: (m := model()).body.convert_q_force_to_u_force(m.state, np.zeros(2))),
    ("body_queries._named.query", "expected (3,)",
     lambda: (m := model()).body.find_station_location_in_ground(m.model.realize(m.state, sx.Stage.Position),
                                                                 [0.0, 1.0])),
    # -- contact: geometry, materials, contact sets, compliant forces -----------------------
    ("builder.contact.GeneralContactSubsystem._set", "no contact set",
     lambda: contact_scene().contacts.get_num_bodies(3)),
    ("builder.contact.GeneralContactSubsystem.add_body", "expected a MobilizedBody",
     lambda: (s := contact_scene()).contacts.add_body(s.surfaces, "ball", sx.ContactGeometry.Sphere(0.1))),
    ("builder.contact.GeneralContactSubsystem.add_body", "belongs to a different MultibodySystem",
     lambda: (s := contact_scene()).contacts.add_body(s.surfaces, pendulum().body, sx.ContactGeometry.Sphere(0.1))),
    ("builder.contact.GeneralContactSubsystem.add_body", "geometry must be",
     lambda: (s := contact_scene()).contacts.add_body(s.surfaces, s.body, 0.1)),
    ("builder.contact.GeneralContactSubsystem.add_body", "material must be",
     lambda: (s := contact_scene()).contacts.add_body(s.surfaces, s.body, sx.ContactGeometry.Sphere(0.1),
                                                      material=1e6)),
    ("builder.contact.GeneralContactSubsystem.add_body", "margin must be",
     lambda: (s := contact_scene()).contacts.add_body(s.surfaces, s.body, sx.ContactGeometry.Sphere(0.1),
                                                      margin=-0.01)),
    ("builder.contact.GeneralContactSubsystem.exclude_pair", "twice",
     lambda: (s := contact_scene()).contacts.exclude_pair(s.surfaces, 0, 0)),
    ("builder.contact.GeneralContactSubsystem._member", "has no surface",
     lambda: (s := contact_scene()).contacts.get_body(s.surfaces, 2)),
    ("builder.contact._PointContactHandle.__init__", "needs a GeneralContactSubsystem of the same",
     lambda: sx.HuntCrossleyForce(pendulum().forces, (s := contact_scene()).contacts, s.surfaces)),
    ("builder.contact._PointContactHandle.set_transition_velocity", "must be positive",
     lambda: sx.HuntCrossleyForce((s := contact_scene()).forces, s.contacts, s.surfaces).set_transition_velocity(0.0)),
    ("builder.contact.HuntCrossleyForce.set_body_parameters", "must be >= 0",
     lambda: sx.HuntCrossleyForce((s := contact_scene()).forces, s.contacts, s.surfaces).set_body_parameters(
         0, -1e6, 0.5, 0.8, 0.5, 0.0)),
    ("builder.contact.HuntCrossleyForce.set_body_parameters", "above its static friction",
     lambda: sx.HuntCrossleyForce((s := contact_scene()).forces, s.contacts, s.surfaces).set_body_parameters(
         0, 1e6, 0.5, 0.5, 0.8, 0.0)),
    ("builder.contact.CompliantContactSubsystem._energy_index", "is not tracked",
     lambda: (ccs := sx.CompliantContactSubsystem((s := contact_scene(RUBBER)).forces, s.contacts, s.surfaces),
              ccs.get_dissipated_energy(s.system.realize_topology()[1]))),
    ("builder.contact.CompliantContactSubsystem.set_dissipated_energy", "must be >= 0",
     lambda: (ccs := sx.CompliantContactSubsystem((s := contact_scene(RUBBER)).forces, s.contacts, s.surfaces),
              ccs.set_track_dissipated_energy(), ccs.set_dissipated_energy(s.system.realize_topology()[1], -1.0))),
    ("builder.contact.CompliantContactSubsystem._surface_parameters", "has no ContactMaterial",
     lambda: (sx.CompliantContactSubsystem((s := contact_scene()).forces, s.contacts, s.surfaces),
              s.system.realize_topology())),
    ("builder.contact.SmoothSphereHalfSpaceForce._set", "must be >= 0",
     lambda: sx.SmoothSphereHalfSpaceForce(pendulum().forces).set_stiffness(-1.0)),
    ("builder.contact.SmoothSphereHalfSpaceForce.set_contact_sphere_radius", "must be positive",
     lambda: sx.SmoothSphereHalfSpaceForce(pendulum().forces).set_contact_sphere_radius(0.0)),
    ("builder.contact.SmoothSphereHalfSpaceForce.freeze", "before realize_topology",
     lambda: (sx.SmoothSphereHalfSpaceForce((p := pendulum()).forces), p.system.realize_topology())),
    ("contact.detection.candidate_pairs", "no contact between",
     lambda: ((s := contact_scene()).contacts.add_body(s.surfaces, pendulum_on(s, "Pin"),
                                                       sx.ContactGeometry.HalfSpace()),
              sx.HuntCrossleyForce(s.forces, s.contacts, s.surfaces), s.system.realize_topology())),
    ("contact.geometry._positive", "must have shape", lambda: sx.ContactGeometry.Ellipsoid([0.1, 0.2])),
    ("contact.geometry._positive", "positive and finite", lambda: sx.ContactGeometry.Sphere(-0.1)),
    ("contact.geometry.HeightField.__init__", "grid with at least 2",
     lambda: sx.ContactGeometry.HeightField([0.0, 0.1, 0.2], [1.0, 1.0])),
    ("contact.geometry.HeightField.__init__", "must be finite",
     lambda: sx.ContactGeometry.HeightField([[0.0, np.nan], [0.1, 0.2]], [1.0, 1.0])),
    ("contact.geometry.ContactMaterial.__init__", "finite and >= 0", lambda: sx.ContactMaterial(-1e6, 0.5, 0.8, 0.5)),
    ("contact.geometry.ContactMaterial.__init__", "is above static_friction",
     lambda: sx.ContactMaterial(1e6, 0.5, 0.5, 0.8)),
    ("contact.geometry.ContactMaterial.calc_dissipation_from_observed_restitution", "needs 0 <= restitution",
     lambda: sx.ContactMaterial.calc_dissipation_from_observed_restitution(1.5, 1.0)),
    ("contact.geometry._elastic_constants", "Young's modulus",
     lambda: sx.ContactMaterial.calc_plane_strain_stiffness(1e9, 0.7)),
    # -- forces -----------------------------------------------------------------------------
    ("builder.forces.GeneralForceSubsystem._check_matter", "belongs to a different",
     lambda: sx.Force.UniformGravity(pendulum().forces, pendulum().matter, [0.0, -9.81, 0.0])),
    ("builder.forces.GeneralForceSubsystem._check_body", "expected a MobilizedBody",
     lambda: sx.Force.MobilityLinearDamper(pendulum().forces, "pin", 0, 1.0)),
    ("builder.forces.GeneralForceSubsystem._check_body", "belongs to a different",
     lambda: sx.Force.MobilityLinearDamper(pendulum().forces, pendulum().body, 0, 1.0)),
    ("forces.base.ForceElement.check", "NaN or infinity",
     lambda: (sx.Force.MobilityLinearDamper((p := pendulum()).forces, p.body, 0, float("nan")),
              p.system.realize_topology())),
    ("forces.base.ForceElement.check", "must be >= 0",
     lambda: (sx.Force.MobilityLinearDamper((p := pendulum()).forces, p.body, 0, -1.0), p.system.realize_topology())),
    ("forces.base.as_param", "must have shape",
     lambda: sx.Force.UniformGravity((p := pendulum()).forces, p.matter, [0.0, -9.81])),
    ("forces.base.as_param", "NaN or infinity",
     lambda: sx.Force.UniformGravity((p := pendulum()).forces, p.matter, [0.0, float("inf"), 0.0])),
    ("forces.base.as_frame", "must be a Transform",
     lambda: sx.Force.LinearBushing((p := pendulum()).forces, p.ground, np.eye(4), p.body, sx.Transform(),
                                    np.ones(6), np.ones(6))),
    ("forces.gravity.Gravity.__init__", "the down direction is zero",
     lambda: sx.Force.Gravity((p := pendulum()).forces, p.matter, [0.0, 0.0, 0.0], 9.81)),
    ("forces.mobility._mobility_index", "out of range",
     lambda: sx.Force.MobilityLinearSpring((p := pendulum()).forces, p.body, 1, 10.0, 0.0)),
    ("forces.mobility._mobility_index", "qdot != u",
     lambda: sx.Force.MobilityLinearSpring((p := pendulum("Ball")).forces, p.body, 0, 10.0, 0.0)),
    ("forces.mobility.MobilityLinearStop.check", "is above the upper bound",
     lambda: (sx.Force.MobilityLinearStop((p := pendulum()).forces, p.body, 0, 1e4, 1.0, 0.5, -0.5),
              p.system.realize_topology())),
    ("forces.mobility.MobilityCoulombFriction.check", "transition_velocity must be > 0",
     lambda: sx.Force.MobilityCoulombFriction((p := pendulum()).forces, p.body, 0, 1.0, 0.0)),
    ("forces.custom.Custom.__init__", "calc must be a callable", lambda: sx.Force.Custom(pendulum().forces, 1.0)),
    ("forces.custom.Custom.__init__", "potential_energy must be",
     lambda: sx.Force.Custom(pendulum().forces, lambda model, state: (None, None), potential_energy=1.0)),
    ("forces.custom._number", "params must hold real numbers",
     lambda: sx.Force.Custom(pendulum().forces, lambda model, state: (None, None), params={"k": "stiff"})),
    ("forces.thermostat.Thermostat.__init__", "num_excluded_dofs must be",
     lambda: sx.Force.Thermostat((p := pendulum()).forces, p.matter, 1.0, 300.0, 0.1, num_excluded_dofs=7)),
    ("forces.thermostat.Thermostat.__init__", "num_chains must be",
     lambda: sx.Force.Thermostat((p := pendulum()).forces, p.matter, 1.0, 300.0, 0.1, num_chains=0)),
    ("forces.thermostat.Thermostat.check", "must be positive",
     lambda: (sx.Force.Thermostat((p := pendulum()).forces, p.matter, 1.0, -300.0, 0.1), p.system.realize_topology())),
    # -- constraints ------------------------------------------------------------------------
    ("constraints.base.Constraint._register", "needs at least one constrained",
     lambda: sx.Constraint.Custom(pendulum().matter, sx.Constraint.Custom.Implementation(
         num_position=1, position_errors=lambda X_AB, q: jnp.zeros(1)))),
    ("constraints.base.Constraint._register", "different matter subsystem than the one given",
     lambda: sx.Constraint.Custom(pendulum().matter, sx.Constraint.Custom.Implementation(
         mobilizers=[pendulum().body], num_position=1, position_errors=lambda X_AB, q: q[0]))),
    ("constraints.base.Constraint._register", "Ground has no mobilizer",
     lambda: sx.Constraint.Custom((p := pendulum()).matter, sx.Constraint.Custom.Implementation(
         mobilizers=[p.ground], num_position=1, position_errors=lambda X_AB, q: q[0]))),
    ("constraints.base.Constraint._register", "between a body and itself",
     lambda: sx.Constraint.Rod((b := pendulum().body), [0.0, 0.0, 0.0], b, [1.0, 0.0, 0.0], 1.0)),
    ("constraints.base.Constraint._register", "equation counts",
     lambda: sx.Constraint.Custom((p := pendulum()).matter, sx.Constraint.Custom.Implementation(mobilizers=[p.body]))),
    ("constraints.base.Constraint._in", "belongs to a different MultibodySystem",
     lambda: sx.Constraint.ConstantSpeed(pendulum().body, 0, 1.0).get_multipliers_as_vector(model("Slider").state)),
    ("constraints.base.Constraint.is_disabled", "without constraints",
     lambda: sx.Constraint.ConstantSpeed(pendulum().body, 0, 1.0).is_disabled(model().state)),
    ("constraints.base.Constraint.set_disabled", "without constraints",
     lambda: sx.Constraint.ConstantSpeed(pendulum().body, 0, 1.0).set_disabled(model().state, True)),
    ("constraints.base.Constraint.calc_constraint_forces_from_multipliers", "multipliers have shape",
     lambda: sx.Constraint.ConstantSpeed((p := pendulum()).body, 0, 1.0).calc_constraint_forces_from_multipliers(
         (b := p.system.realize_topology())[0].realize(b[1], sx.Stage.Position), [1.0, 2.0])),
    ("constraints.coordinate._which", "Ground has no mobilizer",
     lambda: sx.Constraint.ConstantSpeed(pendulum().ground, 0, 1.0)),
    ("constraints.coordinate._which", "out of range", lambda: sx.Constraint.ConstantSpeed(pendulum().body, 1, 1.0)),
    ("constraints.coordinate._mobilizer_slots", "indices",
     lambda: sx.Constraint.CoordinateCoupler((p := pendulum()).matter, lambda q: q[0], [p.body], [0, 0])),
    ("constraints.coordinate._function", "the function takes",
     lambda: sx.Constraint.CoordinateCoupler((p := pendulum()).matter, sx.functions.Linear((1.0, 1.0, 0.0)), [p.body],
                                             [0])),
    ("constraints.custom.Implementation.__init__", "unknown functions",
     lambda: sx.Constraint.Custom.Implementation(num_position=1, position_error=lambda X_AB, q: q[0])),
    ("constraints.custom.Implementation.__init__", "must be callable",
     lambda: sx.Constraint.Custom.Implementation(num_position=1, position_errors=0.0)),
    ("constraints.custom.Custom.__init__", "needs a Constraint.Custom.Implementation",
     lambda: sx.Constraint.Custom(pendulum().matter, lambda X_AB, q: q[0])),
    ("constraints.custom.Custom.__init__", "is required with",
     lambda: sx.Constraint.Custom((p := pendulum()).matter, sx.Constraint.Custom.Implementation(
         mobilizers=[p.body], num_position=1))),
    ("constraints.custom.Custom._evaluate", "returned",
     lambda: (sx.Constraint.Custom((p := pendulum()).matter, sx.Constraint.Custom.Implementation(
         mobilizers=[p.body], num_position=1, position_errors=lambda X, q: jnp.zeros(2))),
              (b := p.system.realize_topology())[0].matter.get_q_err(b[0].realize(b[1], sx.Stage.Position)))),
    ("constraints.geometric.vec3", "must have shape",
     lambda: sx.Constraint.Ball((p := pendulum()).ground, [0.0, 0.0], p.body, [0.0, 0.0, 0.0])),
    ("constraints.geometric.vec3", "NaN or infinity",
     lambda: sx.Constraint.Ball((p := pendulum()).ground, [0.0, np.nan, 0.0], p.body, [0.0, 0.0, 0.0])),
    ("constraints.geometric.unit3", "must not be zero",
     lambda: sx.Constraint.PointInPlane((p := pendulum()).ground, [0.0, 0.0, 0.0], 0.0, p.body, [0.0, 0.0, 0.0])),
    ("constraints.geometric.scalar", "must be a finite number",
     lambda: sx.Constraint.PointInPlane((p := pendulum()).ground, [0.0, 1.0, 0.0], np.inf, p.body, [0.0, 0.0, 0.0])),
    ("constraints.geometric.positive", "must be positive",
     lambda: sx.Constraint.Rod((p := pendulum()).ground, [0.0, 0.0, 0.0], p.body, [0.0, 0.0, 0.0], -1.0)),
    ("constraints.geometric.rotation3", "proper rotation",
     lambda: sx.Constraint.ConstantOrientation((p := pendulum()).ground, -np.eye(3), p.body, np.eye(3))),
    ("constraints.geometric.frame", "must be a Transform",
     lambda: sx.Constraint.Weld((p := pendulum()).ground, np.eye(4), p.body, sx.Transform())),
    ("rigid_contact.unilateral._cor", "coefficient of restitution",
     lambda: sx.HardStopUpper(pendulum().body, 0, 1.0, 1.5)),
    ("rigid_contact.unilateral._friction", "must be nonnegative",
     lambda: sx.PointPlaneContact((p := pendulum()).ground, [0.0, 1.0, 0.0], -1.0, p.body, [0.0, 0.0, 0.0], 0.5,
                                  -0.1, 0.1, 0.0)),
    ("rigid_contact.unilateral._friction", "can't be larger",
     lambda: sx.PointPlaneContact((p := pendulum()).ground, [0.0, 1.0, 0.0], -1.0, p.body, [0.0, 0.0, 0.0], 0.5,
                                  0.3, 0.6, 0.0)),
    ("rigid_contact.unilateral._Conditional._check", "belongs to a different",
     lambda: sx.HardStopUpper(pendulum().body, 0, 1.0, 0.5).is_enabled(model("Slider").state)),
    ("rigid_contact.unilateral.UnilateralSpeedConstraint.__init__", "sign must be",
     lambda: sx.UnilateralSpeedConstraint(pendulum().body, 0, 2)),
    ("rigid_contact.unilateral.BoundedSpeedConstraint.__init__", "exceeds the upper bound",
     lambda: sx.BoundedSpeedConstraint(pendulum().body, 0, 0.0, 1.0, -1.0)),
    ("rigid_contact.unilateral.StateLimitedFriction.__init__", "expected constraint handles",
     lambda: sx.StateLimitedFriction(["slip"], 1.0, 0.5, 0.3, 0.0)),
    ("rigid_contact.unilateral.StateLimitedFriction.__init__", "must have velocity rows only",
     lambda: sx.StateLimitedFriction([sx.Constraint.ConstantCoordinate(pendulum().body, 0, 0.0)], 1.0, 0.5, 0.3, 0.0)),
    ("rigid_contact.unilateral.StateLimitedFriction.__init__", "a friction has 1 to 3",
     lambda: (ball := pendulum("Free").body, sx.StateLimitedFriction(
         [sx.Constraint.ConstantSpeed(ball, k, 0.0) for k in range(4)], 1.0, 0.5, 0.3, 0.0))),
    ("rigid_contact.unilateral.StateLimitedFriction.__init__", "different matter subsystems",
     lambda: sx.StateLimitedFriction([sx.Constraint.ConstantSpeed(pendulum().body, 0, 0.0),
                                      sx.Constraint.ConstantSpeed(pendulum().body, 0, 0.0)], 1.0, 0.5, 0.3, 0.0)),
    ("rigid_contact.unilateral.StateLimitedFriction.__init__", "normal_force must be",
     lambda: sx.StateLimitedFriction([sx.Constraint.ConstantSpeed(pendulum().body, 0, 0.0)], -1.0, 0.5, 0.3, 0.0)),
    ("rigid_contact.unilateral.StateLimitedFriction._check", "belongs to a different",
     lambda: (f := sx.StateLimitedFriction([sx.Constraint.ConstantSpeed((p := pendulum()).body, 0, 0.0)], 1.0, 0.5,
                                           0.3, 0.0), p.matter.adopt_state_limited_friction(f),
              f.get_normal_force_magnitude(model("Slider").state))),
    ("rigid_contact.unilateral.StateLimitedFriction.get_normal_force_magnitude", "adopt it first",
     lambda: sx.StateLimitedFriction([sx.Constraint.ConstantSpeed(pendulum().body, 0, 0.0)], 1.0, 0.5, 0.3,
                                     0.0).get_normal_force_magnitude((m := model()).model.realize(m.state,
                                                                                                  sx.Stage.Velocity))),
    ("builder.system.SimbodyMatterSubsystem._adopt", "expected",
     lambda: pendulum().matter.adopt_unilateral_contact("stop")),
    ("builder.system.SimbodyMatterSubsystem._adopt", "belongs to a different matter subsystem",
     lambda: pendulum().matter.adopt_unilateral_contact(sx.HardStopUpper(pendulum().body, 0, 1.0, 0.5))),
    ("builder.system.SimbodyMatterSubsystem._adopt", "was already adopted",
     lambda: ((p := pendulum()).matter.adopt_unilateral_contact(stop := sx.HardStopUpper(p.body, 0, 1.0, 0.5)),
              p.matter.adopt_unilateral_contact(stop))),
    ("builder.system.SimbodyMatterSubsystem._check_stops", "exceeds the upper limit",
     lambda: ((p := pendulum()).matter.adopt_unilateral_contact(sx.HardStopUpper(p.body, 0, -1.0, 0.5)),
              p.matter.adopt_unilateral_contact(sx.HardStopLower(p.body, 0, 1.0, 0.5)), p.system.realize_topology())),
    ("builder.system.SimbodyMatterSubsystem._check_handles", "belongs to a different matter subsystem",
     lambda: sx.Constraint.Rod(pendulum().body, [0, 0, 0], pendulum().body, [0, 0, 0], 1.0)),
    # -- URDF -------------------------------------------------------------------------------
    ("io.urdf.load_urdf", "limits must be",
     lambda: sx.io.load_urdf(arm_urdf(), limits=(-1.0, 0.0))),
    ("io.urdf.load_urdf", "friction must be a transition velocity",
     lambda: sx.io.load_urdf(arm_urdf(), friction=0.0)),
    ("io.urdf._floor_contact", "{error}",
     lambda: sx.io.load_urdf(urdf(LINK.format("base"), '<link name="arm"><inertial><mass value="1"/><inertia ixx="0.1" '
                                  'iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial><collision><geometry>'
                                  '<sphere/></geometry></collision></link>', SHOULDER),
                             contact=sx.io.UrdfContact(1e6, 1e5, 0.5, 0.8, 0.5))),
    ("io.urdf.example_robot_data", "no {path", lambda: sx.io.example_robot_data("no_such_robot/robot.urdf")),
    ("io.urdf._parse", "no URDF file", lambda: sx.io.load_urdf("no_such_robot.urdf")),
    ("io.urdf._parse", "not well-formed", lambda: sx.io.load_urdf("<robot><link></robot>")),
    ("io.urdf._parse", "refused",
     lambda: sx.io.load_urdf('<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY a "aaaa">]><robot name="r">&a;</robot>')),
    ("io.urdf._parse", "the root element", lambda: sx.io.load_urdf("<mujoco/>")),
    ("io.urdf._check_size", "bytes, over",
     lambda: sx.io.load_urdf(urdf(LINK.format("base")) + " " * sx.io.urdf.MAX_URDF_BYTES)),
    ("io.urdf._floats", "is not {count} numbers",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace('xyz="0 0 1"', 'xyz="0 one 1"')))),
    ("io.urdf._floats", "finite numbers",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace('xyz="0 0 1"', 'xyz="0 nan 1"')))),
    ("io.urdf._number", "is not a number",
     lambda: sx.io.load_urdf(urdf(LINK.format("base").replace('mass value="1"', 'mass value="heavy"')))),
    ("io.urdf._number", "is not finite",
     lambda: sx.io.load_urdf(urdf(LINK.format("base").replace('mass value="1"', 'mass value="inf"')))),
    ("io.urdf._named", "has no name", lambda: sx.io.load_urdf(urdf("<link/>"))),
    ("io.urdf._read", "two links named", lambda: sx.io.load_urdf(urdf(LINK.format("base"), LINK.format("base")))),
    ("io.urdf._read", "has no <mass value>",
     lambda: sx.io.load_urdf(urdf('<link name="base"><inertial><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" '
                                  'iyz="0"/></inertial></link>'))),
    ("io.urdf._read", "two joints named",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER, LINK.format("hand"), JOINT.format("shoulder", "arm", "hand")))),
    ("io.urdf._read", "unknown type",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace("revolute", "hinge")))),
    ("io.urdf._read", "no <{end}",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace('<parent link="base"/>', "")))),
    ("io.urdf._read", "is not defined",
     lambda: sx.io.load_urdf(urdf(LINK.format("base"), SHOULDER))),
    ("io.urdf._read", "zero length",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace('xyz="0 0 1"', 'xyz="0 0 0"')))),
    ("io.urdf._read", "names no joint",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace("</joint>", "<mimic/></joint>")))),
    ("io.urdf._read", "no <link>", lambda: sx.io.load_urdf(urdf())),
    ("io.urdf._tree", "is the child of two joints",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER, LINK.format("hand"), JOINT.format("elbow", "hand", "arm")))),
    ("io.urdf._tree", "form a cycle",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER, JOINT.format("elbow", "arm", "base")))),
    ("io.urdf._tree", "root links",
     lambda: sx.io.load_urdf(urdf(LINK.format("base"), LINK.format("arm")))),
    ("io.urdf._tree", "unreachable from the root",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER, LINK.format("hand"), LINK.format("tool"),
                                      JOINT.format("elbow", "hand", "tool"), JOINT.format("wrist", "tool", "hand")))),
    ("io.urdf._check_massless_leaves", "carries nothing massive",
     lambda: sx.io.load_urdf(urdf(LINK.format("base"), '<link name="arm"/>', SHOULDER))),
    ("io.urdf._coupler", "no joint of that name",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace("</joint>", '<mimic joint="elbow"/></joint>')))),
    ("io.urdf._coupler", "mimic couples one-coordinate joints",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER.replace("revolute", "planar"), LINK.format("hand"),
                                      JOINT.format("elbow", "arm", "hand").replace(
                                          "</joint>", '<mimic joint="shoulder"/></joint>')))),
    # -- functions, events, integration, simulation -------------------------------------------
    ("functions.Linear.__post_init__", "at least two coefficients", lambda: sx.functions.Linear((1.0,))),
    ("functions.Polynomial.__post_init__", "at least one coefficient", lambda: sx.functions.Polynomial(())),
    ("functions.Step.__post_init__", "needs x1 > x0", lambda: sx.functions.Step(0.0, 1.0, 1.0, 0.5)),
    ("functions.Spline.__post_init__", "at least 2 points", lambda: sx.functions.Spline((0.0, 1.0), (0.0,))),
    ("functions.Spline.__post_init__", "strictly increasing", lambda: sx.functions.Spline((1.0, 0.0), (0.0, 1.0))),
    ("functions.as_function", "expected a simbodyx Function",
     lambda: sx.Constraint.CoordinateCoupler((p := pendulum()).matter, 2.0, [p.body], [0])),
    ("functions._floats", "contain NaN or infinity", lambda: sx.functions.Polynomial((1.0, np.nan))),
    ("events.ScheduledEvent.__check_init__", "times must be", lambda: sx.ScheduledEvent([[0.5]], lambda m, s: s)),
    ("events.ScheduledEvent.__check_init__", "handler must be callable", lambda: sx.ScheduledEvent([0.5], None)),
    ("events.TriggeredEvent.__check_init__", "direction must be",
     lambda: sx.TriggeredEvent(lambda m, s: s.q[0], lambda m, s: s, direction=2)),
    ("events.TriggeredEvent.__check_init__", "must be callable", lambda: sx.TriggeredEvent(0.0, lambda m, s: s)),
    ("events.TriggeredEvent.__check_init__", "localization_window must be",
     lambda: sx.TriggeredEvent(lambda m, s: s.q[0], lambda m, s: s, localization_window=0.0)),
    ("events.check_events", "events must be",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [1.0],
                         events=[lambda m, s: s])),
    ("integrate.rollout", "unknown method", lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, 10,
                                                                        method="rk45")),
    ("integrate._schedule", "must have shape",
     lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, controls=np.zeros((10, 2)))),
    ("integrate._schedule", "rows for num_steps",
     lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, 20, controls=np.zeros((10, 1)))),
    ("integrate.rollout", "hold must be",
     lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, controls=np.zeros((10, 1)), hold="cubic")),
    ("integrate.rollout", "no Force.MobilityActuator",
     lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, actuator_controls=np.zeros((10, 1)))),
    ("integrate.rollout", "non-negative multiple of save_every",
     lambda: sx.integrate.rollout((m := model()).model, m.state, 0.01, 10, save_every=3)),
    ("integrate._chunks_per_segment", "steps per segment",
     lambda: jax.grad(lambda u: sx.integrate.rollout((m := model()).model, m.state.with_u(u), 0.01, 10,
                                                     checkpoint=3)[0].q[0])(jnp.ones(1))),
    ("integrators.Integrator.__check_init__", "choose a method", lambda: sx.Integrator()),
    ("integrators.Integrator.__check_init__", "must be a positive number",
     lambda: sx.Integrator.RungeKuttaMerson(accuracy=0.0)),
    ("integrators.Integrator.__check_init__", "exceeds maximum_step",
     lambda: sx.Integrator.RungeKuttaMerson(minimum_step=0.1, maximum_step=0.01)),
    ("integrators.Integrator.__check_init__", "max_steps must be",
     lambda: sx.Integrator.RungeKuttaMerson(max_steps=0)),
    ("simulation.simulate", "takes fixed steps",
     lambda: sx.simulate((m := model()).model, m.state, sx.SemiExplicitEulerTimeStepper(), [1.0])),
    ("simulation.simulate", "integrator must be", lambda: sx.simulate((m := model()).model, m.state, "rk4", [1.0])),
    ("simulation.simulate", "max_event_records must be",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [1.0], max_event_records=-1)),
    ("simulation.simulate", "a non-empty 1-D array",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [])),
    ("simulation.simulate", "finite and nondecreasing",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [1.0, 0.5])),
    ("simulation.simulate", "is before the State's time",
     lambda: sx.simulate((m := model()).model, m.state.with_time(1.0), sx.Integrator.RungeKuttaMerson(), [0.5])),
    ("simulation._raise_on_failure", "at t =",
     lambda: sx.simulate((m := model()).model, m.state.with_u(jnp.array([1.0])), sx.Integrator.RungeKuttaMerson(
         max_steps=2), [10.0])),
    ("simulation._raise_on_failure", "succeeded",
     lambda: sx.check_errors()(jax.jit(lambda m, s: sx.simulate(m, s, sx.Integrator.RungeKuttaMerson(max_steps=2),
                                                                [10.0])))((m := model()).model,
                                                                          m.state.with_u(jnp.array([1.0])))),
    ("projection.ProjectOptions.__check_init__", "need accuracy > 0", lambda: sx.ProjectOptions(accuracy=0.0)),
    ("projection._vector", "must have shape",
     lambda: (m := model()).model.project_q(m.state, u_weights=np.ones(2))),
    ("projection.project_q", "error_estimate must have shape",
     lambda: (m := model()).model.project_q(m.state, error_estimate=np.ones(2))),
    ("projection.project_u", "error_estimate must have shape",
     lambda: (m := model()).model.project_u(m.state, error_estimate=np.ones(2))),
    # -- optimization and batches ---------------------------------------------------------------
    ("optimize._check_count", "must be a positive int",
     lambda: sx.optimize.minimize(lambda x: x @ x, jnp.ones(2), None, 0)),
    ("optimize.multiple_shooting", "controls must have shape",
     lambda: sx.optimize.multiple_shooting((m := model()).model, m.state, 0.01, np.zeros((2, 5)), np.zeros((1, 2)))),
    ("optimize.multiple_shooting", "knots must have shape",
     lambda: sx.optimize.multiple_shooting((m := model()).model, m.state, 0.01, np.zeros((2, 5, 1)), np.zeros((2, 2)))),
    ("optimize.augmented_lagrangian", "neither equalities nor inequalities",
     lambda: sx.optimize.augmented_lagrangian(lambda x: (x @ x, None, None), jnp.ones(2), None, 10, 2)),
    ("parallel.use_cpu_cores", "at least 1", lambda: sx.parallel.use_cpu_cores(0)),
    ("parallel.use_cpu_cores", "is already running", lambda: (jnp.zeros(1), sx.parallel.use_cpu_cores(64))),
    ("parallel._batch_size", "has no array leaves", lambda: sx.parallel.shard_batch({})),
    ("parallel._batch_size", "is a scalar", lambda: sx.parallel.shard_batch(model().state)),
    ("parallel._batch_size", "disagree on the batch size",
     lambda: sx.parallel.shard_batch((np.zeros(4), np.zeros(6)))),
    ("parallel.shard_batch", "is not divisible",
     lambda: sx.parallel.shard_batch(np.zeros(3), devices=[jax.devices()[0]] * 2)),
    ("parallel.batched", "chunk_size must be", lambda: sx.parallel.batched(jnp.sin, chunk_size=0)),
    ("parallel.batched.run", "in_axes must be", lambda: sx.parallel.batched(jnp.add, in_axes=(1, 0))(
        np.zeros(4), np.zeros(4))),
    ("parallel.batched.run", "no argument is batched",
     lambda: sx.parallel.batched(jnp.add, in_axes=(None, None))(np.zeros(4), np.zeros(4))),
    # -- models and States ----------------------------------------------------------------------
    ("model.Model.check", "needs concrete numbers", lambda: jax.jit(lambda m: m.check())(model().model)),
    ("model.Model.check_leaves", "has shape",
     lambda: eqx.tree_at(lambda m: m.params.mass, (m := model()).model, jnp.ones(3)).realize(m.state)),
    ("model.Model.check_leaves", "expected a {",
     lambda: eqx.tree_at(lambda m: m.params.X_PF.p, (m := model().model), jnp.ones((2, 3), jnp.int32)).check()),
    ("model.Model.check_leaves", "other numbers are",
     lambda: eqx.tree_at(lambda m: m.params.mass, (m := model().model), jnp.ones(2, jnp.float32)).check()),
    ("model.Model.check", ".R", lambda: eqx.tree_at(lambda m: m.params.X_PF.R, (m := model().model),
                                                     2 * m.params.X_PF.R).check()),
    ("model.Model.check", ".p contains NaN", lambda: eqx.tree_at(lambda m: m.params.X_BM.p, (m := model().model),
                                                                 jnp.full_like(m.params.X_BM.p, jnp.nan)).check()),
    ("state.State.require", "needs Stage", lambda: model().state.acceleration.udot),
    ("state.State.check_model", "belongs to a different model",
     lambda: model().model.realize(model("Slider").state, sx.Stage.Position)),
    ("state.State.check_model", "same tree but other",
     lambda: (sx.Constraint.ConstantSpeed((p := pendulum()).body, 0, 1.0), p.system.realize_topology())[1][0].realize(
         model().state, sx.Stage.Position)),
    ("state.State.check_model", "a Model computes in its own dtype",
     lambda: (m := model()).model.realize(m.state.astype(jnp.float32), sx.Stage.Position)),
    ("state._check_shape", "has shape", lambda: model().state.with_q(np.zeros((5, 1)))),
    ("matter.Matter._sized", "has shape",
     lambda: (m := model()).model.matter.multiply_by_m(m.model.realize(m.state, sx.Stage.Position), np.zeros(2))),
    ("matter.Matter.add_in_mobility_force", "out of range",
     lambda: (m := model()).model.matter.add_in_mobility_force(m.state, 1, 2, 1.0, np.zeros(1))),
    ("matter.Matter._tasks", "out of range",
     lambda: (m := model()).model.matter.calc_station_jacobian(m.model.realize(m.state, sx.Stage.Position), 5,
                                                              [0.0, 0.0, 0.0])),
    ("matter.Matter._tasks", "stations have shape",
     lambda: (m := model()).model.matter.calc_station_jacobian(m.model.realize(m.state, sx.Stage.Position), 1,
                                                              [0.0, 0.0])),
    ("matter.Matter._task_vector", "input has shape",
     lambda: (m := model()).model.matter.multiply_by_station_jacobian_transpose(
         m.model.realize(m.state, sx.Stage.Position), 1, [0.0, 0.0, 0.0], [1.0, 0.0])),
    ("matter.Matter.get_constraint", "no constraint", lambda: model().model.matter.get_constraint(0)),
    ("matter.Matter._held", "traced here",
     lambda: jax.jit(lambda s: jnp.asarray(m.model.matter.get_free_q_index(s)))(
         (m := model()).body.lock_at(m.state, 0.1))),
    ("matter.Matter.calc_motion_errors", "stage must be",
     lambda: (m := model()).model.matter.calc_motion_errors(m.state, sx.Stage.Dynamics)),
    # -- mobilizers, Motions --------------------------------------------------------------------
    ("mobilizers.custom.Custom.__post_init__", "num_u must be",
     lambda: sx.MobilizedBody.Custom.Implementation(7, 7, lambda q: (jnp.eye(3), q[:3]))),
    ("mobilizers.custom.Custom.__post_init__", "num_q must be",
     lambda: sx.MobilizedBody.Custom.Implementation(1, 2, lambda q: (jnp.eye(3), jnp.zeros(3)))),
    ("mobilizers.custom.Custom.__post_init__", "num_angles must be",
     lambda: sx.MobilizedBody.Custom.Implementation(1, 1, lambda q: (jnp.eye(3), jnp.zeros(3)), num_angles=2)),
    ("mobilizers.custom.Custom.__post_init__", "transform must be", lambda: sx.MobilizedBody.Custom.Implementation(
        1, 1, np.eye(4))),
    ("mobilizers.custom.Custom.__post_init__", "needs n_matrix",
     lambda: sx.MobilizedBody.Custom.Implementation(2, 1, lambda q: (jnp.eye(3), q[:1] * jnp.ones(3)))),
    ("mobilizers.custom.FunctionBased.__post_init__", "num_mobilities must be",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 0, [None] * 6, [()] * 6)),
    ("mobilizers.custom.FunctionBased.__post_init__", "give exactly 6 functions",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [None] * 5, [()] * 5)),
    ("mobilizers.custom.FunctionBased.__post_init__", "arguments but is given",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [sx.functions.Linear((1.0, 1.0, 0.0))]
                                            + [None] * 5, [(0,)] + [()] * 5)),
    ("mobilizers.custom.FunctionBased.__post_init__", "must lie in",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [sx.functions.Linear((1.0, 0.0))]
                                            + [None] * 5, [(1,)] + [()] * 5)),
    ("mobilizers.custom.FunctionBased.__post_init__", "drive no function",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 2, [sx.functions.Linear((1.0, 0.0))]
                                            + [None] * 5, [(0,)] + [()] * 5)),
    ("mobilizers.custom.FunctionBased.__post_init__", "6 finite 3-vectors",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [sx.functions.Linear((1.0, 0.0))]
                                            + [None] * 5, [(0,)] + [()] * 5, [(1.0, 0.0)] * 6)),
    ("mobilizers.custom.FunctionBased.__post_init__", "an axis is zero",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [sx.functions.Linear((1.0, 0.0))]
                                            + [None] * 5, [(0,)] + [()] * 5,
                                            [(0.0, 0.0, 0.0)] + [(1.0, 0.0, 0.0)] * 5)),
    ("mobilizers.custom.FunctionBased.__post_init__", "are parallel",
     lambda: sx.MobilizedBody.FunctionBased(pendulum().ground, BODY, 1, [sx.functions.Linear((1.0, 0.0))]
                                            + [None] * 5, [(0,)] + [()] * 5, [(1.0, 0.0, 0.0)] * 6)),
    ("motion.Motion._register", "Ground has no mobilizer", lambda: sx.Motion.Steady(pendulum().ground, 1.0)),
    ("motion.Motion._register", "got {level", lambda: sx.Motion.Linear(pendulum().body, "fast", 1.0)),
    ("motion.Motion._register", "not NoLevel", lambda: sx.Motion.Linear(pendulum().body, sx.Motion.NoLevel, 1.0)),
    ("motion.Motion._register", "cannot drive a quaternion",
     lambda: sx.Motion.Linear(pendulum("Ball").body, sx.Motion.Position, 1.0)),
    ("motion.Motion._numbers", "must be a scalar or have shape",
     lambda: sx.Motion.Linear(pendulum().body, sx.Motion.Velocity, [1.0, 2.0])),
    ("motion.Motion._numbers", "must be finite", lambda: sx.Motion.Linear(pendulum().body, sx.Motion.Velocity, np.inf)),
    ("motion.Motion._flags", "without this Motion", lambda: sx.Motion.Steady(pendulum().body, 1.0).disable(
        model().state)),
    ("motion.Custom.__init__", "function must be callable",
     lambda: sx.Motion.Custom(pendulum().body, sx.Motion.Velocity, 1.0)),
    ("motion.Custom.__init__", "must return shape",
     lambda: sx.Motion.Custom(pendulum().body, sx.Motion.Velocity, lambda t: jnp.zeros(2))),
    ("builder.mobilized_body.MobilizedBody._motion_methods", "traced here",
     lambda: jax.jit(lambda s: m.body.get_q_motion_method(s))((m := model()).body.lock_at(m.state, 0.1))),
    # -- force elements on a built Model (model.check()) and States --------------------------------
    ("forces.compliant_contact.PointContactForce.check", "transition velocity must be positive",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].transition_velocity, hunt_crossley_model(),
                         0.0).check()),
    ("forces.compliant_contact.PointContactForce.check", "above its static friction",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].dynamic_friction, hunt_crossley_model(),
                         jnp.ones(2)).check()),
    ("forces.compliant_contact.SmoothSphereHalfSpace.check", "radius must be positive",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].radius, smooth_sphere_model(), 0.0).check()),
    ("forces.compliant_contact.SmoothSphereHalfSpace.check", "transition velocity must be positive",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].transition_velocity, smooth_sphere_model(), 0.0).check()),
    ("forces.compliant_contact.SmoothSphereHalfSpace.check", "constant contact force",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].constant_contact_force, smooth_sphere_model(), 0.0).check()),
    ("forces.compliant_contact.SmoothSphereHalfSpace.check", "is above static friction",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].dynamic_friction, smooth_sphere_model(), 2.0).check()),
    ("forces.discrete.MobilityActuator.check", "NaN or infinity",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].gear, actuated_model().model, jnp.nan).check()),
    ("forces.discrete.MobilityActuator.check", "with low <= high",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].ctrl_range, actuated_model().model,
                         np.array([1.0, -1.0])).check()),
    ("forces.discrete._range", "with low <= high",
     lambda: sx.Force.MobilityActuator((p := pendulum()).forces, p.body, 0, ctrl_range=(1.0, -1.0))),
    ("forces.discrete._Discrete._values", "has no values for it",
     lambda: actuated_model().actuator.get_control(model().state)),
    ("forces.discrete.DiscreteForces._like", "must have shape",
     lambda: sx.Force.DiscreteForces((p := pendulum()).forces, p.matter).set_all_mobility_forces(
         p.system.realize_topology()[1], np.zeros(2))),
    ("forces.custom.Custom.calc", "calc returned shapes",
     lambda: (sx.Force.Custom((p := pendulum()).forces, lambda model, state: (jnp.zeros(2), jnp.zeros((2, 6)))),
              (b := p.system.realize_topology())[0].realize(b[1], sx.Stage.Dynamics))),
    ("forces.custom.Controller.__init__", "controller must be callable",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [0.1], controller=1.0)),
    ("forces.custom.Controller.calc", "returned shape",
     lambda: sx.simulate((m := model()).model, m.state, sx.Integrator.RungeKuttaMerson(), [0.1],
                         controller=lambda t, state: jnp.zeros(2))),
    ("forces.thermostat.Thermostat._z", "has no z for it",
     lambda: sx.Force.Thermostat((p := pendulum()).forces, p.matter, 1.0, 300.0, 0.1).get_chain_state(model().state)),
    ("forces.thermostat.Thermostat.set_chain_state", "expected",
     lambda: sx.Force.Thermostat((p := pendulum()).forces, p.matter, 1.0, 300.0, 0.1).set_chain_state(
         p.system.realize_topology()[1], np.zeros(3))),
    ("rigid_contact.impulse.PGSImpulseSolver.__check_init__", "convergence_tolerance", lambda: sx.PGSImpulseSolver(
        convergence_tolerance=0.0)),
    ("rigid_contact.impulse.PGSImpulseSolver.__check_init__", "max_iterations", lambda: sx.PGSImpulseSolver(max_iterations=0)),
    ("rigid_contact.impulse.PGSImpulseSolver.__check_init__", "sor must be", lambda: sx.PGSImpulseSolver(sor=2.0)),
    ("rigid_contact.time_stepper._enum", "unknown", lambda: sx.SemiExplicitEulerTimeStepper(restitution_model="Elastic")),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.__check_init__", "induced_impact_model",
     lambda: sx.SemiExplicitEulerTimeStepper(induced_impact_model="Sequential")),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.__check_init__", "disagrees with the solver given",
     lambda: sx.SemiExplicitEulerTimeStepper(impulse_solver_type="PLUS", solver=sx.PGSImpulseSolver())),
    ("rigid_contact.impulse.PLUSImpulseSolver.__check_init__", "must be positive",
     lambda: sx.PLUSImpulseSolver(0.0)),
    ("rigid_contact.impulse.PLUSImpulseSolver.__check_init__", "must be a positive int",
     lambda: sx.PLUSImpulseSolver(1e-3, max_sliding_intervals=0)),
    ("rigid_contact.impulse.PLUSImpulseSolver.__check_init__", "max_sliding_direction_change must be in",
     lambda: sx.PLUSImpulseSolver(1e-3, max_sliding_direction_change=2.0)),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.__check_init__", "must be a positive number",
     lambda: sx.SemiExplicitEulerTimeStepper(accuracy=0.0)),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.__check_init__", "must be nonnegative",
     lambda: sx.SemiExplicitEulerTimeStepper(default_impact_capture_velocity=-1.0)),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.__check_init__", "solver must be",
     lambda: sx.SemiExplicitEulerTimeStepper(solver="PGS")),
    ("rigid_contact.time_stepper._Problem.__init__", "acceleration-only",
     lambda: sx.SemiExplicitEulerTimeStepper().step(*(lambda b: (b[0], b[1]))(
         (sx.Constraint.ConstantAcceleration((p := pendulum()).body, 0, 1.0), p.system.realize_topology())[1]), 0.01)),
    ("rigid_contact.time_stepper.SemiExplicitEulerTimeStepper.take_step", "prescribed motion and locks",
     lambda: sx.SemiExplicitEulerTimeStepper().step(*(lambda b: (b[0], b[1]))(
         (sx.Motion.Steady((p := pendulum()).body, 1.0), p.system.realize_topology())[1]), 0.01)),
    # -- run-time faults: the checks mode, failed solves --------------------------------------------
    ("runtime_checks._checked_parameters", "model.params.{name}",
     lambda: eqx.tree_at(lambda m: m.params.mass, (m := model()).model, jnp.array([0.0, -1.0])).with_checks().realize(
         m.state, sx.Stage.Position)),
    ("runtime_checks._checked_parameters", "model.force_elements[{k}]",
     lambda: eqx.tree_at(lambda m: m.force_elements[1].stiffness, (m := realized(
         (p := pendulum(), sx.Force.MobilityLinearSpring(p.forces, p.body, 0, 1.0, 0.0))[0])).model,
                         -1.0).with_checks().realize(m.state, sx.Stage.Position)),
    ("runtime_checks.checked_state", "q contains NaN",
     lambda: (m := model()).model.with_checks().realize(m.state.with_q(jnp.array([jnp.nan])), sx.Stage.Position)),
    ("runtime_checks.checked_state", "u contains NaN",
     lambda: (m := model()).model.with_checks().realize(m.state.with_u(jnp.array([jnp.inf])), sx.Stage.Velocity)),
    ("runtime_checks.checked_state", "zero quaternion",
     lambda: (m := model("Ball")).model.with_checks().realize(m.state.with_q(jnp.zeros(4)), sx.Stage.Position)),
    ("runtime_checks.checked_state", "t is NaN",
     lambda: (m := model()).model.with_checks().realize(m.state.with_time(jnp.nan), sx.Stage.Position)),
    ("runtime_checks.checked_solution", "multipliers",
     lambda: eqx.tree_at(lambda m: m.params.constraints[0].acceleration, (m := constrained_model()).model,
                         jnp.nan).with_checks().realize(m.state, sx.Stage.Acceleration)),
    ("runtime_checks.checked_solution", "udot is NaN",
     lambda: (m := massless_model()).model.with_checks().realize(m.state, sx.Stage.Acceleration)),
    ("projection._throw", "could not be brought within",
     lambda: (m := unreachable_model()).model.project(m.state)),
    ("assembly.Assembler.assemble", "did not reach the error tolerance",
     lambda: sx.Assembler((m := unreachable_model()).model).assemble(m.state)),
    ("_xla.scalarize._eval_eqn", "does not evaluate",
     lambda: jax.jit(lambda s: m.model.with_scalar_path(True).realize(s, sx.Stage.Dynamics).dynamics.mobility_forces)(
         (m := custom_force_model(lambda u: jnp.linalg.eigh(jnp.diag(u) + 1.0)[0])).state)),
    ("_xla.scalarize._known_indices", "with traced indices",
     lambda: jax.jit(lambda s: m.model.with_scalar_path(True).realize(s, sx.Stage.Dynamics).dynamics.mobility_forces)(
         (m := custom_force_model(lambda u: jnp.ones(3)[jnp.floor(u).astype(int)])).state)),
    ("_xla.module.content_key", "traced values", lambda: jax.jit(lambda m: hash(m))(model().model)),
    # -- exchange with other engines --------------------------------------------------------------
    ("interop.mujoco.to_mjcf", "no MuJoCo joint for {kind}",
     lambda: sx.interop.mujoco.to_mjcf(pendulum("Cylinder").matter)),
    ("interop.mujoco.to_mjcf", "a reversed",
     lambda: sx.interop.mujoco.to_mjcf(pendulum("Pin", sx.MobilizedBody.Direction.Reverse).matter)),
    ("interop.mujoco.to_mjcf", "free joints only",
     lambda: (p := pendulum(), sx.MobilizedBody.Free(p.body, BODY), sx.interop.mujoco.to_mjcf(p.matter))),
    ("interop.mujoco.to_mjcf", "positive mass",
     lambda: (p := pendulum(), sx.MobilizedBody.Pin(p.body, MASSLESS), sx.interop.mujoco.to_mjcf(p.matter))),
    ("interop.loop_frames", "supported: Ball, Weld",
     lambda: (p := pendulum(), sx.Constraint.Rod(p.ground, [0.0, 0.0, 0.0], p.body, [0.0, -1.0, 0.0], 1.0),
              sx.interop.mujoco.to_mjcf(p.matter, constraints=True))),
    ("interop.pinocchio.to_pinocchio", "no Pinocchio joint for {kind}",
     lambda: sx.interop.pinocchio.to_pinocchio(pendulum("Universal").matter)),
    ("interop.pinocchio.to_pinocchio", "a reversed",
     lambda: sx.interop.pinocchio.to_pinocchio(pendulum("Pin", sx.MobilizedBody.Direction.Reverse).matter)),
    ("interop.pinocchio._armature", "no Pinocchio armature",
     lambda: (p := pendulum("Ball"), p.body.set_armature([0.1, 0.2, 0.3]),
              sx.interop.pinocchio.to_pinocchio(p.matter))),
    ("io.mjcf.load_mjcf", "pip install mujoco", lambda: without_module("mujoco", sx.io.load_mjcf, "<mujoco/>")),
    ("io.mjcf._compile", "no MJCF file", lambda: sx.io.load_mjcf("no_such_robot.xml")),
    ("io.mjcf._compile", "could not compile", lambda: sx.io.load_mjcf("<mujoco><worldbody><body/></mujoco>")),
    ("io.mjcf.MjcfOptions.__post_init__", "physics must be", lambda: sx.io.load_mjcf("<mujoco/>", physics="bullet")),
    ("envs.make", "unknown environment", lambda: sx.envs.make("swimmer")),
    ("envs.base.Randomized.__init__", "has no with_model", lambda: sx.envs.Randomized(object(), None)),
    ("envs.task.gymnasium_asset", "pip install gymnasium",
     lambda: without_module("gymnasium", sx.envs.task.gymnasium_asset, "hopper.xml")),
    ("envs.locomotion.Locomotion.__init__", "other than hinges and slides", lambda: sx.envs.Locomotion("ant.xml", 5)),
    ("envs.task.MuJoCoView.cinert", "share a simbodyx body", lambda: sx.envs.make("ant").mujoco.cinert(None, None)),
    ("envs.task.MuJoCoView.__init__", "welded to the world", lambda: _view_of(
        '<mujoco><worldbody><geom type="plane" size="1 1 0.1"/><body name="shelf" pos="0 0 1">'
        '<geom type="box" size="0.1 0.1 0.1"/></body><body name="ball" pos="0 0 2"><freejoint/>'
        '<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')),
    ("integrate.stable_step", "unknown method", lambda: sx.integrate.stable_step(model().model, model().state, "leapfrog")),
    ("integrate.MuJoCoStepper.__check_init__", "unknown integrator",
     lambda: sx.integrate.MuJoCoStepper(integrator="leapfrog")),
    ("builder.system.SimbodyMatterSubsystem.set_soft_constraints", "expected a simbodyx.soft_constraints",
     lambda: pendulum().matter.set_soft_constraints(object())),
    ("builder.system.SimbodyMatterSubsystem.parameters", "a Model solves one or the other",
     lambda: _soft_and_simbody_constraints()),
    ("io.robot.Robot.__getitem__", "fixed and merged",
     lambda: sx.io.load_urdf(arm_urdf(SHOULDER, LINK.format("hand"), JOINT.format("wrist", "arm", "hand").replace(
         "revolute", "fixed")))[3]["wrist"]),
    ("io.robot.Robot.__getitem__", "no link or joint named",
     lambda: sx.io.load_urdf(arm_urdf())[3]["elbow"]),
    ("io.robot.Robot.set_controls", "expected",
     lambda: (r := sx.io.load_mjcf('<mujoco><worldbody><body><geom size="0.1"/><joint name="hinge"/></body>'
                                   '</worldbody><actuator><motor joint="hinge"/></actuator></mujoco>'))[3].set_controls(
         r[0].realize_topology()[1], np.zeros(2))),
    ("io.robot.Robot.get_link_transform", "no link named",
     lambda: (r := sx.io.load_urdf(arm_urdf()),
              r[3].get_link_transform(r[0].realize_topology()[1], "hand"))),
    ("io.urdf.example_robot_data", "is not installed",
     lambda: without_distribution("example-robot-data", sx.io.example_robot_data)),
    # -- building -------------------------------------------------------------------------------
    ("builder.mobilized_body._concrete", "must be concrete numbers",
     lambda: sx.MobilizedBody.Screw(pendulum().ground, BODY, "fine")),
    ("builder.mobilized_body.MobilizedBody._with_frame", "must have R (3, 3)",
     lambda: (m := model()).body.set_inboard_frame(m.model, sx.Transform(np.stack([np.eye(3)] * 2), np.zeros((2, 3))))),
    ("handles.registering_matter", "expected MobilizedBody handles",
     lambda: sx.Constraint.Rod("ground", [0, 0, 0], pendulum().body, [0, 0, 0], 1.0)),
    ("handles.builder_of", "frozen Model's copy",
     lambda: (sx.Constraint.ConstantSpeed((p := pendulum()).body, 0, 1.0), p.system.realize_topology())[1][0]
     .matter.get_constraint(0).get_constrained_bodies()),
    ("algorithms.coordinates._apply_blocks", "input vector has shape",
     lambda: (m := model()).model.matter.multiply_by_n(m.model.realize(m.state, sx.Stage.Position), False,
                                                      np.zeros(3))),
    # -- spatial ----------------------------------------------------------------------------
    ("spatial.inertia.Inertia.__init__", "a vector of moments", lambda: sx.Inertia(np.ones(2))),
    ("spatial.inertia.Inertia.__init__", "Inertia takes", lambda: sx.Inertia(1.0, 2.0)),
    ("spatial.inertia.Inertia.check", "{problem}", lambda: sx.Inertia(1.0, 1.0, 3.0).check()),
    ("spatial.inertia.MassProperties.check", "mass must be a scalar",
     lambda: sx.MassProperties(np.ones(2), [0, 0, 0], sx.Inertia(0.1)).check()),
    ("spatial.inertia.MassProperties.check", "mass must be finite",
     lambda: sx.MassProperties(-1.0, [0, 0, 0], sx.Inertia(0.1)).check()),
    ("spatial.inertia.MassProperties.check", "mass center must",
     lambda: sx.MassProperties(1.0, [0, np.nan, 0], sx.Inertia(0.1)).check()),
    ("spatial.inertia.MassProperties.check", "(central inertia)",
     lambda: sx.MassProperties.from_central(1.0, [0, 0, 0], sx.Inertia(1.0, 1.0, 3.0)).check()),
    ("spatial.transform.Transform.__init__", "Transform needs R", lambda: sx.Transform(np.eye(2), np.zeros(3))),
    ("io.urdf._color", "is not four numbers", lambda: sx.io.load_urdf(
        '<robot name="r"><link name="a"><visual><geometry><sphere radius="1"/></geometry>'
        '<material name="m"><color rgba="1 0"/></material></visual></link></robot>')),
    ("viz.page._trajectory", "q must be", lambda: _view(model(), np.zeros((3, 2)))),
    ("viz.page._trajectory", "t must be", lambda: _view(model(), np.zeros((2, 1)), t=[0.0])),
    ("viz.page.view", "layout must be", lambda: _view(model(), layout="row")),
    ("viz.scene._mesh_file", "not found", lambda: sx.viz.robot_visuals(sx.io.load_urdf(
        '<robot name="r"><link name="a"><visual><geometry><mesh filename="package://p/a.stl"/></geometry>'
        '</visual></link></robot>')[3])),
    ("viz.scene._urdf_visuals", "with trimesh", lambda: without_module("trimesh", sx.viz.robot_visuals, sx.io.load_urdf(
        '<robot name="r"><link name="a"><visual><geometry><mesh filename="a.stl"/></geometry>'
        '</visual></link></robot>')[3])),
    ("progress.progress_of", "progress must be True, False", lambda: sx.integrate.rollout(
        *model_and_state(), 1e-3, 10, progress="yes")),
    ("progress.progress_of", "updates must be a positive int", lambda: sx.integrate.rollout(
        *model_and_state(), 1e-3, 10, progress=sx.Progress(updates=0))),
    ("progress.progress_of", "need tqdm", lambda: without_module("tqdm.auto", lambda: sx.integrate.rollout(
        *model_and_state(), 1e-3, 10, progress=True))),
    ("viz.skeleton._matplotlib", "draws with matplotlib", lambda: without_module(
        "matplotlib.pyplot", lambda: sx.viz.plot(*model_and_state()))),
    ("viz.browser.chromium", "found none",
     lambda: with_environment("SIMBODYX_CHROMIUM", "/no/chromium", sx.viz.browser.chromium)),
    ("viz.browser.opened", "with Playwright", lambda: without_module("playwright.sync_api", sx.viz.image,
                                                                     _view(model()))),
    ("viz.browser.video", "write .mp4 or .gif", lambda: sx.viz.video(_view(model()), "a.avi")),
    ("viz.browser.video", "must be positive", lambda: sx.viz.video(_view(model()), "a.gif", fps=0)),
    ("viz.browser.video", "with imageio-ffmpeg", lambda: without_module("imageio_ffmpeg", sx.viz.video,
                                                                        _view(model()), "a.mp4")),
]

#: Errors no call here reaches: where, fragment, and why.
UNCALLED = [
    ("model.Model.check_leaves", "array leaves where it was frozen",
     "eqx.tree_at keeps a Model's structure: only a Model rebuilt by hand from a changed tree meets it"),
    ("_xla.faults.fault_if", "located",
     "the RuntimeCheckError rows' messages, raised at once where the numbers are concrete (eager, op by op)"),
    ("_xla.faults._raise", "{message}", "the RuntimeCheckError rows' messages, raised from inside a compiled program"),
    ("_xla.faults.check_errors.__exit__", "_last_message",
     "the RuntimeCheckError rows' messages, raised again in place of JAX's runtime error that carried them"),
    ("_xla.scalarize._Budget.add", "passed",
     "caught inside simbodyx: the automatic choice falls back on the array program, and a Model forced onto the "
     "scalar path (with_scalar_path(True)) has no budget"),
    ("constraints.base.Constraint.position_errors", "is needed",
     "only a subclass of Constraint that declares position equations without defining them meets it; the built-in "
     "constraints define theirs, and Constraint.Custom checks its Implementation when it is built"),
    ("constraints.base.Constraint.velocity_errors", "is needed", "as for position_errors"),
    ("constraints.base.Constraint.acceleration_errors", "is needed", "as for position_errors"),
    ("parallel.shard_process_batch", "is not divisible",
     "needs several local devices (a process that called sx.parallel.use_cpu_cores(n) first, or a GPU host); "
     "tests/test_parallel.py starts such processes"),
    ("topology.Topology.__init__", "at most",
     "every mobilizer type limits its own mobilities first (Custom and FunctionBased to 1..6)"),
    ("topology.Topology.group_row", "belongs to no kind group", "an internal consistency check"),
    ("io.mjcf.load_mjcf", "a free joint must be",
     "MuJoCo's compiler rejects such a model first (a free joint below the world body, or beside another joint)"),
    ("viz.browser.opened", "did not build its scene",
     "needs a page whose script fails in a browser: tests/viz/test_browser.py opens such a page"),
]
