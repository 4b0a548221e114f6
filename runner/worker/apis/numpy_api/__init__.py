"""NumPy: the CPU baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...protocol import CellSpec
from .. import FrameworkBase, tf32


class Framework(FrameworkBase):
    name = "numpy"

    def __init__(self, spec: CellSpec) -> None:
        super().__init__(spec)
        no_tf32, detail = tf32.cpu_only()
        self.effective = {"device": "cpu", "precision": "float32", "jit": False,
                          "tf32": no_tf32, "tf32_detail": detail}

    def metadata(self) -> dict[str, Any]:
        return {"framework_name": "numpy", "framework_version": np.__version__}

    ops = np

    def tensor(self, values: np.ndarray) -> np.ndarray:
        return values                       # float32 host memory already

    def to_host(self, out: np.ndarray) -> np.ndarray:
        return out                          # host memory already: to_host is a no-op

    def to_numpy(self, out: np.ndarray) -> np.ndarray:
        return out

    def array_effective(self, array: Any, **settings: Any) -> dict[str, Any]:
        return {}                           # float32 on the host, as effective says already
