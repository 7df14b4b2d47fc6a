"""What every lane kernel's compile test asserts of its PTX (the tests directory is on the path:
`from ptx import compiled_for_sm90a`)."""

from __future__ import annotations

import re

from lanec.codegen.compile import compile_kernel, entry_signature
from lanec.codegen.kernels.base import releases_at_entry


def compiled_for_sm90a(kernel):
    """The kernel compiled afresh: for sm_90a, with PDL's wait (unless a flag stands in for it:
    `flag_in_place_of_wait`) and its early release of the dependents where its launch asks for PDL
    (and neither where it does not), no local memory (a
    register indexed at run time would spill there), one 8-byte pointer a param, and the launch
    its class computes."""
    compiled = compile_kernel(kernel, cache_dir=None, use_cache=False)
    ptx = compiled.ptx
    assert re.search(r"^\.target sm_90a", ptx, re.M)
    pdl = kernel.launch().pdl
    # a launch whose every thread acquires its predecessor's flag in place of the PDL wait has none
    waits = pdl and not (hasattr(kernel, "flag_in_place_of_wait") and kernel.flag_in_place_of_wait())
    assert ("griddepcontrol.wait;" in ptx) == waits and ("griddepcontrol.launch_dependents;" in ptx) == pdl
    if pdl and releases_at_entry(kernel):  # released before anything else, the wait included
        assert ptx.index("griddepcontrol.launch_dependents;") < ptx.index("griddepcontrol.wait;")
    assert ".local" not in ptx, "registers spilled to local memory (a run-time register index?)"
    _, sizes = entry_signature(ptx)
    assert sizes == [8] * len(kernel.params())
    assert compiled.launch == kernel.launch() and compiled.launch.shared_bytes <= 227 * 1024
    return compiled
