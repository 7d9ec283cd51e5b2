"""Simbody's rigid contact: unilateral constraints that never interpenetrate
(``unilateral``: hard stops, ropes, point, sphere and edge contacts,
ratchets, limited motors and state-limited friction), the impulse solvers
that resolve them (``impulse``: PGS and PLUS, with their implicit
derivatives), and the time stepper that advances a State through impacts
and sliding (``time_stepper``: SemiExplicitEulerTimeStepper)."""
