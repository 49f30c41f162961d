"""Fuzzer bytes -> the arguments of one binding entry point, for ``fuzz/fuzz_ops.py`` and
``tests/test_fuzz_corpus.py`` (importable without atheris).

Every byte string decodes: a read past the end returns 0, and 0 always picks the valid,
ordinary choice (so the empty input is a small valid call and the fuzzer walks away from
validity one byte at a time). A :class:`Case` holds one call of the compiled entry point
``_core.<core_name>`` and one of the public op ``rrag_kernels.ops.<target>``, built from the
same logical arrays, plus what the oracle (``fuzz/oracle.py``) may check on them: the thread
configuration to run at, whether the values are tame enough to compare with the float64
reference, and how to compare.

The decoder is structure-aware: sizes (with the SIMD and block boundaries 7/8/9, 15/16/17,
63/64/65, 4095/4096/4097), CSR offsets that are valid unless a byte asks to break one
(first not 0, decreasing, wrong end, 2**62, wrong length), indices in range unless broken,
values from a tame grid or from special floats (NaN, +-inf, -0.0, denormals, float32
overflow, 2**20 + 1 for greedy_prune's quantisation, ...) or raw float64 bits, and arrays
presented in every layout (wrong dtype, byte-swapped, strided, negative strides, Fortran,
unaligned, read-only, wrong ndim, a list, a ragged list, None, a scalar).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

TARGETS: dict[str, Any] = {}  # name -> builder(Reader) -> Case; filled by @target below

# ---------------------------------------------------------------------------------------------- reading


class Reader:
    """Choices read from fuzzer bytes; past the end every read is 0 (the ordinary choice)."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.pos = 0
        self.tame = True  # no special / raw float drawn so far (the reference comparison needs it)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out

    def below(self, n: int) -> int:
        """An int in [0, n)."""
        if n <= 1:
            return 0
        if n <= 256:
            return self.byte() % n
        return (self.byte() | self.byte() << 8 | self.byte() << 16) % n

    def rare(self, threshold: int = 0xF0) -> bool:
        """An off-path choice: true for a byte >= threshold (1/16 of random bytes, never for 0)."""
        return self.byte() >= threshold

    def pick(self, seq):
        return seq[self.below(len(seq))]


BOUNDARY_SIZES = (0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
                  1023, 1024, 1025, 4095, 4096, 4097)
SPECIAL_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, math.nan, math.inf, -math.inf, 5e-324, 1e-310,
                  1.1754943508222875e-38, 1e-45, 1e-20, 1e19, 1.8446744073709552e19, 3.4028234663852886e38,
                  3.5e38, 1e300, 1.7976931348623157e308, 2.0**20, 2.0**20 + 1, -(2.0**20) - 1, 2.0**-32, 2.0**-33,
                  3 * 2.0**-33, 1 - 2.0**-53, 1 + 2.0**-52, 10.0, 10.000001, -1e-300, 2.0**53, 2.0**63, -(2.0**63),
                  0.1, 1e-4, 0.9999999)
SPECIAL_INTS = (0, 1, -1, 2, 3, 63, 64, 65, 255, 256, 4095, 4096, 4097, 2**31 - 1, 2**31, 2**32, 2**53 + 1,
                2**62, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30, -(10**30))
NOT_A_NUMBER = (None, "1", b"1", 1.5, True, False, [1], np.int64(3), np.float64(0.5), complex(1, 0),
                np.array([2]), np.bool_(True), math.nan)


def size(r: Reader, typical: int, large: int = 0, minimum: int = 0) -> int:
    """A size: mostly in [minimum, typical], sometimes a block boundary up to ``large`` (0 too)."""
    b = r.byte()
    if b < 0xE0:
        return minimum + b % (typical + 1 - minimum)
    choices = [s for s in BOUNDARY_SIZES if s <= max(large, typical)]
    return choices[r.below(len(choices))]


def integer(r: Reader, lo: int, hi: int, special: bool = True) -> Any:
    """An int, mostly in [lo, hi]; rarely a boundary int or something that is not an int."""
    b = r.byte()
    if b < 0xE8 or not special:
        return lo + b % (hi - lo + 1) if hi >= lo else lo
    if b < 0xFA:
        return r.pick(SPECIAL_INTS)
    return r.pick(NOT_A_NUMBER)


def real(r: Reader, lo: float, hi: float, special: bool = True) -> Any:
    """A float, mostly on a 1/256 grid of [lo, hi]; rarely a special float or a non-number."""
    b = r.byte()
    if b < 0xE8 or not special:
        return lo + (hi - lo) * (r.byte() / 255.0)
    r.tame = False
    if b < 0xF6:
        return r.pick(SPECIAL_FLOATS)
    if b < 0xFC:
        return float(np.frombuffer(r.take(8).ljust(8, b"\0"), dtype=np.float64)[0])
    return r.pick(NOT_A_NUMBER)


def boolean(r: Reader) -> Any:
    b = r.byte()
    if b < 0xF8:
        return bool(b & 1) if b else True
    return r.pick((0, 1, 2, None, "yes", np.bool_(False), 1.0))


# ---------------------------------------------------------------------------------------------- values


def floats(r: Reader, n: int, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    """n float64 values: a tame grid (mostly), a constant, zeros, specials, or raw bits.

    The grid (steps of (hi - lo) / 256) is exact in float32; the bytes are tiled when the
    input is shorter than n, so large arrays cost no input."""
    mode = r.byte()
    if n == 0:
        return np.zeros(0)
    if mode < 0xC0:
        raw = np.frombuffer(r.take(min(n, 256)) or b"\x80", dtype=np.uint8).astype(np.float64)
        return np.resize(lo + (hi - lo) * raw / 256.0, n)
    if mode < 0xD0:
        return np.full(n, lo + (hi - lo) * r.byte() / 256.0)
    if mode < 0xD8:
        return np.zeros(n)
    r.tame = False
    if mode < 0xF0:
        # Mostly grid values with specials sprinkled in.
        out = np.resize(lo + (hi - lo) * np.frombuffer(r.take(min(n, 64)) or b"\x80", np.uint8) / 256.0, n)
        for _ in range(1 + r.below(4)):
            out[r.below(n)] = r.pick(SPECIAL_FLOATS)
        return out
    if mode < 0xF8:
        idx = np.frombuffer(r.take(min(n, 64)) or b"\0", dtype=np.uint8)
        return np.resize(np.array(SPECIAL_FLOATS)[idx % len(SPECIAL_FLOATS)], n)
    raw = r.take(8 * min(n, 32))
    raw = raw[: len(raw) // 8 * 8] or b"\0" * 8
    return np.resize(np.frombuffer(raw, dtype=np.float64), n)


def ints(r: Reader, n: int, lo: int, hi: int) -> np.ndarray:
    """n int64 values in [lo, hi] (tiled bytes); rarely one or more out-of-range values."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    raw = np.frombuffer(r.take(min(n, 256)) or b"\0", dtype=np.uint8).astype(np.int64)
    out = np.resize(lo + raw % max(hi - lo + 1, 1), n)
    if r.rare():
        for _ in range(1 + r.below(3)):
            out[r.below(n)] = r.pick((lo - 1, hi + 1, -1, 2**31, 2**32 + lo, 2**62, 2**63 - 1, -(2**63)))
    return out


def bools(r: Reader, n: int) -> np.ndarray:
    if n == 0:
        return np.zeros(0, dtype=bool)
    raw = np.frombuffer(r.take(min((n + 7) // 8, 64)) or b"\0", dtype=np.uint8)
    return np.resize(np.unpackbits(raw).astype(bool), n)


def _total(off: np.ndarray, cap: int = 5000) -> int:
    """The rows a (maybe broken) offsets array asks for, clipped to [0, cap)."""
    return max(int(off[-1]), 0) % cap if len(off) else 0


def counts_to_offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def offsets(r: Reader, n_segments: int, n_rows: int | None = None, max_count: int = 8) -> np.ndarray:
    """CSR offsets of n_segments segments (over n_rows rows when given), valid unless a byte
    asks to break them."""
    if n_rows is None:
        off = counts_to_offsets(np.resize(np.frombuffer(r.take(max(n_segments, 1)) or b"\0", np.uint8), n_segments)
                                % (max_count + 1))
    else:
        cuts = np.sort(np.resize(np.frombuffer(r.take(max(n_segments, 1)) or b"\0", np.uint8).astype(np.int64),
                                 max(n_segments - 1, 0)) % (n_rows + 1))
        off = np.concatenate([[0], cuts, [n_rows]]).astype(np.int64) if n_segments else np.zeros(1, np.int64)
        if n_segments and r.byte() & 1 and n_rows:
            off[1:-1] = np.minimum(np.arange(1, n_segments), n_rows)  # one row each, the rest last
    if r.rare():
        how = r.below(8)
        k = r.below(len(off))
        if how == 0:
            off[0] = r.pick((1, -1, 2**62))
        elif how == 1 and len(off) > 2:
            off[k], off[(k + 1) % len(off)] = off[(k + 1) % len(off)] + 1, off[k]  # a decreasing step
        elif how == 2:
            off[-1] += r.pick((1, -1, 2**40))
        elif how == 3:
            off[k] = r.pick((2**62, 2**63 - 1, -(2**63), -1, 2**31))
        elif how == 4 and len(off) > 1:
            off = off[:-1]
        elif how == 5:
            off = np.append(off, off[-1])
        elif how == 6:
            off = off[1:] if len(off) > 2 else off
        else:
            off[1:] = off[-1]  # every row in the first segment
    return off


# ---------------------------------------------------------------------------------------------- layouts

_DTYPES = (np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.bool_,
           np.complex64, object, "U2", "datetime64[s]", np.longdouble)


def present(r: Reader, arr: np.ndarray) -> Any:
    """The array as given (mostly), or in an odd layout, dtype or type."""
    if not r.rare(0xE8):
        return arr
    how = r.below(16)
    try:
        if how == 0:
            return arr.astype(r.pick(_DTYPES))
        if how == 1:
            return arr.astype(arr.dtype.newbyteorder(">"))  # same values, big-endian
        if how == 2:  # strided view of the same values
            return np.repeat(arr, 2, axis=0)[::2] if arr.ndim else arr
        if how == 3:  # negative strides
            return np.ascontiguousarray(arr[::-1])[::-1] if arr.ndim else arr
        if how == 4:
            return np.asfortranarray(arr)
        if how == 5:  # unaligned
            buf = np.zeros(arr.nbytes + 1, dtype=np.uint8)
            out = buf[1:].view(arr.dtype).reshape(arr.shape) if arr.nbytes else arr
            out[...] = arr
            return out
        if how == 6:
            out = arr.copy()
            out.setflags(write=False)
            return out
        if how == 7:
            return arr[None]
        if how == 8:
            return arr.reshape(-1) if arr.ndim != 1 else arr[:, None]
        if how == 9:
            return arr.tolist()
        if how == 10:  # ragged
            return [arr.tolist(), [1]] if arr.size else [[1], [1, 2]]
        if how == 11:
            return None
        if how == 12:
            return arr.flat[0] if arr.size else 0
        if how == 13:
            return tuple(arr.tolist()) if arr.ndim == 1 else arr
        if how == 14:  # non-contiguous in the last axis
            return np.repeat(arr, 2, axis=-1)[..., ::2] if arr.ndim else arr
        return np.zeros((0,) * max(arr.ndim, 1), dtype=arr.dtype)
    except (ValueError, TypeError, OverflowError):
        return arr


# ---------------------------------------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    """One decoded input: a ``_core`` call and a public-op call, and how to check them."""

    target: str
    core_name: str
    core_args: tuple
    op_args: tuple
    op_kwargs: dict
    compare: str  # "exact": bitwise against the reference backend; "close": float tolerance; "": none
    tame: bool
    threads: int = 1  # 1..3 (capped at max_threads)
    work_scale: float = 1.0  # 0.0: every kernel uses the pool, even on tiny inputs
    simd: int = 0  # index into available_simd_levels() (0: the best, i.e. the default)
    settings: tuple = ()  # (hook name, args) of _core testing hooks to apply first (results must not change)
    names: tuple = ()  # extra argument names an op's error message may start with
    size: int = 0  # elements in the inputs (the reference comparison is skipped when large)

    def describe(self) -> str:
        def short(x):
            if isinstance(x, np.ndarray):
                return f"ndarray{x.shape}{x.dtype.str}"
            s = repr(x)
            return s if len(s) < 60 else s[:57] + "..."

        core = ", ".join(short(a) for a in self.core_args)
        op = ", ".join([short(a) for a in self.op_args] + [f"{k}={short(v)}" for k, v in self.op_kwargs.items()])
        return (f"{self.target}: _core.{self.core_name}({core}); ops.{self.target}({op}); threads={self.threads} "
                f"work_scale={self.work_scale} simd={self.simd} settings={self.settings}")


def target(fn):
    TARGETS[fn.__name__.lstrip("_")] = fn
    return fn


def _run_config(r: Reader) -> dict:
    b = r.byte()
    return {"threads": 1 + (b & 3) % 3, "work_scale": 0.0 if b & 4 else 1.0, "simd": (b >> 3) & 3}


def _case(r: Reader, name: str, core_args: tuple, op_args: tuple, op_kwargs: dict, compare: str,
          core_name: str | None = None, **extra) -> Case:
    size = sum(int(np.size(a)) for a in core_args if isinstance(a, np.ndarray))
    return Case(name, core_name or name, core_args, op_args, op_kwargs, compare, r.tame, size=size,
                **_run_config(r), **extra)


def _emb(r: Reader, n: int, d: int) -> np.ndarray:
    return floats(r, n * d).reshape(n, d).astype(np.float32)


def _dims(r: Reader, d_typical: int = 40) -> int:
    """An embedding width: mostly <= d_typical, sometimes a SIMD boundary up to 385."""
    return size(r, d_typical, 385, minimum=1)


@target
def cosine_matrix(r: Reader) -> Case:
    n, m, d = size(r, 24, 300), size(r, 24, 300), _dims(r)
    a, b = _emb(r, n, d), _emb(r, m, d + (1 if r.rare() else 0))
    cf = boolean(r)
    pa, pb = present(r, a), present(r, b)
    return _case(r, "cosine_matrix", (pa, pb, cf), (pa, pb), {"check_finite": cf}, "close")


@target
def segmented_cosine(r: Reader) -> Case:
    q, n_docs, d = size(r, 12, 129, minimum=1), size(r, 40, 4097), _dims(r)
    queries, docs = _emb(r, q, d), _emb(r, n_docs, d)
    off = offsets(r, q, n_docs)
    cf = boolean(r)
    args = (present(r, queries), present(r, docs), present(r, off))
    return _case(r, "segmented_cosine", args + (cf,), args, {"check_finite": cf}, "close")


@target
def claim_relevance(r: Reader) -> Case:
    q, d = size(r, 10, 65), _dims(r)
    d_off, c_off = offsets(r, q, None, 6), offsets(r, q, None, 5)
    n_docs, n_claims = _total(d_off), _total(c_off)
    qe, de, ce = _emb(r, q, d), _emb(r, n_docs, d), _emb(r, n_claims, d)
    sim = None if r.byte() & 1 else floats(r, n_docs, -1.0, 1.0).astype(np.float32)
    if sim is not None:
        sim = present(r, sim)
    clip, cf = boolean(r), boolean(r)
    args = (present(r, qe), present(r, de), present(r, d_off), present(r, ce), present(r, c_off))
    return _case(r, "claim_relevance", args + (sim, clip, cf), args,
                 {"query_doc_sim": sim, "clip": clip, "check_finite": cf}, "close")


@target
def topk_cosine(r: Reader) -> Case:
    q, n, d = size(r, 12, 65), size(r, 60, 4097, minimum=1), _dims(r)
    queries, corpus = _emb(r, q, d), _emb(r, n, d)
    k = integer(r, 1 if n else 0, max(n, 1))
    cf = boolean(r)
    args = (present(r, queries), present(r, corpus))
    return _case(r, "topk_cosine", args + (k, cf), args + (k,), {"check_finite": cf}, "topk")


@target
def triple_reliability(r: Reader) -> Case:
    b, t, d = size(r, 10, 65), size(r, 50, 4097), _dims(r, d_typical=24)
    qe, te = _emb(r, b, d), _emb(r, t, d)
    cred = floats(r, t, 0.0, 10.0)
    used = None if r.byte() & 1 else bools(r, b * t).reshape(b, t)
    alpha, k = real(r, 0.0, 1.0), integer(r, 1, t + 3)
    cf = boolean(r)
    args = (present(r, qe), present(r, te), present(r, cred))
    used = present(r, used) if used is not None else None
    return _case(r, "triple_reliability", args + (used, alpha, k, cf), args,
                 {"used": used, "alpha": alpha, "k": k, "check_finite": cf}, "topk")


@target
def triple_reliability_segmented(r: Reader) -> Case:
    q, b, d = size(r, 8, 65), size(r, 12, 65), _dims(r, d_typical=24)
    off = offsets(r, q, None, 12)
    t = _total(off, 5000)
    qe, te = _emb(r, b, d), _emb(r, t, d)
    cred = floats(r, t, 0.0, 10.0)
    chain_q = ints(r, b, 0, max(q - 1, 0))
    n_used = int(np.diff(off)[np.clip(chain_q, 0, max(q - 1, 0))].sum()) if q and b and len(off) == q + 1 else 0
    if r.rare():
        n_used += r.pick((1, -1, 7))
    used = None if r.byte() & 1 else bools(r, max(n_used, 0) % 20000)
    alpha, k = real(r, 0.0, 1.0), integer(r, 1, 12)
    cf = boolean(r)
    args = (present(r, qe), present(r, te), present(r, cred), present(r, off), present(r, chain_q))
    used = present(r, used) if used is not None else None
    return _case(r, "triple_reliability_segmented", args + (used, alpha, k, cf), args,
                 {"used": used, "alpha": alpha, "k": k, "check_finite": cf}, "topk")


_WORDS = ("the", "river", "flooded", "in", "1990", "city", "council's", "said", "not", "don't", "bank", "rain", "a",
          "b2b", "o'neill", "x'", "'", "-", "ÉCOLE", "naïve", "İstanbul", "\u212a", "ß", "\ud800", "\x00", "\t\n",
          "ABC", "x" * 40, "1e5", "café", "日本", "a'b'c", "''", "Ǆ")


@target
def claim_token_ids(r: Reader) -> Case:
    n = size(r, 12, 257)
    texts: list[Any] = []
    for _ in range(n):
        if r.rare(0xF8):
            # Raw bytes as text, lone surrogates allowed.
            texts.append(r.take(r.below(24)).decode("utf-8", "surrogateescape"))
        else:
            texts.append(" ".join(r.pick(_WORDS) for _ in range(r.below(8))))
    if r.rare() and texts:
        texts[r.below(len(texts))] = r.pick((None, 3, b"bytes", ["x"], 1.5))
    arg: Any = texts
    if r.rare():
        arg = r.pick((tuple(texts), "one string", None, np.array(texts, dtype=object), iter(texts)))
    return _case(r, "claim_token_ids", (arg,), (arg,), {}, "exact")


@target
def select_pairs(r: Reader) -> Case:
    n = size(r, 24, 129)
    off = offsets(r, n, None, 6)
    n_tok = _total(off, 5000)
    vocab = 1 + r.below(12)
    ids = ints(r, n_tok, 0, vocab - 1)
    if r.rare():
        ids = ids * r.pick((2**40, -1, 2**62 // max(vocab, 1)))
    src = ints(r, n, 0, 1 + r.below(5))
    tau = real(r, 0.0, 1.0)
    if r.byte() & 1:
        tau = r.pick((0.0, 1.0, 0.5, 1 / 3, 0.62))
    max_pairs = integer(r, -1, 60)
    op_max = None if max_pairs == -1 else max_pairs
    args = (present(r, ids), present(r, off), present(r, src))
    return _case(r, "select_pairs", args + (tau, max_pairs), args, {"tau": tau, "max_pairs": op_max}, "exact")


def _edges(r: Reader, n_nodes: int, n_edges: int) -> tuple[np.ndarray, np.ndarray]:
    i = ints(r, n_edges, 0, max(n_nodes - 1, 0))
    step = ints(r, n_edges, 1, max(n_nodes - 1, 1))
    j = (i + step) % max(n_nodes, 1)
    if r.rare() and n_edges:
        j[r.below(n_edges)] = i[r.below(n_edges)]  # maybe a self-loop
    return i, j


_LABEL_ORDERS = (("entailment", "neutral", "contradiction"), ("contradiction", "entailment", "neutral"),
                 {0: "entailment", 1: "neutral", 2: "contradiction"}, ("ENTAILMENT", "neutral", "contradiction"),
                 ("entailment", "entailment", "neutral"), ("a", "b"), None, "entailment")


@target
def nli_graph(r: Reader) -> Case:
    n_claims, p = size(r, 20, 4097), size(r, 40, 4097)
    i, j = _edges(r, n_claims, p)
    pf = floats(r, 3 * p, 0.0, 1.0).reshape(p, 3)
    pb = floats(r, 3 * p, 0.0, 1.0).reshape(p, 3)
    col = r.below(8)
    label_order = _LABEL_ORDERS[col % len(_LABEL_ORDERS)] if col else _LABEL_ORDERS[0]
    entail, contr = {0: (0, 2), 1: (1, 0), 2: (0, 2), 3: (0, 2)}.get(col, (r.below(5) - 1, r.below(5) - 1))
    mean = boolean(r)
    nc = n_claims if not r.rare() else r.pick(SPECIAL_INTS + NOT_A_NUMBER)
    reduce = "mean" if mean is True else "max" if mean is False else mean
    args = (present(r, i), present(r, j), present(r, pf), present(r, pb))
    return _case(r, "nli_graph", args + (nc, entail, contr, mean), args + (nc,),
                 {"label_order": label_order, "reduce": reduce}, "exact")


@target
def greedy_prune(r: Reader) -> Case:
    n, e = size(r, 24, 4097), size(r, 48, 4097)
    scores = floats(r, n, -2.0, 3.0)
    i, j = _edges(r, n, e)
    w = floats(r, e, -1.5, 1.5)
    if r.rare():  # at and around the quantisation's limits (|x| <= 2**20, steps of 2**-32)
        x = scores if r.byte() & 1 or not e else w
        if x.size:
            x[r.below(x.size)] = r.pick((2.0**20, -(2.0**20), 2.0**20 + 2.0**-32, 2.0**20 + 1, 2.0**-33,
                                         3 * 2.0**-33, 2.0**-34, -(2.0**-33)))
    pen = None if r.byte() & 1 else floats(r, n, 0.0, 2.0)
    args = (present(r, scores), present(r, i), present(r, j), present(r, w))
    pen = present(r, pen) if pen is not None else None
    return _case(r, "greedy_prune", args + (pen,), args, {"self_penalty": pen}, "exact")


@target
def gate_stats(r: Reader) -> Case:
    n, e = size(r, 24, 4097), size(r, 48, 4097)
    keep = bools(r, n)
    i, j = _edges(r, n, e)
    kind = ints(r, e, -1, 1).astype(np.int8) if not r.rare() else ints(r, e, -3, 3).astype(np.int8)
    dom = ints(r, n, -2, 6)
    eps = real(r, 0.0, 1e-6)
    cu = boolean(r)
    args = (present(r, keep), present(r, i), present(r, j), present(r, kind), present(r, dom))
    return _case(r, "gate_stats", args + (eps, cu), args, {"eps": eps, "count_unknown": cu}, "exact")


@target
def lexical_opcodes(r: Reader) -> Case:
    n = size(r, 16, 257)
    off_a, off_b = offsets(r, n, None, 14), offsets(r, n, None, 14)
    alphabet = 1 + r.below(6)
    ta = ints(r, _total(off_a, 5000), 0, alphabet - 1)
    tb = ints(r, _total(off_b, 5000), 0, alphabet - 1)
    trim = boolean(r)
    args = (present(r, ta), present(r, off_a), present(r, tb), present(r, off_b))
    return _case(r, "lexical_opcodes", args + (trim,), args, {"trim_affixes": trim}, "exact")


def _claims(r: Reader, n_typical: int = 30, minimum: int = 0):
    n = size(r, n_typical, 1025, minimum)
    off = offsets(r, n, None, 8)
    c = _total(off, 20000)
    scores = floats(r, c, 0.0, 1.0)
    if r.byte() & 1:
        scores = np.round(scores * 4) / 4  # many ties
    return scores, bools(r, c), off


@target
def r_scores(r: Reader) -> Case:
    s, ok, off = _claims(r)
    a = real(r, 1 / 256, 1.0) if r.byte() & 1 else 1.0
    sentinel = r.pick((-math.inf, -100000.0, -1.0)) if not r.rare() else real(r, -10, 10)
    args = (present(r, s), present(r, ok), present(r, off))
    return _case(r, "r_scores", args + (a, sentinel), args, {"a": a, "sentinel": sentinel}, "exact")


@target
def conformal_quantile(r: Reader) -> Case:
    n = size(r, 60, 4097, minimum=1)
    rr = floats(r, n, -1.0, 1.0)
    if r.byte() & 1:
        rr = np.round(rr * 3) / 3
    if r.rare() and n:
        rr[r.below(n)] = -math.inf
    n_a = 1 + r.below(4) if not r.rare() else r.pick((0, 65))
    alphas = floats(r, n_a, 0.01, 0.99)
    scalar = r.byte() & 1 and n_a == 1
    raise_ = r.byte() & 1
    bands = r.byte() & 1
    settings = (("_set_quantile_bands", (False,)),) if bands else ()
    args = (present(r, rr),)
    al = present(r, alphas)
    op_alpha = float(alphas[0]) if scalar else al
    return _case(r, "conformal_quantile", args + (al, bool(raise_)), args + (op_alpha,),
                 {"on_too_few": "raise" if raise_ else "inf"}, "exact", settings=settings)


@target
def conformal_sweep(r: Reader) -> Case:
    s, ok, off = _claims(r, 20, minimum=2)
    n = max(len(off) - 1, 0)
    alphas = floats(r, 1 + r.below(3), 0.01, 0.99)
    n_splits = integer(r, 0, 6)
    cf = real(r, 0.0, 1.0) if r.byte() & 1 else 0.5
    seed = integer(r, 0, 255) if not r.rare() else r.pick((2**64 - 1, 2**63, 2**64, -1, 2**63 - 1))
    a = 1.0 if not r.byte() & 1 else real(r, 1 / 256, 1.0)
    sentinel = -math.inf
    groups = None
    n_groups = 1
    if r.byte() & 1:
        n_groups = 1 + r.below(4)
        groups = ints(r, n, 0, n_groups - 1)
        if r.rare():
            n_groups = r.pick((0, -1, 1, 2**40, 2**62))
    settings: tuple = ()
    if r.rare(0xC0):
        settings = (("_set_sweep_tuning", (r.pick((8.0, 0.0, -1.0, 0.5, 1e-300, 1e300, math.inf, math.nan)),
                                           r.pick((8.0, 0.0, -1.0, 0.5, 1e-300, 1e300, math.inf, math.nan)),
                                           bool(r.byte() & 1))),)
    args = (present(r, s), present(r, ok), present(r, off))
    g = present(r, groups) if groups is not None else None
    al = present(r, alphas)
    return _case(r, "conformal_sweep", args + (al, n_splits, cf, seed, a, sentinel, g, n_groups), args,
                 {"alphas": al, "n_splits": n_splits, "calib_fraction": cf, "seed": seed, "a": a,
                  "sentinel": sentinel, "groups": g}, "exact", settings=settings)


@target
def beam_step(r: Reader) -> Case:
    q, c = size(r, 8, 65), 1 + size(r, 8, 64)
    off = offsets(r, q, None, 6)
    b = _total(off, 5000)
    parent = 2.0 ** -ints(r, b, 0, 4).astype(np.float64)
    if r.rare():
        parent = floats(r, b, 0.0, 1.0)
    fin = bools(r, b) & (np.arange(b) % 3 == 0)
    probs = np.resize(np.array([0.0, 0.125, 0.25, 0.5, 1.0, np.nan, 1e-4, 0.75])[
        np.frombuffer(r.take(64) or b"\0", np.uint8) % 8], (b, c)) if b else np.zeros((0, c))
    if r.rare():
        probs = floats(r, b * c, 0.0, 1.0).reshape(b, c)
    n_cand = ints(r, b, 0, c - 1)
    beams, max_chains = integer(r, 1, 6), integer(r, 1, 10)
    min_prob = r.pick((1e-4, 0.0, 0.25, 1.0)) if not r.rare() else real(r, 0.0, 1.0)
    args = (present(r, parent), present(r, fin), present(r, probs), present(r, n_cand), present(r, off))
    return _case(r, "beam_step", args + (beams, min_prob, max_chains), args,
                 {"beams": beams, "min_prob": min_prob, "max_chains": max_chains}, "exact")


@target
def split_key_bits(r: Reader) -> Case:
    count = size(r, 200, 4097)
    if r.rare():
        count = r.pick(SPECIAL_INTS)
    perm = None if r.byte() & 1 else present(r, ints(r, count if isinstance(count, int) and 0 <= count < 5000 else 3,
                                                      -5, 300))
    base, lo, span = (integer(r, 0, 2**64 - 1, special=False) for _ in range(3))
    base = int(np.frombuffer(r.take(8).ljust(8, b"\0"), np.uint64)[0]) if r.byte() & 1 else base
    return _case(r, "split_key_bits", (base, perm, count, lo, span), (), {}, "", core_name="_split_key_bits")


_SETTERS = ("set_num_threads", "set_memory_budget", "set_simd_level", "_set_min_work_scale", "_set_quantile_bands",
            "_set_sweep_tuning")
_LEVEL_NAMES = ("scalar", "avx2", "avx512", "AVX2", "", "neon", "avx2\x00", "sse", "native", "auto")


@target
def settings(r: Reader) -> Case:
    """The runtime setters (the oracle puts every setting back afterwards)."""
    name = r.pick(_SETTERS)
    if name == "set_num_threads":
        args: tuple = (integer(r, 1, 4),)
    elif name == "set_memory_budget":
        args = (integer(r, 0, 1 << 20) if not r.rare() else r.pick((0, 1, -1, 2**63 - 1, 2**63, 2**64, 1.5, None)),)
    elif name == "set_simd_level":
        args = (r.pick(_LEVEL_NAMES) if not r.rare() else r.pick(NOT_A_NUMBER),)
    elif name == "_set_min_work_scale":
        args = (real(r, 0.0, 4.0),)
    elif name == "_set_quantile_bands":
        args = (boolean(r),)
    else:
        args = (real(r, -1.0, 16.0), real(r, -1.0, 16.0), boolean(r))
    return _case(r, "settings", args, (), {}, "", core_name=name)


def decode(target_name: str, data: bytes) -> Case:
    """The case that ``data`` decodes to for target ``target_name``."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # casts of inf / NaN / huge values are the point
        return TARGETS[target_name](Reader(data))
