"""Helpers shared by the torch formulations and the Triton launchers.

Row normalisation (in float64, so that no row's scale over- or underflows float32 before
the product), the owner of each row of a CSR layout, and the int64 keys that make a top-k
exact: a key orders (score descending, index ascending) when read from the largest down.
"""

from __future__ import annotations

import torch

__all__ = ["BLOCK_ENTRIES", "decode_keys", "encode_keys", "normalized", "padded_index", "padded_rows",
           "row_scales", "segment_owners"]

#: Entries of the largest intermediate block a torch formulation forms at once (float32:
#: 64 MiB); the results do not depend on it.
BLOCK_ENTRIES = 1 << 24

_LOW_MASK = 0xFFFFFFFF
_MAG_MASK = 0x7FFFFFFF


def row_scales(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the power of two ``p = 2**-e`` nearest 1 / ||x|| (exact in float32) and the
    rescaled norm ``p * ||x||`` in [0.5, 1) (0 for a zero row); the norm is reduced in float64
    (cast on load, no copy), which holds the sum of squares of any float32 row.

    Parameters
    ----------
    x : torch.Tensor, shape (n, d), float32

    Returns
    -------
    power, rescaled_norm : torch.Tensor, shape (n, 1), float32
    """
    norm = torch.linalg.vector_norm(x, dim=1, keepdim=True, dtype=torch.float64)
    power = torch.ldexp(torch.ones_like(norm), (-torch.frexp(norm).exponent).clamp_(-126, 126))
    return power.to(torch.float32), (norm * power).to(torch.float32)


def normalized(x: torch.Tensor) -> torch.Tensor:
    """Each row divided by its L2 norm (a zero row stays zero).

    The row is multiplied by the power of two of :func:`row_scales` (exact) and divided by the
    rescaled norm in [0.5, 1): no reciprocal leaves float32's range, so a row of tiny (even
    subnormal) or huge entries gets the float64 reference's direction. Three passes over x
    (the norm, the multiply, the divide).

    Parameters
    ----------
    x : torch.Tensor, shape (n, d), float32

    Returns
    -------
    torch.Tensor, shape (n, d), float32, on ``x.device``
    """
    power, rescaled = row_scales(x)
    return (x * power).div_(torch.where(rescaled > 0, rescaled, 1.0))


def padded_index(starts: torch.Tensor, counts: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices of G segments padded to one width, and which of them are real.

    Parameters
    ----------
    starts, counts : torch.Tensor, shape (G,), int64
        Each segment's first row and length (``counts <= width``, every count >= 1).
    width : int

    Returns
    -------
    index : torch.Tensor, shape (G, width), int64
        ``starts[g] + j``; a padding slot repeats the segment's first row (a real row of it).
    valid : torch.Tensor, shape (G, width), bool
        ``j < counts[g]``.
    """
    j = torch.arange(width, dtype=torch.int64, device=starts.device)
    valid = j[None, :] < counts[:, None]
    return starts[:, None] + torch.where(valid, j[None, :], 0), valid


def padded_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` with zero rows appended up to ``rows``: every block of a blocked matrix product
    then has one shape, so cuBLAS runs one kernel and computes every element in the same
    order, and identical rows get bitwise identical scores in every block.

    Parameters
    ----------
    x : torch.Tensor, shape (n, d), n <= rows
    rows : int

    Returns
    -------
    torch.Tensor, shape (rows, d)
    """
    if x.shape[0] == rows:
        return x
    return torch.cat([x, x.new_zeros((rows - x.shape[0], x.shape[1]))])


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
    # One zero (-0.0 is 0.0), and a NaN (an inf input with check_finite=False; its sign bit
    # is arbitrary) below every finite score but above -inf, the used / padding sentinel.
    scores = torch.where(scores == 0.0, torch.zeros_like(scores), scores)
    scores = torch.where(torch.isnan(scores), torch.finfo(torch.float32).min, scores).contiguous()
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
