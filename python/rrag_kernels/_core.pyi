"""Typed stubs for the compiled module rrag_kernels._core (use rrag_kernels.ops instead)."""

import numpy as np
import numpy.typing as npt

__version__: str

def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def simd_level() -> str: ...
def available_simd_levels() -> list[str]: ...
def set_simd_level(name: str) -> None: ...
def compiler() -> str: ...
def openmp_version() -> int: ...
def native_build() -> bool: ...
def cosine_matrix(
    a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], check_finite: bool = True
) -> npt.NDArray[np.float32]: ...
def segmented_cosine(
    queries: npt.NDArray[np.float32],
    docs: npt.NDArray[np.float32],
    doc_offsets: npt.NDArray[np.int64],
    check_finite: bool = True,
) -> npt.NDArray[np.float32]: ...
def claim_relevance(
    query_emb: npt.NDArray[np.float32],
    doc_emb: npt.NDArray[np.float32],
    doc_offsets: npt.NDArray[np.int64],
    claim_emb: npt.NDArray[np.float32],
    claim_offsets: npt.NDArray[np.int64],
    query_doc_sim: npt.NDArray[np.float32] | None = None,
    clip: bool = True,
    check_finite: bool = True,
) -> npt.NDArray[np.float32]: ...
def topk_cosine(
    queries: npt.NDArray[np.float32],
    corpus: npt.NDArray[np.float32],
    k: int,
    check_finite: bool = True,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...
