"""A compiled MuJoCo model's constraints as ``SoftConstraints``
(``simbodyx.soft_constraints``) and its integrator as a ``MuJoCoStepper``:
``load_mjcf(..., physics="mujoco")``'s contacts, limits, friction loss and
equality constraints, with the file's own numbers.

Contacts: each colliding geom pair a kernel handles becomes a candidate
pair of contact surfaces (one surface per geom, as ``ContactGeoms`` maps
it), with MuJoCo's mixing of the two geoms' parameters
(``mj_contactParam``: the higher priority's, else condim and friction the
larger, solref and solimp mixed by solmix, a direct solref the smaller)
or an explicit ``<pair>``'s own, margin and gap each the sum of the
geoms'. Limits: each limited hinge, slide and ball (its rotation's
angle), and each limited fixed tendon (a sum of coef q over hinges and
slides). Friction loss: each dof's. Equalities: each active connect,
weld, joint and fixed-tendon coupling, anchors and frames moved into the
bodies that carry MuJoCo's (``equality_frames`` and ``as_coordinates``
read MuJoCo's equalities for both of ``load_mjcf``'s physics). Damping: every dof's, in u's order (a free joint's
rotation first), for the Euler integrators' implicit damping.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.detection import candidate_pairs, detect
from simbodyx.contact.geometry import ContactSurface
from simbodyx.io.mjcf_fit import _pose
from simbodyx.io.robot import pose, transform
from simbodyx.integrate import MuJoCoStepper
from simbodyx.soft_constraints import MIN_VALUE, BallLimits, Connects, Couplings, SoftConstraints, Welds
from simbodyx.spatial import Transform


def _pair_parameters(m, g1, g2):
    """(condim, friction (5,): sliding twice, torsional, rolling twice,
    solref, solimp) of a dynamic pair, as MuJoCo's mj_contactParam mixes
    them."""
    def spread(f):  # a geom's (sliding, torsional, rolling) as a contact's five
        return np.asarray([f[0], f[0], f[1], f[2], f[2]], float)

    if m.geom_priority[g1] != m.geom_priority[g2]:
        g = g1 if m.geom_priority[g1] > m.geom_priority[g2] else g2
        return int(m.geom_condim[g]), spread(m.geom_friction[g]), m.geom_solref[g], m.geom_solimp[g]
    s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
    if s1 >= MIN_VALUE and s2 >= MIN_VALUE:
        mix = s1 / (s1 + s2)
    else:
        mix = 0.5 if s1 < MIN_VALUE and s2 < MIN_VALUE else (0.0 if s1 < MIN_VALUE else 1.0)
    r1, r2 = np.asarray(m.geom_solref[g1], float), np.asarray(m.geom_solref[g2], float)
    solref = mix * r1 + (1 - mix) * r2 if r1[0] > 0 and r2[0] > 0 else np.minimum(r1, r2)
    solimp = mix * np.asarray(m.geom_solimp[g1], float) + (1 - mix) * np.asarray(m.geom_solimp[g2], float)
    return (max(int(m.geom_condim[g1]), int(m.geom_condim[g2])),
            spread(np.maximum(m.geom_friction[g1], m.geom_friction[g2])), solref, solimp)


def as_coordinates(mujoco, m, kind, obj):
    """A hinge's or slide's q, or a fixed tendon's length (MuJoCo's equality
    ``kind``, a ``mjtEq``), as ({joint id: weight}, value at qpos0); None for
    other joints and spatial tendons."""
    if kind == mujoco.mjtEq.mjEQ_JOINT:
        if int(m.jnt_type[obj]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            return None
        return {obj: 1.0}, float(m.qpos0[m.jnt_qposadr[obj]])
    wraps = range(m.tendon_adr[obj], m.tendon_adr[obj] + m.tendon_num[obj])
    if any(m.wrap_type[w] != mujoco.mjtWrap.mjWRAP_JOINT for w in wraps):
        return None
    weights = {}
    for w in wraps:  # MuJoCo's compiler allows only hinges and slides here
        weights[int(m.wrap_objid[w])] = weights.get(int(m.wrap_objid[w]), 0.0) + float(m.wrap_prm[w])
    return weights, float(m.tendon_length0[obj])


def equality_frames(mujoco, m, placed, body_names, e) -> tuple:
    """((MobilizedBody, X_BF), (MobilizedBody, X_BF)): the two frames (4x4,
    in the bodies that carry them, ``placed``) MuJoCo's connect or weld
    equality ``e`` makes coincide (a connect: their origins). Between
    bodies: a connect's two anchors; a weld's body-1 frame at ``relpose``
    and body-2 frame at its anchor, unrotated. Between sites, the sites'."""
    data, by_body = np.asarray(m.eq_data[e], float), int(m.eq_objtype[e]) == int(mujoco.mjtObj.mjOBJ_BODY)

    def frame(obj, X_OF):
        if by_body:
            body, X = placed[body_names[obj]]
            return body, X @ X_OF
        body, X = placed[body_names[m.site_bodyid[obj]]]
        return body, X @ _pose(mujoco, m.site_pos[obj], m.site_quat[obj])

    first, second = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_CONNECT):
        return frame(first, pose(p=data[:3])), frame(second, pose(p=data[3:6]))
    relpose = _pose(mujoco, data[3:6], data[6:10] / np.linalg.norm(data[6:10])) if by_body else np.eye(4)
    return frame(first, relpose), frame(second, pose(p=data[:3]))


def _on_q_and_u(m, weights) -> tuple:
    """({q index: weight}, {u index: weight}) of {hinge or slide id: weight}."""
    return ({int(m.jnt_qposadr[j]): w for j, w in weights.items()},
            {int(m.jnt_dofadr[j]): w for j, w in weights.items()})


def _equalities(mujoco, m, placed, body_names, name, array) -> tuple:
    """(Connects or None, Welds or None, Couplings or None, [what is left
    out]) of compiled model ``m``'s equality constraints, their anchors and
    frames moved into the bodies that carry MuJoCo's (``placed``)."""
    kinds = mujoco.mjtEq
    connects, welds, couplings, left_out = [], [], [], []
    if int(m.opt.disableflags) & mujoco.mjtDisableBit.mjDSBL_EQUALITY:
        return None, None, None, left_out
    for i in range(m.neq):
        kind, data, label = kinds(m.eq_type[i]), np.asarray(m.eq_data[i], float), name(mujoco.mjtObj.mjOBJ_EQUALITY, i)
        if not m.eq_active0[i]:
            left_out.append(f"equality {label} (inactive at the start)")
            continue
        numbers = (m.eq_solref[i], m.eq_solimp[i])
        if kind in (kinds.mjEQ_CONNECT, kinds.mjEQ_WELD):
            (body1, X1), (body2, X2) = equality_frames(mujoco, m, placed, body_names, i)
            by_site = int(m.eq_objtype[i]) == int(mujoco.mjtObj.mjOBJ_SITE)
            b1, b2 = (int(m.site_bodyid[o]) if by_site else int(o) for o in (m.eq_obj1id[i], m.eq_obj2id[i]))
            invweight = np.asarray(m.body_invweight0[b1], float) + np.asarray(m.body_invweight0[b2], float)
            bodies, anchors = (body1.index, body2.index), np.stack([X1[:3, 3], X2[:3, 3]])
            if kind == kinds.mjEQ_CONNECT:
                connects.append((bodies, anchors, *numbers, invweight[0]))
            else:
                welds.append((bodies, anchors, np.stack([X1[:3, :3], X2[:3, :3]]), data[10], *numbers, invweight))
        elif kind in (kinds.mjEQ_JOINT, kinds.mjEQ_TENDON):
            objects = [int(o) for o in (m.eq_obj1id[i], m.eq_obj2id[i]) if o >= 0]
            lengths = [as_coordinates(mujoco, m, kind, o) for o in objects]
            if any(length is None for length in lengths):
                left_out.append(f"equality {label} (on a spatial tendon)")
                continue
            q, u, ref, invweight = np.zeros((2, m.nq)), np.zeros((2, m.nv)), np.zeros(2), 0.0
            for k, (o, (weights, ref[k])) in enumerate(zip(objects, lengths)):
                q_weights, u_weights = _on_q_and_u(m, weights)
                q[k, list(q_weights)], u[k, list(u_weights)] = list(q_weights.values()), list(u_weights.values())
                invweight += (m.dof_invweight0[m.jnt_dofadr[o]] if kind == kinds.mjEQ_JOINT
                              else m.tendon_invweight0[o])
            couplings.append((q, u, ref, data[:5], *numbers, invweight))
        else:
            left_out.append(f"equality {label} ({kind.name.removeprefix('mjEQ_').lower()})")

    def stacked(rows, k, shape):
        return array([r[k] for r in rows], shape)

    connect = None if not connects else Connects(
        bodies=tuple(r[0] for r in connects), anchors=stacked(connects, 1, (-1, 2, 3)),
        solref=stacked(connects, 2, (-1, 2)), solimp=stacked(connects, 3, (-1, 5)),
        invweight=stacked(connects, 4, (-1,)))
    weld = None if not welds else Welds(
        bodies=tuple(r[0] for r in welds), anchors=stacked(welds, 1, (-1, 2, 3)),
        frames=stacked(welds, 2, (-1, 2, 3, 3)), torquescale=stacked(welds, 3, (-1,)),
        solref=stacked(welds, 4, (-1, 2)), solimp=stacked(welds, 5, (-1, 5)), invweight=stacked(welds, 6, (-1, 2)))
    coupling = None if not couplings else Couplings(
        q=stacked(couplings, 0, (-1, 2, m.nq)), u=stacked(couplings, 1, (-1, 2, m.nv)),
        ref=stacked(couplings, 2, (-1, 2)), polynomial=stacked(couplings, 3, (-1, 5)),
        solref=stacked(couplings, 4, (-1, 2)), solimp=stacked(couplings, 5, (-1, 5)),
        invweight=stacked(couplings, 6, (-1,)))
    return connect, weld, coupling, left_out


def soft_constraints(mujoco, m, geometry, placed, body_names, name) -> tuple:
    """(SoftConstraints, MuJoCoStepper, [what of the file's constraints
    they leave out, described]) for compiled model ``m``; ``geometry`` its
    ``ContactGeoms``, ``placed`` each MuJoCo body's (MobilizedBody, X_B),
    ``name(kind, i)`` an object's name."""
    geom_name = [name(mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(m.ngeom)]
    disabled = int(m.opt.disableflags)
    left_out = []
    dtype = jnp.zeros(0).dtype

    # contacts: one surface per geom in a covered pair
    index = {g: i for i, g in enumerate(geometry.surfaces)}
    surfaces = []
    for g in geometry.surfaces:
        body, X_B = placed[body_names[m.geom_bodyid[g]]]
        shape, X_GS = geometry.shape(g)
        surfaces.append(ContactSurface(body.index, shape, transform(X_B @ geometry.pose(mujoco, g) @ X_GS),
                                       f"geom {geom_name[g]!r} ({shape.kind} on {body_names[m.geom_bodyid[g]]})"))
    explicit = {frozenset((int(a), int(b))): p for p, (a, b) in enumerate(zip(m.pair_geom1, m.pair_geom2))}
    parameters = {}
    for g1, g2 in geometry.covered:
        p = explicit.get(frozenset((g1, g2)))
        if p is not None:
            condim, friction = int(m.pair_dim[p]), np.asarray(m.pair_friction[p], float)
            solref, solimp = np.asarray(m.pair_solref[p], float), np.asarray(m.pair_solimp[p], float)
            margin = float(m.pair_margin[p] - m.pair_gap[p])
            if np.any(m.pair_solreffriction[p]) and int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC):
                left_out.append(f"the solreffriction of pair {geom_name[g1]}-{geom_name[g2]}")
        else:
            condim, friction, solref, solimp = _pair_parameters(m, g1, g2)
            margin = float(m.geom_margin[g1] + m.geom_margin[g2] - m.geom_gap[g1] - m.geom_gap[g2])
        invweight = float(m.body_invweight0[m.geom_bodyid[g1]][0] + m.body_invweight0[m.geom_bodyid[g2]][0])
        parameters[frozenset((index[g1], index[g2]))] = (condim, friction * (condim > 1), solref, solimp, margin,
                                                         invweight)
    wanted = set(parameters)
    excluded = frozenset((i, j) for i in range(len(surfaces)) for j in range(i + 1, len(surfaces))
                         if frozenset((i, j)) not in wanted)
    groups = candidate_pairs(tuple(surfaces), "load_mjcf", excluded) if surfaces else ()
    nb = max(s.body for s in surfaces) + 1 if surfaces else 0
    if groups:  # the candidate points' pairs, in detect's order
        X = jax.tree.map(lambda a: jnp.broadcast_to(a, (nb,) + a.shape), Transform())
        _, first, second, _ = detect(tuple(surfaces), groups, X)
        rows = [parameters[frozenset((int(i), int(j)))] for i, j in zip(first, second)]
        bodies = (tuple(surfaces[i].body for i in first), tuple(surfaces[j].body for j in second))
        kinds = [(surfaces[i].shape.kind, surfaces[j].shape.kind) for i, j in zip(first, second)]
        axes = tuple(int(j) if k == ("HalfSpace", "Capsule") else int(i) if k == ("Capsule", "HalfSpace") else -1
                     for (i, j), k in zip(zip(first, second), kinds))
    else:
        rows, bodies, axes = [], ((), ()), ()
    dims, friction, solref, solimp, margin, invweight = (list(c) for c in zip(*rows)) if rows else [[]] * 6

    # limits of hinges, slides and fixed tendons
    limited = []  # (q coefficients, u coefficients, range, margin, solref, solimp, invweight)
    balls = []  # (first q, first u, largest angle, margin, solref, solimp, invweight)
    if not disabled & mujoco.mjtDisableBit.mjDSBL_LIMIT:
        for j in range(m.njnt):
            if not m.jnt_limited[j]:
                continue
            if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_BALL):
                balls.append((int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), max(m.jnt_range[j]), m.jnt_margin[j],
                              m.jnt_solref[j], m.jnt_solimp[j], m.dof_invweight0[m.jnt_dofadr[j]]))
                continue
            limited.append(({int(m.jnt_qposadr[j]): 1.0}, {int(m.jnt_dofadr[j]): 1.0}, m.jnt_range[j],
                            m.jnt_margin[j], m.jnt_solref[j], m.jnt_solimp[j], m.dof_invweight0[m.jnt_dofadr[j]]))
        for t in range(m.ntendon):
            if not m.tendon_limited[t]:
                continue
            length = as_coordinates(mujoco, m, mujoco.mjtEq.mjEQ_TENDON, t)
            if length is None:
                left_out.append(f"the limit of spatial tendon {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, t)}")
                continue
            limited.append((*_on_q_and_u(m, length[0]), m.tendon_range[t], m.tendon_margin[t], m.tendon_solref_lim[t],
                            m.tendon_solimp_lim[t], m.tendon_invweight0[t]))
    limit_q, limit_u = np.zeros((len(limited), m.nq)), np.zeros((len(limited), m.nv))
    for i, (qw, uw, *_) in enumerate(limited):
        limit_q[i, list(qw)], limit_u[i, list(uw)] = list(qw.values()), list(uw.values())

    # friction loss of each dof: a hinge's or slide's on its u; a free joint's translations on u[3:6] (its F
    # is Ground's frame); a ball's or free joint's rotations, about the body's axes, turning with the joint
    lossy, turning = [], []  # (dof, its u or None), (row, body, axis, the joint's first u)
    if not disabled & mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS:
        for j in range(m.njnt):
            kind, first = int(m.jnt_type[j]), int(m.jnt_dofadr[j])
            translations = 3 if kind == int(mujoco.mjtJoint.mjJNT_FREE) else 0
            for k in range({0: 6, 1: 3}.get(kind, 1)):
                if m.dof_frictionloss[first + k] <= 0:
                    continue
                if kind in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                    lossy.append((first, first))
                elif k < translations:
                    lossy.append((first + k, first + 3 + k))
                else:
                    turning.append((len(lossy), placed[body_names[m.jnt_bodyid[j]]][0].index, k - translations, first))
                    lossy.append((first + k, None))
        for t in range(m.ntendon):
            if m.tendon_frictionloss[t] > 0:
                left_out.append(f"the friction loss of tendon {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, t)}")
    loss_u = np.zeros((len(lossy), m.nv))
    for row, (_, column) in enumerate(lossy):
        if column is not None:
            loss_u[row, column] = 1.0
    lossy = [dof for dof, _ in lossy]

    damping = np.asarray(m.dof_damping, float).copy()
    for j in range(m.njnt):  # a free joint's dofs in u's order: rotation, then translation
        if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
            d = int(m.jnt_dofadr[j])
            damping[d:d + 6] = np.concatenate([damping[d + 3:d + 6], damping[d:d + 3]])
    if disabled & mujoco.mjtDisableBit.mjDSBL_DAMPER or disabled & mujoco.mjtDisableBit.mjDSBL_EULERDAMP:
        damping[:] = 0.0

    def array(values, shape):
        return jnp.asarray(np.asarray(values, float).reshape(shape), dtype)

    connects, welds, couplings, unmodelled = _equalities(mujoco, m, placed, body_names, name, array)
    left_out += unmodelled
    constraints = SoftConstraints(
        surfaces=tuple(surfaces), groups=groups, contact_bodies=bodies, dims=tuple(dims),
        contact_axes=axes,
        friction=array(friction, (-1, 5)), contact_solref=array(solref, (-1, 2)),
        contact_solimp=array(solimp, (-1, 5)), contact_margin=array(margin, (-1,)),
        contact_invweight=array(invweight, (-1,)),
        limit_q=array(limit_q, limit_q.shape), limit_u=array(limit_u, limit_u.shape),
        limit_range=array([x[2] for x in limited], (-1, 2)), limit_margin=array([x[3] for x in limited], (-1,)),
        limit_solref=array([x[4] for x in limited], (-1, 2)), limit_solimp=array([x[5] for x in limited], (-1, 5)),
        limit_invweight=array([x[6] for x in limited], (-1,)),
        loss_u=array(loss_u, loss_u.shape), loss=array(m.dof_frictionloss[lossy], (-1,)),
        loss_solref=array(m.dof_solref[lossy], (-1, 2)), loss_solimp=array(m.dof_solimp[lossy], (-1, 5)),
        loss_invweight=array(m.dof_invweight0[lossy], (-1,)),
        timestep=array(0.0 if disabled & mujoco.mjtDisableBit.mjDSBL_REFSAFE else m.opt.timestep, ()),
        impratio=array(m.opt.impratio, ()), mean_inertia=array(m.stat.meaninertia, ()),
        connects=connects, welds=welds, couplings=couplings, loss_turning=tuple(turning),
        elliptic=int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC),
        ball_limits=None if not balls else BallLimits(
            q_starts=tuple(b[0] for b in balls), u_starts=tuple(b[1] for b in balls),
            range=array([b[2] for b in balls], (-1,)), margin=array([b[3] for b in balls], (-1,)),
            solref=array([b[4] for b in balls], (-1, 2)), solimp=array([b[5] for b in balls], (-1, 5)),
            invweight=array([b[6] for b in balls], (-1,))),
        iterations=int(m.opt.iterations), tolerance=float(m.opt.tolerance))
    rk4 = int(m.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4)
    stepper = MuJoCoStepper(damping=None if rk4 or not damping.any() else array(damping, (-1,)),
                            integrator="rk4" if rk4 else "euler")
    return constraints, stepper, left_out
