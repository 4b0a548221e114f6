"""NumPy: the CPU baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import FrameworkBase


class Framework(FrameworkBase):
    name = "numpy"

    def __init__(self, spec):
        super().__init__(spec)
        self.effective = {"device": "cpu", "precision": "float32", "jit": False}

    def metadata(self) -> dict[str, Any]:
        return {"framework_name": "numpy", "framework_version": np.__version__}
