"""A tiny distribution made for the bisect test: `dlbench-blas-probe` 1.0 does nothing, 2.0
ships a .pth file that makes OpenBLAS use its oldest kernels (OPENBLAS_CORETYPE=Prescott) in
every interpreter of the environment — a BLAS change that slows NumPy's matmul about 3× on this
machine's CPUs, delivered the way a real dependency upgrade would be."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

NAME = "dlbench-blas-probe"
SLOW_PTH = 'import os; os.environ.setdefault("OPENBLAS_CORETYPE", "Prescott")\n'


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, version: str, slow: bool) -> Path:
    module = NAME.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
                             "Summary: bisect test probe\n").encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                         b"Tag: py3-none-any\n",
    }
    if slow:
        files[f"{module}.pth"] = SLOW_PTH.encode()
    record = "".join(f"{name},{_digest(data)},{len(data)}\n" for name, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path
