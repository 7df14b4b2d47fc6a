"""What the CPU tests share: forms, and a guard for tests of the no-GPU path (pytest puts tests/
on the path: `from forms import DENSE`)."""

import pytest


def skip_where_a_gpu_works() -> None:
    """Skip a test of the no-GPU error on a machine whose GPU the driver opens."""
    from lanec.runtime import driver

    try:
        driver.Device()
    except driver.DeviceError:
        return
    pytest.skip("this machine has a usable GPU")

# a three-row dense step: embed, gate and up products, swiglu, down, argmax
DENSE = """
builtin.module {
  form.step batch 3 tokens 1 {
    %x = form.input {role = "tokens"} : tensor<3xi32>
    %table = form.weight {name = "embed", format = "bf16"} : tensor<64x256xbf16>
    %gw = form.weight {name = "gate", format = "bf16"} : tensor<512x256xbf16>
    %uw = form.weight {name = "up", format = "bf16"} : tensor<512x256xbf16>
    %dw = form.weight {name = "down", format = "bf16"} : tensor<64x512xbf16>
    %h = form.embed %x, %table : (tensor<3xi32>, tensor<64x256xbf16>) -> tensor<3x256xbf16>
    %g = form.product %h, %gw : (tensor<3x256xbf16>, tensor<512x256xbf16>) -> tensor<3x512xbf16>
    %u = form.product %h, %uw : (tensor<3x256xbf16>, tensor<512x256xbf16>) -> tensor<3x512xbf16>
    %s = form.swiglu %g, %u : (tensor<3x512xbf16>, tensor<3x512xbf16>) -> tensor<3x512xbf16>
    %d = form.product %s, %dw : (tensor<3x512xbf16>, tensor<64x512xbf16>) -> tensor<3x64xbf16>
    %t = form.argmax %d : (tensor<3x64xbf16>) -> tensor<3xi32>
    form.return %t, %d : tensor<3xi32>, tensor<3x64xbf16>
  }
}
"""
