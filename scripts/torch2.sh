#!/bin/sh
# Runs a Python script under a PyTorch 2.x on this CPU-only machine, for regenerating the parity
# fixtures (tests/fixtures/parity/make_parity.py, tests/fixtures/bad_inputs_torch.py):
#     scripts/torch2.sh tests/fixtures/parity/make_parity.py
# The documents use PyTorch 2.x, and where 1.13 (Debian's python3-torch) and 2.x differ the
# library follows 2.x. PyPI has no CPU-only 2.x wheel, only the CUDA build; that build runs on a
# CPU if the CUDA libraries it links against can be loaded, so this script installs the wheel
# without its dependency list, adds the few NVIDIA libraries the CUDA toolkit here does not ship,
# and points the loader at them and at /usr/local/cuda. Nothing touches the GPU. The first run
# downloads about 1 GB into the virtual environment (TORCH2_VENV, default /tmp/tiny-torch2).
set -eu
venv=${TORCH2_VENV:-/tmp/tiny-torch2}
py=$venv/bin/python
if ! [ -x "$py" ] || ! "$py" -c "import torch, einops, safetensors" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-deps torch
  "$venv/bin/pip" install -q --no-warn-conflicts numpy einops safetensors typing_extensions sympy filelock jinja2 \
    networkx fsspec
  "$venv/bin/pip" install -q --no-warn-conflicts --no-deps nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 nvidia-cufile \
    nvidia-nccl-cu13
fi
site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/nvidia
LD_LIBRARY_PATH=$site/nccl/lib:$site/cu13/lib:$site/nvshmem/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
exec "$py" "$@"
