"""Weights loaded at run time in ``verigym serve``: vLLM's ``POST /v1/load_lora_adapter`` and
``/v1/unload_lora_adapter``, SGLang's ``POST /update_weights_from_disk``, and where they may read from.

All three are off unless the operator names a directory (``--allow-adapter-loading DIR``): then a
path is taken relative to that directory (an absolute path as it is), every symlink resolved, and a
path that does not end up inside the directory (``..``, a symlink out, ``/etc``) gets 403 without
being opened; the files of the named directory must resolve inside it too. With no directory, every
call gets 403 and the server reads nothing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response

from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy
from verigym.policies.local.lora import base_model
from verigym.serve._wire import ApiError, LoadLoraRequest, UnloadLoraRequest

__all__ = ["AdapterDir", "add_weight_routes"]


class AdapterDir:
    """The one directory run-time weight loading may read from (None: loading is off)."""

    def __init__(self, root: str | Path | None) -> None:
        self.root = None if root is None else os.path.realpath(root)
        if self.root is not None and not os.path.isdir(self.root):
            raise ValueError(f"the adapter directory {str(root)!r} is not a directory")

    def enabled(self, what: str, param: str) -> str:
        """The root; a 403 when loading is off."""
        if self.root is None:
            raise ApiError(
                403,
                f"{what} is turned off on this server (start verigym serve with "
                "--allow-adapter-loading DIR to allow it for paths inside DIR); nothing was read",
                param=param,
                code="adapter_loading_disabled",
            )
        return self.root

    def resolve(self, path: str, what: str, param: str) -> str:
        """``path`` (relative to the root, or absolute) with every symlink resolved; a 403 unless it and
        the entries of the directory it names lie inside the root."""
        root = self.enabled(what, param)
        try:
            real = os.path.realpath(os.path.join(root, path))
            inside = _inside(real, root)
            if inside and os.path.isdir(real):
                inside = all(_inside(os.path.realpath(e.path), root) for e in os.scandir(real))
        except (ValueError, OSError) as exc:  # a NUL byte, an unreadable directory
            raise ApiError(400, f"{param} {path!r}: {exc}", param=param) from None
        if not inside:
            raise ApiError(
                403,
                f"{param} {path!r} is outside the directory this server loads weights from "
                "(--allow-adapter-loading); it was not opened",
                param=param,
                code="path_not_allowed",
            )
        return real


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def add_weight_routes(app: FastAPI, policy: LocalPolicy, served_name: str, adapter_dir: AdapterDir) -> None:
    """The three weight endpoints of the module doc on ``app``."""

    @app.post("/v1/load_lora_adapter")
    async def load_lora(req: LoadLoraRequest) -> Response:
        path = adapter_dir.resolve(req.lora_path, "loading LoRA adapters", "lora_path")
        if req.lora_name == served_name:
            raise ApiError(400, f"{req.lora_name!r} is the base model's name", param="lora_name")
        try:
            await asyncio.to_thread(policy.load_adapter, path, req.lora_name)
        except PolicyError as exc:
            raise ApiError(
                404 if exc.kind == "adapter_not_found" else 400,
                str(exc).replace(path, req.lora_path),  # the client's own spelling, not the resolved path
                param="lora_path",
            ) from None
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(req: UnloadLoraRequest) -> Response:
        adapter_dir.enabled("unloading LoRA adapters", "lora_name")
        try:
            await asyncio.to_thread(policy.unload_adapter, req.lora_name)
        except PolicyError as exc:
            raise ApiError(404, str(exc), param="lora_name", code="model_not_found") from None
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    @app.post("/update_weights_from_disk")
    async def update_weights(req: dict[str, Any]) -> dict[str, Any]:
        """SGLang's endpoint: reload the base weights from ``model_path`` (``save_pretrained``); a trainer
        pushing full checkpoints names the ``version``, echoed here and in ``Completion.policy_version``."""
        path, version = req.get("model_path"), req.get("version")
        if not isinstance(path, str) or not (version is None or isinstance(version, int)):
            raise ApiError(400, "expected {model_path: str, version?: int}", param="model_path")
        real = adapter_dir.resolve(path, "loading weights", "model_path")
        if not os.path.isdir(real):
            raise ApiError(404, f"cannot load weights from {path!r}: no such directory", param="model_path")
        try:
            await asyncio.to_thread(_reload, policy, real)
        except (OSError, ValueError, RuntimeError) as exc:
            message = str(exc).replace(real, path)
            raise ApiError(400, f"cannot load weights from {path!r}: {message}", param="model_path") from None
        if version is not None:
            policy.version = version
        return {"success": True, "message": f"loaded {path}", "version": policy.version}


def _reload(policy: LocalPolicy, path: str) -> None:
    from transformers import AutoModelForCausalLM

    state = AutoModelForCausalLM.from_pretrained(path).state_dict()
    model = base_model(policy.model)
    target = model.state_dict()
    for key in [k for k in state if k not in target]:  # LoRA adapters loaded here wrap base layers
        head, _, leaf = key.rpartition(".")
        state[f"{head}.base_layer.{leaf}"] = state.pop(key)
    missing = [k for k in target if k not in state and ".lora_" not in k]
    if missing or any(k not in target for k in state):
        raise ValueError(f"the weights do not fit the served model (e.g. {(missing or list(state))[0]})")
    policy.swap_weights(lambda _: model.load_state_dict(state, strict=False))  # not during a pass
