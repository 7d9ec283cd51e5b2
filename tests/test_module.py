"""simbodyx._xla.module.Module behaves as eqx.Module, with plain attributes read
without equinox's bound-method check (the cost of flattening a Model or
State at every jitted call), and hashes by structure and numbers."""

import equinox as eqx
import jax
import numpy as np
import pytest

import simbodyx as sx
from simbodyx._xla import module
from simbodyx.stage import Stage

from conftest import random_state, with_forces


def test_attributes_skip_equinox_and_methods_stay_pytrees(monkeypatch):
    system, *_ = with_forces(["Pin", "Ball", "Free"], seed=3)
    model, _ = system.realize_topology()
    state = random_state(model, seed=1)
    calls = []

    def counting(self, name):
        calls.append(name)
        return eqx.Module.__getattribute__(self, name)

    monkeypatch.setattr(module, "_equinox_getattribute", counting)
    leaves, treedef = jax.tree.flatten((model, state))
    assert calls == []  # flattening reads each node's __dict__ directly
    assert model.params.X_PF.p.shape == (4, 3) and state.stage == Stage.Model and calls == []

    realize = model.realize  # a method still goes through equinox: a pytree holding the model's arrays
    assert calls == ["realize"] and isinstance(realize, eqx.Module)
    assert len(jax.tree.leaves(realize)) == len(jax.tree.leaves(model))
    realized = eqx.filter_jit(realize)(state, Stage.Position)
    np.testing.assert_array_equal(realized.position.X_GB.p, model.realize(state).position.X_GB.p)
    assert jax.tree.unflatten(treedef, leaves)[0].topology is model.topology


def test_pytrees_hash_by_structure_and_numbers_so_jax_jit_takes_their_methods():
    """Equal Models (and States) hash equal, numbers that differ hash apart,
    a traced one does not hash; ``jax.jit`` of a Model's or a handle's
    method compiles it with the numbers as constants, as a closure would."""
    system, _, _, bodies = with_forces(["Pin", "Ball"], seed=3)
    rod = sx.Constraint.Rod(bodies[1], [0.1, 0, 0], bodies[2], [0, 0.2, 0], 0.5)
    model, _ = system.realize_topology()
    twin, _ = system.realize_topology()
    state = random_state(model, seed=1)
    assert hash(model) == hash(twin) and hash(state) == hash(state.with_q(state.q + 0))
    assert hash(eqx.tree_at(lambda m: m.params.mass, model, model.params.mass + 1.0)) != hash(model)
    with pytest.raises(TypeError, match="traced values"):
        jax.jit(lambda m: hash(m))(model)
    s = jax.jit(model.realize)(state)
    np.testing.assert_allclose(s.position.X_GB.p, model.realize(state).position.X_GB.p, atol=1e-15)
    np.testing.assert_allclose(jax.jit(rod.get_position_errors_as_vector)(s), rod.get_position_errors_as_vector(s),
                               atol=1e-15)
