"""Remote inference for RL: sample from OpenAI-compatible servers, push new weights over HTTP.

``RemoteSampler`` is a ``Sampler`` (see ``verigym.scale.sampler``) over one or more servers —
``verigym serve``, vLLM (``--enable-lora``, ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=1``, and
``return_token_ids``) or SGLang — reached through ``OpenAIPolicy``. No NCCL: weights travel as files.

- **LoRA** (the trainer trains an adapter): after each update the adapter is saved to
  ``push_dir/v000007`` and loaded on every server with ``POST /v1/load_lora_adapter`` under the
  name ``{served_name}-v7``; the producer then requests that name. The server echoes the name in
  each response, so every completion's version is read off the response, never assumed; a
  completion whose name does not parse is an error (the sample is dropped, never trained on).
  Once the producer moved to a version, older adapters are unloaded (nothing asks for them again).
- **Checkpoint** (full fine-tuning): the model is saved with ``save_pretrained`` and every server
  reloads it with ``POST /update_weights_from_disk`` (``{"model_path", "version"}``, as SGLang; also
  in ``verigym serve``). The reload happens at the producer's step boundary, when no request is in
  flight, and the server answers with the version it now serves — so again the version of every
  completion is known.

Failed pushes are retried with exponential backoff; when the retries run out the run stops with
``WeightPushError`` rather than sample from weights of an unknown version.

``api_key`` goes with every request, sampling and pushes alike, as ``Authorization: Bearer``
(``verigym serve --api-key``, vLLM's ``--api-key``); ``verigym train --remote`` takes it from the
environment variable ``API_KEY_ENV`` (``VERIGYM_API_KEY``). A ``verigym serve`` that receives pushes
needs ``--allow-adapter-loading DIR`` with the push directory inside ``DIR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Unpack

import httpx

from verigym.policies.base import PolicyArgs, PolicyError
from verigym.policies.openai import OpenAIPolicy
from verigym.policies.spec import ModelSpec, served_policy
from verigym.types import Completion, Message

__all__ = ["API_KEY_ENV", "RemoteSampler", "VersionedPolicy", "WeightPushError", "server_root"]

API_KEY_ENV = "VERIGYM_API_KEY"  # where ``verigym train --remote`` finds the servers' key

WeightMode = Literal["auto", "lora", "checkpoint"]


class WeightPushError(RuntimeError):
    """New weights could not be pushed to a server (after the retries)."""


def server_root(base_url: str) -> str:
    """``http://h:8000/v1`` → ``http://h:8000`` (weight endpoints live beside ``/v1``)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class VersionedPolicy:
    """An ``OpenAIPolicy`` whose completions carry the policy version that produced them."""

    def __init__(self, inner: OpenAIPolicy, served_name: str) -> None:
        self.inner = inner
        self.served_name = served_name
        self.version = 0
        self.mode: WeightMode = "lora"
        self._pattern = re.compile(re.escape(served_name) + r"-v(\d+)$")

    @property
    def name(self) -> str:
        return self.served_name

    async def aclose(self) -> None:
        """Close the wrapped policy (every policy has ``aclose``)."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    def _tag(self, c: Completion, version: int) -> Completion:
        if self.mode == "lora":
            found = self._pattern.search(c.model or "")
            if found is None:
                raise PolicyError(
                    "unknown_version",
                    f"the server answered as model {c.model!r}: no policy version in the name",
                )
            version = int(found.group(1))
        return c.model_copy(update={"policy_version": version})

    async def complete(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> Completion:
        version = self.version
        return self._tag(await self.inner.complete(messages, **kw), version)

    async def complete_n(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> list[Completion]:
        version = self.version
        out = await self.inner.complete_n(messages, **kw)
        return [self._tag(c, version) for c in out]


class RemoteSampler:
    """Sample from ``base_urls``; push each new version as a LoRA adapter or a checkpoint (module doc)."""

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        push_dir: str | Path,
        served_name: str = "verigym-policy",
        weights: WeightMode = "auto",
        retries: int = 5,
        backoff_s: float = 0.5,
        api_key: str | None = None,
        concurrency: int = 64,
        timeout: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("RemoteSampler needs at least one server URL")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.push_dir = Path(push_dir)
        self.weights = weights
        self.retries = retries
        self.backoff_s = backoff_s
        self.api_key = api_key
        self.timeout = timeout
        self.pushes = 0
        self.push_retries = 0
        self._transport = transport
        spec = ModelSpec(
            model=f"{served_name}-v0",
            base_url=self.base_urls,
            api_key=api_key,
            concurrency=concurrency,
            timeout=timeout,
        )
        self._policy = VersionedPolicy(served_policy(spec), served_name)
        self._tokenizer: Any = None
        self._pending: int | None = None
        self._published: list[int] = []  # versions whose files (and adapters) exist

    @property
    def policy(self) -> VersionedPolicy:
        return self._policy

    @property
    def version(self) -> int:
        return self._policy.version

    # ---- HTTP ------------------------------------------------------------------------------------------

    async def _post(self, client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        for attempt in range(self.retries + 1):
            try:
                resp = await client.post(url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    return resp
                reason = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code in (400, 401, 403, 404, 405, 422):
                    break  # the server will not change its mind
            if attempt < self.retries:
                self.push_retries += 1
                await asyncio.sleep(self.backoff_s * 2**attempt)
        raise WeightPushError(f"{url}: {reason}")

    async def _post_all(self, path: str, body: dict[str, Any]) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client:
            return list(
                await asyncio.gather(
                    *(self._post(client, server_root(u) + path, body) for u in self.base_urls)
                )
            )

    # ---- the Sampler protocol ----------------------------------------------------------------------------

    async def start(self, model: Any, tokenizer: Any, version: int) -> None:
        self._tokenizer = tokenizer
        is_lora = hasattr(model, "peft_config")
        mode = self.weights if self.weights != "auto" else ("lora" if is_lora else "checkpoint")
        if mode == "lora" and not is_lora:
            raise WeightPushError("weights = 'lora' needs a LoRA model ([model.lora] in the config)")
        self._policy.mode = mode
        if mode == "checkpoint":  # requests name the server's own model; the version is the one loaded
            models = await self._policy.inner.check()
            if not models:
                raise WeightPushError(f"{self.base_urls[0]}: lists no model")
            self._policy.inner.model = models[0]
        await self.publish(model, version)
        await self.advance()

    async def publish(self, model: Any, version: int) -> None:
        path = self.push_dir / f"v{version:06d}"

        def save() -> None:
            shutil.rmtree(path, ignore_errors=True)
            model.save_pretrained(path)
            if self._policy.mode == "checkpoint":
                self._tokenizer.save_pretrained(path)

        await asyncio.to_thread(save)
        if self._policy.mode == "lora":  # loading a new name does not disturb requests for older ones
            name = f"{self._policy.served_name}-v{version}"
            await self._post_all(
                "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())}
            )
            self.pushes += 1
        self._published.append(version)
        self._pending = version

    async def advance(self) -> None:
        if self._pending is None:
            return
        version, self._pending = self._pending, None
        if self._policy.mode == "checkpoint":
            path = str((self.push_dir / f"v{version:06d}").resolve())
            for resp in await self._post_all(
                "/update_weights_from_disk", {"model_path": path, "version": version}
            ):
                served = _served_version(resp)
                if served is not None and served != version:
                    raise WeightPushError(f"{resp.url}: serves version {served} after loading {version}")
            self.pushes += 1
        if self._policy.mode == "lora":
            self._policy.inner.model = f"{self._policy.served_name}-v{version}"
        self._policy.version = version
        await self._forget([v for v in self._published if v < version])

    async def _forget(self, versions: list[int]) -> None:
        for v in versions:
            self._published.remove(v)
            if self._policy.mode == "lora":
                name = f"{self._policy.served_name}-v{v}"
                with contextlib.suppress(WeightPushError):  # a leftover adapter costs memory, not correctness
                    await self._post_all("/v1/unload_lora_adapter", {"lora_name": name})
            shutil.rmtree(self.push_dir / f"v{v:06d}", ignore_errors=True)

    async def aclose(self) -> None:
        """End of the run (or an error): unload every adapter this run pushed, so the servers are left
        as they were found; then close the client."""
        try:
            if self._policy.mode == "lora":
                for v in list(self._published):
                    self._published.remove(v)
                    with contextlib.suppress(WeightPushError, httpx.HTTPError):
                        await self._post_all(
                            "/v1/unload_lora_adapter", {"lora_name": f"{self._policy.served_name}-v{v}"}
                        )
        finally:
            await self._policy.inner.aclose()


def _served_version(resp: httpx.Response) -> int | None:
    try:
        data = resp.json()
    except ValueError:
        return None
    v = data.get("version") if isinstance(data, dict) else None
    return int(v) if isinstance(v, int) else None
