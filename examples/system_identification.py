"""System identification: recover the masses and mass centers of a 3-link
planar chain from a noisy simulated trajectory, through gradients with
respect to the Model's mass properties.

The chain swings under gravity and known joint torques (a sum of sines);
each joint angle is measured every 10 ms for 1 s with Gaussian noise of
1 mrad. The six unknowns (log mass and mass-center offset along each link)
minimize the squared output error of a simulated rollout, by
Levenberg-Marquardt as one compiled loop (the Jacobian of the rollout by
forward mode, a tangent per unknown). The Gauss-Newton covariance
sigma^2 (J^T J)^-1 of the residuals' Jacobian gives each estimate's
standard error, and the script prints how many standard errors each
estimate lies from the truth. (Over a 2 s horizon the output error has
local minima that the fit falls into from this guess; split longer records
into windows.)

    python examples/system_identification.py
"""

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

LENGTH = 0.5  # m, each link
TRUE_MASSES = jnp.array([1.0, 0.8, 0.6])  # kg
TRUE_OFFSETS = jnp.array([-0.25, -0.20, -0.30])  # m, mass center along each link's y
NUM_STEPS, DT, NOISE = 100, 0.01, 1e-3  # steps, s, rad


def chain():
    """(model, state, links): three Pins about z, each link hanging along -y
    from the previous link's end, under gravity along -y."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    links, parent = [], matter.Ground()
    for k in range(3):
        at = sx.Transform() if k == 0 else sx.Transform(p=[0.0, -LENGTH, 0.0])
        parent = sx.MobilizedBody.Pin(parent, at, sx.Body.Rigid(link_mass_properties(1.0, -LENGTH / 2)),
                                      sx.Transform())
        links.append(parent)
    model, state = system.realize_topology()
    return model, state.with_q(jnp.array([0.5, -0.3, 0.2])), links


def link_mass_properties(mass, offset):
    """A slender rod's mass properties with its mass center at (0, offset, 0)."""
    rod = mass * LENGTH**2 / 12
    return sx.MassProperties.from_central(mass, jnp.stack([0.0 * offset, offset, 0.0 * offset]),
                                          sx.Inertia(rod, 0.0 * rod, rod))


def with_parameters(model, links, theta):
    """The Model with theta = (log masses (3), mass-center offsets (3))."""
    for link, log_mass, offset in zip(links, theta[:3], theta[3:]):
        model = link.set_mass_properties(model, link_mass_properties(jnp.exp(log_mass), offset))
    return model


def torques():
    """The known joint torques (NUM_STEPS, 3), N m, held over each step."""
    t = DT * jnp.arange(NUM_STEPS)[:, None]
    return jnp.array([2.0, 1.0, 0.5]) * jnp.sin(jnp.array([3.0, 5.0, 7.0]) * t)


def make_residuals(model, state, links):
    """residuals(theta, measured (NUM_STEPS, 3)) -> (NUM_STEPS * 3,) output
    errors in units of the noise."""
    controls = torques()

    def residuals(theta, measured):
        _, trajectory = sx.integrate.rollout(with_parameters(model, links, theta), state, DT, controls=controls,
                                             energy=False)
        return ((trajectory.q[1:] - measured) / NOISE).ravel()

    return residuals


def true_parameters():
    """theta of the chain that made the data."""
    return jnp.concatenate([jnp.log(TRUE_MASSES), TRUE_OFFSETS])


def initial_guess():
    """theta the fit starts from: 1.5 kg links with their mass centers mid-link."""
    return jnp.concatenate([jnp.log(jnp.array([1.5, 1.5, 1.5])), jnp.full(3, -LENGTH / 2)])


def predicted(residuals, theta):
    """The joint angles (NUM_STEPS, 3) the Model with theta simulates."""
    return residuals(theta, jnp.zeros((NUM_STEPS, 3))).reshape(NUM_STEPS, 3) * NOISE


def measurements(residuals, seed=0):
    """The true chain's joint angles with Gaussian noise of NOISE rad."""
    clean = predicted(residuals, true_parameters())
    return clean + NOISE * jax.random.normal(jax.random.key(seed), clean.shape)


@functools.partial(jax.jit, static_argnums=(0, 3))
def levenberg_marquardt(residuals, theta, measured, iterations):
    """(estimate, the loss 0.5 mean(r^2) after each iteration, the residuals'
    Jacobian at the last linearization) of ``residuals(theta, measured)``.
    Each iteration linearizes the residuals at theta (forward mode, one
    tangent per unknown), solves (J'J + mu diag(J'J)) step = -J'r, and keeps
    the step if it lowers the loss (then mu / 3, else mu * 2)."""

    def loss(theta):
        r = residuals(theta, measured)
        return 0.5 * (r @ r) / r.size

    def iterate(carry, _):
        theta, mu, current, _ = carry
        r, tangent = jax.linearize(lambda theta: residuals(theta, measured), theta)
        J = jax.vmap(tangent, out_axes=1)(jnp.eye(theta.size, dtype=theta.dtype))
        A = J.T @ J
        trial = theta - jnp.linalg.solve(A + mu * jnp.diag(jnp.diag(A)), J.T @ r)
        value = loss(trial)
        better = value < current
        carry = (jnp.where(better, trial, theta), jnp.where(better, mu / 3, mu * 2), jnp.minimum(value, current), J)
        return carry, carry[2]

    start = (theta, jnp.asarray(1e-3, theta.dtype), loss(theta), jnp.zeros((NUM_STEPS * 3, theta.size), theta.dtype))
    (theta, _, _, J), losses = jax.lax.scan(iterate, start, None, iterations)
    return theta, losses, J


def identify(seed=0, iterations=12):
    """(estimate, truth, standard errors, residual RMS in rad, losses)."""
    model, state, links = chain()
    residuals = make_residuals(model, state, links)
    truth, measured = true_parameters(), measurements(residuals, seed)
    estimate, losses, J = levenberg_marquardt(residuals, initial_guess(), measured, iterations)
    standard_errors = jnp.sqrt(jnp.diag(jnp.linalg.inv(J.T @ J)))
    rms = NOISE * jnp.sqrt(2 * losses[-1])
    return estimate, truth, standard_errors, rms, losses


if __name__ == "__main__":
    start = time.perf_counter()
    estimate, truth, standard_errors, rms, losses = identify()
    print(f"{len(losses)} Levenberg-Marquardt iterations, {time.perf_counter() - start:.1f} s with compiling; "
          f"residual RMS {float(rms) * 1e3:.3f} mrad (noise {NOISE * 1e3:.1f} mrad)")
    names = [f"mass {k} (kg)" for k in range(3)] + [f"mass center {k} (m)" for k in range(3)]
    shown = np.concatenate([np.exp(estimate[:3]), estimate[3:]]), np.concatenate([np.exp(truth[:3]), truth[3:]])
    for name, e, t, se, z in zip(names, *shown, standard_errors, (estimate - truth) / standard_errors):
        print(f"  {name:18s} estimate {e:8.5f}  truth {t:8.5f}  ({float(z):+.2f} standard errors)")
