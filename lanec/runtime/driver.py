"""The CUDA driver, as lanec's runtime and its GPU tests use it: a device, cubin modules, device
buffers, streams, launches (clusters and PDL through cuLaunchKernelEx), CUDA graphs and event
timing. Only `cuda.bindings.driver` (13.3's API), numpy and the launch ABI (launch.py); importing
this module needs no GPU, and every failure of the driver becomes one `DeviceError` line that
names the CUDA error."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lanec.runtime.launch import TENSOR_MAP_BYTES, LaunchError, LaunchShape, tensor_map_record

try:
    from cuda.bindings import driver as cu
except ImportError:  # a machine without cuda-python still imports the runtime; Device() says why
    cu = None

# Above this much dynamic shared memory a function must opt in (cudaFuncSetAttribute).
DEFAULT_SHARED_BYTES = 48 * 1024
# Clusters of more than 8 CTAs are "non-portable" and must be allowed per function.
PORTABLE_CLUSTER_SIZE = 8


class DeviceError(RuntimeError):
    """A one-line error from the GPU side: no driver, no GPU, the wrong GPU, a CUDA error."""


def _driver():
    if cu is None:
        raise DeviceError("cuda-python is not installed (cuda.bindings.driver is missing): no GPU runtime")
    return cu


def _error_name(err) -> str:
    try:
        code, name = cu.cuGetErrorName(err)
        if code == cu.CUresult.CUDA_SUCCESS:
            return name.decode()
    except Exception:  # an unknown code has no name; the number is still useful
        pass
    return f"CUresult {int(err)}"


def check(result, what: str = "CUDA driver call"):
    """Unwrap a cuda.bindings result `(CUresult, *values)`: raise `DeviceError` naming the error,
    else return None, the one value, or the tuple of values."""
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != cu.CUresult.CUDA_SUCCESS:
        name = _error_name(err)
        if err == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            raise DeviceError(f"{what}: out of GPU memory ({name})")
        raise DeviceError(f"{what} failed: {name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


_initialized = False


def _init() -> None:
    global _initialized
    if _initialized:
        return
    driver = _driver()
    try:
        result = driver.cuInit(0)
    except Exception as exc:  # cuda.bindings raises when libcuda.so itself is missing
        raise DeviceError(f"no NVIDIA driver on this machine ({type(exc).__name__})") from None
    if result[0] == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        raise DeviceError("no CUDA GPU on this machine (cuInit: CUDA_ERROR_NO_DEVICE)")
    check(result, "cuInit")
    _initialized = True


def device_count() -> int:
    """The GPUs this process sees (a DeviceError where there is no driver or none)."""
    _init()
    return int(check(cu.cuDeviceGetCount(), "cuDeviceGetCount"))


class Device:
    """One GPU with its primary context made current. lanec's kernels are sm_90a cubins, so any
    other architecture is refused here rather than failing later at module load."""

    def __init__(self, ordinal: int = 0):
        _init()
        count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise DeviceError("no CUDA GPU on this machine")
        if not 0 <= ordinal < count:
            raise DeviceError(f"GPU {ordinal} does not exist: this machine has {count}")
        self.ordinal = ordinal
        self.handle = check(cu.cuDeviceGet(ordinal), "cuDeviceGet")
        self.name = check(cu.cuDeviceGetName(256, self.handle), "cuDeviceGetName").split(b"\0")[0].decode()
        attribute = cu.CUdevice_attribute
        self.capability = (self._attribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                           self._attribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        if self.capability != (9, 0):
            major, minor = self.capability
            raise DeviceError(f"GPU {ordinal} ({self.name}) is sm_{major}{minor}: lanec's kernels are built "
                              "for sm_90a (Hopper: H100, H200)")
        self.sm_count = self._attribute(attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self.context = check(cu.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def _attribute(self, attribute) -> int:
        return int(check(cu.cuDeviceGetAttribute(attribute, self.handle), "cuDeviceGetAttribute"))

    def free_bytes(self) -> int:
        free, _total = check(cu.cuMemGetInfo(), "cuMemGetInfo")
        return int(free)

    def persisting_l2_max(self) -> tuple[int, int]:
        """(the most L2 bytes this GPU sets aside for persisting lines, the widest access-policy
        window in bytes)."""
        attribute = cu.CUdevice_attribute
        return (self._attribute(attribute.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE),
                self._attribute(attribute.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE))

    def set_persisting_l2(self, nbytes: int) -> int:
        """Set this context's L2 set-aside for persisting lines (0 gives it back, and turns every
        persisting line normal); returns the size the driver took."""
        limit = cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
        if nbytes == 0:
            check(cu.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
        check(cu.cuCtxSetLimit(limit, int(nbytes)), "cuCtxSetLimit(persisting L2)")
        return int(check(cu.cuCtxGetLimit(limit), "cuCtxGetLimit(persisting L2)"))

    def __repr__(self) -> str:
        return f"Device({self.ordinal}: {self.name}, sm_{self.capability[0]}{self.capability[1]}, {self.sm_count} SMs)"


def synchronize() -> None:
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")


class Function:
    """One kernel entry of a module; remembers which opt-in attributes it already carries."""

    def __init__(self, handle, entry: str):
        self.handle = handle
        self.entry = entry
        self._shared_bytes = DEFAULT_SHARED_BYTES
        self._non_portable = False

    def resources(self) -> tuple[int, int]:
        """(registers a thread, local memory bytes a thread) as the loaded cubin has them: local bytes
        above 0 are spilled registers or a register array indexed at run time."""
        attribute = cu.CUfunction_attribute
        return tuple(check(cu.cuFuncGetAttribute(which, self.handle), f"{self.entry}: cuFuncGetAttribute")
                     for which in (attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES))

    def prepare(self, shape) -> None:
        """Set what a launch of `shape` needs: the dynamic shared memory opt-in above 48 KB, and
        non-portable cluster sizes above 8 CTAs."""
        if shape.shared_bytes > self._shared_bytes:
            check(cu.cuFuncSetAttribute(
                self.handle, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shape.shared_bytes), f"{self.entry}: {shape.shared_bytes} bytes of dynamic shared memory")
            self._shared_bytes = shape.shared_bytes
        if math.prod(shape.cluster) > PORTABLE_CLUSTER_SIZE and not self._non_portable:
            check(cu.cuFuncSetAttribute(
                self.handle, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                f"{self.entry}: cluster {shape.cluster}")
            self._non_portable = True


class Module:
    """A loaded cubin."""

    def __init__(self, cubin: bytes):
        self.handle = check(cu.cuModuleLoadData(bytes(cubin)), "loading a cubin (cuModuleLoadData)")
        self._functions: dict[str, Function] = {}

    def function(self, entry: str, shape=None) -> Function:
        if entry not in self._functions:
            handle = check(cu.cuModuleGetFunction(self.handle, entry.encode()),
                           f"kernel entry {entry!r} (cuModuleGetFunction)")
            self._functions[entry] = Function(handle, entry)
        function = self._functions[entry]
        if shape is not None:
            function.prepare(shape)
        return function

    def unload(self) -> None:
        if self.handle is not None:
            check(cu.cuModuleUnload(self.handle), "cuModuleUnload")
            self.handle = None


class Buffer:
    """Device memory: `ptr` is the address a kernel parameter carries."""

    def __init__(self, ptr: int, nbytes: int, handle):
        self.ptr = ptr
        self.nbytes = nbytes
        self._handle = handle

    @classmethod
    def empty(cls, nbytes: int) -> Buffer:
        # cuMemAlloc refuses 0 bytes; an empty tensor still needs a valid, distinct address
        handle = check(cu.cuMemAlloc(max(int(nbytes), 1)), f"allocating {int(nbytes)} bytes")
        return cls(int(handle), int(nbytes), handle)

    @classmethod
    def from_array(cls, array: np.ndarray) -> Buffer:
        buffer = cls.empty(np.asarray(array).nbytes)
        buffer.upload(array)
        return buffer

    def upload(self, array: np.ndarray) -> None:
        host = np.ascontiguousarray(array)
        if host.nbytes != self.nbytes:
            raise DeviceError(f"uploading {host.nbytes} bytes into a buffer of {self.nbytes}")
        if host.nbytes:
            synchronize()  # our streams are non-blocking: the copy must not overtake their work
            check(cu.cuMemcpyHtoD(self.ptr, host, host.nbytes), "cuMemcpyHtoD")

    def to_array(self, dtype, shape: Sequence[int]) -> np.ndarray:
        host = np.empty(tuple(shape), dtype=dtype)
        if host.nbytes != self.nbytes:
            raise DeviceError(f"reading {host.nbytes} bytes ({np.dtype(dtype).name} {tuple(shape)}) "
                              f"from a buffer of {self.nbytes}")
        synchronize()  # our streams are non-blocking: the copy must not overtake their work
        if host.nbytes:
            check(cu.cuMemcpyDtoH(host, self.ptr, host.nbytes), "cuMemcpyDtoH")
        return host

    def fill(self, byte: int) -> None:
        """Set every byte (0xFF poisons: it is NaN in bf16, f16 and f32)."""
        synchronize()
        if self.nbytes:
            check(cu.cuMemsetD8(self.ptr, byte & 0xFF, self.nbytes), "cuMemsetD8")
        synchronize()

    def zero(self, offset: int, nbytes: int) -> None:
        """Zero bytes [offset, offset + nbytes) (a state's slot before a new request reads it)."""
        if not 0 <= offset <= offset + nbytes <= self.nbytes:
            raise DeviceError(f"zeroing bytes [{offset}, {offset + nbytes}) of a buffer of {self.nbytes}")
        synchronize()
        if nbytes:
            check(cu.cuMemsetD8(self.ptr + offset, 0, nbytes), "cuMemsetD8")
        synchronize()

    def free(self) -> None:
        if self._handle is not None:
            check(cu.cuMemFree(self._handle), "cuMemFree")
            self._handle = None
            self.ptr = 0


class Stream:
    def __init__(self):
        self.handle = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")

    def synchronize(self) -> None:
        check(cu.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def destroy(self) -> None:
        if self.handle is not None:
            check(cu.cuStreamDestroy(self.handle), "cuStreamDestroy")
            self.handle = None


@dataclass(frozen=True)
class AccessWindow:
    """An L2 access-policy window of a launch: `hit_ratio` of the lines of [base, base + nbytes)
    that the launch touches persist in the context's L2 set-aside, the others stream."""

    base: int
    nbytes: int
    hit_ratio: float


def _launch_config(shape, stream: Stream | None, window: AccessWindow | None = None):
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (int(v) for v in shape.grid)
    config.blockDimX, config.blockDimY, config.blockDimZ = (int(v) for v in shape.block)
    config.sharedMemBytes = int(shape.shared_bytes)
    if stream is not None:
        config.hStream = stream.handle
    attributes = []
    if math.prod(shape.cluster) > 1:
        cluster = cu.CUlaunchAttribute()
        cluster.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        cluster.value.clusterDim.x, cluster.value.clusterDim.y, cluster.value.clusterDim.z = (
            int(v) for v in shape.cluster)
        attributes.append(cluster)
    if shape.pdl:
        pdl = cu.CUlaunchAttribute()
        pdl.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        pdl.value.programmaticStreamSerializationAllowed = 1
        attributes.append(pdl)
    if window is not None:
        policy = cu.CUlaunchAttribute()
        policy.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        held = cu.CUaccessPolicyWindow()
        held.base_ptr, held.num_bytes, held.hitRatio = int(window.base), int(window.nbytes), float(window.hit_ratio)
        held.hitProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        held.missProp = cu.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        policy.value.accessPolicyWindow = held
        attributes.append(policy)
    config.attrs = attributes
    config.numAttrs = len(attributes)
    return config


class Launch:
    """One kernel launch prepared once (config, parameter arrays) and enqueued many times: every
    parameter is an 8-byte device pointer, passed as cuLaunchKernelEx's array of pointers."""

    def __init__(self, function: Function, shape, pointers: Sequence[int], stream: Stream,
                 window: AccessWindow | None = None):
        try:
            LaunchShape.of(shape).check()
        except LaunchError as exc:
            raise DeviceError(f"{function.entry}: {exc}") from None
        function.prepare(shape)
        self.function = function
        self.shape = shape
        self.stream = stream
        self.window = window
        self._config = _launch_config(shape, stream, window)
        self._values = np.array([int(p) for p in pointers], dtype=np.uint64)
        base = self._values.ctypes.data
        self._addresses = np.array([base + 8 * i for i in range(len(self._values))], dtype=np.uint64)
        self._params = self._addresses.ctypes.data if len(self._values) else 0

    def enqueue(self) -> None:
        check(cu.cuLaunchKernelEx(self._config, self.function.handle, self._params, 0),
              f"launching {self.function.entry}")


def launch(function: Function, shape, pointers: Sequence[int], stream: Stream) -> None:
    Launch(function, shape, pointers, stream).enqueue()


class Graph:
    """A CUDA graph captured from the launches `fn` enqueues on `stream`."""

    def __init__(self, graph, executable):
        self._graph = graph
        self._executable = executable

    @classmethod
    def capture(cls, stream: Stream, fn: Callable[[], Any]) -> Graph:
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(cu.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        try:
            fn()
        except BaseException:
            cu.cuStreamEndCapture(stream.handle)  # leave the stream usable; the first error is the one to report
            raise
        graph = check(cu.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        executable = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        return cls(graph, executable)

    def replay(self, stream: Stream) -> None:
        check(cu.cuGraphLaunch(self._executable, stream.handle), "cuGraphLaunch")

    def destroy(self) -> None:
        if self._executable is not None:
            check(cu.cuGraphExecDestroy(self._executable), "cuGraphExecDestroy")
            check(cu.cuGraphDestroy(self._graph), "cuGraphDestroy")
            self._executable = None


def time_us(stream: Stream, fn: Callable[[], Any], repeats: int = 20, warmup: int = 3) -> float:
    """Median microseconds of `fn`'s work on `stream`, each repetition between two CUDA events."""
    if repeats < 1:
        raise DeviceError(f"time_us: repeats must be at least 1, not {repeats}")
    for _ in range(warmup):
        fn()
    flags = cu.CUevent_flags.CU_EVENT_DEFAULT
    start = check(cu.cuEventCreate(flags), "cuEventCreate")
    end = check(cu.cuEventCreate(flags), "cuEventCreate")
    try:
        times = []
        for _ in range(repeats):
            check(cu.cuEventRecord(start, stream.handle), "cuEventRecord")
            fn()
            check(cu.cuEventRecord(end, stream.handle), "cuEventRecord")
            check(cu.cuEventSynchronize(end), "cuEventSynchronize")
            times.append(float(check(cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")) * 1000.0)
    finally:
        cu.cuEventDestroy(start)
        cu.cuEventDestroy(end)
    return statistics.median(times)


def time_each_us(stream: Stream, launches: Sequence[Launch], repeats: int = 20, warmup: int = 3) -> list[float]:
    """Median microseconds of each launch in an eager replay of `launches` on `stream`: an event
    before each launch and one after the last, so launch i's time is the gap between its event and
    the next (with PDL a launch's gap includes its wait for the one before)."""
    if repeats < 1:
        raise DeviceError(f"time_each_us: repeats must be at least 1, not {repeats}")
    for _ in range(warmup):
        for launch in launches:
            launch.enqueue()
    flags = cu.CUevent_flags.CU_EVENT_DEFAULT
    events = [check(cu.cuEventCreate(flags), "cuEventCreate") for _ in range(len(launches) + 1)]
    try:
        samples: list[list[float]] = [[] for _ in launches]
        for _ in range(repeats):
            for event, launch in zip(events, launches, strict=False):
                check(cu.cuEventRecord(event, stream.handle), "cuEventRecord")
                launch.enqueue()
            check(cu.cuEventRecord(events[-1], stream.handle), "cuEventRecord")
            check(cu.cuEventSynchronize(events[-1]), "cuEventSynchronize")
            for i in range(len(launches)):
                ms = check(cu.cuEventElapsedTime(events[i], events[i + 1]), "cuEventElapsedTime")
                samples[i].append(float(ms) * 1000.0)
    finally:
        for event in events:
            cu.cuEventDestroy(event)
    return [statistics.median(times) for times in samples]


def copy_async(target: int, source: int, nbytes: int, stream: Stream) -> None:
    """Copy `nbytes` from device address `source` to `target` on `stream`."""
    check(cu.cuMemcpyDtoDAsync(target, source, nbytes, stream.handle), "cuMemcpyDtoDAsync")


def copy_2d_async(target: int, target_pitch: int, source: int, source_pitch: int, width: int, rows: int,
                  stream: Stream) -> None:
    """Copy `rows` rows of `width` bytes from device address `source` (rows `source_pitch` bytes
    apart) to `target` (rows `target_pitch` apart) on `stream`."""
    copy = cu.CUDA_MEMCPY2D()
    copy.srcMemoryType = copy.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    copy.srcDevice, copy.srcPitch = source, source_pitch
    copy.dstDevice, copy.dstPitch = target, target_pitch
    copy.WidthInBytes, copy.Height = width, rows
    check(cu.cuMemcpy2DAsync(copy, stream.handle), "cuMemcpy2DAsync")


def copy_bandwidth(stream: Stream, nbytes: int = 1 << 30, repeats: int = 10) -> float:
    """Bytes a second of a device-to-device copy of `nbytes` (read and written counted): the
    ceiling a memory-bound kernel's traffic is measured against."""
    source, target = Buffer.empty(nbytes), Buffer.empty(nbytes)
    try:
        source.fill(0)
        us = time_us(stream, lambda: copy_async(target.ptr, source.ptr, nbytes, stream), repeats=repeats)
    finally:
        source.free()
        target.free()
    return 2 * nbytes / (us * 1e-6)


def occupancy_clusters(function: Function, shape) -> int:
    """How many clusters of `shape` can be resident at once (0: the shape cannot launch)."""
    function.prepare(shape)
    return int(check(cu.cuOccupancyMaxActiveClusters(function.handle, _launch_config(shape, None)),
                     f"{function.entry}: cuOccupancyMaxActiveClusters"))


# cuTensorMapEncodeTiled's element types for the dtypes a tensor map reads
_MAP_DTYPES = {"bfloat16": "BFLOAT16", "float16": "FLOAT16", "float32": "FLOAT32", "int32": "INT32",
               "uint8": "UINT8", "int8": "UINT8"}


def encode_tensor_map(address: int, record: dict) -> bytes:
    """The 128-byte TMA tensor map (CUtensorMap) of a 2-D tensor at device `address`, as
    `record` (`launch.tensor_map_record`'s) describes it: its dtype, [rows, width] shape and row
    pitch, the box ([inner, outer] elements one copy moves) and the swizzle span in bytes.
    Out-of-bounds elements read as zeros; L2 promotion 256 bytes. The runtime uploads the bytes
    and passes their address (launch.py's `TensorParam.tensor_map`)."""
    driver = _driver()
    from lanec.runtime import dtypes

    itemsize = dtypes.storage(record["dtype"]).itemsize
    (rows, width), pitch = record["shape"], record["strides"][0]
    kind = getattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_MAP_DTYPES[record['dtype']]}")
    swizzle = getattr(driver.CUtensorMapSwizzle,
                      "CU_TENSOR_MAP_SWIZZLE_NONE" if not record["swizzle"] else
                      f"CU_TENSOR_MAP_SWIZZLE_{record['swizzle']}B")
    u32, u64 = driver.cuuint32_t, driver.cuuint64_t
    encoded = check(driver.cuTensorMapEncodeTiled(
        kind, 2, int(address), [u64(int(width)), u64(int(rows))], [u64(int(pitch) * itemsize)],
        [u32(int(b)) for b in record["box"]], [u32(1), u32(1)],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        f"encoding a tensor map of {rows}x{width} {record['dtype']} (box {record['box']})")
    return np.array([int(word) for word in encoded.opaque], dtype=np.uint64).tobytes()


class TensorMaps:
    """The tensor maps a set of launches reads, encoded on the host and uploaded into one device
    buffer (`TENSOR_MAP_BYTES` each, as aligned): `address(pointer, record)` gives a map's device
    address, and `upload()` writes them all once before the first launch."""

    def __init__(self, count: int):
        self.buffer = Buffer.empty(max(1, count) * TENSOR_MAP_BYTES)
        self.encoded: list[bytes] = []

    def address(self, pointer: int, record: dict) -> int:
        self.encoded.append(encode_tensor_map(pointer, record))
        return self.buffer.ptr + TENSOR_MAP_BYTES * (len(self.encoded) - 1)

    def pointers(self, params: Sequence, addresses: dict[str, int]) -> list[int]:
        """A launch's pointers for a kernel's `params` (`TensorParam`s, in entry order): each
        param's device address in `addresses`, a tensor-map param's the address of a map encoded
        over the address of the param it maps."""
        by_name = {p.name: p for p in params}
        return [addresses[p.name] if p.tensor_map is None else
                self.address(addresses[p.tensor_map["of"]], tensor_map_record(by_name[p.tensor_map["of"]], p))
                for p in params]

    def upload(self) -> None:
        data = b"".join(self.encoded).ljust(self.buffer.nbytes, b"\0")
        self.buffer.upload(np.frombuffer(data, dtype=np.uint8))

    def free(self) -> None:
        self.buffer.free()
