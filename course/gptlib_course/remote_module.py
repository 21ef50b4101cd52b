"""A submission's nn.Module as the judge's checkers see it: a mirror in the judge whose forward runs in the
submission's confined process (the build track of notebook 09: `build_track.check_mlp(MLP)` and the others).

The submission's process keeps each module its calls return and describes it (inside/remote_module.py,
which states the protocol both sides speak and its bounds); here, the judge's side, `Link.mirror` builds a
`RemoteModule` tree from that description: the same submodules in the same order under the same names,
of the same container kinds, each holding local parameters of the remote's names, shapes, dtypes and
values, shared where the remote's are. The checker reads and writes these local parameters as it would
the module's own; calling any node of the mirror runs the submission's forward of that submodule, and
`Link.request` sends the parameters the checker changed since the last exchange.

Everything from the submission is untrusted: Link.mirror and Link.received accept only the protocol's layout
(exact types, names of at most NAME characters without a dot, at most NODES submodules and PARAMETERS
tensors, TENSOR_ELEMENTS entries in all, floating dtypes only, each value of exactly the shape and dtype
declared, for a handle and slot the judge asked about) and raise ValueError otherwise, which the judge turns
into that case's zero with the reason. No buffer is mirrored: the build checkers read and write parameters only.
"""

from __future__ import annotations

import torch
from torch import nn

from .inside.remote_module import DTYPES, KINDS, NAME, NODES, PARAMETERS, TENSOR_ELEMENTS


class RemoteModule(nn.Module):
    """One node of a submission's module: its parameters are the judge's; calling it runs the submission's forward
    of that node, in its process (Link.forward)."""

    def __init__(self, link: "Link", handle: int, node: int):
        nn.Module.__init__(self)  # not a container's __init__: the children are added by Link.mirror
        self._gptlib_remote = (link, handle, node)

    def forward(self, *args):
        link, handle, node = self._gptlib_remote
        return link.forward(handle, node, args)

    def extra_repr(self) -> str:
        return "a submission's module, run in its process"


PROXIES = {"Module": RemoteModule, **{name: type(f"Remote{name}", (RemoteModule, cls), {})
                                      for name, cls in KINDS.items() if name != "Module"}}


class Mirror:
    """The judge's copy of one module of the submission's: its nodes, its distinct parameters, and their values
    as last exchanged."""

    def __init__(self, nodes: list[RemoteModule], parameters: list[nn.Parameter]):
        self.nodes, self.parameters = nodes, parameters
        self.synced = [p.detach().clone() for p in parameters]

    def updates(self) -> dict[int, torch.Tensor]:
        found = {}
        for slot, parameter in enumerate(self.parameters):
            if not torch.equal(parameter.detach(), self.synced[slot]):
                found[slot] = self.synced[slot] = parameter.detach().clone()
        return found


def _name(name) -> str:
    if not (type(name) is str and 0 < len(name) <= NAME and "." not in name and name.isprintable()):
        raise ValueError("a submodule or parameter name that is not a short printable name without a dot")
    return name


def _index(value, size: int) -> int:
    if type(value) is not int or not 0 <= value < size:
        raise ValueError("an index out of its range")
    return value


def _tensor(value, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    """A tensor of the submission's, as a fresh local tensor, if it is exactly of the dtype and shape declared."""
    if not (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device.type == "cpu"
            and value.dtype == dtype and tuple(value.shape) == shape):
        raise ValueError("a parameter's value that is not a tensor of the shape and dtype the module declared")
    return torch.empty(shape, dtype=dtype).copy_(value.detach())


class Link:
    """The judge's side of one submission process's modules: the mirrors by handle. `calls(kind, target, args)`
    is the judge's own round trip (judge.remote_call), through which every mirror's forward goes."""

    def __init__(self, calls):
        self.calls = calls
        self.mirrors: dict[int, Mirror] = {}

    def forward(self, handle: int, node: int, args: tuple):
        return self.calls(self, "forward", (handle, node), args)

    def request(self, kind: str, target, args: tuple) -> tuple[tuple, list[int]]:
        """The message for a call (kind "call": target a function's name; "forward": (handle, node)) and the
        handles whose parameters it exchanges: the forwarded module's and those among the arguments."""
        sent, handles = [], [target[0]] if kind == "forward" else []
        for arg in args:
            if isinstance(arg, RemoteModule):
                remote = arg._gptlib_remote
                if remote[0] is not self:
                    raise ProcessLookupError("the process that built this module has ended")
                sent.append(("module", *remote[1:]))
                handles.append(remote[1])
            else:
                sent.append(("value", arg))
        handles = list(dict.fromkeys(handles))
        state = {"updates": {h: u for h in handles if (u := self.mirrors[h].updates())},
                 "modes": {h: [n.training for n in self.mirrors[h].nodes] for h in handles},
                 "dtype": str(torch.get_default_dtype()).removeprefix("torch."), "grad": torch.is_grad_enabled(),
                 "rng": torch.random.get_rng_state()}
        return (kind, target, tuple(sent), state), handles

    def received(self, reply: tuple, handles: list[int]) -> tuple:
        """The reply without its changes, which are copied into the mirrors asked about; a "module" reply
        becomes ("return", its mirror). ValueError if any of it is not as the protocol says."""
        if len(reply) < 2 or type(reply[-1]) is not dict:
            raise ValueError("a reply without its parameter changes")
        *reply, changes = reply
        for handle, values in changes.items():
            if handle not in handles or type(values) is not dict:
                raise ValueError("changes to a module the grader did not ask about")
            mirror = self.mirrors[handle]
            for slot, value in values.items():
                parameter = mirror.parameters[_index(slot, len(mirror.parameters))]
                local = _tensor(value, parameter.dtype, tuple(parameter.shape))
                with torch.no_grad():
                    parameter.copy_(local)
                mirror.synced[slot] = local
        if reply[0] == "module":
            if not (len(reply) == 2 and type(reply[1]) is tuple and len(reply[1]) == 2 and type(reply[1][0]) is int
                    and reply[1][0] not in self.mirrors):
                raise ValueError("a module without a new handle")
            return "return", self.mirror(*reply[1])
        return tuple(reply)

    def mirror(self, handle: int, tree) -> RemoteModule:
        """The RemoteModule tree a module's description (ModuleServer.described) declares, checked entry by entry."""
        if type(tree) is not dict or set(tree) != {"nodes", "parameters", "values"}:
            raise ValueError("a module description of another layout")
        nodes, layout, values = tree["nodes"], tree["parameters"], tree["values"]
        if not (type(nodes) is list and type(layout) is list and type(values) is list and 0 < len(nodes) <= NODES
                and len(layout) == len(values) <= PARAMETERS):
            raise ValueError("a module description of another layout or too large")
        parameters, elements = [], 0
        for entry, value in zip(layout, values):
            if not (type(entry) is tuple and len(entry) == 3 and entry[0] in DTYPES and type(entry[1]) is tuple
                    and type(entry[2]) is bool and all(type(n) is int and 0 <= n <= TENSOR_ELEMENTS for n in entry[1])
                    and len(entry[1]) <= 8):
                raise ValueError("a parameter declared with an unreadable dtype or shape")
            elements += torch.Size(entry[1]).numel()
            if elements > TENSOR_ELEMENTS:
                raise ValueError(f"a module of more than {TENSOR_ELEMENTS:,} parameter entries")
            parameters.append(nn.Parameter(_tensor(value, DTYPES[entry[0]], entry[1]), requires_grad=entry[2]))
        described = []
        for node in nodes:
            if not (type(node) is tuple and len(node) == 3 and node[0] in PROXIES and type(node[1]) is list
                    and type(node[2]) is list and all(type(e) is tuple and len(e) == 2 for e in node[1] + node[2])):
                raise ValueError("a submodule described in another layout")
            described.append((node[0], [(_name(n), _index(i, len(nodes))) for n, i in node[1]],
                              [(_name(n), _index(s, len(parameters))) for n, s in node[2]]))
        proxies = [PROXIES[kind](self, handle, i) for i, (kind, _, _) in enumerate(described)]
        try:
            for proxy, (_, children, own) in zip(proxies, described):
                for name, i in children:
                    proxy.add_module(name, proxies[i])
                for name, slot in own:
                    proxy.register_parameter(name, parameters[slot])
        except (KeyError, TypeError) as error:  # a name torch refuses (an attribute of nn.Module's, twice the same)
            raise ValueError(f"a module whose names cannot be mirrored ({type(error).__name__})") from None
        self.mirrors[handle] = Mirror(proxies, parameters)
        return proxies[0]
