"""simbodyx._xla.module.Module behaves as eqx.Module, with plain attributes read
without equinox's bound-method check (the cost of flattening a Model or
State at every jitted call)."""

import equinox as eqx
import jax
import numpy as np

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
