"""What exists: framework APIs and their engines, axes, workloads, their options and size presets,
and which combinations apply. Standard library only; the host validates and plans from it, the
worker dispatches from it.

Each API, axis and workload is declared once, and everything else reads the declaration:
- an API (apis.py): its engine (Keras 3: its backend's), the modules it imports, the variables set
  before them, the module implementing each workload it runs, and its capabilities (quantizer,
  data parallelism, steps_per_execution, …; an engine's: profiler, compiler, TF32, GPU), each
  either how it runs or why it is absent — an absent one makes a cell not applicable with that
  reason (rules.py asks the records, never an API's name);
- an axis (axes.py): the matrix schema checks its values by its kind; a benchmark gives one value
  or a list (one cell per value); the cell spec and the result record carry it as a field; cell
  names, report rows and summary.csv show it; rules.py says where a value does not apply (the
  cell is planned "not_applicable" with the rule's reason);
- a workload (workloads.py): its tasks, the APIs where it is not applicable and why, its
  precisions, options and size presets (tests/worker/test_catalog.py checks that every module
  an API's record names exists and builds).
"""

from __future__ import annotations

from . import apis as _apis
from . import rules as _rules
from . import quantized_rules as _quantized_rules     # asked after rules.py's
from . import workloads as _workloads
from .api_base import (API_RECORDS, ENGINES, Api, Capability, Engine, Knob, api, declare_api,
                       declare_engine, engine_of, has, lacks)
from .axes import (DATA_MODES, DEVICES, JIT_WORDS, PRECISIONS, SCALINGS, SIZES, TASKS,
                   TORCH_COMPILE_MODES)
from .precisions import (FLOAT_PRECISIONS, QUANTIZED_MODES, QUANTIZED_PRECISIONS, float_base,
                         is_quantized, quantized_mode)
from .base import (AXES, AXIS_DEFAULTS, AXIS_KINDS, FAMILIES, RULES, WORKLOADS, Axis, Option,
                   Where, Workload, declare_axis, declare_workload, default_sizes, dense_paths,
                   is_hub, not_applicable_reason, rule, setting_axes)

del _apis, _rules, _quantized_rules, _workloads      # imported for their declarations

# The declared APIs, and every Keras 3 backend (the study's order: TensorFlow, JAX, PyTorch).
APIS = tuple(API_RECORDS)
KERAS_BACKENDS = tuple(dict.fromkeys(b for record in API_RECORDS.values() for b in record.backends))

__all__ = ["API_RECORDS", "APIS", "AXES", "AXIS_DEFAULTS", "AXIS_KINDS", "DATA_MODES", "DEVICES",
           "ENGINES", "FAMILIES", "FLOAT_PRECISIONS", "JIT_WORDS", "KERAS_BACKENDS", "PRECISIONS",
           "QUANTIZED_MODES", "QUANTIZED_PRECISIONS", "RULES", "SCALINGS", "SIZES", "TASKS",
           "TORCH_COMPILE_MODES", "WORKLOADS", "Api", "Axis", "Capability", "Engine", "Knob",
           "Option", "Where", "Workload", "api", "declare_api", "declare_axis", "declare_engine",
           "declare_workload", "default_sizes", "dense_paths", "engine_of", "float_base", "has",
           "is_hub", "is_quantized", "lacks", "not_applicable_reason", "quantized_mode", "rule",
           "setting_axes"]
