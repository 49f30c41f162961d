"""Helpers shared by the torch formulations and the Triton launchers.

Row normalisation (in float64, so that no row's scale over- or underflows float32 before
the product), the owner of each row of a CSR layout, and the int64 keys that make a top-k
exact: a key orders (score descending, index ascending) when read from the largest down.
"""

from __future__ import annotations

import torch

__all__ = ["BLOCK_ENTRIES", "decode_keys", "encode_keys", "normalized", "segment_owners"]

#: Entries of the largest intermediate block a torch formulation forms at once (float32:
#: 64 MiB); the results do not depend on it.
BLOCK_ENTRIES = 1 << 24

_LOW_MASK = 0xFFFFFFFF
_MAG_MASK = 0x7FFFFFFF


def normalized(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its L2 norm (a zero row stays zero), computed in float64.

    Parameters
    ----------
    x : torch.Tensor, shape (n, d), float32

    Returns
    -------
    torch.Tensor, shape (n, d), float32, on ``x.device``
    """
    wide = x.to(torch.float64)
    norm = torch.linalg.vector_norm(wide, dim=1, keepdim=True)
    return torch.where(norm > 0, wide / torch.where(norm > 0, norm, 1.0), 0.0).to(torch.float32)


def segment_owners(offsets: torch.Tensor, n_rows: int) -> torch.Tensor:
    """Owning segment of each row of a CSR layout, built on device without a host sync.

    Parameters
    ----------
    offsets : torch.Tensor, shape (Q + 1,), int64
        Valid CSR offsets (``offsets[0] == 0``, non-decreasing, ``offsets[-1] == n_rows``).
    n_rows : int

    Returns
    -------
    torch.Tensor, shape (n_rows,), int64
        ``out[j] = q`` such that ``offsets[q] <= j < offsets[q + 1]``.
    """
    rows = torch.arange(n_rows, dtype=torch.int64, device=offsets.device)
    # right=True skips the repeated offsets of empty segments.
    return torch.searchsorted(offsets.contiguous(), rows, right=True) - 1


def encode_keys(scores: torch.Tensor, first_index: int | torch.Tensor) -> torch.Tensor:
    """int64 keys of a (Q, R) block of float32 scores for rows ``first_index ..`` (or the given
    (R,) / (Q, R) int64 indices): larger key = higher score, then lower index; -0.0 is 0.0.

    Parameters
    ----------
    scores : torch.Tensor, shape (Q, R), float32
    first_index : int, or torch.Tensor of int64 broadcastable to (Q, R)

    Returns
    -------
    torch.Tensor, shape (Q, R), int64
    """
    scores = torch.where(scores == 0.0, torch.zeros_like(scores), scores).contiguous()
    bits = scores.view(torch.int32)
    mono = bits ^ ((bits >> 31) & _MAG_MASK)
    if isinstance(first_index, int):
        index = torch.arange(first_index, first_index + scores.shape[1], dtype=torch.int64, device=scores.device)
    else:
        index = first_index
    return (mono.to(torch.int64) << 32) | (_LOW_MASK - index)


def decode_keys(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`encode_keys`: (scores float32, indices int64), same shape."""
    mono = (keys >> 32).to(torch.int32)
    bits = mono ^ ((mono >> 31) & _MAG_MASK)
    return bits.view(torch.float32), _LOW_MASK - (keys & _LOW_MASK)
