"""What gymnasium's MuJoCo tasks share: the robot of one of gymnasium's
files, loaded with ``sx.io.load_mjcf`` and stepped ``frame_skip`` of the
file's steps per environment step (:class:`GymnasiumTask`), and MuJoCo's
quantities of its State that gymnasium's observations are made of
(:class:`MuJoCoView`: qpos, qvel and cfrc_ext)."""

from __future__ import annotations

import copy
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.algorithms.energy import mass_centers_in_ground
from simbodyx.envs.base import Env
from simbodyx.integrate import rollout
from simbodyx.io.mjcf import load_mjcf
from simbodyx.spatial.rotation import quaternion_to_matrix
from simbodyx.spatial.vectors import cross
from simbodyx.stage import Stage


def gymnasium_asset(file: str) -> pathlib.Path:
    """The path of an MJCF file gymnasium ships (its MuJoCo tasks' assets)."""
    try:
        import gymnasium
    except ImportError:
        raise ImportError("simbodyx.envs reads gymnasium's robot files: pip install gymnasium "
                          "(or simbodyx[learn])") from None
    return pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / file


class MuJoCoView:
    """MuJoCo's quantities of a loaded robot's States, as JAX functions
    (eager, under ``jit``, ``vmap`` and ``grad``).

    ``load_mjcf`` keeps MuJoCo's joint order in q and u. A hinge's or
    slide's q and u are MuJoCo's; a ball's quaternion is MuJoCo's, its u
    (the angular velocity in F) becomes MuJoCo's (in M); a free joint's q
    [quaternion of R_GM; p_GM] is MuJoCo's [p; quaternion] reordered, its
    u [w; v] (in G) becomes MuJoCo's [v in G; w in M].

    Args:
        robot: A robot from ``sx.io.load_mjcf``.
        model: Its Model.
        state: A State of the Model (where each joint's q and u are).

    Raises:
        NotImplementedError: A contact surface is on a MuJoCo body welded to
            the world (MuJoCo's cfrc_ext refers its force to that body's own
            subtree, which simbodyx merged into Ground).
    """

    def __init__(self, robot, model, state):
        self.rotated = []  # (row of qvel, q index of the quaternion) of each angular velocity MuJoCo takes in M
        q_index, u_index = [], []
        for name, body in robot.joint_bodies.items():
            kind, q0, u0 = robot.joints[name].type, body.get_first_q_index(state), body.get_first_u_index(state)
            if kind == "free":
                q_index += [q0 + 4, q0 + 5, q0 + 6, q0, q0 + 1, q0 + 2, q0 + 3]
                self.rotated.append((len(u_index) + 3, q0))
                u_index += [u0 + 3, u0 + 4, u0 + 5, u0, u0 + 1, u0 + 2]
            elif kind == "ball":
                q_index += [q0, q0 + 1, q0 + 2, q0 + 3]
                self.rotated.append((len(u_index), q0))
                u_index += [u0, u0 + 1, u0 + 2]
            else:
                q_index.append(q0)
                u_index.append(u0)
        self.q_index, self.u_index = np.asarray(q_index), np.asarray(u_index)
        self.quaternions = [int(np.flatnonzero(self.q_index == q0)[0]) for _, q0 in self.rotated]

        links = list(robot.links)
        self.num_bodies = len(links)
        self.surface_links = np.asarray([links.index(link) for link in robot.contact_links], dtype=int)
        constraints = model.soft_constraints
        own = np.asarray([s.body for s in constraints.surfaces] if constraints is not None else [], dtype=int)
        welded = [robot.contact_links[i] for i in np.flatnonzero((own == 0) & (self.surface_links != 0))]
        if welded:
            raise NotImplementedError(f"MuJoCoView: contact surfaces on bodies welded to the world "
                                      f"({', '.join(welded)}) have no cfrc_ext here")
        parents = state.topology.parent
        roots = list(range(len(parents)))
        for b in range(1, len(parents)):
            roots[b] = b if parents[b] == 0 else roots[parents[b]]
        self.surface_roots = np.asarray([roots[b] for b in own], dtype=int)
        self.roots = np.asarray(roots)

    def qpos(self, state) -> jnp.ndarray:
        """(nq,) MuJoCo's qpos of a State."""
        return state.q[self.q_index]

    def qvel(self, state) -> jnp.ndarray:
        """(nv,) MuJoCo's qvel of a State."""
        qvel = state.u[self.u_index]
        for row, q0 in self.rotated:
            qvel = qvel.at[row:row + 3].set(quaternion_to_matrix(state.q[q0:q0 + 4]).T @ qvel[row:row + 3])
        return qvel

    def state(self, state, qpos, qvel):
        """``state`` with MuJoCo's (qpos, qvel) (its quaternions normalized)."""
        qpos, qvel = jnp.asarray(qpos, state.q.dtype), jnp.asarray(qvel, state.u.dtype)
        for first in self.quaternions:
            qpos = qpos.at[first:first + 4].divide(jnp.linalg.norm(qpos[first:first + 4]))
        q = state.q.at[self.q_index].set(qpos)
        for row, q0 in self.rotated:
            qvel = qvel.at[row:row + 3].set(quaternion_to_matrix(q[q0:q0 + 4]) @ qvel[row:row + 3])
        return state.with_q(q).with_u(state.u.at[self.u_index].set(qvel))

    def cfrc_ext(self, model, state) -> jnp.ndarray:
        """(nbody, 6) MuJoCo's cfrc_ext at a State: on each MuJoCo body
        (the world's row zero), the contact forces of the constrained
        accelerations (``model.soft_constraints.contact_forces``) as one
        [torque; force] in G (N m, N), the torque about the mass center of
        the body's root subtree (the subtree of the world's child that
        carries it), as MuJoCo's ``mj_rnePostConstraint``."""
        contacts = model.soft_constraints.contact_forces(model, state)
        placed = model.realize(state, Stage.Position)
        mass = placed.instance.mass
        weighted = jax.ops.segment_sum(mass[:, None] * mass_centers_in_ground(placed.instance, placed.position),
                                       self.roots, len(self.roots))
        centers = weighted / jnp.maximum(jax.ops.segment_sum(mass, self.roots, len(self.roots)), 1e-300)[:, None]
        on_second = jnp.concatenate([cross(contacts.location - centers[self.surface_roots[list(contacts.surface2)]],
                                           contacts.force), contacts.force], axis=-1)
        on_first = -jnp.concatenate([cross(contacts.location - centers[self.surface_roots[list(contacts.surface1)]],
                                           contacts.force), contacts.force], axis=-1)
        links = self.surface_links
        cfrc = (jnp.zeros((self.num_bodies, 6), on_second.dtype).at[links[list(contacts.surface2)]].add(on_second)
                .at[links[list(contacts.surface1)]].add(on_first))
        return cfrc.at[0].set(0.0)


class GymnasiumTask(Env):
    """A task on the robot of one of gymnasium's MJCF files: loaded with
    ``sx.io.load_mjcf`` (MuJoCo's constraint model, the file's integrator
    at the file's time step), one environment step ``frame_skip`` of the
    file's steps with the action held as the actuators' controls.

    Args:
        file: The gymnasium MJCF file ("hopper.xml", "ant.xml", ...).
        frame_skip: The file's steps per environment step.
        reset_noise_scale: The scale of the noise a reset adds to the file's state.
    """

    def __init__(self, file: str, frame_skip: int, reset_noise_scale: float):
        system, _, _, robot = load_mjcf(gymnasium_asset(file))
        self.model, self.initial = system.realize_topology()
        self.robot, self.frame_skip, self.reset_noise_scale = robot, frame_skip, reset_noise_scale
        self.mujoco = MuJoCoView(robot, self.model, self.initial)

    def with_model(self, model) -> GymnasiumTask:
        """The same task on another Model of the same structure (its numbers
        changed: masses, frictions, actuator gains)."""
        other = copy.copy(self)
        other.model = model
        return other

    @property
    def dt(self) -> float:
        """The environment's step (s): ``frame_skip`` steps of the file's."""
        return self.frame_skip * self.robot.timestep

    @property
    def action_size(self) -> int:
        return len(self.robot.actuators)

    def advance(self, physics, action):
        """The physics State ``frame_skip`` steps of the file's after
        ``physics``, the actuators' controls held at ``action``."""
        controls = jnp.broadcast_to(jnp.asarray(action, physics.q.dtype), (self.frame_skip, self.action_size))
        final, _ = rollout(self.model, physics, self.robot.timestep, self.frame_skip, save_every=self.frame_skip,
                           method=self.robot.stepper, actuator_controls=controls, energy=False)
        return final
