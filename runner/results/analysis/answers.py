"""The same answer: whether the environments of a row computed the same thing.

Every cell records a small fingerprint of what it computed on the seeded inputs (the record's
`answer`, written by runner/worker/apis/answers.py: norms of an output, a loss, initial logits,
the first generated tokens). Here the fingerprints of a row's cells (same workload, task, batch
size, precision, every axis and option) are compared quantity by quantity, with a relative
tolerance that depends on the arithmetic the two cells ran (the looser of the two):

- float32: 1e-3. Same inputs, same function: the cells differ only in the order of their sums
  (relative rounding error of a float32 dot product of n terms ~ √n · 6e-8, under 1e-5 for
  n ≤ 10⁴, and a fingerprint averages it further), while a wrong scale, a transposed layout or a
  sum-instead-of-mean loss moves it by percents or more.
- TF32 (float32 matmuls on tensor cores, 10-bit mantissa) and float16: 1e-2; bfloat16 (8-bit
  mantissa, unit roundoff 3.9e-3) and mixed bfloat16: 5e-2. A float32 GPU cell whose TF32 state
  is not recorded gets the TF32 tolerance (unknown is never assumed to be full float32).

A number is compared relative to the larger of the two values and of its group's scale (the rms
of the same output, so that a mean near zero is not compared relative to itself); a list of
numbers relative to its largest magnitude; token ids exactly, on the first TOKEN_PREFIX tokens of
each sequence (greedy decoding flips a token at a near-tie, after which the rest follows it).

Keras 2's keras-hub rows (keras-nlp / keras-cv 0.8, other libraries) are compared among Keras 2
cells only (answer_family). The reference of a row is its majority: the cell that agrees with the most others (ties: the
first column). Cells outside the reference's agreement are "different"; with no strict majority
(two cells that disagree, say) every disagreeing cell is "no majority": nothing tells which is
right. Either way such a cell is marked in every table and never bold "best".

Generate cells also record the work one call did (first_token.generate_work, in `effective`): a
cell whose prompts or generation-loop iterations differ from its row's majority is marked the
same way, "different work" (check_work): its time is not comparable either.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypedDict, cast

from ...worker.catalog import is_hub, quantized_mode
from ..data.types import CellSummary, Manifest
from ..formatting import DIFFERENT_MARK, fmt
from . import quantized, quantized_check
from .summaries import KERAS2, table_group

# The quantized modes' own tolerances (int8 5e-2, int4 0.25, float8 0.15) are quantized.py's.
TOLERANCES = {"float32": 1e-3, "tf32": 1e-2, "float16": 1e-2, "bfloat16": 5e-2,
              **quantized.TOLERANCES}
TOKEN_PREFIX = {"float32": 4, "tf32": 2, "float16": 1, "bfloat16": 1, **quantized.TOKEN_PREFIX}

SAME, DIFFERENT, NO_MAJORITY = "same", "different", "no majority"
UNCHECKED, NOT_RECORDED, ALONE = "not checked", "not recorded", "alone"
# A generate cell whose call did other work than its row's (first_token.generate_work).
DIFFERENT_WORK = "different work"
DIFFERING = (DIFFERENT, NO_MAJORITY, DIFFERENT_WORK)
# The parts of a generate call's work that must be equal across a row: the same prompts and as
# many iterations of the generation loop. The prefill's positions are each library's own (keras-hub
# seeds its cache over its whole buffer): recorded and shown, not checked.
WORK_CHECKED = ("prompt_positions", "new_tokens_per_sequence", "decode_iterations")
MARK = DIFFERENT_MARK
NOTE = (f"{MARK} This cell computed a different answer from the rest of its row (see Different "
        "answers): its time is not comparable, and it is never bold.")


def arithmetic(summary: Mapping[str, Any]) -> str:
    """What a cell's float arithmetic was: float32, tf32, float16 or bfloat16; a quantized
    cell's is its mode (int8, int4, float8: quantized.py's tolerances)."""
    precision = str(summary.get("precision"))
    mode = quantized_mode(precision)
    if mode is not None:
        return mode
    if "bfloat16" in precision:
        return "bfloat16"
    if "float16" in precision:
        return "float16"
    if summary.get("tf32_effective") is True:
        return "tf32"
    if summary.get("tf32_effective") is None and summary.get("on_gpu"):
        return "tf32"
    return "float32"


def _looser(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    return max(arithmetic(a), arithmetic(b), key=lambda kind: TOLERANCES[kind])


def _is_tokens(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(row, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in row)
        for row in value)


def _numbers(value: Any) -> list[float] | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, list) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [float(v) for v in value]
    return None


def differences(a: Mapping[str, Any], b: Mapping[str, Any], kind: str,
                where: str = "") -> tuple[list[str], int]:
    """(what differs beyond the tolerance of `kind`, how many quantities were compared), for
    the quantities both fingerprints hold."""
    rtol, prefix = TOLERANCES[kind], TOKEN_PREFIX[kind]
    scales = (_numbers(a.get("rms")) or []) + (_numbers(b.get("rms")) or [])
    scale = max([abs(v) for v in scales if math.isfinite(v)] + [0.0])
    out: list[str] = []
    compared = 0
    for key in [k for k in a if k in b]:
        name, x, y = f"{where}{key}", a[key], b[key]
        if isinstance(x, dict) and isinstance(y, dict):
            found, count = differences(x, y, kind, f"{name}.")
            out += found
            compared += count
        elif _is_tokens(x) and _is_tokens(y):
            compared += 1
            head_x, head_y = [row[:prefix] for row in x], [row[:prefix] for row in y]
            if head_x != head_y:
                out.append(f"{name}: first {prefix} token(s) {head_y} against {head_x}")
        elif (xs := _numbers(x)) is not None and (ys := _numbers(y)) is not None:
            compared += 1
            if len(xs) != len(ys):
                out.append(f"{name}: {len(ys)} values against {len(xs)}")
                continue
            if not all(map(math.isfinite, xs + ys)):
                if xs != ys:
                    out.append(f"{name}: not finite ({_shown(ys)} against {_shown(xs)})")
                continue
            floor = max([abs(v) for v in xs + ys] + [scale]) if len(xs) > 1 else scale
            worst = max(abs(p - q) / max(abs(p), abs(q), floor, 1e-300) for p, q in zip(xs, ys, strict=True))
            if worst > rtol:
                out.append(f"{name}: {_shown(ys)} against {_shown(xs)} (relative difference "
                           f"{fmt(worst)} > {rtol:g}, {kind})")
    return out, compared


def _shown(values: Any) -> str:
    numbers = values if isinstance(values, list) else [values]
    shown = ", ".join(fmt(v) if isinstance(v, (int, float)) else str(v) for v in numbers[:4])
    return shown + (", …" if len(numbers) > 4 else "") if len(numbers) > 1 else shown


@dataclass
class Verdict:
    status: str
    reference: str | None = None        # the environment this cell was compared with
    detail: str = ""


def _compare_group(cells: Sequence[Mapping[str, Any]]) -> dict[str, Verdict]:
    """Verdicts for the cells of one row that have an answer (in column order)."""
    agree: dict[str, set[str]] = {c["cell_id"]: {c["cell_id"]} for c in cells}
    found: dict[tuple[str, str], list[str]] = {}
    for i, a in enumerate(cells):
        for b in cells[i + 1:]:
            diff, compared = differences(a["answer"], b["answer"], _looser(a, b))
            found[(a["cell_id"], b["cell_id"])] = found[(b["cell_id"], a["cell_id"])] = diff
            if not diff and compared:
                agree[a["cell_id"]].add(b["cell_id"])
                agree[b["cell_id"]].add(a["cell_id"])
    reference = max(cells, key=lambda c: len(agree[c["cell_id"]]))   # first of the most agreed
    majority = 2 * len(agree[reference["cell_id"]]) > len(cells)
    out: dict[str, Verdict] = {}
    for cell in cells:
        if majority and cell["cell_id"] in agree[reference["cell_id"]]:
            out[cell["cell_id"]] = Verdict(SAME, reference["environment"])
            continue
        other = reference if majority else next(
            (c for c in cells if c is not cell and c["cell_id"] not in agree[cell["cell_id"]]),
            reference)
        diff = found.get((other["cell_id"], cell["cell_id"])) or ["nothing in common to compare"]
        if not majority and len(agree[cell["cell_id"]]) == len(cells):
            out[cell["cell_id"]] = Verdict(SAME, None)
            continue
        out[cell["cell_id"]] = Verdict(DIFFERENT if majority else NO_MAJORITY,
                                       other["environment"], "; ".join(diff))
    return out


class AnswerCheck(TypedDict):
    """One cell's verdicts, the CellSummary keys of the same names: the same-answer check of its
    row (answer_*) and, for a quantized cell, its checks (quantization_*, quantized_check.py)."""

    answer_check: str | None            # a status above; None: not an ok cell
    answer_reference: str | None        # the environment it was compared with
    answer_detail: str                  # what differs
    answer_differs: bool                # marked in every table, never bold
    quantization_check: str | None
    quantization_detail: str
    quantization_base: str | None
    quantization_base_check: str


def check(summaries: Sequence[CellSummary],
          unchecked: Collection[str] = frozenset()) -> dict[str, AnswerCheck]:
    """Every cell's verdicts by cell id, comparing the ok cells of each row (same label and batch
    size, same model). The summaries are only read: `checked` gives them with their verdicts."""
    verdicts: dict[str, Verdict] = {}
    rows: dict[tuple[Any, ...], list[CellSummary]] = defaultdict(list)
    for s in summaries:
        if s["status"] != "ok":
            continue
        if s["cell_id"] in unchecked:
            verdicts[s["cell_id"]] = Verdict(UNCHECKED)
        elif not s.get("answer"):
            verdicts[s["cell_id"]] = Verdict(NOT_RECORDED)
        else:
            rows[(s["label"], s["batch_size"], answer_family(s))].append(s)
    for cells in rows.values():
        verdicts.update({cells[0]["cell_id"]: Verdict(ALONE)} if len(cells) == 1
                        else _compare_group(cells))
    quantized_checks = quantized_check.check(summaries, differences)
    out: dict[str, AnswerCheck] = {}
    for s in summaries:
        v = verdicts.get(s["cell_id"])
        q = quantized_checks[s["cell_id"]]
        out[s["cell_id"]] = AnswerCheck(
            answer_check=v.status if v else None, answer_reference=v.reference if v else None,
            answer_detail=v.detail if v else "",
            answer_differs=v is not None and v.status in DIFFERING,
            quantization_check=q["quantization_check"],
            quantization_detail=q["quantization_detail"],
            quantization_base=q["quantization_base"],
            quantization_base_check=q["quantization_base_check"])
    check_work(summaries, out)
    return out


def with_checks(summaries: Sequence[CellSummary],
                checks: Mapping[str, AnswerCheck]) -> list[CellSummary]:
    """The summaries with their cells' verdicts (`check`), as new summaries: the ones given are
    left as they are (the history keeps them so)."""
    return [cast(CellSummary, {**s, **checks[s["cell_id"]]}) for s in summaries]


def checked(summaries: Sequence[CellSummary],
            unchecked: Collection[str] = frozenset()) -> list[CellSummary]:
    """`summaries` with their verdicts (new summaries: with_checks of check)."""
    return with_checks(summaries, check(summaries, unchecked))


def check_work(summaries: Sequence[CellSummary], checks: dict[str, AnswerCheck]) -> None:
    """Mark in `checks` the generate cells whose call did other work than their row's majority
    (WORK_CHECKED of their `generate_work`) as a different answer is marked: `answer_check`
    "different work", `answer_differs`, the figures in `answer_detail`. With no strict majority
    every cell whose work differs from another's is marked."""
    rows: dict[tuple[Any, ...], list[CellSummary]] = defaultdict(list)
    for s in summaries:
        if s["status"] == "ok" and s.get("generate_work"):
            rows[(s["label"], s["batch_size"])].append(s)
    for cells in rows.values():
        keys = [tuple((c.get("generate_work") or {}).get(k) for k in WORK_CHECKED) for c in cells]
        if len(set(keys)) < 2:
            continue
        top = max(keys, key=keys.count)
        majority = 2 * keys.count(top) > len(cells)
        for cell, key in zip(cells, keys, strict=True):
            if majority and key == top:
                continue
            other = next(c for c, k in zip(cells, keys, strict=True)
                         if (k == top if majority else k != key))
            mine, theirs = cell.get("generate_work") or {}, other.get("generate_work") or {}
            what = "; ".join(f"{k.replace('_', ' ')} {mine.get(k)} against {theirs.get(k)}"
                             for k in WORK_CHECKED if mine.get(k) != theirs.get(k))
            verdict = checks[cell["cell_id"]]
            verdict["answer_check"], verdict["answer_reference"] = (DIFFERENT_WORK,
                                                                    other["environment"])
            verdict["answer_detail"] = "; ".join(filter(None, [verdict["answer_detail"],
                                                               f"other work per call: {what}"]))
            verdict["answer_differs"] = True


def answer_family(summary: CellSummary) -> str:
    """Which cells of a row can compute the same answer: Keras 2's keras-hub rows run keras-nlp
    and keras-cv 0.8, other libraries whose weights (named differently, none of them
    loadable into the other) cannot be made those of the Keras 3 models; their answers are
    compared among Keras 2 cells only. The CNN's weights are set explicitly everywhere.
    Quantized cells are compared among cells quantized by the same library: Keras and torchao
    quantize different layers (Keras embeddings too) with other rounding."""
    if table_group(summary) == KERAS2 and is_hub(summary["workload"]):
        return "keras2"
    library = (summary.get("quantization") or {}).get("library")
    return f"quantized by {str(library).split()[0]}" if library else ""


def unchecked_cells(manifest: Manifest) -> set[str]:
    """Cells of benchmarks whose matrix says check_answers = false (the manifest's cell list)."""
    return {c["id"] for c in manifest.get("cells") or [] if c.get("check_answers") is False}
