"""TensorFlow's profile (an XSpace protobuf, `<host>.xplane.pb`: TensorFlow's profiler writes
nothing else) converted to Chrome trace events, with the protobuf reader TensorFlow's own wheel
carries. One process per plane (`/host:CPU`, `/device:GPU:0`), one thread per line, one complete
event per XEvent with its stats as arguments; a TensorFlow kernel (`name:Type`) also gets
`tf_op` and `op_type`, by which the reducer counts it. Worker side (it imports TensorFlow's
module); `events_of` takes any object shaped like an XSpace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

READERS = ("tensorflow.tsl.profiler.protobuf.xplane_pb2",
           "tensorflow.core.profiler.protobuf.xplane_pb2")
TF_KERNEL = re.compile(r"^[^:\s]+:([A-Z_][A-Za-z0-9_]*)$")


def read_xspace(path: Path) -> Any:
    """The XSpace in `path`, parsed by the first of TensorFlow's readers this version has."""
    import importlib

    for module in READERS:
        try:
            xplane_pb2 = importlib.import_module(module)
        except ImportError:
            continue
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        return space
    raise ImportError(f"no XSpace reader in this TensorFlow ({', '.join(READERS)})")


def stat_value(stat: Any, plane: Any) -> Any:
    which = stat.WhichOneof("value") if hasattr(stat, "WhichOneof") else None
    if which == "ref_value":
        ref = plane.stat_metadata.get(stat.ref_value)
        return ref.name if ref is not None else stat.ref_value
    if which == "bytes_value":
        return f"<{len(stat.bytes_value)} bytes>"
    if which is not None:
        return getattr(stat, which)
    return None


def events_of(space: Any) -> list[dict[str, Any]]:
    """Chrome trace events of an XSpace (timestamps in µs, as Chrome traces have them)."""
    events: list[dict[str, Any]] = []
    for pid, plane in enumerate(space.planes, 1):
        if not plane.lines:
            continue
        events.append({"ph": "M", "pid": pid, "name": "process_name",
                       "args": {"name": plane.name}})
        for tid, line in enumerate(plane.lines, 1):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                           "args": {"name": line.display_name or line.name}})
            base_us = line.timestamp_ns / 1000
            for event in line.events:
                metadata = plane.event_metadata.get(event.metadata_id)
                name = metadata.name if metadata is not None else str(event.metadata_id)
                args = {}
                for stat in [*event.stats, *(metadata.stats if metadata is not None else ())]:
                    stat_name = plane.stat_metadata.get(stat.metadata_id)
                    if stat_name is not None:
                        args[stat_name.name] = stat_value(stat, plane)
                kernel = TF_KERNEL.match(name)
                if kernel:
                    args.update(tf_op=name, op_type=kernel.group(1))
                events.append({"ph": "X", "pid": pid, "tid": tid, "name": name,
                               "ts": base_us + event.offset_ps / 1e6,
                               "dur": event.duration_ps / 1e6, "args": args})
    return events
