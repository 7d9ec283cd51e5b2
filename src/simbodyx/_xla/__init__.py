"""simbodyx's workarounds of JAX and XLA, in one private place.

Every module here exists because of how a JAX or XLA release behaves, not
because of the mechanics; the rest of simbodyx reads as if JAX had none of
these limits. The only imports of JAX's private modules (``jax._src``) are
here, each behind a guard (a release check or an ``ImportError``
fallback) that ``tests/_xla/test_xla_setup.py`` exercises. Its public parts:
``sx.xla_setup`` (``loop_compiler_options``), ``sx.scalarize``
(``scalarize``), ``sx.RuntimeCheckError`` and ``sx.check_errors``. The measurements behind each choice are in
docs/explanation/performance.md and benchmarks/README.md, "Across JAX releases".

What each works around, where, and when it can go:

- ``releases``: the process's JAX and jaxlib releases and the choices made
  by release (``SPLIT_TRANSPOSES``, how gradients transpose the tree's row
  gathers: splits of the cotangent on jaxlib >= 0.11, whose newer fusion
  emitters run them faster; scatter-adds before). Goes when the range of
  supported releases has one behaviour for each switch.
- ``xla_setup``: XLA's CPU options: per program on simbodyx's own
  programs (AVX2 cap on x86-64, where XLA's AVX-512 code for small kernels
  is slower; no YNNPACK fusions on jaxlib >= 0.8.1, slower on small
  kernels; the older fusion emitters on jaxlib 0.7-0.10, whose programs
  hold a quarter of the newer ones' memory mappings), process-wide only
  through ``set_cpu_options`` (those and, on jaxlib >= 0.7, a small-loop
  threshold of 2 MiB, so that XLA compiles one trajectory's loop into one
  function), and ``loop_compiler_options`` (XLA's earlier CPU runtime for
  loops at batch 1, jaxlib 0.6 only). Each option goes when XLA's default
  is as fast (``benchmarks/first_calls.py`` with and without them), and
  ``CPU_OPTIONS`` holds the release range of each.
- ``faults``: a check on a compiled program's numbers can stop it only
  through a host callback, and JAX raises that as its own runtime error
  with the message mid-traceback (and logs a second traceback); this
  module raises ``sx.RuntimeCheckError`` with the message alone, at every
  compiled call simbodyx makes and inside ``sx.check_errors``. Goes when
  JAX raises a callback's exception as itself.
- ``jax_compat``: JAX < 0.7's transpose rule of ``custom_linear_solve``
  fails on a symbolic-zero cotangent; wrapped on those releases only, with
  JAX 0.7's fix (jax-ml/jax pull request 29629). Goes when the oldest
  supported JAX is 0.7.
- ``trace_context``: XLA's CPU runtime handles the scalars of every
  reduction on each call, so a program that runs once per call sums with
  adds and a loop body with reductions; this module tells which one is
  being traced, from JAX's private trace state (``jax._src.core``; where a
  release lacks it, reductions everywhere). Goes when XLA's runtime makes
  a reduction as cheap as its adds, or JAX says publicly what a trace is
  for.
- ``scalarize``: XLA's CPU backend pays per kernel, so a small model's
  dynamics at batch 1 costs many times its arithmetic; the scalar path
  re-emits a program one array entry at a time with the constants folded.
  ``CHOICE`` decides once per Model structure, before any scalar program
  is traced, and logs why. Goes when XLA
  runs a small array program near its arithmetic's cost.
- ``primitives``: JAX traces each ``jax.numpy`` operation as its own
  equation, again under every ``vmap``, ``jvp`` and transpose, and XLA's
  CPU runtime pays per reduction; cross products, small sums, 3x3
  matrices from their entries and a leaf's rows are one primitive each,
  with their derivative, transpose and batching rules, lowered to the
  entries' arithmetic (the rest of simbodyx calls ``cross``,
  ``small_sum``, ``matrix3``, ``rows_of`` and ``stacked``). Goes when
  tracing a ``jax.numpy`` expression costs about one equation.
- ``module``: equinox's ``Module.__getattribute__`` checks every attribute
  for a bound method, which each jitted call pays while flattening its
  Model and State; ``Module`` skips the check for plain attributes. Goes
  when equinox's lookup is as fast.
"""
