"""Walking the nested tuples, lists and dicts that tasks pass around (inputs, outputs, requests).
Standard library at import (torch is imported where a tensor is met), like arena/integrity.py, its user."""


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
