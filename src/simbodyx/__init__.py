"""simbodyx: Simbody's multibody dynamics on JAX.

Build a system with the Simbody-shaped API, freeze it with
``realize_topology()``, then use the pure functions of the Model and its
States under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

Numbers follow JAX's default float type: float32 unless
``jax.config.update("jax_enable_x64", True)`` is set *before* the system is
frozen (``Model.astype`` converts an existing model). simbodyx changes
JAX's global configuration and XLA's options only when asked
(``xla_setup.set_cpu_options``, ``parallel.use_cpu_cores``); its own
programs carry XLA's per-program options (``xla_setup``). One exception is
applied on import: on JAX < 0.7 ``custom_linear_solve``'s transpose rule
gets JAX 0.7's fix for symbolic-zero cotangents. It lives in the private
``simbodyx._xla``, with simbodyx's other workarounds of JAX and XLA (its
docstring says what each works around and when it can go);
``sx.xla_setup``, ``sx.scalarize``, ``sx.RuntimeCheckError`` and
``sx.check_errors`` are its public parts.
"""

from simbodyx._xla import jax_compat, xla_setup as xla_setup

jax_compat.instantiate_linear_solve_cotangents()

from simbodyx import (
    assembly as assembly,
    constraints as constraints,
    envs as envs,
    events as events,
    integrate as integrate,
    io as io,
    mobilizers as mobilizers,
    optimize as optimize,
    parallel as parallel,
    projection as projection,
    rigid_contact as rigid_contact,
    simulation as simulation,
    spatial as spatial,
    tree as tree,
    viz as viz,
)
from simbodyx._xla import scalarize as scalarize
from simbodyx._xla.faults import RuntimeCheckError as RuntimeCheckError, check_errors as check_errors
from simbodyx.assembly import (
    AssembleResults as AssembleResults,
    Assembler as Assembler,
    Markers as Markers,
    QValue as QValue,
)
from simbodyx.builder import (
    Body as Body,
    CompliantContactSubsystem as CompliantContactSubsystem,
    GeneralContactSubsystem as GeneralContactSubsystem,
    GeneralForceSubsystem as GeneralForceSubsystem,
    HuntCrossleyForce as HuntCrossleyForce,
    MobilizedBody as MobilizedBody,
    Mobod as Mobod,
    MultibodySystem as MultibodySystem,
    SimbodyMatterSubsystem as SimbodyMatterSubsystem,
    SmoothSphereHalfSpaceForce as SmoothSphereHalfSpaceForce,
)
from simbodyx.constraints import Constraint as Constraint
from simbodyx.rigid_contact.unilateral import (
    BoundedSpeedConstraint as BoundedSpeedConstraint,
    ConditionalConstraint as ConditionalConstraint,
    EdgeEdgeContact as EdgeEdgeContact,
    HardStopLower as HardStopLower,
    HardStopUpper as HardStopUpper,
    PointPlaneContact as PointPlaneContact,
    PointPlaneFrictionlessContact as PointPlaneFrictionlessContact,
    Rope as Rope,
    SpherePlaneContact as SpherePlaneContact,
    SphereSphereContact as SphereSphereContact,
    StateLimitedFriction as StateLimitedFriction,
    UnilateralContact as UnilateralContact,
    UnilateralSpeedConstraint as UnilateralSpeedConstraint,
)
from simbodyx.contact import ContactGeometry as ContactGeometry, ContactMaterial as ContactMaterial
from simbodyx.events import ScheduledEvent as ScheduledEvent, TriggeredEvent as TriggeredEvent
from simbodyx.forces import Force as Force
from simbodyx.integrators import Integrator as Integrator
from simbodyx.simulation import (
    IntegratorStats as IntegratorStats,
    IntegratorStatus as IntegratorStatus,
    simulate as simulate,
)
from simbodyx.rigid_contact.impulse import ImpulseSolver as ImpulseSolver
from simbodyx.rigid_contact.impulse import PGSImpulseSolver as PGSImpulseSolver
from simbodyx.rigid_contact.impulse import PLUSImpulseSolver as PLUSImpulseSolver
from simbodyx.motion import Motion as Motion
from simbodyx.matter import Matter as Matter
from simbodyx.model import Model as Model
from simbodyx.progress import Progress as Progress
from simbodyx.projection import (
    ProjectOptions as ProjectOptions,
    ProjectResults as ProjectResults,
    ProjectStatus as ProjectStatus,
)
from simbodyx.soft_constraints import SoftConstraints as SoftConstraints
from simbodyx.spatial import (
    Inertia as Inertia,
    MassProperties as MassProperties,
    Rotation as Rotation,
    SpatialInertia as SpatialInertia,
    Transform as Transform,
    UnitInertia as UnitInertia,
)
from simbodyx.stage import Stage as Stage
from simbodyx.state import State as State
from simbodyx.rigid_contact.time_stepper import SemiExplicitEulerTimeStepper as SemiExplicitEulerTimeStepper

__version__ = "0.1.0"
