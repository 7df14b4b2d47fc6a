#!/usr/bin/env bash
# The wheels a GPU machine without network needs for tensor parallel (a plan for several ranks), into
# .whl-tp/ (git-ignored): nccl4py's bindings and cuda-pathfinder, which finds libnccl. Python 3.12,
# manylinux x86_64, as on the H200 machines. libnccl itself is not carried: torch 2.11 there is its
# default CUDA 13 build and installs nvidia-nccl-cu13 (GPU.md), and an nvidia-nccl wheel (about
# 200 MB) would not fit the 64 MiB that travels with the work tree anyway.
#
#   here:  bash tests/gpu/tp_wheels.sh
#   there: python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-tp/*.whl
#          PYTHONPATH=/tmp/site:. python3 -m pytest -q tests/gpu/test_tp_nccl.py
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl-tp
python3 -m pip download -q --no-deps --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_28_x86_64 -d .whl-tp nccl4py==0.6.0 cuda-pathfinder==1.9.1
ls -l .whl-tp
