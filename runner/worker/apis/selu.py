"""SELU constants shared by every elementwise implementation (Klambauer et al., 2017)."""

ALPHA = 1.6732632423543772
SCALE = 1.0507009873554805
# Counted as compare, exp, subtract, multiply by alpha, multiply by scale (exp as one operation).
FLOPS_PER_ELEMENT = 5
