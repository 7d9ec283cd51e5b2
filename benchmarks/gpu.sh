#!/usr/bin/env bash
# The GPU rows of benchmarks/README.md: simbodyx beside MJX on chain7 and the
# humanoid, forward dynamics and its gradient, float32 then float64, batch 1
# to 65,536, each batch one jit(vmap) on the one GPU (run.py --chunk-size 0);
# then gymnasium's robots stepping with contact (contact.py, float32).
#
#     bash benchmarks/gpu.sh [OUTDIR]      # writes OUTDIR/gpu_float32.txt, gpu_float64.txt, gpu_contact.txt
#
# DTYPES (default "float32 float64") and ROBOTS (default "ant,humanoid")
# choose what runs; an empty one skips its part.
#
# Needs jax with its CUDA plugin, equinox and mujoco-mjx importable. On a
# machine without a network, put their wheels in .whl/ beside the project:
# they are installed into /tmp/site first.
set -euo pipefail
out=${1:-${OUT:-.}}
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=src:benchmarks:$PYTHONPATH PYTHONUNBUFFERED=1
# run.py's figures compile each program twice (timing, then memory analysis): the second comes from this cache
# float32 matrix products in full float32, not TF32 (on TF32, MJX's float32 humanoid accelerations are 0.26 off)
export JAX_DEFAULT_MATMUL_PRECISION=highest
export JAX_COMPILATION_CACHE_DIR=/tmp/simbodyx-jax-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import jax, equinox, mujoco; print('jax', jax.__version__, jax.devices(), 'equinox', equinox.__version__, 'mujoco', mujoco.__version__)"
for dtype in ${DTYPES-float32 float64}; do
    python3 benchmarks/run.py --dtype "$dtype" --models "${MODELS:-chain7,humanoid}" --ops forward_dynamics,grad_forward_dynamics \
        --batches 256,4096,65536 --repeats 5 --chunk-size 0 --adaptive-batch 0 --rollout-grad-steps 0 \
        --contact-steps 0 --trajopt-iterations 0 2>&1 | tee "$out/gpu_$dtype.txt"
done
if [ -n "${ROBOTS-ant,humanoid}" ]; then
    python3 benchmarks/contact.py --scenes "" --robots "${ROBOTS-ant,humanoid}" --dtype float32 --repeats 3 2>&1 \
        | tee "$out/gpu_contact.txt"
fi
