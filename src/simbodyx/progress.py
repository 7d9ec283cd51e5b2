"""Progress bars for long loops (``rollout``, ``simulate``, ``minimize``),
updated from inside compiled programs by host callbacks.

A loop that takes ``progress=True`` (or a :class:`Progress`) calls
:func:`report` with its unbatched iteration count; every so many
iterations a ``jax.debug.callback`` moves a tqdm bar (``tqdm.auto``: a
widget in a notebook, text in a terminal) on the host. Off, nothing is
added to the program. The count is the loop's own, not the State's, so
under ``jax.vmap`` one bar counts the whole batch's progress.
"""

from __future__ import annotations

import dataclasses
import threading

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Progress:
    """How a loop shows its progress.

    Attributes:
        description: The bar's label.
        updates: About how many times the bar moves over a whole loop
            (each is one host callback).
        unit: What the loop counts ("step", "report", "iteration").
    """

    description: str = ""
    updates: int = 100
    unit: str = "step"


def progress_of(option, caller: str, unit: str) -> Progress | None:
    """The :class:`Progress` a loop's ``progress=`` option asks for (None:
    off). Checks that tqdm is there before anything is traced."""
    if option is False or option is None:
        return None
    if option is True:
        option = Progress(caller, unit=unit)
    if not isinstance(option, Progress):
        raise TypeError(f"{caller}: progress must be True, False or an sx.Progress, got {option!r}")
    if not (isinstance(option.updates, int) and option.updates >= 1):
        raise ValueError(f"{caller}: Progress.updates must be a positive int, got {option.updates!r}")
    try:
        import tqdm.auto  # noqa: F401
    except ImportError:
        raise ImportError(f"{caller}: progress bars need tqdm: pip install tqdm (or simbodyx[viz])") from None
    return dataclasses.replace(option, unit=option.unit if option.unit != "step" else unit)


_BARS: dict = {}
_LOCK = threading.Lock()


def _move(progress: Progress, done, total, value=None):
    """Host side: move ``progress``'s bar to ``done`` of ``total`` (a new
    bar when a run starts again from below where the last one stood)."""
    from tqdm.auto import tqdm

    done, total = int(done), int(total)
    with _LOCK:
        bar = _BARS.get(progress)
        if bar is None or done < bar.n or bar.total != total:
            if bar is not None:
                bar.close()
            bar = _BARS[progress] = tqdm(total=total, desc=progress.description, unit=progress.unit,
                                         dynamic_ncols=True)
        bar.update(done - bar.n)
        if value is not None:
            bar.set_postfix(loss=f"{float(value):.6g}", refresh=False)
        if done >= total:
            bar.close()
            del _BARS[progress]


def report(progress: Progress | None, done, total: int, value=None) -> None:
    """Inside a loop: report ``done`` (a traced, unbatched count, 1 after
    the first iteration) of ``total`` iterations, and a scalar ``value``
    (the loss) if given, every ``total // progress.updates`` iterations and
    at the last. Nothing when ``progress`` is None."""
    if progress is None:
        return
    every = max(1, total // progress.updates)
    due = (done % every == 0) | (done == total) | (done == 1)
    arguments = (done, total) if value is None else (done, total, value)

    def move(*arguments):
        jax.debug.callback(lambda *a: _move(progress, *a), *arguments)

    jax.lax.cond(jnp.asarray(due), move, lambda *a: None, *arguments)
