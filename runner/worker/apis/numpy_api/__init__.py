"""NumPy: the CPU baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import FrameworkBase, tf32


class Framework(FrameworkBase):
    name = "numpy"

    def __init__(self, spec):
        super().__init__(spec)
        no_tf32, detail = tf32.cpu_only()
        self.effective = {"device": "cpu", "precision": "float32", "jit": False,
                          "tf32": no_tf32, "tf32_detail": detail}

    def metadata(self) -> dict[str, Any]:
        return {"framework_name": "numpy", "framework_version": np.__version__}
