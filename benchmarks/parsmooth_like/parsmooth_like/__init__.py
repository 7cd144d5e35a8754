"""Kalman filters and smoothers, sequential and parallel-in-time, in parsmooth's style."""

from parsmooth_like._base import (
    FilteringElement,
    FunctionalModel,
    MVNSqrt,
    MVNStandard,
    SmoothingElement,
)
from parsmooth_like.iterated import iterated_smoothing
from parsmooth_like.parallel import filtering as parallel_filtering
from parsmooth_like.parallel import smoothing as parallel_smoothing
from parsmooth_like.sequential import filtering as sequential_filtering
from parsmooth_like.sequential import smoothing as sequential_smoothing

__all__ = [
    "FilteringElement",
    "FunctionalModel",
    "MVNSqrt",
    "MVNStandard",
    "SmoothingElement",
    "iterated_smoothing",
    "parallel_filtering",
    "parallel_smoothing",
    "sequential_filtering",
    "sequential_smoothing",
]
