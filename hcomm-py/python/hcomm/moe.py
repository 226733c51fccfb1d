"""Expert parallelism (Rust ``hcomm::moe``): ``group=None`` is the context's
expert-parallel group. Experts are placed in contiguous blocks: with ``E``
experts over ``ep`` ranks, rank ``j`` holds experts ``j*E/ep .. (j+1)*E/ep``.

Tokens are float16, float32 or float64 ``[T, H]`` arrays; an expert id out of
range on any rank is ``hcomm.Precondition`` on every rank of the group.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _group, _native
from ._errors import Precondition
from ._native import Comm

Dispatch = _native.Dispatch


class Routing:
    """Where :func:`all_to_all` sent each token, to bring the experts' output back."""

    __slots__ = ("dispatch",)

    def __init__(self, dispatch: Any) -> None:
        self.dispatch = dispatch

    @property
    def tokens_per_expert(self) -> list:
        """Rows received per local expert, in expert order."""
        return self.dispatch.tokens_per_expert


def dispatch(tokens: Any, topk_ids: Any, topk_weights: Any, num_experts: int, group: Optional[Comm] = None) -> Any:
    """Sends every token to the ranks holding its ``k`` experts (``topk_ids`` ``[T, k]``,
    ``topk_weights`` ``[T, k]``); returns a ``Dispatch`` with ``tokens`` (grouped by
    local expert) and ``tokens_per_expert``."""
    ids = np.ascontiguousarray(topk_ids, dtype=np.int64)
    weights = np.ascontiguousarray(topk_weights, dtype=np.float32)
    return _native.moe_dispatch(_group(group, "ep"), np.ascontiguousarray(tokens), ids, weights, num_experts)


def combine(expert_output: Any, d: Any, group: Optional[Comm] = None) -> Any:
    """``[T, H]``: for every original token, the sum over its ``k`` experts of weight × output."""
    return _native.moe_combine(_group(group, "ep"), np.ascontiguousarray(expert_output), d)


def all_to_all(tokens: Any, expert_ids: Any, num_experts: int = 8, tokens_per_expert: Optional[Sequence[int]] = None,
               group: Optional[Comm] = None) -> Any:
    """Forward: ``tokens`` ``[T, H]`` and ``expert_ids`` ``[T]`` -> ``(routed, routing)``, the
    tokens this rank's experts receive (grouped by local expert) and a :class:`Routing`.

    Reverse: ``all_to_all(expert_output, routing)`` -> ``[T, H]``, every row back at its
    original rank and position. ``tokens_per_expert``, when given, must be the count of
    ``expert_ids`` equal to each expert (else ``hcomm.Precondition`` naming the expert).
    """
    if isinstance(expert_ids, Routing):
        return combine(expert_output=tokens, d=expert_ids.dispatch, group=group)
    ids = np.asarray(expert_ids, dtype=np.int64).reshape(-1)
    if tokens_per_expert is not None:
        if len(tokens_per_expert) != num_experts:
            raise Precondition(
                f"precondition: moe.all_to_all: tokens_per_expert has {len(tokens_per_expert)} counts, "
                f"expected one per expert ({num_experts})")
        valid = ids[(ids >= 0) & (ids < num_experts)]
        actual = np.bincount(valid, minlength=num_experts)
        for e, (given, got) in enumerate(zip(tokens_per_expert, actual)):
            if given != got:
                raise Precondition(
                    f"precondition: moe.all_to_all: tokens_per_expert says {given} tokens for expert {e}, "
                    f"but expert_ids routes {got} there")
    d = dispatch(tokens, ids.reshape(-1, 1), np.ones((ids.size, 1), dtype=np.float32), num_experts, group)
    return d.tokens, Routing(d)


__all__ = ["Dispatch", "Routing", "all_to_all", "combine", "dispatch"]
