"""Hugging Face's model code on native PyTorch (transformers, diffusers, peft; image hf-torch): the
five keras-hub models built from configuration objects in code, random weights, nothing
downloaded. Device, synchronisation, memory counters, TF32 and `jit` (torch.compile) are native
torch's (torch_api.Framework), so an hf cell is measured exactly like a torch cell.

Offline by construction: the Hugging Face libraries are told so before they are imported
(HF_HUB_OFFLINE and its aliases), and no model here is ever named by a hub id. The shared
recipes are in apis/huggingface/.
"""

from __future__ import annotations

import os
from importlib import metadata as importlib_metadata
from typing import Any

# Before transformers, diffusers or huggingface_hub is imported (each reads them at import time);
# set, not defaulted: no environment variable of the matrix turns downloads back on.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "DIFFUSERS_NO_ADVISORY_WARNINGS": "1",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
os.environ.update(OFFLINE)

from ...protocol import CellSpec  # noqa: E402
from ..torch_api import Framework as Torch  # noqa: E402

LIBRARIES = ("transformers", "diffusers", "peft", "accelerate")


class Framework(Torch):
    name = "hf"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        self.effective["hf_hub_offline"] = os.environ.get("HF_HUB_OFFLINE")

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        for library in LIBRARIES:
            try:
                meta[f"{library}_version"] = importlib_metadata.version(library)
            except importlib_metadata.PackageNotFoundError:
                pass
        return meta
