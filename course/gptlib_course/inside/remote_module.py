"""A submission's nn.Module served to the judge: the submission's half of a module's mirror, and the protocol.

When a call of the submission's function (a class is one: `MLP(d, d_ff)`) returns an nn.Module, the
submission's process keeps the module under a handle and describes it (ModuleServer.described); the
judge builds a mirror from that description (remote_module.py, on the host): the same submodules in the
same order under the same names, of the same container kinds (KINDS: nn.ModuleList, nn.ModuleDict,
nn.Sequential, and nn.Embedding, the only kinds the build checkers test for), each holding local
parameters of the remote's names, shapes, dtypes and values, shared where the remote's are (a tied
W_U = E^T). Calling any node of the mirror runs the submission's forward of that submodule:

    judge -> submission  ("forward", (handle, node), args, state)       pickled (the judge is trusted)
                         ("call", name, args, state)                    a function's call; a mirror among
                                                                         args is sent as its handle
                         state: {"updates": {handle: {slot: tensor}},   parameters the judge changed since
                                                                         the last exchange
                                 "modes": {handle: [bool per node]},    the nodes' training flags
                                 "dtype", "grad", "rng"}                the checker's default dtype, grad
                                                                         mode and torch's generator state
    submission -> judge  (*reply, changes)                              torch.save, read with
                                                                         torch.load(weights_only=True)
                         reply: ("return", value) | ("module", (handle, tree)) | ("unsendable", what)
                                | ("raise", kind, message, stub)
                         changes: {handle: {slot: tensor}}              parameters the call changed (an
                                                                         init_weights(model) writes them)

Both sides keep the values last exchanged, so each call sends only what changed since (the checker's random
weights once per module, not on every forward), and the submission compares after each call, so a
forward or a function that writes the module's parameters is seen by the checker as in the learner's own
kernel. The submission's side (zygote.py) sets the checker's global state before each call (within
checking.global_state_kept), so its code runs as it would under the checker in its own kernel.
The bounds below hold on both sides: the judge refuses a description or a value beyond them.
"""

from __future__ import annotations

import torch
from torch import nn

from .plain import plain_tensor

NODES = 4096  # submodules of one module
PARAMETERS = 4096  # distinct parameters of one module
TENSOR_ELEMENTS = 2**23  # entries of all of one module's parameters (32 MiB in float32)
NAME = 100  # characters of a submodule's or parameter's name
DTYPES = {str(t).removeprefix("torch."): t for t in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}
KINDS = {"Module": nn.Module, "ModuleList": nn.ModuleList, "ModuleDict": nn.ModuleDict, "Sequential": nn.Sequential,
         "Embedding": nn.Embedding}  # the container kinds the build checkers test with isinstance, most specific last


def _kind(module: nn.Module) -> str:
    return next(name for name, cls in reversed(KINDS.items()) if isinstance(module, cls))


class ModuleServer:
    """The modules the submission's calls returned, by handle: their nodes, their distinct parameters and the
    parameters' values as last exchanged with the judge."""

    def __init__(self):
        self.modules: list[tuple[list[nn.Module], list[torch.Tensor], list[torch.Tensor]]] = []

    def described(self, module: nn.Module) -> tuple:
        """("module", handle, tree): the module read as the checkers read one (named_children,
        named_parameters(recurse=False)), kept under a new handle."""
        nodes, index, slots, slot_of, tree = [module], {id(module): 0}, [], {}, []
        for node in nodes:  # breadth first; `nodes` grows as children are found
            children, parameters = [], []
            for name, child in node.named_children():
                if id(child) not in index:
                    index[id(child)] = len(nodes)
                    nodes.append(child)
                children.append((str(name), index[id(child)]))
            for name, parameter in node.named_parameters(recurse=False):
                if id(parameter) not in slot_of:
                    slot_of[id(parameter)] = len(slots)
                    slots.append(parameter)
                parameters.append((str(name), slot_of[id(parameter)]))
            tree.append((_kind(node), children, parameters))
            if len(nodes) > NODES or len(slots) > PARAMETERS:
                raise ValueError(f"a module of more than {NODES} submodules or {PARAMETERS} parameters")
        values = [plain_tensor(p) for p in slots]
        if sum(v.numel() for v in values) > TENSOR_ELEMENTS:
            raise ValueError(f"a module of more than {TENSOR_ELEMENTS:,} parameter entries")
        unread = sorted({str(v.dtype) for v in values} - {f"torch.{name}" for name in DTYPES})
        if unread:
            raise ValueError(f"a module with parameters of dtype {unread[0]}, which the grader does not read")
        self.modules.append((nodes, slots, [v.clone() for v in values]))
        layout = [(str(v.dtype).removeprefix("torch."), tuple(v.shape), bool(p.requires_grad)) for v, p in zip(values, slots)]
        return "module", len(self.modules) - 1, {"nodes": tree, "parameters": layout, "values": values}

    def node(self, handle: int, node: int) -> nn.Module:
        return self.modules[handle][0][node]

    def arguments(self, args: tuple, state: dict) -> list:
        """The call's arguments, each ("module", handle, node) a module of the submission's; the judge's parameter
        values and training flags loaded first."""
        with torch.no_grad():
            for handle, values in state["updates"].items():
                _, slots, synced = self.modules[handle]
                for slot, value in values.items():
                    slots[slot].copy_(value)
                    synced[slot] = plain_tensor(slots[slot])
        for handle, flags in state["modes"].items():
            for node, flag in zip(self.modules[handle][0], flags):
                node.training = flag
        return [self.node(*arg[1:]) if arg[0] == "module" else arg[1] for arg in args]

    def changes(self, handles) -> dict:
        """{handle: {slot: value}}: the parameters of `handles` whose values differ from those last exchanged."""
        found = {}
        for handle in handles:
            _, slots, synced = self.modules[handle]
            for slot, parameter in enumerate(slots):
                value = torch.Tensor.detach(parameter).as_subclass(torch.Tensor)  # a view: copied only if it changed
                if not (value.shape == synced[slot].shape and value.dtype == synced[slot].dtype
                        and torch.equal(value, synced[slot])):
                    found.setdefault(handle, {})[slot] = synced[slot] = value.clone()
        return found
