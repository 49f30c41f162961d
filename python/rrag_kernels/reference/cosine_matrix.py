"""Reference for ``cosine_matrix``."""

from __future__ import annotations

import numpy as np


def inverse_norms_ref(x: np.ndarray) -> np.ndarray:
    """Inverse L2 norm of each row, 0 for a zero row (so its cosine is 0, never NaN).

    Parameters
    ----------
    x : ndarray, shape (n, d), any float dtype

    Returns
    -------
    ndarray, shape (n,), float64
    """
    x64 = np.asarray(x, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", x64, x64)) if x64.size else np.zeros(x64.shape[0])
    inv = np.zeros_like(norms)
    np.divide(1.0, norms, out=inv, where=norms > 0)
    return inv


def cosine_matrix_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All-pairs cosine similarity in float64.

    Parameters
    ----------
    a : ndarray, shape (n, d)
    b : ndarray, shape (m, d)

    Returns
    -------
    ndarray, shape (n, m), float64
        ``out[i, j] = cos(a[i], b[j])``; 0 where either row is the zero vector.
    """
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    return (a64 * inverse_norms_ref(a64)[:, None]) @ (b64 * inverse_norms_ref(b64)[:, None]).T
