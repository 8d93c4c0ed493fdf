"""Walking the nested tuples, lists and dicts that tasks pass around (inputs, outputs, requests).
Standard library at import (torch is imported where a tensor is met), like arena/audit/reply_audit.py, its user."""


def map_leaves(value, fn):
    """The same nesting of tuples, lists and dicts, with `fn` applied to every other value."""
    if isinstance(value, tuple):
        return tuple(map_leaves(v, fn) for v in value)
    if isinstance(value, list):
        return [map_leaves(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_leaves(v, fn) for k, v in value.items()}
    return fn(value)


def clone_data(data):
    """Deep copy of the tensors in nested tuples/lists/dicts (what the submission gets)."""
    import torch
    return map_leaves(data, lambda x: x.clone() if isinstance(x, torch.Tensor) else x)


def copy_storages(data):
    """Deep copy in which every tensor keeps its memory layout: each distinct storage is copied once, whole,
    and each view rebuilt on the copy with its offset and strides (so views that shared memory still do, and
    memory past a view's end, such as the guard rows of `eval.py diagnose`, travels with it)."""
    import torch
    copies = {}

    def copy(x):
        if not isinstance(x, torch.Tensor):
            return x
        storage = x.untyped_storage()
        key = (str(x.device), storage.data_ptr(), storage.nbytes())
        if key not in copies:
            copies[key] = storage.clone()
        return torch.empty(0, dtype=x.dtype, device=x.device).set_(copies[key], x.storage_offset(), x.shape, x.stride())
    return map_leaves(data, copy)


def tensors_in(data, path: str = "data"):
    """(path, tensor) for every tensor in nested tuples/lists/dicts, the path written as Python indexing."""
    import torch
    if isinstance(data, torch.Tensor):
        yield path, data
    elif isinstance(data, (tuple, list)):
        for i, x in enumerate(data):
            yield from tensors_in(x, f"{path}[{i}]")
    elif isinstance(data, dict):
        for k, x in data.items():
            yield from tensors_in(x, f"{path}[{k!r}]")
