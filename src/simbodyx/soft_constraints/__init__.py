"""MuJoCo's constraint model for robots from MJCF files: contacts, joint and
tendon limits, dof friction loss and equality constraints (connect, weld,
joint and fixed-tendon couplings) as soft constraints, solved as one
convex problem in the Model's Acceleration stage (``SoftConstraints``,
``model.soft_constraints``), so every integrator steps them.
``sx.io.load_mjcf`` builds them from a file's own numbers, and
``robot.stepper`` (``sx.integrate.MuJoCoStepper``) steps them as MuJoCo
does, so the robot moves as its authors tuned it, at the file's own time
step.

Each evaluation, at (q, u), with the Model's forces (gravity, springs,
dampers, actuators, controls) giving the unconstrained accelerations a0 and
the mass matrix M (armature included), finds

    a = argmin_a  1/2 (a - a0)' M (a - a0) + sum_i s_i(J_i a - aref_i)

(MuJoCo's primal problem). Row i has Jacobian J_i (1/s per unit u),
regularizer R_i = (1 - d) / d A_i and reference acceleration
aref_i = -b (J_i u) - k d r_i, from its violation r_i (m or rad; < 0 when
violated), its solref (time constant, at least twice ``timestep``, and
damping ratio: k and b) and solimp (the impedance d(|r|)), A_i an
approximate inverse inertia (MuJoCo's ``dof_invweight0``,
``body_invweight0`` and ``tendon_invweight0``). s_i is R_i^-1 x^2 / 2 where
row i pushes and zero where it would pull (a contact's pyramid edge, a
limit): its force is -x / R_i there; a friction-loss row's force is that
too, clipped to its frictionloss. A contact of condim 3 has four rows, the
edges J_n +- mu J_t1 and J_n +- mu J_t2 of MuJoCo's pyramid (tangents as
MuJoCo's ``mju_makeFrame`` builds them, a plane-capsule point's seeded by
the capsule's axis; R = 2 mu^2 (1 + mu^2) R_n / impratio, R_n a
frictionless row's); of condim 4 and 6, also the edges J_n +- mu_k J_k of
its torsional (turning about the normal) and rolling (about the tangents)
rows; of condim 1, its normal row. With MuJoCo's elliptic
cone (``elliptic``, a file's cone="elliptic") a frictional contact is one
cone of its condim's rows, normal, tangents, torsion and rolling
(:class:`Cones`: no cost inside
the cone, the cone surface's where the contact slides, every row's where
it pulls; the others' R = R_n mu_1^2 / (impratio mu_k^2) and aref = -b J u).
A contact exists where the surfaces are within the pair's margin less its
gap, and its rows act only there. An equality's
rows act always, with either sign, their impedance from the length of
the equality's whole violation (three rows of a connect, six of a weld),
and a connect's or weld's aref less the part of its violation's second
derivative that udot does not give (MuJoCo's Jdot v), so that the rows
follow the reference.

The problem is strictly convex and piecewise smooth (piecewise quadratic
without cones); Newton's method with an exact line search (the root of
the cost's slope along the step, bracketed) solves it to the file's tolerance in a few iterations, as
MuJoCo's Newton solver does. Its derivative is the implicit one: one more
Newton step taken from the solution with the rows that push there held,
whose value is the solution and whose derivative with respect to q, u,
the forces and the Model's parameters is exact wherever the set of
pushing, sticking and sliding rows does not change. A contact row starts
to act with a force set by its approach speed (aref's -b J u), a jump in
time: a step in which a contact begins is differentiated with that
moment held, as an impulsive stepper's step is without localized impacts.

Not modelled (``load_mjcf`` says which of a file's elements it left out):
a pair's solreffriction, equalities that start inactive
or hold spatial tendons or flexes, spatial tendons, tendons' friction
loss, adhesion.
A Model with soft constraints has no Simbody constraints or Motions
(``realize_topology`` says so where it would).
"""

from simbodyx.soft_constraints.equalities import Connects, Couplings, Welds
from simbodyx.soft_constraints.model import BallLimits, SoftConstraints
from simbodyx.soft_constraints.rows import MIN_VALUE, Cones, Rows, reference_parameters, regularizer
from simbodyx.soft_constraints.solver import solve

__all__ = ["BallLimits", "Cones", "Connects", "Couplings", "MIN_VALUE", "Rows", "SoftConstraints", "Welds",
           "reference_parameters", "regularizer", "solve"]
