"""A fix for the JAX releases before 0.7, applied on import.

JAX 0.6's transpose rule of ``lax.custom_linear_solve`` passes symbolic-zero
cotangents on to ``bind``, which fails ("Zero(float64[n]) ... is not a
valid JAX type") when reverse mode reaches a linear solve whose result is
unused, as happens in ``jax.grad`` through ``simulate`` when the loss reads
only q: the u part of an interpolated sample depends on a forward-dynamics
solve (``aba.symmetric_solve``) that then gets a zero cotangent. JAX 0.7
instantiates such cotangents as zeros (jax-ml/jax pull request 29629); on
older releases this module wraps the rule to do the same. The change only
turns the failure into the correct (zero) contribution; every other use of
the rule is untouched.
"""

from __future__ import annotations


from simbodyx._xla.releases import JAX


def instantiate_linear_solve_cotangents() -> bool:
    """Wrap custom_linear_solve's transpose rule on JAX < 0.7; True if wrapped."""
    if JAX >= (0, 7, 0):
        return False
    from jax._src.interpreters import ad
    from jax._src.lax.control_flow import solves

    rule = ad.primitive_transposes[solves.linear_solve_p]
    if getattr(rule, "instantiates_zeros", False):
        return True

    def transpose(cotangent, *primals, **params):
        return rule([ad.instantiate_zeros(ct) for ct in cotangent], *primals, **params)

    transpose.instantiates_zeros = True
    ad.primitive_transposes[solves.linear_solve_p] = transpose
    return True
