"""Samplers: where the asynchronous RL loop generates, and how new weights reach it.

A ``Sampler`` owns the policy the producer samples with and the version of the weights behind it.
The trainer calls ``publish(version)`` right after an update (capture or push the new weights);
the producer calls ``advance()`` between steps, when no request is in flight, to switch to the
newest published version. So every completion of one step comes from one known version, which
the sampler writes into ``Completion.policy_version``.

``InProcessSampler`` keeps a second copy of the model in this process (generation and the update
then run at the same time on two threads); ``verigym.scale.remote.RemoteSampler`` samples from
OpenAI-compatible servers and pushes weights over HTTP.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from verigym.policies.base import Policy

__all__ = ["InProcessSampler", "Sampler"]


class Sampler(Protocol):
    """What the asynchronous loop needs from a generation engine."""

    @property
    def policy(self) -> Policy: ...

    @property
    def version(self) -> int: ...

    async def start(self, model: Any, tokenizer: Any, version: int) -> None:
        """Serve ``model``'s current weights as ``version`` (called once, before the first step)."""

    async def publish(self, model: Any, version: int) -> None:
        """New weights exist (called by the trainer right after the update that made ``version``)."""

    async def advance(self) -> None:
        """Switch to the newest published version (called by the producer between steps)."""

    async def aclose(self) -> None: ...


class InProcessSampler:
    """A ``LocalPolicy`` over a private copy of the trainer's model, synced at step boundaries.

    Only the trainable parameters are copied (the LoRA adapter when training one), so a push costs
    a memory copy of what changed.
    """

    def __init__(self, name: str = "policy", *, tool_format: str | None = None) -> None:
        self.name = name
        self.tool_format = tool_format  # the trainer's (``[model] tool_format``; None: the tokenizer's)
        self._policy: Any = None
        self._pending: tuple[int, dict[str, Any]] | None = None

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise RuntimeError("InProcessSampler.start() was not called")
        policy: Policy = self._policy
        return policy

    @property
    def version(self) -> int:
        return 0 if self._policy is None else int(self._policy.version)

    async def start(self, model: Any, tokenizer: Any, version: int) -> None:
        from verigym.policies.local import LocalPolicy

        # requires_grad stays as it is: freezing changes CPU kernels' float round-off, and with
        # max_staleness 0 the samples must match the synchronous loop's to the bit
        clone = copy.deepcopy(model).eval()
        self._policy = LocalPolicy(clone, tokenizer, name=self.name, tool_format=self.tool_format)
        self._policy.version = version

    async def publish(self, model: Any, version: int) -> None:
        snapshot = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        self._pending = (version, snapshot)

    async def advance(self) -> None:
        if self._pending is None:
            return
        import torch

        version, snapshot = self._pending
        self._pending = None
        policy = self._policy

        def copy_in(model: Any) -> None:  # under the policy's lock: never during a generation pass
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, value in snapshot.items():
                    params[name].copy_(value)
            policy.version = version

        policy.swap_weights(copy_in)

    async def aclose(self) -> None:
        self._policy = None
