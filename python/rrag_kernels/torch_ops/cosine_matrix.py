"""``cosine_matrix`` in torch: one matrix product of the normalised rows (cuBLAS on CUDA)."""

from __future__ import annotations

import torch

from .common import normalized

__all__ = ["cosine_matrix"]


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """All-pairs cosine similarity.

    Parameters
    ----------
    a : torch.Tensor, shape (n, d), float32, contiguous
    b : torch.Tensor, shape (m, d), float32, contiguous, same device

    Returns
    -------
    torch.Tensor, shape (n, m), float32
        0 where either row is the zero vector.
    """
    if a.shape[0] == 0 or b.shape[0] == 0 or a.shape[1] == 0:
        return torch.zeros((a.shape[0], b.shape[0]), dtype=torch.float32, device=a.device)
    return normalized(a) @ normalized(b).T
