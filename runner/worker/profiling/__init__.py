"""Per-op profiles: a profiled pass of a cell (never a timed one) with the framework's own
profiler, written as a Chrome trace and one table for every framework (kernels.json).

Standard library only, apart from the capture module, which imports the framework under test
(and the converter of TensorFlow's XSpace, its protobuf reader): the host reads categories and
the reducer too (`profile diff`, the report), never a profiler.
"""
