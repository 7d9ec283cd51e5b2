"""Compound joints equal chains of simpler ones through massless bodies:
Gimbal = three Pins, Bushing = Translation + three Pins, Universal = two Pins,
Cylinder = Slider + Pin, Planar = two Sliders + Pin, Free = Translation + Ball.

One model holds every pair as two branches on Ground (a massive body on the
built-in joint; the same body at the end of the chain), so one RK4 rollout
of 1 s checks them all. The chains' coordinates are the built-in's, reordered;
both integrate the same ODE, so the trajectories agree to rounding: 1e-10.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_transform, rigid

import simbodyx as sx
from simbodyx.integrate import rollout

# Frame rotations turning a Pin's z axis (or a Slider's x axis) onto x, y or z.
PIN_X, PIN_Y, PIN_Z = sx.Rotation.about_y(np.pi / 2), sx.Rotation.about_x(-np.pi / 2), sx.Rotation()
SLIDE_X, SLIDE_Y, SLIDE_Z = sx.Rotation(), sx.Rotation.about_z(np.pi / 2), sx.Rotation.about_y(-np.pi / 2)
ROTATIONS = [("Pin", PIN_X), ("Pin", PIN_Y), ("Pin", PIN_Z)]

# Built-in -> (chain of (kind, axis frame rotation), chain q from built-in q, chain u from built-in u).
EQUIVALENT = {
    "Gimbal": (ROTATIONS, np.arange(3), np.arange(3)),
    "Bushing": ([("Translation", SLIDE_X)] + ROTATIONS, np.r_[3:6, 0:3], np.r_[3:6, 0:3]),
    "Universal": (ROTATIONS[:2], np.arange(2), np.arange(2)),
    "Cylinder": ([("Slider", SLIDE_Z), ("Pin", PIN_Z)], np.array([1, 0]), np.array([1, 0])),
    "Planar": ([("Slider", SLIDE_X), ("Slider", SLIDE_Y), ("Pin", PIN_Z)], np.array([1, 2, 0]), np.array([1, 2, 0])),
    "Free": ([("Translation", SLIDE_X), ("Ball", PIN_Z)], np.r_[4:7, 0:4], np.r_[3:6, 0:3]),
}


@pytest.fixture(scope="module")
def branches():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0.0, -9.81, 0.0])
    ground, massless = matter.Ground(), sx.Body.Massless()
    pairs = {}
    for k, (kind, (chain, _, _)) in enumerate(EQUIVALENT.items()):
        rng = np.random.default_rng(k)
        X_PF, X_BM = random_transform(rng), random_transform(rng)
        builtin = getattr(sx.MobilizedBody, kind)(ground, X_PF, rigid(), X_BM)
        # Body i of the chain: F = (previous M or X_PF) T_i, M = T_i (the last: X_BM T_i),
        # so that X_PB = X_PF (prod T_i X_i T_i^-1) X_BM^-1, the built-in's pose.
        links, parent = [], ground
        for i, (link, rotation) in enumerate(chain):
            T = sx.Transform(rotation)
            last = i == len(chain) - 1
            parent = getattr(sx.MobilizedBody, link)(
                parent, X_PF.compose(T) if i == 0 else T, rigid() if last else massless, X_BM.compose(T) if last else T
            )
            links.append(parent)
        pairs[kind] = (builtin, links)
    model, state = system.realize_topology()
    return model, state, pairs


def chain_slices(model, links, attribute):
    top = model.topology
    start, count = (top.q_start, top.body_nq) if attribute == "q" else (top.u_start, top.body_nu)
    return np.concatenate([np.arange(start[b.index], start[b.index] + count[b.index]) for b in links])


def builtin_slice(model, body, attribute):
    top = model.topology
    start, count = (top.q_start, top.body_nq) if attribute == "q" else (top.u_start, top.body_nu)
    return np.arange(start[body.index], start[body.index] + count[body.index])


def test_compound_joints_move_like_chains_through_massless_bodies(branches):
    model, state, pairs = branches
    rng = np.random.default_rng(5)
    q, u = np.array(state.q), np.array(state.u)
    for kind, (builtin, links) in pairs.items():
        _, q_map, u_map = EQUIVALENT[kind]
        qb, ub = builtin_slice(model, builtin, "q"), builtin_slice(model, builtin, "u")
        q[qb] = q[qb] + rng.uniform(-0.6, 0.6, size=len(qb))
        u[ub] = rng.uniform(-1.0, 1.0, size=len(ub))
        if kind == "Free":
            q[qb[:4]] /= np.linalg.norm(q[qb[:4]])
        q[chain_slices(model, links, "q")] = q[qb][q_map]
        u[chain_slices(model, links, "u")] = u[ub][u_map]
    _, trajectory = rollout(model, state.with_q(jnp.asarray(q)).with_u(jnp.asarray(u)), 0.01, 100, save_every=10,
                            energy=False)
    for kind, (builtin, links) in pairs.items():
        _, q_map, u_map = EQUIVALENT[kind]
        for attribute, mapping, values in (("q", q_map, trajectory.q), ("u", u_map, trajectory.u)):
            np.testing.assert_allclose(
                values[:, chain_slices(model, links, attribute)],
                values[:, builtin_slice(model, builtin, attribute)][:, mapping],
                atol=1e-10, err_msg=f"{kind}: {attribute}",
            )
    assert float(jnp.max(jnp.abs(trajectory.q[-1] - trajectory.q[0]))) > 0.1  # it did move
