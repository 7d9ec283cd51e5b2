"""What a Constraint or Motion handle asks of the builder, without importing
it: the SimbodyMatterSubsystem its MobilizedBody handles belong to (which
checks them, ``_check_handles``), and the builder reference that the
frozen Model's copy of a handle lacks (``matter`` is None there)."""

from __future__ import annotations


def registering_matter(what: str, handles):
    """The SimbodyMatterSubsystem of ``handles[0]``, after it checked that each
    of ``handles`` is a MobilizedBody of its own; errors name ``what``."""
    matter = getattr(handles[0], "_matter", None)
    if not hasattr(matter, "_check_handles"):
        raise TypeError(f"{what}: expected MobilizedBody handles, got {type(handles[0]).__name__}")
    matter._check_handles(what, handles)
    return matter


def builder_of(handle, what: str):
    """``handle.matter`` for its building-time method ``what``, or the error
    that the frozen Model's copy has none."""
    if handle.matter is None:
        raise ValueError(f"{handle.label}.{what}: this is the frozen Model's copy; "
                         "ask the handle made while building")
    return handle.matter
