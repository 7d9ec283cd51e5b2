"""Simbody's Force::Thermostat: Nose-Hoover chains that hold a system's
temperature at a bath temperature Tb.

The temperature is T = 2 KE / (N kB), KE = u.M u / 2 the kinetic energy and
N the thermal degrees of freedom: the mobilities, less the equations of the
enabled constraints, less ``num_excluded_dofs`` (0 to 6 rigid-body
degrees of freedom of the system as a whole), at least 1. With m chains of
thermostat variables c (1/s) and relaxation time t (s), the element applies
the mobility forces f = -c[0] M u and

    cdot[0]   = (T/Tb - 1)/t^2 - c[0] c[1]
    cdot[1]   = N c[0]^2 - 1/t^2 - c[1] c[2]
    cdot[i]   = c[i-1]^2 - 1/t^2 - c[i] c[i+1]     (2 <= i < m - 1)
    cdot[m-1] = c[m-2]^2 - 1/t^2                  (m = 1: cdot[0] = (T/Tb - 1)/t^2)

with sdot[i] = c[i] and the external work W, Wdot = f.u = -2 c[0] KE (J).
Its auxiliary states z are [W, c (m), s (m)], all zero by default,
stepped with q and u by ``sx.integrate.rollout`` and ``sx.simulate``. The
bath energy KEb + PEb, KEb = kB Tb t^2 (N c[0]^2 + sum c[i>0]^2) / 2 and
PEb = kB Tb (N s[0] + sum s[i>0]), added to the system's energy gives a
conserved quantity (with conservative forces otherwise). No potential
energy of its own.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx.algorithms import rnea
from simbodyx.forces.base import ForceElement, as_param
from simbodyx.stage import Stage


class Thermostat(ForceElement):
    """``Force.Thermostat(forces, matter, boltzmanns_constant,
    bath_temperature, relaxation_time, num_excluded_dofs=6, num_chains=3)``:
    kB in energy per temperature unit (J/K in SI), Tb in those temperature
    units, t in s. The chains' count sets the State's z, so it is given
    here (Simbody's default 3), not changed on a State."""

    boltzmanns_constant: jnp.ndarray
    bath_temperature: jnp.ndarray
    relaxation_time: jnp.ndarray
    num_excluded_dofs: int = eqx.field(static=True)
    num_chains: int = eqx.field(static=True)
    z_start: int = eqx.field(static=True)

    def __init__(self, forces, matter, boltzmanns_constant, bath_temperature, relaxation_time,
                 num_excluded_dofs: int = 6, num_chains: int = 3):
        label = "Force.Thermostat"
        forces._check_matter(matter, label)
        self.boltzmanns_constant = as_param(boltzmanns_constant, (), "boltzmanns_constant", label)
        self.bath_temperature = as_param(bath_temperature, (), "bath_temperature", label)
        self.relaxation_time = as_param(relaxation_time, (), "relaxation_time", label)
        if not (isinstance(num_excluded_dofs, (int, np.integer)) and 0 <= num_excluded_dofs <= 6):
            raise ValueError(f"{label}: num_excluded_dofs must be an int from 0 to 6, got {num_excluded_dofs!r}")
        if not (isinstance(num_chains, (int, np.integer)) and num_chains >= 1):
            raise ValueError(f"{label}: num_chains must be a positive int, got {num_chains!r}")
        self.num_excluded_dofs, self.num_chains = int(num_excluded_dofs), int(num_chains)
        self.z_start = -1  # placed by realize_topology
        forces._add(self)

    def check(self) -> None:
        super().check()
        for name in ("boltzmanns_constant", "bath_temperature", "relaxation_time"):
            value = np.asarray(getattr(self, name))
            if not np.all(value > 0):
                raise ValueError(f"Force.Thermostat: {name} must be positive, got {value}")

    # -- Simbody's getters (the numbers are Model leaves: the default is the value) --
    def get_boltzmanns_constant(self):
        return self.boltzmanns_constant

    def get_default_bath_temperature(self):
        return self.bath_temperature

    def get_default_relaxation_time(self):
        return self.relaxation_time

    def get_default_num_excluded_dofs(self) -> int:
        return self.num_excluded_dofs

    def get_default_num_chains(self) -> int:
        return self.num_chains

    get_bath_temperature = get_default_bath_temperature
    get_relaxation_time = get_default_relaxation_time
    get_num_excluded_dofs = get_default_num_excluded_dofs
    get_num_chains = get_default_num_chains

    # -- the auxiliary states -------------------------------------------------------
    def num_z(self) -> int:
        return 2 * self.num_chains + 1

    def _z(self, state):
        z = state.z[self.z_start:self.z_start + self.num_z()]
        if z.shape[-1] != self.num_z():
            raise ValueError("Force.Thermostat: this State has no z for it; make States with model.default_state()")
        return z

    def _with_z(self, state, values, start, size):
        at = self.z_start + start
        return state.with_z(state.z.at[at:at + size].set(jnp.broadcast_to(jnp.asarray(values, state.z.dtype), (size,))))

    def get_chain_state(self, state):
        """[c (m), s (m)]: the chains' variables."""
        return self._z(state)[1:]

    def set_chain_state(self, state, values):
        """A new State with the chains' variables [c (m), s (m)] set."""
        values = jnp.asarray(values)
        if values.shape != (2 * self.num_chains,):
            raise ValueError(f"Force.Thermostat.set_chain_state: expected {2 * self.num_chains} values "
                             f"(2 x {self.num_chains} chains), got shape {values.shape}")
        return self._with_z(state, values, 1, 2 * self.num_chains)

    def initialize_chain_state(self, state):
        """A new State with the chains' variables zero."""
        return self._with_z(state, 0.0, 1, 2 * self.num_chains)

    def get_external_work(self, state):
        """W (J): the work the bath has done on the system since it was last set."""
        return self._z(state)[0]

    def set_external_work(self, state, work):
        return self._with_z(state, work, 0, 1)

    # -- what it computes ---------------------------------------------------------------
    def _momentum(self, state):
        """(M u (nu,), KE = u.M u / 2) of a State realized to Velocity."""
        p = rnea.multiply_by_m(state.topology, state.instance, state.position, state.u)
        return p, 0.5 * jnp.dot(state.u, p)

    def _thermal_dofs(self, state):
        """N: the mobilities less the enabled constraints' equations and the excluded dofs, at least 1."""
        constraints = state.instance.constraints
        equations = np.array([c.mp + c.mv + c.ma for c in constraints], np.float64)
        enabled = (equations.sum() if state.constraint_disabled is None or not constraints else
                   jnp.sum(jnp.where(state.constraint_disabled, 0.0, equations)))
        return jnp.maximum(1.0, state.topology.nu - enabled - self.num_excluded_dofs).astype(state.u.dtype)

    def get_num_thermal_dofs(self, state):
        """N (a number of the State's dtype: the enabled constraints are State data)."""
        state.require(Stage.Instance, "Force.Thermostat.get_num_thermal_dofs")
        return self._thermal_dofs(state)

    def get_current_temperature(self, state):
        """T = 2 KE / (N kB) (Velocity)."""
        state.require(Stage.Velocity, "Force.Thermostat.get_current_temperature")
        return 2 * self._momentum(state)[1] / (self._thermal_dofs(state) * self.boltzmanns_constant)

    def get_external_power(self, state):
        """Wdot = -2 c[0] KE (W): positive when energy flows from the bath (Velocity)."""
        state.require(Stage.Velocity, "Force.Thermostat.get_external_power")
        return -2 * self._z(state)[1] * self._momentum(state)[1]

    def calc_bath_energy(self, state):
        """KEb + PEb (J) (Instance)."""
        state.require(Stage.Instance, "Force.Thermostat.calc_bath_energy")
        m, N = self.num_chains, self._thermal_dofs(state)
        c, s = self._z(state)[1:1 + m], self._z(state)[1 + m:]
        kT, t = self.boltzmanns_constant * self.bath_temperature, self.relaxation_time
        kinetic = kT / 2 * t**2 * (N * c[0] ** 2 + jnp.sum(c[1:] ** 2))
        return kinetic + kT * (N * s[0] + jnp.sum(s[1:]))

    def calc(self, model, state):
        p, _ = self._momentum(state)
        return -self._z(state)[1] * p, jnp.zeros((state.topology.num_bodies, 6), state.u.dtype)

    def calc_zdot(self, model, state):
        m, N = self.num_chains, self._thermal_dofs(state)
        z = self._z(state)
        c = z[1:1 + m]
        _, kinetic = self._momentum(state)
        oot2 = 1 / self.relaxation_time**2
        driving = (kinetic / N / (self.boltzmanns_constant * self.bath_temperature / 2) - 1) * oot2
        # cdot[k] = w_k c[k-1]^2 - 1/t^2 - c[k] c[k+1] (w_1 = N, then 1), cdot[0] driven by T
        weights = jnp.where(jnp.arange(m - 1) == 0, N, 1.0)
        cdot = (jnp.concatenate([driving[None], weights * c[:-1] ** 2 - oot2])
                - c * jnp.concatenate([c[1:], jnp.zeros(1, c.dtype)]))
        work = -2 * c[0] * kinetic
        return jnp.concatenate([work[None], cdot, c])
