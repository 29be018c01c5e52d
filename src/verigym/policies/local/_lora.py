"""LoRA adapters on a ``LocalPolicy`` (peft): load, switch per pass, unload, without reloading the base.

Adapters are loaded with peft's own API: the first one wraps the plain model in a ``peft.PeftModel``
and unloading the last one unwraps it again. transformers' peft integration (``model.load_adapter``)
is not used: transformers 5.24 refuses every peft the registry serves (it asks for >= 0.22) there, while
``PeftModel`` works with both. A ``PeftModel`` a trainer passes in is used as it is and never unwrapped,
and a model that already carries integration adapters still switches through them. ``AS_IS`` means
"leave the model's adapter state untouched".
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verigym.policies.base import PolicyError

__all__ = ["AS_IS", "AdapterMixin", "base_model"]

AS_IS = "<model as it is>"  # adapter sentinel: leave the model's adapter state untouched


def base_model(model: Any) -> Any:
    """The ``transformers`` model under a ``PeftModel`` (its LoRA layers in place), else ``model``."""
    from peft import PeftModel

    return model.get_base_model() if isinstance(model, PeftModel) else model


class AdapterMixin:
    """The adapter half of ``LocalPolicy``."""

    model: Any
    _adapter: str | None
    _lock: threading.RLock
    _wrapped = False  # True while ``model`` is a PeftModel that ``load_adapter`` made (so unwrap it again)

    # ---- LoRA adapters --------------------------------------------------------------------------

    @property
    def adapters(self) -> list[str]:
        """Names of the loaded LoRA adapters."""
        config = getattr(self.model, "peft_config", None)
        return sorted(config) if isinstance(config, dict) and self._has_adapters() else []

    @property
    def active_adapter(self) -> str | None:
        """The adapter named by ``set_adapter`` (None: the base model, or never set)."""
        return None if self._adapter == AS_IS else self._adapter

    def load_adapter(self, path: str | Path, name: str) -> None:
        """Load a peft LoRA adapter saved at ``path`` as ``name`` (replacing one of that name); the base
        model is not reloaded. It is not activated: call ``set_adapter(name)`` (or name it per request)."""
        if not Path(str(path)).exists():
            raise PolicyError("adapter_not_found", f"no adapter directory at {str(path)!r}")
        with self._lock:
            if name in self.adapters:
                self.unload_adapter(name, _keep_active=True)
            if self._adapter == AS_IS and not self._has_adapters():
                self._adapter = None  # transformers activates a first adapter on load; keep the base model on
            try:
                self._load(str(path), name)
            except Exception as exc:
                raise PolicyError("bad_adapter", f"cannot load adapter {str(path)!r}: {exc}") from None

    def set_adapter(self, name: str | None) -> None:
        """Make ``name`` the adapter ``complete``/``generate`` use; None means the base model (adapters off).

        Until it is called the model is used as it is, so a ``PeftModel`` a trainer passed in samples with
        its active adapter."""
        if name is not None and name not in self.adapters:
            raise PolicyError("adapter_not_found", f"no adapter named {name!r}; loaded: {self.adapters}")
        self._adapter = name

    def unload_adapter(self, name: str, *, _keep_active: bool = False) -> None:
        """Remove adapter ``name``; if it was active, the base model becomes active."""
        if name not in self.adapters:
            raise PolicyError("adapter_not_found", f"no adapter named {name!r}; loaded: {self.adapters}")
        with self._lock:
            if self._wrapped and self.adapters == [name]:
                self.model, self._wrapped = self.model.unload(), False  # the plain model again, unmerged
            else:
                self.model.delete_adapter(name)
            if self._adapter == name and not _keep_active:
                self._adapter = None

    def _load(self, path: str, name: str) -> None:
        from peft import PeftModel

        if self._has_adapters():  # a PeftModel, or the user's integration adapters: keep that API
            self.model.load_adapter(path, adapter_name=name)
        else:
            was_training = self.model.training
            self.model = PeftModel.from_pretrained(self.model, path, adapter_name=name)
            self.model.train(was_training)
            self._wrapped = True

    def _has_adapters(self) -> bool:
        from peft import PeftModel

        return isinstance(self.model, PeftModel) or bool(getattr(self.model, "_hf_peft_config_loaded", False))

    @contextlib.contextmanager
    def _adapter_active(self, name: str | None) -> Iterator[None]:
        if name == AS_IS:
            yield
            return
        if not self._has_adapters():
            if name is not None:
                raise PolicyError("adapter_not_found", f"no adapter named {name!r} is loaded")
            yield
            return
        from peft import PeftModel

        if name is not None and name not in self.adapters:
            raise PolicyError("adapter_not_found", f"no adapter named {name!r}; loaded: {self.adapters}")
        if isinstance(self.model, PeftModel):
            if name is None:
                with self.model.disable_adapter():
                    yield
                return
            self.model.set_adapter(name)
            yield
            return
        if name is None:
            self.model.disable_adapters()
        else:
            self.model.enable_adapters()
            self.model.set_adapter(name)
        yield
