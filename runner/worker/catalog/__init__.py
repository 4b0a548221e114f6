"""What exists: APIs, axes, workloads, their options and size presets, and which combinations
apply. Standard library only; the host validates and plans from it, the worker dispatches from it.

Each axis and each workload is declared once, and everything else reads the declaration:
- an axis (axes.py): the matrix schema checks its values by its kind; a benchmark gives one value
  or a list (one cell per value); the cell spec and the result record carry it as a field; cell
  names, report rows and summary.csv show it; rules.py says where a value does not apply (the
  cell is planned "not_applicable" with the rule's reason);
- a workload (workloads.py): its tasks, the APIs with a module
  runner/worker/apis/<api>_api/<workload>.py (tests/worker/test_catalog.py checks both ways),
  the APIs where it is not applicable and why, its precisions, options and size presets.
"""

from __future__ import annotations

from . import rules as _rules
from . import quantized_rules as _quantized_rules     # asked after rules.py's
from . import workloads as _workloads
from .axes import (DATA_MODES, DEVICES, JIT_WORDS, PRECISIONS, SCALINGS, SIZES, TASKS,
                   TORCH_COMPILE_MODES)
from .precisions import (FLOAT_PRECISIONS, QUANTIZED_MODES, QUANTIZED_PRECISIONS, float_base,
                         is_quantized, quantized_mode)
from .base import (API_PACKAGES, APIS, AXES, AXIS_DEFAULTS, AXIS_KINDS, FAMILIES, KERAS_BACKENDS,
                   RULES, WORKLOADS, Axis, Option, Where, Workload, declare_axis,
                   declare_workload, default_sizes, dense_paths, is_hub, not_applicable_reason, rule,
                   setting_axes)

del _rules, _quantized_rules, _workloads      # imported for their declarations

__all__ = ["API_PACKAGES", "APIS", "AXES", "AXIS_DEFAULTS", "AXIS_KINDS", "DATA_MODES", "DEVICES",
           "FAMILIES", "FLOAT_PRECISIONS", "JIT_WORDS", "KERAS_BACKENDS", "PRECISIONS",
           "QUANTIZED_MODES", "QUANTIZED_PRECISIONS", "RULES", "SCALINGS", "SIZES", "TASKS",
           "TORCH_COMPILE_MODES", "WORKLOADS", "Axis", "Option", "Where", "Workload",
           "declare_axis", "declare_workload", "default_sizes", "dense_paths", "float_base",
           "is_hub", "is_quantized", "not_applicable_reason", "quantized_mode", "rule",
           "setting_axes"]
