"""What gymnasium's MuJoCo tasks share: the robot of one of gymnasium's
files, loaded with ``sx.io.load_mjcf`` and stepped ``frame_skip`` of the
file's steps per environment step (:class:`GymnasiumTask`), and MuJoCo's
quantities of its State that gymnasium's observations are made of
(:class:`MuJoCoView`: qpos, qvel, cinert, cvel, qfrc_actuator, cfrc_ext)."""

from __future__ import annotations

import copy
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.algorithms.coordinates import angular_velocities_in_m, normalize_quaternions
from simbodyx.algorithms.energy import mass_centers_in_ground, system_mass_center
from simbodyx.envs.base import Env
from simbodyx.integrate import actuators, rollout
from simbodyx.io.mjcf import load_mjcf
from simbodyx.spatial.inertia import point_inertia
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


def _realized(model, state, stage: Stage):
    """The State itself if realized through ``stage``, else realized by the Model."""
    return state if state.stage >= stage else model.realize(state, stage)


class MuJoCoView:
    """MuJoCo's quantities of a loaded robot's States, as JAX functions
    (eager, under ``jit``, ``vmap`` and ``grad``).

    ``load_mjcf`` keeps MuJoCo's joint order in q and u. A hinge's or
    slide's q and u are MuJoCo's; a ball's quaternion is MuJoCo's, its u
    (the angular velocity in F) becomes MuJoCo's (in M); a free joint's q
    [quaternion of R_GM; p_GM] is MuJoCo's [p; quaternion] reordered, its
    u [w; v] (in G) becomes MuJoCo's [v in G; w in M]. MuJoCo's per-body
    quantities have one row per MuJoCo body (``robot.links``' order, the
    world's first); its "com-based" ones are taken at the mass center of
    the body's root subtree (the subtree of the world's child that carries
    it), in G. Each takes a State as it is where it is realized far enough
    (so several quantities of one State share one realization).

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
        q_index, u_index = [], []  # where each entry of qpos and qvel is in q and u
        for name, body in robot.joint_bodies.items():
            kind, q0, u0 = robot.joints[name].type, body.get_first_q_index(state), body.get_first_u_index(state)
            if kind == "free":
                q_index += [q0 + 4, q0 + 5, q0 + 6, q0, q0 + 1, q0 + 2, q0 + 3]
                u_index += [u0 + 3, u0 + 4, u0 + 5, u0, u0 + 1, u0 + 2]
            else:
                q_index += range(q0, q0 + (4 if kind == "ball" else 1))
                u_index += range(u0, u0 + (3 if kind == "ball" else 1))
        self.q_index, self.u_index = np.asarray(q_index), np.asarray(u_index)

        links = list(robot.links)
        self.num_bodies = len(links)
        self.link_bodies = np.asarray([body.index for body, _ in robot.links.values()], dtype=int)
        self.shared = sorted(name for name, (body, _) in robot.links.items()
                             if body.index and int(np.sum(self.link_bodies == body.index)) > 1)
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
        self.surface_bodies = own
        self.roots = np.asarray(roots)

    def qpos(self, state) -> jnp.ndarray:
        """(nq,) MuJoCo's qpos of a State."""
        return state.q[self.q_index]

    def qvel(self, state) -> jnp.ndarray:
        """(nv,) MuJoCo's qvel of a State."""
        return self._in_mujoco_order(state, state.u)

    def _in_mujoco_order(self, state, x):
        """(nv,) a vector on u (speeds, accelerations or generalized forces)
        in MuJoCo's order and frames."""
        return angular_velocities_in_m(state.topology, state.q, x)[self.u_index]

    def state(self, state, qpos, qvel):
        """``state`` with MuJoCo's (qpos, qvel) (its quaternions normalized)."""
        topology = state.topology
        q = normalize_quaternions(topology, state.q.at[self.q_index].set(jnp.asarray(qpos, state.q.dtype)))
        u = state.u.at[self.u_index].set(jnp.asarray(qvel, state.u.dtype))
        return state.with_q(q).with_u(angular_velocities_in_m(topology, q, u, back=True))

    def mass_center(self, model, state) -> jnp.ndarray:
        """(3,) the system's mass center in G (m): MuJoCo's body_mass-weighted xipos."""
        placed = _realized(model, state, Stage.Position)
        return system_mass_center(placed.instance, placed.position)

    def _root_centers(self, placed):
        """(nb, 3) for each of the Model's bodies the mass center of its root subtree, in G."""
        mass = placed.instance.mass
        weighted = jax.ops.segment_sum(mass[:, None] * mass_centers_in_ground(placed.instance, placed.position),
                                       self.roots, len(self.roots))
        centers = weighted / jnp.maximum(jax.ops.segment_sum(mass, self.roots, len(self.roots)), 1e-300)[:, None]
        return centers[self.roots]

    def cinert(self, model, state) -> jnp.ndarray:
        """(nbody, 10) MuJoCo's cinert at a State: each body's inertia about
        its root subtree's mass center c in G (xx, yy, zz, xy, xz, yz;
        kg m^2), its mass times its mass center less c (kg m), its mass (kg).

        Raises:
            NotImplementedError: Bodies of the file share one simbodyx body
                (load with ``merge_fixed=False`` to keep them apart).
        """
        if self.shared:
            raise NotImplementedError(f"MuJoCoView.cinert: the bodies {', '.join(self.shared)} share a simbodyx "
                                      f"body; load the file with merge_fixed=False")
        placed = _realized(model, state, Stage.Position)
        instance, bodies = placed.instance, self.link_bodies
        mass = instance.mass[bodies]
        offset = mass_centers_in_ground(instance, placed.position)[bodies] - self._root_centers(placed)[bodies]
        R = placed.position.X_GB.R[bodies]
        inertia = jnp.einsum("bij,bjk,blk->bil", R, instance.central_inertia[bodies], R) + point_inertia(mass, offset)
        rows, columns = np.array([0, 1, 2, 0, 0, 1]), np.array([0, 1, 2, 1, 2, 2])
        return jnp.concatenate([inertia[:, rows, columns], mass[:, None] * offset, mass[:, None]], axis=-1)

    def cvel(self, model, state) -> jnp.ndarray:
        """(nbody, 6) MuJoCo's cvel at a State: each body's angular velocity
        and the velocity of the point of it at its root subtree's mass
        center, [w; v] in G (rad/s, m/s)."""
        moving = _realized(model, state, Stage.Velocity)
        bodies = self.link_bodies
        V = moving.velocity.V_GB[bodies]
        lever = self._root_centers(moving)[bodies] - moving.position.X_GB.p[bodies]
        return jnp.concatenate([V[:, :3], V[:, 3:] + cross(V[:, :3], lever)], axis=-1)

    def qfrc_actuator(self, model, state) -> jnp.ndarray:
        """(nv,) MuJoCo's qfrc_actuator at a State: the generalized forces
        of the Model's actuators at the controls the State holds, in
        MuJoCo's order and frames (N or N m)."""
        total = sum((a.calc(model, state)[0] for a in actuators(model)), jnp.zeros_like(state.u))
        return self._in_mujoco_order(state, total)

    def cfrc_ext(self, model, state) -> jnp.ndarray:
        """(nbody, 6) MuJoCo's cfrc_ext at a State: on each MuJoCo body
        (the world's row zero), the contact forces of the constrained
        accelerations (``model.soft_constraints.contact_forces``) as one
        [torque; force] in G (N m, N), the torque about the mass center of
        the body's root subtree (the subtree of the world's child that
        carries it), as MuJoCo's ``mj_rnePostConstraint``."""
        contacts = model.soft_constraints.contact_forces(model, state)
        centers = self._root_centers(_realized(model, state, Stage.Position))
        on_second = jnp.concatenate([cross(contacts.location - centers[self.surface_bodies[list(contacts.surface2)]],
                                           contacts.force), contacts.force], axis=-1)
        on_first = -jnp.concatenate([cross(contacts.location - centers[self.surface_bodies[list(contacts.surface1)]],
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
        reset_noise_scale: The half-width of the uniform noise a reset adds
            to the file's qpos, and the scale of the noise it gives qvel.
        velocity_noise: "uniform" (qvel's noise within +-scale) or "normal"
            (with standard deviation scale).
        merge_fixed: ``load_mjcf``'s: merge bodies welded together.
    """

    def __init__(self, file: str, frame_skip: int, reset_noise_scale: float, velocity_noise: str = "uniform",
                 merge_fixed: bool = True):
        system, _, _, robot = load_mjcf(gymnasium_asset(file), merge_fixed=merge_fixed)
        self.model, self.initial = system.realize_topology()
        self.robot, self.frame_skip, self.reset_noise_scale = robot, frame_skip, reset_noise_scale
        self.velocity_noise = velocity_noise
        self.mujoco = MuJoCoView(robot, self.model, self.initial)

    def with_model(self, model) -> GymnasiumTask:
        """The same task on another Model of the same structure (its numbers
        changed: masses, frictions, actuator gains)."""
        other = copy.copy(self)
        other.model = model
        return other

    def astype(self, dtype) -> GymnasiumTask:
        """The same task computed in ``dtype`` (``jnp.float32`` for GPUs;
        its observations, rewards and States follow): its Model and initial
        State cast (``Model.astype``)."""
        other = self.with_model(self.model.astype(dtype))
        other.initial = self.initial.astype(dtype)
        other.mujoco = MuJoCoView(self.robot, other.model, other.initial)
        return other

    @property
    def dt(self) -> float:
        """The environment's step (s): ``frame_skip`` steps of the file's."""
        return self.frame_skip * self.robot.timestep

    @property
    def action_size(self) -> int:
        return len(self.robot.actuators)

    def reset_physics(self, rng: jax.Array):
        """The file's State with gymnasium's reset noise: qpos plus uniform
        noise of half-width ``reset_noise_scale``, qvel the file's (zero)
        plus noise of that scale (quaternions normalized)."""
        view, scale = self.mujoco, self.reset_noise_scale
        qpos0, qvel0 = view.qpos(self.initial), view.qvel(self.initial)
        position_key, velocity_key = jax.random.split(rng)
        qpos = qpos0 + jax.random.uniform(position_key, qpos0.shape, qpos0.dtype, -scale, scale)
        if self.velocity_noise == "normal":
            qvel = qvel0 + scale * jax.random.normal(velocity_key, qvel0.shape, qvel0.dtype)
        else:
            qvel = qvel0 + jax.random.uniform(velocity_key, qvel0.shape, qvel0.dtype, -scale, scale)
        return view.state(self.initial, qpos, qvel)

    def advance(self, physics, action):
        """The physics State ``frame_skip`` steps of the file's after
        ``physics``, the actuators' controls held at ``action``."""
        controls = jnp.broadcast_to(jnp.asarray(action, physics.q.dtype), (self.frame_skip, self.action_size))
        final, _ = rollout(self.model, physics, self.robot.timestep, self.frame_skip, save_every=self.frame_skip,
                           method=self.robot.stepper, actuator_controls=controls, energy=False)
        return final
