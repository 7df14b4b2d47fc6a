"""lanec's runtime: what a GPU machine needs to run a plan.bin, on numpy and cuda.bindings alone.

    dtypes.py   storage of each element type (bfloat16 as uint16 bits)
    driver.py   the CUDA driver: device, modules, buffers, streams, launches, graphs, timing
    plan.py     the plan.bin format: `Plan.read` / `Plan.write`, `describe`
    weights.py  safetensors checkpoints, seeded weights, the transforms that lay weights out
    runner.py   `lanec run` / `python -m lanec.runtime`: step, graph, timings, --check, --interpret
"""
