"""simbodyx._xla.module.Module behaves as eqx.Module, with plain attributes read
without equinox's bound-method check (the cost of flattening a Model or
State at every jitted call), methods bound without equinox's constructor
checks, and hashes by structure and numbers."""

import equinox as eqx
import jax
import numpy as np
import pytest

import simbodyx as sx
from simbodyx._xla import module
from simbodyx.stage import Stage

from conftest import random_state, with_forces


def test_attributes_skip_equinox_and_methods_stay_pytrees(monkeypatch):
    """Plain attributes are read without equinox's bound-method check;
    a method is bound as equinox binds it (its BoundMethod, a pytree holding
    the model's arrays, equal in structure, attributes and leaves to the
    one equinox's constructor makes) without equinox's code."""
    system, *_ = with_forces(["Pin", "Ball", "Free"], seed=3)
    model, _ = system.realize_topology()
    state = random_state(model, seed=1)
    calls = []

    def counting(self, name):
        calls.append(name)
        return original(self, name)

    original = eqx.Module.__getattribute__
    monkeypatch.setattr(eqx.Module, "__getattribute__", counting)
    leaves, treedef = jax.tree.flatten((model, state))
    assert model.params.X_PF.p.shape == (4, 3) and state.stage == Stage.Model
    realize = model.realize
    assert calls == []  # flattening reads each node's __dict__ directly; methods are bound here
    monkeypatch.undo()

    by_equinox = module._BOUND_METHOD(type(model).realize, model)
    assert type(realize) is type(by_equinox) and isinstance(realize, eqx.Module)
    assert jax.tree.structure(realize) == jax.tree.structure(by_equinox)
    assert vars(realize).keys() == vars(by_equinox).keys() and realize.__name__ == "realize"
    assert realize.__doc__ == type(model).realize.__doc__ and realize == model.realize
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
