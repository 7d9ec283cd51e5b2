"""Bridges to other engines (optional dependencies), used by the tests and
benchmarks to compare numbers on the same model."""

from __future__ import annotations


def loop_frames(matter, constraints, counterpart: str):
    """For each Ball or Weld constraint: (kind, ((body 1, X_M1), (body 2, X_M2))),
    its two stations or frames measured in their bodies' joint frames (our M;
    Ground's own frame for Ground), a Ball's stations as frames without
    rotation. Any other constraint is named as having no ``counterpart``."""
    from simbodyx.spatial.transform import Transform

    out = []
    for c in constraints:
        kind = type(c).__name__
        if kind not in ("Ball", "Weld"):
            raise ValueError(f"{c.label}: no {counterpart} for {kind}; supported: Ball, Weld")
        frames = (c.frame1, c.frame2) if kind == "Weld" else (Transform(c.station1), Transform(c.station2))
        pair = []
        for b, X_BS in zip(c.bodies, frames):
            body = matter.get_mobilized_body(b)
            pair.append((body, X_BS if body.is_ground() else body.get_default_outboard_frame().inverse() @ X_BS))
        out.append((kind, tuple(pair)))
    return out
