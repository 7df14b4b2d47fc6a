"""lanec's runtime: what a GPU machine needs to run a plan.bin, on numpy and cuda.bindings alone.

    dtypes.py     the element types: names, storage (bfloat16 as uint16 bits), bf16 rounding, q8_0
    launch.py     the launch ABI: tensor parameters, launch shapes, the one check of a launch
    tolerance.py  how close a GPU result must come to the interpreter's (--check and tests/gpu)
    driver.py     the CUDA driver: device, modules, buffers, streams, launches, graphs, timing
    artifact.py   one compiled kernel on disk (a cubin and its JSON)
    plan.py       the plan.bin format: `Plan.read` / `Plan.write`, `describe`; buffer roles, transforms
    weights.py    safetensors checkpoints, seeded weights, the transforms that lay weights out
    seeded.py     seeded weights: each value a function of (seed, name, index), the GPU kernel's twin
    gguf_checkpoint.py  GGUF checkpoints (llama.cpp's names and layouts; the gguf package, imported lazily)
    runner.py     `lanec run` / `python -m lanec.runtime`: step, graph, timings, --check, --interpret
    parallel.py   a plan for N ranks: the rank processes, each rank's step and slices, its --check
    collectives.py  NCCL through nccl4py (imported only for a plan for several ranks)

Nothing here imports the compiler (lanec.codegen, xDSL, CuTe DSL) or click: the compiler imports
the runtime, never the reverse. `--check` and `--interpret` import the interpreter's numpy half
(lanec.interp.program, ops, environment, lazy) where they run.
"""
