"""Walking the nested tuples, lists and dicts that tasks pass around (inputs, outputs, requests)."""
import torch


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
    return map_leaves(data, lambda x: x.clone() if isinstance(x, torch.Tensor) else x)
