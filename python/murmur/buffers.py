"""Tensors and arrays as the (address, floats, device) triples murmur's C++ side takes, after the
checks that keep it from reading the wrong memory: float32, contiguous, on the CPU or a CUDA
device. A failed check is a TypeError or ValueError naming the tensor, never a crash."""


def _torch_buffer(t, what):
    import torch
    if t.dtype != torch.float32:
        kind = "floating" if t.is_floating_point() else "non-float"
        raise TypeError(f"{what}: a {kind} tensor of {t.dtype}; murmur averages float32 tensors "
                        f"(convert with .float())")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (shape {tuple(t.shape)}, strides "
                         f"{t.stride()}); pass t.contiguous() and copy the result back")
    if t.device.type == "cpu":
        device = -1
    elif t.device.type == "cuda":
        device = t.device.index if t.device.index is not None else torch.cuda.current_device()
    else:
        raise ValueError(f"{what}: a tensor on {t.device}; murmur takes cpu and cuda tensors")
    return (t.data_ptr(), t.numel(), device)


def _numpy_buffer(a, what):
    import numpy as np
    if a.dtype != np.float32:
        raise TypeError(f"{what}: an array of {a.dtype}; murmur averages float32 arrays "
                        f"(convert with .astype(numpy.float32))")
    if not a.flags["C_CONTIGUOUS"]:
        raise ValueError(f"{what}: the array is not contiguous; pass numpy.ascontiguousarray(a) "
                         "and copy the result back")
    if not a.flags["WRITEABLE"]:
        raise ValueError(f"{what}: the array is read-only")
    return (a.ctypes.data, a.size, -1)


def as_buffer(x, what):
    """(address, floats, device) of a torch tensor or numpy array; device -1 is host memory."""
    kind = type(x).__module__.split(".")[0]
    if kind == "torch":
        return _torch_buffer(x, what)
    if kind == "numpy":
        return _numpy_buffer(x, what)
    raise TypeError(f"{what}: a {type(x).__name__}; murmur takes torch tensors and numpy arrays")
