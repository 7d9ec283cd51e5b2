"""Constrained forward dynamics against Pinocchio (an independent C++ engine,
``pin.constraintDynamics`` with 3-D and 6-D loop constraints, no Baumgarte
terms) on three closed chains: a planar four-bar closed by a Ball (its
out-of-plane row is redundant; Pinocchio's proximal solver and our least
squares both handle it), a 3-D loop of a Pin, a Ball and a tilted Pin closed
to Ground by a Ball, and a Pin-Ball-Ball chain welded to Ground. The
constraint mapping is simbodyx.interop.pinocchio.rigid_constraints.

Each chain is assembled exactly by construction (the constraint's first
station or frame, a Model leaf, is put where the second one is at the chosen
q) and u is projected onto G u = 0, so both engines solve the same
acceleration-level problem. udot agrees to 1e-8 (observed: 1e-14, float64
round-off of two different algorithms); the Ball's multipliers (the force on
the first body, Pinocchio's in that body's frame) to 1e-8."""

import equinox as eqx
import numpy as np
import pytest

import simbodyx as sx

pin = pytest.importorskip("pinocchio")
from simbodyx.interop.pinocchio import configuration, rigid_constraints, to_pinocchio, velocity_map  # noqa: E402

C = sx.Constraint


def _body(mass, com, inertia):
    return sx.Body.Rigid(sx.MassProperties(mass, com, sx.Inertia(*inertia)))


def _four_bar(G):
    crank = sx.MobilizedBody.Pin(G, sx.Transform(), _body(1.0, [0.5, 0, 0], (0.05, 0.4, 0.4)), sx.Transform())
    coupler = sx.MobilizedBody.Pin(crank, sx.Transform([1.0, 0, 0]), _body(0.7, [1.0, 0, 0], (0.02, 0.9, 0.9)),
                                   sx.Transform())
    rocker = sx.MobilizedBody.Pin(G, sx.Transform([2.0, 0, 0]), _body(1.2, [0.6, 0, 0], (0.02, 0.6, 0.6)),
                                  sx.Transform())
    return C.Ball(coupler, [2.0, 0, 0], rocker, [0, 0, 0]), [0.9, -0.7, 1.6]


def _spatial_loop(G):
    b1 = sx.MobilizedBody.Pin(G, sx.Transform(sx.Rotation.about_x(0.4), [0, 0, 0]),
                              _body(1.0, [0.3, 0.1, 0], (0.1, 0.2, 0.25)), sx.Transform())
    b2 = sx.MobilizedBody.Ball(b1, sx.Transform([0.8, 0, 0]), _body(0.8, [0.4, 0, 0.1], (0.1, 0.25, 0.25)),
                               sx.Transform())
    b3 = sx.MobilizedBody.Pin(b2, sx.Transform(sx.Rotation.about_y(0.7), [0.9, 0, 0]),
                              _body(0.6, [0.3, 0, 0], (0.02, 0.1, 0.1)), sx.Transform([-0.1, 0, 0]))
    quaternion = np.array([1.0, 0.2, -0.3, 0.4]) / np.linalg.norm([1.0, 0.2, -0.3, 0.4])
    return C.Ball(G, [0, 0, 0], b3, [0.7, 0.05, 0]), [0.3, *quaternion, 0.8]


def _welded_loop(G):
    b1 = sx.MobilizedBody.Pin(G, sx.Transform(), _body(1.0, [0.3, 0.1, 0], (0.1, 0.2, 0.25)), sx.Transform())
    b2 = sx.MobilizedBody.Ball(b1, sx.Transform([0.8, 0, 0]), _body(0.8, [0.4, 0, 0.1], (0.1, 0.25, 0.25)),
                               sx.Transform())
    b3 = sx.MobilizedBody.Ball(b2, sx.Transform([0.9, 0, 0]), _body(0.6, [0.3, 0, 0], (0.02, 0.1, 0.1)),
                               sx.Transform())
    quaternions = np.array([[1.0, 0.2, -0.3, 0.4], [0.9, -0.1, 0.3, 0.2]])
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    return C.Weld(G, sx.Transform(), b3, sx.Transform(sx.Rotation.about_z(0.3), [0.5, 0, 0])), [0.5, *quaternions.ravel()]


@pytest.mark.parametrize("chain", [_four_bar, _spatial_loop, _welded_loop])
def test_closed_chain_dynamics_match_pinocchio(chain):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    loop, q = chain(matter.Ground())
    body1, body2 = loop.get_constrained_bodies()
    model, state = system.realize_topology()
    q = np.asarray(q, dtype=float)

    # Assemble: move station (or frame) 1, a Model leaf, onto station (frame) 2 at this q.
    s = model.realize(state.with_q(q), sx.Stage.Position)
    weld = isinstance(loop, C.Weld)
    X_12 = body1.get_body_transform(s).inverse() @ body2.get_body_transform(s)
    first = X_12 @ loop.frame2 if weld else X_12 @ loop.station2
    model = eqx.tree_at(lambda m: getattr(m.params.constraints[0], "frame1" if weld else "station1"), model, first)
    s = model.realize(model.default_state().with_q(q), sx.Stage.Position)
    assert np.abs(loop.get_position_errors_as_vector(s)).max() < 1e-14

    G = np.asarray(model.matter.calc_g(s))
    u = np.random.default_rng(0).standard_normal(s.u.shape)
    s = model.realize(s.with_u(u - np.linalg.pinv(G) @ (G @ u)), sx.Stage.Acceleration)
    assert np.abs(loop.get_velocity_errors_as_vector(s)).max() < 1e-14

    pmodel, _ = to_pinocchio(matter)
    pdata = pmodel.createData()

    models, datas = rigid_constraints(pmodel, matter, model.params.constraints)
    pin.initConstraintDynamics(pmodel, pdata, models, datas)
    q_pin, v_pin = configuration(matter, s)
    a_pin = pin.constraintDynamics(pmodel, pdata, q_pin, v_pin, np.zeros(pmodel.nv), models, datas,
                                   pin.ProximalSettings(1e-14, 1e-12, 200))

    np.testing.assert_allclose(velocity_map(matter, s) @ np.asarray(s.acceleration.udot), a_pin, atol=1e-8)
    if not weld:  # a Weld's rotational multipliers are not torque components
        R_G1 = np.asarray(body1.get_body_rotation(s).matrix)
        np.testing.assert_allclose(loop.get_multipliers_as_vector(s), R_G1 @ pdata.lambda_c, atol=1e-8)
