"""The same tree as a MuJoCo model (``pip install mujoco``; MJX with ``mujoco-mjx``).

Supported mobilizers: Pin (hinge about z), Slider (slide along x), Universal
and Gimbal (two or three hinges about x, y(, z), which MuJoCo composes
body-fixed like Simbody), Ball (ball) and, on Ground only, Free (free).
The MuJoCo body frame is our M frame, placed on the parent's M frame by
X_BM(parent)^-1 X_PF. Contacts are disabled. By default so are
constraints, so ``mj_forward`` computes the unconstrained forward dynamics
that ``calc_acceleration_ignoring_constraints`` does; with
``constraints=True`` every Ball and Weld constraint becomes a MuJoCo
``connect`` or ``weld`` equality between two sites at its stations or
frames. MuJoCo's equality constraints are soft (``solref``, ``solimp``), so
its constrained accelerations approach, but do not equal, the exact ones.

Coordinates: MuJoCo's quaternions are [w, x, y, z] like ours; its Ball
angular velocity is expressed in M (ours in F); its free joint has q =
[p_GM; quaternion of R_GM] and velocity [v in G; w in M] (ours [w; v] in F).
Every velocity map here is a constant rotation of u given q, and the same
map takes udot to MuJoCo's qacc (the time derivative of R_MF w_F is R_MF
wdot_F because w_F is parallel to the rotation rate).
"""

from __future__ import annotations

import numpy as np

from simbodyx.interop import loop_frames
from simbodyx.spatial.rotation import matrix_to_quaternion, quaternion_to_matrix
from simbodyx.spatial.transform import Transform
from simbodyx.stage import Stage

_HINGES = {"Pin": ("0 0 1",), "Universal": ("1 0 0", "0 1 0"), "Gimbal": ("1 0 0", "0 1 0", "0 0 1")}
SUPPORTED = sorted(set(_HINGES) | {"Slider", "Ball", "Free"})


def _vec(x):
    return " ".join(f"{float(v):.17g}" for v in np.asarray(x).reshape(-1))


def _quat(R):
    return np.asarray(matrix_to_quaternion(np.asarray(R, dtype=float)))


def _joints(kind: str, name: str) -> str:
    if kind in _HINGES:
        return "".join(f'<joint name="{name}_{i}" type="hinge" axis="{a}"/>' for i, a in enumerate(_HINGES[kind]))
    return {"Slider": f'<joint name="{name}" type="slide" axis="1 0 0"/>',
            "Ball": f'<joint name="{name}" type="ball"/>',
            "Free": f'<freejoint name="{name}"/>'}[kind]


def _equalities(matter):
    """({body index: site elements}, equality elements) for the Ball and Weld
    constraints; sites are placed in the MuJoCo body (our M) frame."""
    sites, equalities = {}, []
    handles = [matter.get_constraint(i) for i in range(matter.get_num_constraints())]
    for i, (kind, pair) in enumerate(loop_frames(matter, handles, "MuJoCo equality")):
        names = [f"constraint{i}_{k + 1}" for k in range(2)]
        for name, (body, X_MS) in zip(names, pair):
            sites.setdefault(body.index, []).append(
                f'<site name="{name}" pos="{_vec(X_MS.p)}" quat="{_vec(_quat(X_MS.R))}"/>')
        tag = "connect" if kind == "Ball" else "weld"
        equalities.append(f'<{tag} site1="{names[0]}" site2="{names[1]}"/>')
    return sites, equalities


def to_mjcf(matter, gravity=(0.0, -9.81, 0.0), constraints=False):
    """(MJCF text, bodies) for a built matter subsystem (see the module notes).
    MuJoCo numbers bodies depth-first: its body k + 1 is our ``bodies[k]``,
    and its q and velocity follow that order."""
    n = matter.get_num_bodies()
    sites, equalities = _equalities(matter) if constraints else ({}, [])
    children = {i: [] for i in range(n)}
    for i in range(1, n):
        b = matter.get_mobilized_body(i)
        kind = type(b).__name__
        if kind not in SUPPORTED:
            raise ValueError(f"{b._label}: no MuJoCo joint for {kind}; supported: {SUPPORTED}")
        if b.is_reversed():
            raise ValueError(f"{b._label}: no MuJoCo joint for a reversed {kind}")
        if kind == "Free" and not b.parent.is_ground():
            raise ValueError(f"{b._label}: MuJoCo allows free joints only on bodies hanging from Ground")
        if float(b.get_default_mass_properties().mass) <= 0:
            raise ValueError(f"{b._label}: MuJoCo needs a positive mass on every moving body")
        children[b.parent.index].append(i)

    order = []

    def body(i: int) -> str:
        order.append(i)
        b = matter.get_mobilized_body(i)
        placement = b.get_default_inboard_frame()
        if not b.parent.is_ground():
            placement = b.parent.get_default_outboard_frame().inverse() @ placement
        mp = b.get_default_mass_properties()
        X_MB = b.get_default_outboard_frame().inverse()
        R_MB = np.asarray(X_MB.R, dtype=float)
        I = R_MB @ np.asarray(mp.calc_central_inertia().matrix, dtype=float) @ R_MB.T
        full = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
        inner = "".join(body(c) for c in children[i])
        return (f'<body name="{b.name}" pos="{_vec(placement.p)}" quat="{_vec(_quat(placement.R))}">'
                f'<inertial pos="{_vec(X_MB @ mp.com)}" mass="{float(mp.mass):.17g}" fullinertia="{_vec(full)}"/>'
                f"{_joints(type(b).__name__, b.name)}{''.join(sites.get(i, ()))}{inner}</body>")

    world = "".join(sites.get(0, ())) + "".join(body(c) for c in children[0])
    flags = 'contact="disable"' + ("" if constraints else ' constraint="disable"')
    equality = f"<equality>{''.join(equalities)}</equality>" if equalities else ""
    xml = (f'<mujoco model="simbodyx"><compiler angle="radian"/>'
           f'<option gravity="{_vec(gravity)}"><flag {flags}/></option>'
           f"<worldbody>{world}</worldbody>{equality}</mujoco>")
    return xml, tuple(order)


def _velocity_block(b, state):
    """(n, n): MuJoCo's velocity of this joint from our u of it."""
    kind, n = type(b).__name__, b.get_num_u(state)
    R_MF = np.asarray(b.get_mobilizer_transform(state).R, dtype=float).T
    if kind == "Ball":
        return R_MF
    if kind == "Free":
        block = np.zeros((6, 6))
        block[:3, 3:] = np.asarray(b.get_inboard_frame(state).R, dtype=float)
        block[3:, :3] = R_MF
        return block
    return np.eye(n)


def velocity_map(matter, state, bodies):
    """T (nu, nu) with MuJoCo's qvel = T u (and qacc = T udot); ``state``
    realized to Position, ``bodies`` from :func:`to_mjcf`."""
    nu = state.u.shape[0]
    T = np.zeros((nu, nu))
    row = 0
    for i in bodies:
        b = matter.get_mobilized_body(i)
        col, n = b.get_first_u_index(state), b.get_num_u(state)
        T[row:row + n, col:col + n] = _velocity_block(b, state)
        row += n
    return T


def configuration(matter, state, bodies):
    """(qpos, qvel) for MuJoCo from a State realized to Position."""
    q = []
    for i in bodies:
        b = matter.get_mobilized_body(i)
        qb = np.asarray(b.get_q_as_vector(state), dtype=float)
        kind = type(b).__name__
        if kind == "Ball":
            qb = qb / np.linalg.norm(qb)
        elif kind == "Free":
            X_GM = b.get_inboard_frame(state) @ b.get_mobilizer_transform(state)
            qb = np.concatenate([np.asarray(X_GM.p, dtype=float), _quat(X_GM.R)])
        q.extend(qb)
    return np.array(q), velocity_map(matter, state, bodies) @ np.asarray(state.u, dtype=float)


def state_from(model, matter, state, qpos, qvel, bodies):
    """The State (realized to Position) whose :func:`configuration` is
    MuJoCo's (qpos, qvel): the inverse map (a free joint's world pose
    re-expressed in its inboard frame, its quaternion taken with w >= 0;
    the velocities mapped back by the inverse of :func:`velocity_map`).
    ``bodies`` as for ``configuration``."""
    qpos, q, row = np.asarray(qpos, dtype=float), np.array(state.q, dtype=float), 0
    instance = model.realize(state, Stage.Instance)  # the Model's inboard frames, as configuration reads them
    for i in bodies:
        b = matter.get_mobilized_body(i)
        kind, first, n = type(b).__name__, b.get_first_q_index(state), b.get_num_q(state)
        if kind == "Free":
            X_GM = Transform(quaternion_to_matrix(qpos[row + 3:row + 7]), qpos[row:row + 3])
            X_FM = b.get_inboard_frame(instance).inverse() @ X_GM
            q[first:first + 7] = np.concatenate([_quat(X_FM.R), np.asarray(X_FM.p, dtype=float)])
            row += 7
        else:
            q[first:first + n] = qpos[row:row + n]
            row += n
    placed = model.realize(state.with_q(q), Stage.Position)
    return placed.with_u(np.linalg.solve(velocity_map(matter, placed, bodies), np.asarray(qvel, dtype=float)))
