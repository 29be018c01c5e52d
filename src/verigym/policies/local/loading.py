"""The public path of ``_loading``: ``load_pretrained`` and the one device and dtype rule
(``resolve_device``, ``resolve_dtype``) that the opener (``policies.default``) and training share."""

from verigym.policies.local._loading import (
    DTYPES,
    Pretrained,
    display_name,
    load_pretrained,
    resolve_device,
    resolve_dtype,
)

__all__ = ["DTYPES", "Pretrained", "display_name", "load_pretrained", "resolve_device", "resolve_dtype"]
